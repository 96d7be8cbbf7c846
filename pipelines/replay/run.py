"""One replay run of a window: silver → gold route history, then its quality check, then publish.

Three stages, each idempotent for its run id, runnable in one process (:func:`run_replay`) or one
by one from a scheduler (``jobs/rebuild_routes.py --stage replay|quality|publish``):

1. :func:`replay_window` — the window ``(after, until]`` (see :mod:`pipelines.replay.windows`):
   read the window's records from ``silver.events`` and the units' states persisted at ``after``
   by the published run of the previous window; split each NameServer into replay units
   (:mod:`pipelines.replay.units`), replay every unit in its own task from its state
   (:mod:`pipelines.replay.unit_replay`); write the gold rows the window owns (predicate overwrite
   of its slice), the states at ``until`` (``gold.replay_state``) and one ``gold.replay_runs`` row
   naming the table versions written. Nothing is published yet.
2. :func:`check_window` — Great Expectations over what the run wrote (``silver.quality_results``).
3. :func:`publish_window` — one ``gold.publish_log`` row naming those versions, if the check passed
   and no other run wrote in between. Readers (API, shim) use only the latest publish row, so a run
   that fails or is killed before this step changes nothing they see, and a re-run of the same
   window publishes the same contents again.

A run id whose gold check failed, run again (the cause fixed), replays its window anew as its next
attempt, discarding the failed attempt's writes first (:mod:`pipelines.replay.attempts`).

A window whose start is not the end of a published window fails with
:class:`MissingPredecessorError` unless ``from_last_good`` is set, in which case the run starts at
the end of the latest published window before it (or from the first record) and covers the gap. On
a warehouse with nothing published yet there is no gap to miss: the first run starts from the first
record whatever its ``window_from``.
When a window links two units that were independent before it (their states cannot be merged
exactly), the unit they form is replayed again from its NameServer's last start before the window
(when every route table was empty), or from its first record without one; the other units resume.
The result is the same.
"""

from __future__ import annotations

import json
import pickle
import shlex
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

import pyarrow.dataset as pads
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from nsreplay.config import Settings
from nsreplay.history import latest_publish_row
from nsreplay.runtime import format_ms, local_frame
from nsreplay.storage import ColumnRange, CommitInfo, TableSpec, Warehouse, changes_rows, dataset, sql_string
from pipelines.quality.gold_suites import validate_replay
from pipelines.quality.suites import QualityReport
from pipelines.replay.attempts import DISCARD_FAILED_JOB, attempt_job, attempt_of, latest_attempt, run_attempt
from pipelines.replay.fidelity import fidelity
from pipelines.replay.history import (
    cancel_ticks,
    cancelled_ticks,
    epochs,
    epochs_frame,
    generic_intervals,
    keyframes,
    scan_ticks,
    typed_intervals,
    with_tick,
)
from pipelines.replay.transforms import (
    STATE_COLUMN,
    namesrv_spans,
    queue_holders_at,
    ranked_events,
    replay_partitions,
    replay_records,
    replay_units,
    restart_ranks,
    route_changing,
    topic_holders,
    unit_facts,
    units_input,
    with_states,
    with_units,
)
from pipelines.replay.stale import (
    PUBLISH_STALE_JOB,
    StaleWindow,
    backfill_windows,
    late_data_note,
    mark_stale,
    records_since,
    rows_changed_between,
    settled_events_version,
    stale_windows_published_by,
)
from pipelines.replay.unit_replay import StateFormatError, load_state
from pipelines.replay.units import CarriedFacts, UnitFacts, UnitMap, WindowFacts, carries_over
from pipelines.replay.windows import MissingPredecessorError, RecordedWindow, Window, check_window_length, window_text
from schemas.gold import (
    INTERVAL_TABLES,
    KEYFRAMES,
    NAMESRV_EPOCHS,
    PUBLISH_LOG,
    REPLAY_RUNS,
    REPLAY_STATE,
    REPLAY_TABLES,
    ROUTE_CHANGES,
    ROUTE_FIDELITY,
    SCAN_TICKS,
    TOPIC_QUEUE_INTERVALS,
)
from schemas.silver import EVENTS, QUALITY_RESULTS, TOPIC_CONFIGS

JOB = "replay"
EVENTS_VERSION = "events_version"  # commit metadata: the silver.events version a replay's writes come from
GOLD_QUALITY_JOB = "gold-quality"
PUBLISH_JOB = "publish"
#: the replay_state rows of a NameServer's unit facts and start records take these unit ids, which no
#: broker group takes (``units.group_unit_id``: "~" and a letter is the replay's own)
FACTS_UNIT = "~facts"
#: the replay_state row of a NameServer's start records up to the window end: (ts, rocketmq_version,
#: config) in processing order, so that the next window reads only its own (see :func:`_start_records`)
STARTS_UNIT = "~starts"


class NothingToReplayError(RuntimeError):
    """silver.events holds no record in the requested window."""


class NotWrittenError(RuntimeError):
    """The quality or publish stage names a run whose replay stage has not written anything."""


class PublishRefusedError(RuntimeError):
    """The run may not be published (its quality check failed or is missing, or tables moved on)."""


class ConcurrentRunError(RuntimeError):
    """Another run wrote the gold tables while this one did: nothing of this run is recorded."""


class RunIdSpentError(RuntimeError):
    """Running this run id again cannot give a consistent publish: its window was published and later
    records made it stale, or an earlier attempt wrote part of it from other input. Idempotency is per
    run id (a repeated write is skipped), so the window must be run under another run id."""


@dataclass(frozen=True)
class ReplayResult:
    run_id: str
    window_from: int
    window_to: int
    namesrvs: dict[str, tuple[int, int, str]]
    units: int
    changes: int
    ticks: int
    fidelity: dict[str, int]
    row_counts: dict[str, int]
    table_versions: dict[str, int]
    seconds: float
    resumed_from: int | None = None
    replayed_again: tuple[str, ...] = ()  # units joining units of before, replayed from their NameServer's last start
    quality: QualityReport | None = field(default=None, compare=False)
    stages: dict[str, float] = field(default_factory=dict, compare=False)
    unfinished_ingests: tuple[str, ...] = ()  # ingest runs whose records the replay left out (not finished)
    stale: tuple[StaleWindow, ...] = field(default=(), compare=False)  # marked at publish: records ingested meanwhile
    warehouse: str = field(default="", compare=False)  # the warehouse root, for the commands the messages suggest
    attempt: int = 1  # > 1: the run id's earlier attempt failed its gold check and was discarded (pipelines.replay.attempts)
    # set when an earlier try of this run id (and attempt) had written the window already, so every
    # write of this one was skipped: when that try wrote its gold.replay_runs row, whose counts this
    # result then holds (not the ones this try computed); None: written by this try
    written_before_ms: int | None = None
    published: bool = False  # written before, and published already (its publish row is there)

    def notes(self) -> str:
        """What the run left out, and the windows it found stale when it published ('' if nothing)."""
        lines = []
        if self.attempt > 1:
            lines.append(
                f"attempt {self.attempt} of run {self.run_id}: attempt {self.attempt - 1} failed its gold quality check; "
                "its gold writes and run row were discarded first (its quality results stay in silver.quality_results)"
            )
        if self.unfinished_ingests:
            lines.append(
                f"left out the records of ingest run(s) that have not finished ({', '.join(self.unfinished_ingests)}): "
                "the next ingest finishes or discards them, and the windows they belong to are marked stale once published"
            )
        if self.stale:
            lines.append(late_data_note(self.stale, self.warehouse))
        return "\n".join(lines)

    def summary(self) -> str:
        ns = ", ".join(f"{n} ({p})" for n, (_, _, p) in sorted(self.namesrvs.items()))
        start = "from the first record" if self.resumed_from is None else f"resuming from the state at {format_ms(self.resumed_from)}"
        restart = f"; units joined, replayed again: {'; '.join(self.replayed_again)}" if self.replayed_again else ""
        if self.written_before_ms is not None:
            head = (f"replay {self.run_id}: written already, by an earlier try of this run id at {format_ms(self.written_before_ms)}"
                    f"{', and published' if self.published else ''}; nothing written now; as recorded then (gold.replay_runs): ")
        else:
            head = f"replay {self.run_id}: "
        return (
            f"{head}window up to {format_ms(self.window_to)}, {start}{restart}; {len(self.namesrvs)} NameServers [{ns}], {self.units} replay units, "
            f"{self.ticks} scan ticks, {self.changes} changes, "
            f"{self.row_counts.get('gold.topic_queue_intervals', 0)} topic-route intervals, "
            f"{self.row_counts.get('gold.broker_addr_intervals', 0)} broker intervals; captured route answers: "
            f"{self.fidelity['matched']} match the rebuild, {self.fidelity['mismatched']} do not (gold.route_fidelity); {self.seconds:.1f} s"
        ) + (f"\n{notes}" if (notes := self.notes()) else "")


