"""Ingest runs that stopped before they finished (killed, crashed, lost their machine).

An ingest commits its tables one at a time (bronze lines, silver events, quarantine, file marks) and
writes its ``silver.ingest_runs`` row last. A run stopped in between leaves rows under its run id with
no run row, and its files are not marked as read (or are, if it died after the marks). Kept, those
rows break the counts of the run that reads the files again under another run id: every bronze line
and quarantine row twice, and the events counted as that run's duplicates while they belong to a run
that never reported.

So an ingest starts by **discarding the rows of the abandoned runs**: the runs that committed to
``bronze.captures_raw`` after the newest run that finished (has a run row), itself included: an
earlier attempt of its own run id that stopped (an Airflow retry) is abandoned like any other. Kept,
its events would count as the retry's duplicates, and the late records among them would mark no
published window stale.
Their events, quarantine rows, file marks and bronze lines are deleted in one commit per table,
bronze last (its commit is what records them as discarded, so a discard stopped halfway is finished
by the next run), and their files are read again like new ones. Their rows are looked for only in
the data files each table gained since the oldest commit of those runs to it, which the Delta log
names (:func:`written_since`): a data file never changes, so one the table held before cannot hold
them; the history's files are not opened. Runs before the newest finished run
are never touched: every ingest discards what it finds at its start, so they were either discarded
then or were read again by a finished run whose counts rely on them (warehouses from before this
module).

Kept on purpose: ``bronze.capture_bodies`` and ``silver.topic_configs`` (stored once by content and
possibly referred to by later runs' rows; the run that reads an abandoned run's lines again counts
the register bodies it stored as its own new bodies), quality results (a record of checks that ran) and stale
marks (repaired by the next publish of their window).

Ingests into one warehouse run one at a time (``docs/operations.md``): a second ingest started while
another is still running would take the running one for abandoned.

A retry under the run id of a discarded run (an Airflow retry, after a manual run or the retry itself
discarded it) must write everything again, but its earlier commits would make the storage module skip
those writes as already done. :func:`commit_job` gives such a retry a job name of its own,
``ingest@<version of the discard>``, so its writes are new commits (and idempotent again if it is
retried in turn). A finished run id run again reads nothing new: it discards nothing.

**A run that failed its data-quality check, run again under its run id** (the cause fixed, e.g. the
quarantine ratio raised or the stray files moved away, and the Airflow task cleared) is the one
exception: it finished, but wrote only its bronze lines, its quality results and its run row (status
``failed_quality``), and marked no file as read. Its run again starts by discarding that attempt
(:func:`discard_failed_attempt`): its rows, bronze lines last as above (a discard commit, so that the
run gets a job name of its own and writes every table anew), then its run row. Its quality results
stay (a record of the checks that ran: the run id then has the failed attempt's and its own). A
discard stopped between the two is finished by the next attempt, which finds the run row still there.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable, Mapping, Sequence

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from nsreplay.runtime import local_frame
from nsreplay.storage import CommitInfo, TableSpec, Warehouse, sql_string
from schemas.bronze import CAPTURES_RAW, INGEST_FILES
from schemas.silver import EVENTS, INGEST_RUNS, QUARANTINE

DISCARD_JOB = "ingest-discard-abandoned"
# Newest commits of bronze.captures_raw read first; the whole history only when these hold no
# finished run (normally the newest commit or two do).
_RECENT_COMMITS = 32


def abandoned_runs(history: Iterable[Mapping[str, Any]], finished: set[str], ingest_job: str) -> tuple[tuple[str, ...], bool]:
    """``(abandoned run ids, complete)`` from ``bronze.captures_raw``'s commits, **newest first**.

    Walks back to the newest commit of ``ingest_job`` by a run in ``finished``. Every ``ingest_job``
    commit before that point (that is, newer) by a run neither finished nor already discarded by a
    newer discard commit names an abandoned run, the caller's own earlier attempt included.
    ``complete`` is False when the walk ran out of commits before finding a finished run (the caller
    then reads the whole history)."""
    found: list[str] = []
    discarded: set[str] = set()
    for entry in history:
        job, rid = entry.get("job"), entry.get("run_id")
        if _is_discard(job):
            discarded.update(json.loads((entry.get("extra") or {}).get("discarded", "[]")))
        elif _is_ingest(job, ingest_job) and rid is not None:
            if rid in finished:
                return tuple(sorted(set(found))), True
            if rid not in discarded:
                found.append(rid)
    return tuple(sorted(set(found))), False


def discard_abandoned(spark: SparkSession, warehouse: Warehouse, ingest_job: str, run_id: str) -> tuple[str, ...]:
    """Delete the bronze lines, events, quarantine rows and file marks of the abandoned ingest runs
    (see the module docstring); returns their run ids. Reads only the run log and the newest commits
    when there is nothing to discard."""
    recent = warehouse.history(CAPTURES_RAW, limit=_RECENT_COMMITS)
    if len(recent) < _RECENT_COMMITS and not any(_is_ingest(e.get("job"), ingest_job) for e in recent):
        return ()  # the whole history holds no ingest: nothing to look up
    finished = {r.run_id for r in warehouse.read(INGEST_RUNS).select("run_id").collect()}  # one row per run
    abandoned, complete = abandoned_runs(recent, finished, ingest_job)
    if not complete:
        abandoned, _ = abandoned_runs(warehouse.history(CAPTURES_RAW), finished, ingest_job)
    if not abandoned:
        return ()
    # bronze last: its discard commit is what marks these runs as discarded (abandoned_runs)
    _discard(spark, warehouse, run_id, abandoned, recent, (EVENTS, QUARANTINE, INGEST_FILES, CAPTURES_RAW))
    return abandoned


def discard_failed_attempt(spark: SparkSession, warehouse: Warehouse, ingest_job: str, run_id: str) -> bool:
    """When ``run_id`` has a run row of status ``failed_quality``, delete that attempt's rows (bronze
    lines last of the data, with the discard commit naming it, then its run row) and return True; else
    change nothing and return False (see the module docstring). A run id that never committed under
    ``ingest_job`` (the usual run: a new one) is told from the tables' commit records alone, without
    reading a row: every attempt of a run id commits its bronze lines or its run row under
    ``ingest_job`` first (a later attempt's own job name exists only after a discard of those)."""
    first = CommitInfo(run_id=run_id, job=ingest_job)
    if not (warehouse.committed(CAPTURES_RAW, first) or warehouse.committed(INGEST_RUNS, first)):
        return False
    failed = warehouse.read(INGEST_RUNS).where((F.col("run_id") == run_id) & (F.col("status") == "failed_quality"))
    if failed.isEmpty():
        return False
    # a failed attempt writes no events, quarantine rows or file marks, but one run again under its run
    # id by an earlier version did (and left the run row failed); bronze records the discard, and the
    # run row goes last: while it is there, the next attempt discards again
    tables = (EVENTS, QUARANTINE, INGEST_FILES, CAPTURES_RAW, INGEST_RUNS)
    _discard(spark, warehouse, run_id, (run_id,), warehouse.history(CAPTURES_RAW, limit=1), tables, kind="failed ")
    return True


def _discard(spark: SparkSession, warehouse: Warehouse, run_id: str, runs: Sequence[str], recent: Sequence[Mapping[str, Any]],
             tables: Sequence[TableSpec], kind: str = "") -> None:
    """Delete the rows of ``runs`` from ``tables``, in that order, in commits by ``run_id`` whose
    ``extra`` lists them as discarded. One job name per kind of discard, set of runs and bronze
    version (``recent``: bronze's newest commits, newest first): a retry of this discard (bronze,
    committed last, unchanged) skips the tables it has done; a later discard by the same run id, of
    other runs or of its own next attempt, is a new commit."""
    listed = json.dumps(list(runs))
    newest = recent[0]["version"] if recent else -1
    job = f"{DISCARD_JOB}:{hashlib.sha256(f'{kind}{listed}@{newest}'.encode()).hexdigest()[:16]}"
    commit = CommitInfo(run_id=run_id, job=job, extra={"discarded": listed})
    where = "run_id IN (" + ", ".join(sql_string(r) for r in runs) + ")"
    for spec in tables:
        if warehouse.committed(spec, commit):
            continue  # done by an earlier try of this discard (the overwrite would skip it too)
        since = written_since(warehouse.history(spec), runs) if warehouse.exists(spec) else None
        _delete(spark, warehouse, spec, where, commit, since)


def written_since(history: Sequence[Mapping[str, Any]], runs: Iterable[str]) -> int | None:
    """The oldest version at which any of ``runs`` committed, from a table's ``history`` (newest
    first, the whole retained log): their rows can only be in the data files added since (by their
    commits, or by a rewrite after them). With no such commit in a history that goes back to the
    table's creation (version 0), they hold no row there: the version after the newest. None when the
    log no longer goes back that far (expired): look at every file."""
    if not history:
        return None
    wanted = set(runs)
    own = [e["version"] for e in history if e.get("run_id") in wanted]
    if own:
        return min(own)
    return history[0]["version"] + 1 if min(e["version"] for e in history) == 0 else None


def commit_job(warehouse: Warehouse, ingest_job: str, run_id: str) -> str:
    """The job name under which run ``run_id`` commits: ``ingest_job``, or ``ingest_job@<v>`` when a
    discard commit (the newest naming it, at version ``v`` of ``bronze.captures_raw``) deleted what
    it had written, so that its retry writes again. Reads the history only for a run id that has
    committed bronze lines already (a retry)."""
    if not warehouse.committed(CAPTURES_RAW, CommitInfo(run_id=run_id, job=ingest_job)):
        return ingest_job
    for entry in warehouse.history(CAPTURES_RAW):  # newest first
        if _is_discard(entry.get("job")) and run_id in json.loads((entry.get("extra") or {}).get("discarded", "[]")):
            return f"{ingest_job}@{entry['version']}"
    return ingest_job


def _is_discard(job: str | None) -> bool:
    return job is not None and job.startswith(DISCARD_JOB + ":")


def _is_ingest(job: str | None, ingest_job: str) -> bool:
    return job is not None and (job == ingest_job or job.startswith(ingest_job + "@"))


def _delete(spark: SparkSession, warehouse: Warehouse, spec: TableSpec, where: str, commit: CommitInfo, since: int | None) -> None:
    """Delete the rows matching ``where``, which were all written at or after version ``since``
    (None: unknown). The storage module rewrites only the files that hold such rows, and looks for
    them among the files added since that version only (:meth:`Warehouse.overwrite`'s
    ``written_since``), not the whole history's; it commits even when there are none, so the bronze
    commit always records the discard."""
    warehouse.overwrite(spec, local_frame(spark, [], spec.schema), commit, where=where, written_since=since)


__all__ = ["DISCARD_JOB", "abandoned_runs", "commit_job", "discard_abandoned", "discard_failed_attempt", "written_since"]