# ---------------------------------------------------------------------------------- published state


@dataclass(frozen=True)
class Published:
    """The latest publish row: run id, table versions and coverage per NameServer."""

    run_id: str
    versions: dict[str, int]
    coverage: dict[str, tuple[int, int, str]]


def latest_publish(warehouse: Warehouse) -> Published | None:
    row = latest_publish_row(warehouse)  # the newest run's file, without a Spark job
    if row is None:
        return None
    return Published(row["run_id"], dict(row["table_versions"]), {c["namesrv"]: (c["from_ts"], c["to_ts"], c["profile"]) for c in row["namesrvs"]})


def _published_states(warehouse: Warehouse, published: Published | None, where: ColumnRange | None = None) -> DataFrame | None:
    if published is None or REPLAY_STATE.name not in published.versions:
        return None
    return warehouse.read(REPLAY_STATE, version=published.versions[REPLAY_STATE.name], where=where)


def _state_ends(states: DataFrame | None, upto: int) -> dict[int, set[str]]:
    """window_to → NameServers with a state there, for every window end at or before ``upto``."""
    if states is None:
        return {}
    ends: dict[int, set[str]] = {}
    for r in states.where((F.col("window_to") <= upto) & (F.col("unit") == FACTS_UNIT)).select("window_to", "namesrv").distinct().collect():
        ends.setdefault(r.window_to, set()).add(r.namesrv)
    return ends


def _resume_point(warehouse: Warehouse, published: Published | None, window_from: int | None, origins: Mapping[str, int],
                  from_last_good: bool) -> int | None:
    """:func:`resolve_start` for ``window_from``, reading the published states at ``window_from`` only
    (their own files) when they are complete there, and every earlier window end only when not.

    On a warehouse with nothing published, a ``window_from`` after records replays from the first
    record (None): there is no predecessor to miss, and the state at ``window_from`` needs every
    record before it."""
    if window_from is None:
        return None
    at_start = ColumnRange("window_to", above=window_from - 1, at_most=window_from)
    try:
        return resolve_start(window_from, origins, _state_ends(_published_states(warehouse, published, at_start), window_from), False)
    except MissingPredecessorError:
        if published is None:
            return None
        return resolve_start(window_from, origins, _state_ends(_published_states(warehouse, published), window_from), from_last_good)


def _check_state_format(warehouse: Warehouse, carried: DataFrame, after: int) -> None:
    """Refuse, before any task runs, to resume from unit states of another state layout than this
    code's (:func:`~pipelines.replay.unit_replay.load_state`): a warehouse whose windows an older
    nsreplay replayed. One unit row is read (all the states of a window come from one run, so one
    code); the refusal names the way forward, a backfill of the whole history from its first record,
    which replays every window from the start under this code's layout."""
    sample = carried.where(~F.col("unit").isin(FACTS_UNIT, STARTS_UNIT)).select("state").limit(1).collect()
    if not sample:
        return
    try:
        load_state(sample[0].state)
    except StateFormatError as exc:
        raise StateFormatError(
            f"the replay states published at {format_ms(after)} were written by another nsreplay version ({exc}) and cannot be "
            f"resumed; replay the history again from its first record: nsreplay backfill --warehouse {shlex.quote(str(warehouse.root))} "
            f"--from start") from exc


def _start_records(events: Callable[[ColumnRange | None], DataFrame], carried: Mapping[str, list], origins: Mapping[str, int],
                   after: int | None, end: int) -> dict[str, list[tuple[int, str, dict]]]:
    """Every NameServer's start records up to ``end``, as (ts, rocketmq_version, config) in its
    processing order (:func:`~pipelines.replay.transforms.ranked_events`: of two starts at one ts, the
    later one runs on). Those up to ``after`` come from the ``carried`` state rows; only a NameServer
    with records by then but no such row (a warehouse written before they were kept) has its earlier
    records searched, so a window reads the files of ``(after, end]``, not the history's."""
    kind = F.col("kind") == "namesrv_start"
    if after is None:
        found = events(ColumnRange("ts", at_most=end)).where(kind)
    else:
        found = events(ColumnRange("ts", above=after, at_most=end)).where(kind)
        missing = sorted(ns for ns, origin in origins.items() if origin <= after and ns not in carried)
        if missing:
            found = found.unionByName(events(ColumnRange("ts", at_most=after)).where(kind & F.col("namesrv").isin(missing)))
    ordered = found.orderBy("ts", F.col("seq").isNull(), "seq", "source_file", "line_no")
    starts: dict[str, list] = {ns: list(carried[ns]) for ns in origins if after is not None and ns in carried}
    for r in ordered.select("namesrv", "ts", "rocketmq_version", "config").collect():  # start records are few
        starts.setdefault(r.namesrv, []).append((r.ts, r.rocketmq_version, dict(r.config or {})))
    return starts


def _last_start(starts: Iterable[tuple[int, str, dict]], at: int) -> int | None:
    """The ts of a NameServer's last start record at or before ``at`` (None without one)."""
    return max((ts for ts, *_ in starts if ts <= at), default=None)


def _replayed_again(again: Mapping[str, list[str]], since: Mapping[str, int | None]) -> Iterator[str]:
    for ns, units in sorted(again.items()):
        start = "its first record" if since[ns] is None else f"its start at {format_ms(since[ns])}"
        yield f"{ns} units {', '.join(sorted(units))} from {start}"


def _bookkeeping_states(facts: Mapping[str, CarriedFacts], starts: Mapping[str, list], until: int, run_id: str) -> list[tuple]:
    """The replay_state rows at ``until`` beside the units' own: each NameServer's unit facts and its
    start records up to ``until``, which the next window carries instead of reading them again."""
    return [(ns, until, FACTS_UNIT, pickle.dumps(f), run_id) for ns, f in facts.items()] + [
        (ns, until, STARTS_UNIT, pickle.dumps([s for s in starts.get(ns, []) if s[0] <= until]), run_id) for ns in facts
    ]


def resolve_start(after: int | None, origins: Mapping[str, int], ends: Mapping[int, set[str]], from_last_good: bool) -> int | None:
    """The window start to resume from: ``after`` when every NameServer with records at or before it
    has a state there; otherwise (with ``from_last_good``) the latest such published end before it, or
    None (replay from the first record); otherwise :class:`MissingPredecessorError`."""
    if after is None:
        return None

    def complete(t: int) -> bool:
        return {ns for ns, o in origins.items() if o <= t} <= ends.get(t, set())

    if complete(after):
        return after
    if not from_last_good:
        have = ", ".join(str(t) for t in sorted(ends)[-3:]) or "none"
        raise MissingPredecessorError(
            f"no published replay state at {after}: the window ending there has not been published "
            f"(the latest published window ends at or before it: {have}), or its state was thinned (nsreplay "
            f"thin-states); run that window first, or run jobs/rebuild_routes.py with --from-last-good to replay "
            f"from the last published state before it"
        )
    for t in sorted((t for t in ends if t < after), reverse=True):
        if complete(t):
            return t
    return None


def _commits_since_publish(warehouse: Warehouse, published: Published | None) -> dict[str, list[dict[str, Any]]]:
    """Each gold table's commits that may change its rows (``Warehouse.row_commits_since``) after its
    published version, or after its creation when nothing is published; a table the publish does not
    name is left out. Reads only those log entries."""
    since = {spec.name: (published.versions.get(spec.name) if published is not None else 0) for spec in REPLAY_TABLES}
    return {name: warehouse.row_commits_since(name, version) for name, version in since.items() if version is not None}


DISCARD_JOB = f"{JOB}/discard-unpublished"


def others_stand(commits: list[dict[str, Any]], run_id: str) -> bool:
    """Whether a commit of another run still stands in a gold table: ``commits`` (a table's commits
    since its published version, newest first) hold one of another run after this run's latest
    discard of the unpublished writes (:func:`_discard_unpublished`, any attempt's), or without such a discard. This
    run's own writes since that discard are then not all the table holds."""
    for c in commits:
        if c["run_id"] == run_id and attempt_of(c["job"], DISCARD_JOB) is not None:
            return False
        if c["run_id"] != run_id:
            return True
    return False


def _discard_unpublished(warehouse: Warehouse, published: Published | None, run_id: str,
                         since_publish: dict[str, list[dict[str, Any]]] | None = None, attempt: int = 1) -> None:
    """Put back the published version of every gold table another run wrote since without publishing
    (its quality check failed, or it was killed): :func:`others_stand`. This run replaces only its own
    slice, and its publish names whole table versions, so it would otherwise publish that run's rows
    too. This run's own earlier writes after its own discard (a retry of the same run id, from the
    same input: :func:`_check_run_id_unspent`) are kept: its repeated writes are skipped. A Delta
    restore: no data is rewritten, however long the history the tables hold. A vacuum's or a
    compaction's commits since the publish change no row and are kept. ``since_publish``:
    :func:`_commits_since_publish`, read here when not given. ``attempt``: the run's attempt, whose
    job name the restores take (:func:`~pipelines.replay.attempts.attempt_job`)."""
    if published is None:
        return
    if since_publish is None:
        since_publish = _commits_since_publish(warehouse, published)
    for spec in REPLAY_TABLES:
        commits = since_publish.get(spec.name)
        if commits is None or not others_stand(commits, run_id):
            continue
        warehouse.restore(spec, published.versions[spec.name], CommitInfo(run_id=run_id, job=attempt_job(DISCARD_JOB, attempt)))


def _this_attempt(warehouse: Warehouse, run_id: str) -> tuple[int, int | None]:
    """``(attempt, failed)``: the attempt this replay of ``run_id`` writes as, and the attempt before
    it when that one failed its gold check and must be discarded first (else None); see
    :mod:`pipelines.replay.attempts`. A run id that never wrote its run row (the usual run: a new
    one) is told from the run log's commit records alone, without reading its history."""
    if not warehouse.committed(REPLAY_RUNS, CommitInfo(run_id=run_id, job=JOB)):
        return 1, None
    latest = latest_attempt(warehouse.history(REPLAY_RUNS, limit=100), run_id) or latest_attempt(warehouse.history(REPLAY_RUNS), run_id)
    if latest is None:  # its commit is gone from the log (expired): a run row from before attempts, or none
        return 1, None
    attempt, written = latest
    if not written:  # the discard of the attempt before is done: this attempt's writes are its own retry's
        return attempt, None
    results = _gold_results(warehouse, run_id, attempt)
    return (attempt + 1, attempt) if results and not all(r["success"] for r in results) else (attempt, None)


def _discard_failed_attempt(spark: SparkSession, warehouse: Warehouse, published: Published | None, run_id: str, failed: int,
                            since_publish: dict[str, list[dict[str, Any]]]) -> None:
    """Discard attempt ``failed`` of ``run_id``, which failed its gold check (:mod:`pipelines.replay.attempts`):
    put back every gold table written since the latest publish to its published version (with
    nothing published, to the version before the attempt's write), then delete the attempt's
    ``gold.replay_runs`` row, last. Restores and delete take the next attempt's job names, so a
    discard stopped halfway is finished by the next try, its done steps skipped."""
    attempt = failed + 1
    restore = CommitInfo(run_id=run_id, job=attempt_job(DISCARD_JOB, attempt))
    for spec in REPLAY_TABLES:
        commits = since_publish.get(spec.name)
        if not commits:
            continue
        if published is not None:
            target = published.versions[spec.name]
        else:
            own = [c["version"] for c in commits if c["run_id"] == run_id and c["job"] == attempt_job(JOB, failed)]
            if not own:
                continue
            target = min(own) - 1
        warehouse.restore(spec, target, restore)
    commit = CommitInfo(run_id=run_id, job=attempt_job(DISCARD_FAILED_JOB, attempt), extra={"discarded_attempt": str(failed)})
    warehouse.overwrite(REPLAY_RUNS, local_frame(spark, [], REPLAY_RUNS.schema), commit, where=f"run_id = {sql_string(run_id)}")


def _check_no_other_writer(warehouse: Warehouse, before: Mapping[str, int | None], run_id: str) -> None:
    """After this run's gold writes: refuse (:class:`ConcurrentRunError`) when another run committed
    to a gold table since ``before`` (each table's version before this run read the commits since
    the publish, which its discard of the unpublished writes goes by; None: no table yet), i.e. wrote
    the tables while this run discarded, planned or wrote. Its rows and this run's would both be in
    the versions this run is about to record; nothing is recorded, so nothing can be published."""
    writers = {}
    for spec in REPLAY_TABLES:
        version = before.get(spec.name)
        if version is not None:
            commits = warehouse.row_commits_since(spec, version)
        else:  # created by this run's write (or a concurrent one)
            commits = [c for c in warehouse.history(spec) if changes_rows(c)] if warehouse.exists(spec) else []
        # (a table's creation carries no run id)
        others = sorted({c["run_id"] for c in commits if c["run_id"] not in (run_id, None)})
        if others:
            writers[spec.name] = others
    if writers:
        names = sorted({w for ws in writers.values() for w in ws})
        raise ConcurrentRunError(
            f"run(s) {', '.join(map(repr, names))} wrote gold tables ({', '.join(sorted(writers))}) while run {run_id!r} did, "
            f"so neither can be published; run the window once more under a new run id (--run-id), one run at a time: "
            f"its replay discards both runs' writes first"
        )


def _committed_before_publish(warehouse: Warehouse, published: Published | None, run_id: str, attempt: int,
                              since_publish: Mapping[str, list[dict[str, Any]]]) -> list[str]:
    """The gold tables that ``run_id``'s attempt ``attempt`` committed to (a write, or a discard of
    other runs' writes) at or before the version the latest publish names, when that publish is
    another run's and ``run_id`` never published: that run's replay discarded those commits (or
    wrote over them), then published. They are not among the table's commits since the publish
    (``since_publish``: :func:`_commits_since_publish`, whose tables only are looked at), which
    the other checks read, but they are among its app transactions (kept forever), by which a
    retry's repeated commits are skipped. Read from those app transactions: no history is read."""
    if published is None or published.run_id == run_id:
        return []
    jobs = (attempt_job(JOB, attempt), attempt_job(DISCARD_JOB, attempt))
    before = [name for name, commits in sorted(since_publish.items())
              if any(warehouse.committed(name, CommitInfo(run_id=run_id, job=job))
                     and not any(c["run_id"] == run_id and c["job"] == job for c in commits) for job in jobs)]
    if before and warehouse.committed(PUBLISH_LOG, CommitInfo(run_id=run_id, job=PUBLISH_JOB)):
        return []  # its own publish came after them: a retry of a published run id writes nothing
    return before


def _check_run_id_unspent(warehouse: Warehouse, run_id: str, events_version: int, since_publish: dict[str, list[dict[str, Any]]],
                          attempt: int, published: Published | None) -> None:
    """Refuse (:class:`RunIdSpentError`) a run id whose run again would publish tables that disagree
    with their input or with each other. The storage skips a repeated write of a (job, run id), which
    makes a retry safe when nothing changed, but not:

    * when the run id published its window and records ingested since made it stale: a run again
      would write nothing and publish nothing, and report success;
    * when an earlier attempt of the run id stopped after writing some gold tables from another
      version of ``silver.events`` (an ingest committed in between): the retry would keep those tables
      and write the others from the new input; or wrote them all (its run row too) and did not
      publish: the retry would publish the window without the records ingested since;
    * when another run committed to a gold table after this run's write or discard there (a run of
      another id wrote, or discarded this run's writes), whether or not that run has published since
      (:func:`_committed_before_publish`): the retry would skip its own commits as done and publish
      that run's rows, or the table without its own.

    A run under another run id does all three right: it replaces the window's rows, and discards the
    unpublished writes of this one first. ``since_publish``: :func:`_commits_since_publish`;
    ``attempt``: the run's attempt, whose writes are its own (:mod:`pipelines.replay.attempts`);
    ``published``: the latest publish (:func:`latest_publish`)."""
    stale = stale_windows_published_by(warehouse, run_id)
    if stale:
        w = stale[0]
        raise RunIdSpentError(
            f"run {run_id!r} published the window ({format_ms(w.window_from)}, {format_ms(w.window_to)}] already, and records "
            f"ingested since (from {format_ms(w.late_from_ts)} on {w.namesrv}) make it stale; a run id publishes once, so running "
            f"it again cannot repair it; re-run it and every window after it, in order: "
            f"nsreplay backfill --warehouse {shlex.quote(warehouse.root)} --from {w.window_from}"
        )
    replaced = _committed_before_publish(warehouse, published, run_id, attempt, since_publish)
    if replaced:
        raise RunIdSpentError(
            f"run {run_id!r} committed to {replaced[0]} before (a write or a discard), and run {published.run_id!r} has published "
            f"since, over those commits: a retry would skip them as done and publish the table without them, or with the other "
            f"run's rows; if that publish holds the window asked, nothing is left to do; otherwise run the window under another "
            f"run id (--run-id)"
        )
    complete = warehouse.committed(REPLAY_RUNS, CommitInfo(run_id=run_id, job=attempt_job(JOB, attempt)))  # its run row: every write done
    for name, commits in since_publish.items():
        if others_stand(commits, run_id) and any(c["run_id"] == run_id for c in commits):
            # this run's write (or discard) of the table is done, so a retry would skip it again
            others = sorted({c["run_id"] for c in commits if c["run_id"] != run_id})
            raise RunIdSpentError(
                f"run {run_id!r} committed to {name} before (a write or a discard), and run(s) {', '.join(map(repr, others))} "
                f"committed to it since: a retry would skip its own commits as done and publish the table without them, or "
                f"with the other run's rows; run the window under another run id (--run-id), which discards these writes"
            )
        for c in commits:
            read = (c.get("extra") or {}).get(EVENTS_VERSION)
            if c["run_id"] == run_id and c["job"] == attempt_job(JOB, attempt) and read is not None \
                    and rows_changed_between(warehouse, int(read), events_version):
                if complete:
                    raise RunIdSpentError(
                        f"run {run_id!r} wrote its window from silver.events version {read} (not published), and silver.events "
                        f"is at version {events_version} now: a retry would publish the window without the records ingested "
                        f"since; run the window under another run id (--run-id), which replays it from the input as it is "
                        f"and discards these writes"
                    )
                raise RunIdSpentError(
                    f"run {run_id!r} stopped after writing {name} from silver.events version {read}, and silver.events "
                    f"is at version {events_version} now: a retry would publish tables replayed from different input; "
                    f"run the window under another run id (--run-id), which discards these writes"
                )


def _recorded_window(run: Mapping[str, Any]) -> RecordedWindow:
    return RecordedWindow.of(run, json.loads(run["quality"]))


def _other_window(run_id: str, recorded: RecordedWindow, asked: str) -> RunIdSpentError:
    return RunIdSpentError(
        f"run {run_id!r} replayed the window {recorded.text()} already, not the window {asked} asked now: a run id replays "
        f"one window, so it would answer with that one; run the window asked under another run id (--run-id), or retry "
        f"{run_id!r} with {recorded.flags()}"
    )


def _check_asked_window(run: Mapping[str, Any], run_id: str, window_from: int | None, until: int, to_given: bool) -> None:
    """Refuse (:class:`RunIdSpentError`) a replay of ``run_id``, whose earlier try wrote the window
    its ``gold.replay_runs`` row ``run`` records, that asks another window
    (:meth:`RecordedWindow.answers`): its writes are done, so it would answer with the recorded
    window, not the one asked. ``window_from``: the ``--from`` given (None: from the first record);
    ``until``: the ``--to`` given (``to_given``), or else the last record."""
    recorded = _recorded_window(run)
    if not recorded.answers(window_from, until):
        raise _other_window(run_id, recorded, window_text(window_from, until) + ("" if to_given else " (no --to: up to the last record)"))


def check_run_window(warehouse: Warehouse, run_id: str, window_from: int | None, window_to: int | None) -> None:
    """For the quality and publish stages, which go by the window ``run_id``'s replay recorded:
    refuse (:class:`RunIdSpentError`) a ``--from`` or a ``--to`` given that asks another window
    (:meth:`RecordedWindow.answers`), as the replay stage refuses it; one not given asks nothing.
    :class:`NotWrittenError` when the run has written no replay."""
    if window_from is None and window_to is None:
        return
    recorded = _recorded_window(written_run(warehouse, run_id))
    until = recorded.until if window_to is None else window_to
    if (window_to is not None and window_to != recorded.until) or (window_from is not None and not recorded.answers(window_from, until)):
        start = "..." if window_from is None else format_ms(window_from)
        raise _other_window(run_id, recorded, f"({start}, {format_ms(until) if window_to is not None else '...'}]")


def _check_stopped_window(since_publish: Mapping[str, list[dict[str, Any]]], run_id: str, attempt: int, after: int | None,
                          until: int) -> None:
    """Refuse (:class:`RunIdSpentError`) a retry of ``run_id`` that would replay ``(after, until]``
    when an earlier try of its attempt stopped after writing gold tables for another window (before
    its run row): that try's writes are skipped as done, so the retry would keep them and write the
    other tables for this window. Each write's commit names the window it was replayed for (as
    resolved, like ``after``: nothing was published by a try stopped before its run row, so a retry
    asking the same window resolves it the same way)."""
    for name, commits in sorted(since_publish.items()):
        for c in commits:
            if c["run_id"] == run_id and c["job"] == attempt_job(JOB, attempt) and (c["window_from"], c["window_to"]) != (after, until):
                again = f"--from {format_ms(c['window_from'])} --to {format_ms(c['window_to'])}" if c["window_from"] is not None \
                    else f"--to {format_ms(c['window_to'])}"
                raise RunIdSpentError(
                    f"run {run_id!r} stopped after writing {name} for the window {window_text(c['window_from'], c['window_to'])}, "
                    f"not the window {window_text(after, until)} asked now: a retry would keep those writes as done and write the "
                    f"other tables for another window; run the window asked under another run id (--run-id), which discards "
                    f"these writes, or retry {run_id!r} with its window ({again})"
                )


# ---------------------------------------------------------------------------------- stage 1: replay


def owned_rows(window: Window) -> dict[str, ColumnRange | None]:
    """The rows of each gold table that the run of ``window`` owns, so writes (a predicate overwrite
    of that slice), as a range of one column (``None``: the whole table). As ranges, a write or a read
    of one window opens the data files of that window, not those of the whole history."""
    return {
        ROUTE_CHANGES.name: window.owned_instants("ts"),
        SCAN_TICKS.name: window.owned_instants("tick_ts"),
        NAMESRV_EPOCHS.name: None,
        KEYFRAMES.name: window.owned_instants("keyframe_ts"),
        ROUTE_FIDELITY.name: window.owned_instants("ts"),
        **{spec.name: window.owned_intervals() for spec in INTERVAL_TABLES.values()},
        REPLAY_STATE.name: ColumnRange("window_to", above=window.until - 1, at_most=window.until),
    }


def replay_window(
    spark: SparkSession,
    warehouse: Warehouse,
    settings: Settings,
    run_id: str,
    *,
    window_from: int | None = None,
    window_to: int | None = None,
    from_last_good: bool = False,
) -> ReplayResult:
    """Replay ``(window_from, window_to]`` and write its gold rows (see module docstring).

    A retry of ``run_id`` whose attempt (:mod:`pipelines.replay.attempts`) wrote its
    ``gold.replay_runs`` row already (the last of its writes, so every one is done) replays nothing
    and writes nothing: once the refusals of :func:`_check_run_id_unspent` are passed, it returns
    what that try recorded (:func:`_recorded_result`), from the Delta log and that one row. A try
    stopped before its run row (killed between its writes) is replayed again, its done writes
    skipped; so is a run id whose latest attempt failed its gold check (as its next attempt)."""
    started = time.time()
    for spec in REPLAY_TABLES + (REPLAY_RUNS,):
        warehouse.ensure(spec)
    cfg = settings.replay
    # the latest version, less the appends of ingests that have not finished (stale.settled_events_version)
    events_version, unfinished_ingests = settled_events_version(warehouse)

    def events(where: ColumnRange | None = None) -> DataFrame:
        """silver.events as this run first saw it (an ingest committing meanwhile is not half seen);
        with ``where``, only the files whose ``ts`` statistics may hold rows in that range are read."""
        return warehouse.read(EVENTS, version=events_version, where=where)

    # Each NameServer's first and last record from the files' statistics (the log, not the history's
    # rows); a warehouse whose files predate the statistics is scanned.
    spans = warehouse.column_bounds(EVENTS, "ts", by="namesrv", version=events_version)
    if spans is None:
        spans = namesrv_spans(events())
    if not spans:
        raise NothingToReplayError("silver.events is empty: ingest a capture first")
    until = window_to if window_to is not None else max(hi for _, hi in spans.values())
    if window_from is not None and window_from >= until:
        end = "--to" if window_to is not None else "the last record of silver.events"
        raise NothingToReplayError(f"empty window: --from {format_ms(window_from)} is not before {end}, {format_ms(until)}")
    origins = {ns: lo for ns, (lo, _) in spans.items() if lo <= until}  # each one's first record up to `until`
    if not origins:
        raise NothingToReplayError(f"no record at or before --to {format_ms(until)}")
    # Each gold table's version before this run reads what stands there: a commit of another run after
    # it (while this run discards, plans or writes) would be in the versions this run records
    # (_check_no_other_writer, after the writes), whether or not the discard saw it.
    seen = {spec.name: warehouse.version(spec) for spec in REPLAY_TABLES}
    published = latest_publish(warehouse)
    since_publish = _commits_since_publish(warehouse, published)
    attempt, failed = _this_attempt(warehouse, run_id)
    if failed is None:
        _check_run_id_unspent(warehouse, run_id, events_version, since_publish, attempt, published)
        if warehouse.committed(REPLAY_RUNS, CommitInfo(run_id=run_id, job=attempt_job(JOB, attempt))):
            # this attempt's run row, its last write, is there, so all its writes are: every write of
            # this try would be skipped, so the window is not replayed again (nor another run's
            # unpublished writes discarded): the result is what that try recorded, if it is the
            # window asked now
            run = written_run(warehouse, run_id)
            _check_asked_window(run, run_id, window_from, until, window_to is not None)
            return _recorded_result(warehouse, run_id, time.time() - started, run)
    after = _resume_point(warehouse, published, window_from, origins, from_last_good)
    if failed is None:
        _check_stopped_window(since_publish, run_id, attempt, after, until)
    # the ticks replayed: from where the run really starts (the first record, or a last good state)
    check_window_length(after if after is not None else min(origins.values()), until, cfg.max_window_days)
    if failed is not None:
        # a run id that never published, whose every earlier write goes: only the stale check applies
        _check_run_id_unspent(warehouse, run_id, events_version, {}, attempt, published)
        _discard_failed_attempt(spark, warehouse, published, run_id, failed, since_publish)
        since_publish = _commits_since_publish(warehouse, published)
    _discard_unpublished(warehouse, published, run_id, since_publish, attempt)
    covered_to = {ns: to for ns, (_, to, _) in (published.coverage.items() if published else [])}
    latest = not covered_to or until >= max(covered_to.values())
    window = Window(after, until, latest)

    # Units: the facts carried from before the window, joined with the window's own.
    # the states persisted at `after` (read from their own files, not from every window end's)
    carried = _published_states(warehouse, published, ColumnRange("window_to", above=after - 1, at_most=after)) if after is not None else None
    previous_facts: dict[str, CarriedFacts] = {}
    previous_starts: dict[str, list] = {}
    if carried is not None:
        _check_state_format(warehouse, carried, after)
        # two small rows per NameServer
        for r in carried.where(F.col("unit").isin(FACTS_UNIT, STARTS_UNIT)).select("namesrv", "unit", "state").collect():
            if r.unit == FACTS_UNIT:
                previous_facts[r.namesrv] = CarriedFacts.loaded(pickle.loads(r.state))
            else:
                previous_starts[r.namesrv] = pickle.loads(r.state)
    # Epochs of every NameServer over the whole covered range (start records are few).
    end_of_range = {ns: max(until, covered_to.get(ns, until)) for ns in origins}
    starts = _start_records(events, previous_starts, origins, after, max(end_of_range.values()))
    # each NameServer's last start in the window: the facts before it link no groups after it
    window_starts = {ns: last for ns, runs in starts.items()
                     if (last := max((ts for ts, *_ in runs if (after is None or ts > after) and ts <= until), default=None)) is not None}
    window_events = events(window.record_range())
    changing_window = route_changing(window_events)
    # the groups that can hold a REGISTER_TOPIC's topic: those holding it at the window's start (the
    # published topicQueueTable there) and those registering it within the window
    held = None
    if after is not None and published is not None and TOPIC_QUEUE_INTERVALS.name in published.versions:
        held = queue_holders_at(warehouse.read(TOPIC_QUEUE_INTERVALS, version=published.versions[TOPIC_QUEUE_INTERVALS.name],
                                               where=ColumnRange("valid_to", above=after, or_null=True)), after)
    # each NameServer's profile and settings before its first start record (conf)
    defaults = {ns: cfg.defaults_for(ns) for ns in origins}
    new_facts = unit_facts(changing_window, lambda ns: defaults[ns][0],
                           lambda topics: topic_holders(window_events, warehouse.read(TOPIC_CONFIGS), topics, held), window_starts)
    idle = {ns: WindowFacts(UnitFacts(profiles=frozenset({profile}))) for ns, (profile, _) in defaults.items()}  # no route-changing record
    facts = {ns: CarriedFacts.after(previous_facts.get(ns), new_facts.get(ns, idle[ns])) for ns in origins}
    maps: dict[str, UnitMap] = {ns: f.assigned.assign() for ns, f in facts.items()}
    again: dict[str, list[str]] = {}  # NameServer -> its units replayed again (they join units of before, or a start split theirs)
    sources: list[tuple[str, str, str]] = []  # (namesrv, unit, unit whose state it resumes from)
    for ns, now in maps.items():
        if ns not in previous_facts:
            continue
        for unit, source in carries_over(previous_facts[ns].assigned.assign(), now).items():
            if source is None:
                again.setdefault(ns, []).append(unit)
            else:
                sources.append((ns, unit, source))
    resume = None
    if sources:
        plan = F.broadcast(local_frame(spark, sources, "namesrv string, unit string, source string"))
        resume = plan.join(
            carried.select("namesrv", F.col("unit").alias("source"), F.col("state").alias(STATE_COLUMN)), ["namesrv", "source"]
        ).select("namesrv", "unit", STATE_COLUMN)

    grid = epochs(starts, origins, end_of_range, defaults)
    epoch_df = epochs_frame(spark, grid).persist()

    # A unit replayed again starts from nothing at its NameServer's origin and takes the records
    # from the NameServer's last start up to the window's start: that start emptied every route
    # table (spec §4), and the KV store it keeps is the KV unit's, which never joins another.
    again_from = {ns: _last_start(starts.get(ns, ()), after) for ns in again}
    replayed = window_events
    for ns, since in again_from.items():
        replayed = replayed.unionByName(events(ColumnRange("ts", above=None if since is None else since - 1, at_most=after)).where(F.col("namesrv") == ns))
    records = replay_records(replayed)
    routed = with_units(spark, ranked_events(records), maps)
    if again:
        # the records before the window go to the units replayed again only
        rebuilt = local_frame(spark, [(ns, u, True) for ns, units in again.items() for u in units], "namesrv string, unit string, _again boolean")
        routed = routed.join(F.broadcast(rebuilt), ["namesrv", "unit"], "left").where((F.col("ts") > after) | F.col("_again").isNotNull()).drop("_again")
    units = sum(len(m.units()) for m in maps.values())
    partitions = replay_partitions(units, spark.sparkContext.defaultParallelism, cfg.unit_tasks_per_core)
    unit_records, unit_bodies = units_input(with_states(routed, resume), warehouse.read(TOPIC_CONFIGS), partitions)
    restarts = restart_ranks(records, [(ns, ts) for ns, runs in starts.items() for ts, *_ in runs])
    output = replay_units(unit_records, unit_bodies, origins=origins, until=until, defaults=defaults).persist(StorageLevel.MEMORY_AND_DISK)
    changes = output.where(F.col("state").isNull()).drop("state")
    # Open intervals in files of their own (the next window rewrites only those files): each interval
    # table is written from ``generic`` partition by partition, so it is range-partitioned once here,
    # by (namesrv, open) only. Each table's write then runs a task per (namesrv, open) holding its rows:
    # cut by table too, every write would also run a task for each part of the five other tables.
    generic = generic_intervals(changes).repartitionByRange(2 * len(origins), "namesrv", F.col("valid_to").isNull()).persist(StorageLevel.MEMORY_AND_DISK)
    logged = changes.where(~F.col("carried")).drop("carried")
    ticks = scan_ticks(epoch_df, logged, until, run_id, after=after).persist(StorageLevel.MEMORY_AND_DISK)
    facts_rows = local_frame(spark, _bookkeeping_states(facts, starts, until, run_id), REPLAY_STATE.schema)
    new_states = output.where(F.col("state").isNotNull()).select("namesrv", F.lit(until).alias("window_to"), "unit", "state", F.lit(run_id).alias("run_id"))
    try:
        outputs: dict[str, DataFrame] = {
            ROUTE_CHANGES.name: with_tick(logged, epoch_df, restarts).withColumn("run_id", F.lit(run_id)).where(F.expr(window.instant("ts"))),
            SCAN_TICKS.name: ticks,
            NAMESRV_EPOCHS.name: epoch_df.select(
                "namesrv", "start_ts", "end_ts", "profile", "config", "first_tick", F.col("interval").alias("tick_interval"), F.lit(run_id).alias("run_id")
            ),
            KEYFRAMES.name: keyframes(generic, ticks, epoch_df, cfg.keyframe_every_ticks, run_id),
            # the window's own answers: those before it (units replayed again) were checked by their windows
            ROUTE_FIDELITY.name: fidelity(window_events, generic, epoch_df, run_id),
            **typed_intervals(generic, run_id),
            REPLAY_STATE.name: new_states.unionByName(facts_rows),
        }
        owned = owned_rows(window)
        # A start record of this window that comes before the first tick after its start cancels
        # that tick for the change rows the window before gave it: those rows are written again.
        cancelled = cancelled_ticks(grid, after) if after is not None and published is not None else {}
        if cancelled:
            lo = min(lo for lo, _ in cancelled.values())
            tail = warehouse.read(ROUTE_CHANGES, version=published.versions[ROUTE_CHANGES.name], where=ColumnRange("ts", above=lo, at_most=after))
            own = outputs[ROUTE_CHANGES.name].select(*ROUTE_CHANGES.schema.fieldNames())
            outputs[ROUTE_CHANGES.name] = own.unionByName(cancel_ticks(tail.where(F.col("namesrv").isin(sorted(origins))), cancelled))
            changes_range = owned[ROUTE_CHANGES.name]
            owned[ROUTE_CHANGES.name] = ColumnRange("ts", above=lo, at_most=changes_range.at_most if changes_range else None)
        # the input's version goes with every write: a retry checks it (_check_run_id_unspent)
        commit = CommitInfo(run_id=run_id, job=attempt_job(JOB, attempt), window_from=after, window_to=until, extra={EVENTS_VERSION: str(events_version)})
        planned = time.time()
        replaced = {"namesrv": sorted(origins)}
        by_name = {spec.name: spec for spec in REPLAY_TABLES}

        def write(name: str, df: DataFrame, owned: ColumnRange | None) -> tuple[str, int, int]:
            spec = by_name[name]
            frame = df.select(*spec.schema.fieldNames())
            if owned is not None:
                frame = frame.where(F.expr(owned.sql()))
            version, rows = warehouse.overwrite_counted(spec, frame, commit, where=owned, partitions=replaced)
            # the version this write committed; a retry whose write was skipped (committed before) takes the latest
            return name, rows, version if version is not None else warehouse.version(spec)

        # The tables are independent commits (nothing is published before the publish stage), so they
        # are written a few at a time; the first failure fails the run once the others have stopped.
        with ThreadPoolExecutor(max_workers=cfg.write_threads, thread_name_prefix="nsreplay-write") as pool:
            written = list(pool.map(lambda item: write(item[0], item[1], owned[item[0]]), outputs.items()))
        _check_no_other_writer(warehouse, seen, run_id)
        counts = {name: rows for name, rows, _ in written}
        versions = {name: version for name, _, version in written}
        coverage = {ns: (origins[ns], end_of_range[ns], next(e.profile for e in reversed(grid) if e.namesrv == ns)) for ns in origins}
        # A NameServer whose first record is after this window (a re-run of an earlier window) is not
        # replayed here and none of its rows change: it stays covered as published.
        coverage = {**(published.coverage if published else {}), **coverage}
        checked = warehouse.read(ROUTE_FIDELITY, version=versions[ROUTE_FIDELITY.name], where=owned[ROUTE_FIDELITY.name]).groupBy("match").count().collect()
        fidelity_counts = {("matched" if r.match else "mismatched"): r["count"] for r in checked}
        summary = {
            "changes_by_cause": {r.cause: r["count"] for r in logged.where(F.expr(window.instant("ts"))).groupBy("cause").count().collect()},
            "units": units,
            "fidelity": {"matched": fidelity_counts.get("matched", 0), "mismatched": fidelity_counts.get("mismatched", 0)},
            "resumed_from": after,
            "replayed_again": {ns: {"units": sorted(units), "from_ts": again_from[ns]} for ns, units in sorted(again.items())},
            "latest": latest,
            "events_version": events_version,  # what publish_window checks later ingests against
            "asked_from": window_from,  # the --from given (None: none): what a retry is compared with (RecordedWindow)
            "unfinished_ingests": list(unfinished_ingests),
            **({"attempt": attempt} if attempt > 1 else {}),  # the check and the publish go by it (pipelines.replay.attempts)
        }
        # (window_from, window_to] holds every record replayed: a run from the first record starts just before it
        window_from_value = after if after is not None else min(origins.values()) - 1
        run_row = local_frame(
            spark,
            [(run_id, int(time.time() * 1000), window_from_value, until, [(ns, f, t, p) for ns, (f, t, p) in sorted(coverage.items())],
              versions, counts, json.dumps(summary, sort_keys=True))],
            REPLAY_RUNS.schema,
        )
        if warehouse.append(REPLAY_RUNS, run_row, CommitInfo(run_id=run_id, job=attempt_job(JOB, attempt), window_from=after, window_to=until)) is None:
            # an earlier try wrote the run row, last of its writes, so all of them: this one's were skipped
            return _recorded_result(warehouse, run_id, time.time() - started)
        return ReplayResult(
            run_id=run_id,
            window_from=window_from_value,
            window_to=until,
            namesrvs=coverage,
            units=units,
            changes=counts[ROUTE_CHANGES.name],
            ticks=counts[SCAN_TICKS.name],
            fidelity=summary["fidelity"],
            row_counts=counts,
            table_versions=versions,
            seconds=time.time() - started,
            resumed_from=after,
            replayed_again=tuple(_replayed_again(again, again_from)),
            stages={"plan (metadata queries)": round(planned - started, 2), "replay units, write gold": round(time.time() - planned, 2)},
            unfinished_ingests=unfinished_ingests,
            warehouse=warehouse.root,
            attempt=attempt,
        )
    finally:
        for frame in (ticks, generic, output, epoch_df):
            frame.unpersist()


def _recorded_result(warehouse: Warehouse, run_id: str, seconds: float, run: dict[str, Any] | None = None) -> ReplayResult:
    """The result of a replay of ``run_id`` whose writes were all done by an earlier try (of the same
    attempt): what that try recorded in ``gold.replay_runs`` (its window, counts and table versions,
    and when), which the tables hold; nothing is computed again. ``run``: that row, read here when
    not given."""
    if run is None:
        run = written_run(warehouse, run_id)
    summary = json.loads(run["quality"])
    again = summary.get("replayed_again", {})
    return ReplayResult(
        run_id=run_id,
        window_from=run["window_from"],
        window_to=run["window_to"],
        namesrvs={c["namesrv"]: (c["from_ts"], c["to_ts"], c["profile"]) for c in run["namesrvs"]},
        units=summary["units"],
        changes=run["row_counts"][ROUTE_CHANGES.name],
        ticks=run["row_counts"][SCAN_TICKS.name],
        fidelity=summary["fidelity"],
        row_counts=run["row_counts"],
        table_versions=run["table_versions"],
        seconds=seconds,
        resumed_from=summary.get("resumed_from"),
        replayed_again=tuple(_replayed_again({ns: a["units"] for ns, a in again.items()}, {ns: a["from_ts"] for ns, a in again.items()})),
        unfinished_ingests=tuple(summary.get("unfinished_ingests", ())),
        warehouse=warehouse.root,
        attempt=run_attempt(summary),
        written_before_ms=run["written_ms"],
        published=warehouse.committed(PUBLISH_LOG, CommitInfo(run_id=run_id, job=PUBLISH_JOB)),
    )


# ---------------------------------------------------------------------------------- stages 2 and 3


def run_rows(warehouse: Warehouse, spec: TableSpec, job: str, run_id: str) -> list[dict[str, Any]]:
    """The rows of ``spec`` whose ``run_id`` is ``run_id``, as dicts (map columns as dicts). Read from
    the files that ``job``'s commit of that run added, when the Delta log names it among the table's
    newest commits (:meth:`Warehouse.files_written_by`; the common case: the stage right after the
    one that wrote them), so a table of thousands of runs is not read whole to find one; else by a
    filter over the whole table."""
    files = warehouse.files_written_by(spec, CommitInfo(run_id=run_id, job=job))
    if files:
        maps = {f.name for f in spec.schema.fields if isinstance(f.dataType, T.MapType)}
        table = dataset(spec, files).to_table(filter=pads.field("run_id") == run_id)
        rows = [{k: dict(v) if k in maps and v is not None else v for k, v in row.items()} for row in table.to_pylist()]
        if rows:
            return rows
    return [r.asDict(recursive=True) for r in warehouse.read(spec).where(F.col("run_id") == run_id).collect()]


def written_run(warehouse: Warehouse, run_id: str) -> dict[str, Any]:
    """The ``gold.replay_runs`` row of ``run_id`` (:class:`NotWrittenError` if there is none): its
    latest attempt's, the only one (a failed attempt's row is deleted by the next attempt). A later
    attempt's row is found by a filter (the first attempt's commit names no file of it)."""
    rows = run_rows(warehouse, REPLAY_RUNS, JOB, run_id) if warehouse.exists(REPLAY_RUNS) else []
    if not rows:
        raise NotWrittenError(f"run {run_id!r} has written no replay: run its replay stage first")
    return rows[0]


def check_window(spark: SparkSession, warehouse: Warehouse, run_id: str) -> QualityReport:
    """Great Expectations over the gold rows ``run_id`` wrote; results go to silver.quality_results,
    under the run's attempt (:mod:`pipelines.replay.attempts`): once per attempt, a check of an
    attempt checked before records nothing new (its verdict stands: run the replay stage again)."""
    run = written_run(warehouse, run_id)
    attempt = run_attempt(json.loads(run["quality"]))
    # every row the run wrote is in its window's slice, owned as by the latest window (the widest)
    within = owned_rows(Window(run["window_from"], run["window_to"], latest=True))
    tables = {spec.name: warehouse.read(spec, version=run["table_versions"][spec.name], where=within[spec.name]) for spec in REPLAY_TABLES}
    report = validate_replay(spark, run_id=run_id, tables=tables)
    rows = [{**r, "attempt": attempt} for r in report.rows]
    warehouse.append(QUALITY_RESULTS, local_frame(spark, rows, QUALITY_RESULTS.schema), CommitInfo(run_id=run_id, job=attempt_job(GOLD_QUALITY_JOB, attempt)))
    return report


def _gold_results(warehouse: Warehouse, run_id: str, attempt: int) -> list[dict[str, Any]]:
    """The gold quality results of attempt ``attempt`` of ``run_id`` (rows without an attempt are the
    first's: written before attempts existed). Every one is written by the commit of that attempt's
    check (:func:`check_window`), so without that commit (its quality stage has not run: a retry of
    its replay stage, say) there are none, which the table's app transactions tell without reading
    any of its files (a filter over the whole table, one file per run, before:
    ``scripts/bench/gold_results.py``)."""
    job = attempt_job(GOLD_QUALITY_JOB, attempt)
    if not warehouse.committed(QUALITY_RESULTS, CommitInfo(run_id=run_id, job=job)):  # False without the table
        return []
    rows = run_rows(warehouse, QUALITY_RESULTS, job, run_id)
    return [r for r in rows if r["suite"].startswith("gold.") and (r.get("attempt") or 1) == attempt]


def publish_window(spark: SparkSession, warehouse: Warehouse, run_id: str) -> dict[str, Any]:
    """Append the publish row of ``run_id`` (idempotent); :class:`PublishRefusedError` when its
    quality check failed or is missing (its latest attempt's: :mod:`pipelines.replay.attempts`), or
    when another run wrote gold tables since.

    Records ingested after the version of ``silver.events`` the run's replay read, at or before its
    window's end, are in no window it publishes: once published, its window (and any published one
    ending at or after them) is marked stale for them (:func:`~pipelines.replay.stale.records_since`),
    as an ingest after the publish would have. The returned row's ``stale`` lists those marks."""
    run = written_run(warehouse, run_id)
    published = _publish(spark, warehouse, run_id, run)
    return {**published, "stale": _mark_ingested_since(spark, warehouse, run_id, run)}


def _mark_ingested_since(spark: SparkSession, warehouse: Warehouse, run_id: str, run: dict[str, Any]) -> list[StaleWindow]:
    """The stale marks for the records committed to silver.events after the run's replay read it
    (a run written before the replay recorded its version: none). Idempotent (one commit per run)."""
    read = json.loads(run["quality"]).get("events_version")
    if read is None:
        return []
    starts = {c["namesrv"]: c["from_ts"] for c in run["namesrvs"]}
    late = records_since(warehouse, int(read), run["window_to"], starts)
    return mark_stale(spark, warehouse, late, run_id, job=PUBLISH_STALE_JOB) if late else []


def _publish(spark: SparkSession, warehouse: Warehouse, run_id: str, run: dict[str, Any]) -> dict[str, Any]:
    attempt = run_attempt(json.loads(run["quality"]))
    results = _gold_results(warehouse, run_id, attempt)
    if not results:
        raise PublishRefusedError(f"run {run_id!r} has no gold quality results: run its quality stage first")
    if not all(r["success"] for r in results):
        raise PublishRefusedError(
            f"run {run_id!r} failed its gold quality checks (see silver.quality_results); nothing published; once the cause "
            f"is fixed, run its replay stage again (then quality and publish): it replaces the failed attempt"
        )
    commit = CommitInfo(run_id=run_id, job=PUBLISH_JOB, window_from=run["window_from"], window_to=run["window_to"])
    if warehouse.committed(PUBLISH_LOG, commit):
        return run
    moved = [name for name, v in run["table_versions"].items() if warehouse.row_commits_since(name, v)]
    if moved:
        raise PublishRefusedError(f"gold tables changed since run {run_id!r} wrote them ({', '.join(sorted(moved))}): re-run its replay stage")
    quality = json.loads(run["quality"])
    quality["gold_expectations"] = len(results)
    row = local_frame(
        spark,
        [(run_id, int(time.time() * 1000), run["window_from"], run["window_to"],
          [(c["namesrv"], c["from_ts"], c["to_ts"], c["profile"]) for c in run["namesrvs"]],
          run["table_versions"], run["row_counts"], json.dumps(quality, sort_keys=True))],
        PUBLISH_LOG.schema,
    )
    warehouse.append(PUBLISH_LOG, row, commit)
    return run


class GoldQualityError(RuntimeError):
    """The gold quality check of a run failed: nothing was published."""

    def __init__(self, report: QualityReport) -> None:
        super().__init__(report.text())
        self.report = report


def run_replay(
    spark: SparkSession,
    warehouse: Warehouse,
    settings: Settings,
    run_id: str,
    *,
    window_from: int | None = None,
    window_to: int | None = None,
    from_last_good: bool = False,
) -> ReplayResult:
    """All three stages: replay the window, check it, publish it (see module docstring). The
    result's ``stages`` holds the seconds each took (the replay stage in two parts)."""
    result = replay_window(spark, warehouse, settings, run_id, window_from=window_from, window_to=window_to, from_last_good=from_last_good)
    started = time.time()
    report = check_window(spark, warehouse, run_id)
    checked = time.time()
    if not report.passed:
        raise GoldQualityError(report)
    published = publish_window(spark, warehouse, run_id)
    stages = {**result.stages, "gold quality": round(checked - started, 2), "publish": round(time.time() - checked, 2)}
    return ReplayResult(**{**result.__dict__, "quality": report, "stages": stages, "stale": tuple(published["stale"])})


def run_backfill(
    spark: SparkSession,
    warehouse: Warehouse,
    settings: Settings,
    run_prefix: str,
    *,
    start: int | None,
    end: int | None = None,
) -> list[ReplayResult]:
    """Re-run every window of ``(start, end]`` in order (each replayed, checked and published), cut
    where the published windows were cut (:func:`backfill_windows`); ``end`` defaults to the end of
    the published coverage. When the published states at ``start`` are gone (``nsreplay
    thin-states`` keeps a checkpoint a day of older window ends), the first run resumes from the
    latest state kept before ``start`` (or the first record) and replays that range too, as
    ``from_last_good`` does: the rows are the same, the first run longer."""
    if end is None:
        published = latest_publish(warehouse)
        if published is None:
            raise NotWrittenError("nothing has been published yet: there is nothing to backfill")
        end = max(to for _, to, _ in published.coverage.values())
    results = []
    for i, (after, until) in enumerate(backfill_windows(warehouse, start, end)):
        results.append(run_replay(spark, warehouse, settings, f"{run_prefix}-{i:04d}", window_from=after, window_to=until, from_last_good=i == 0))
    return results


__all__ = [
    "GoldQualityError",
    "MissingPredecessorError",
    "NothingToReplayError",
    "NotWrittenError",
    "PublishRefusedError",
    "ReplayResult",
    "StateFormatError",
    "check_run_window",
    "check_window",
    "latest_publish",
    "publish_window",
    "replay_window",
    "resolve_start",
    "run_backfill",
    "run_replay",
]
