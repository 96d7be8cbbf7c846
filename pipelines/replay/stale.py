"""Late input: which published windows it makes stale, and the re-runs (backfill) that repair them.

A record that arrives after the window holding its ``ts`` was published changes that window and,
through the carried state, every window after it. :func:`mark_stale` (called by every ingest run
that added records) compares the earliest new record of each NameServer with the published windows
and appends one ``gold.stale_windows`` row per window to re-run. A stale row stays open until a run
publishes that window again after the row was detected (:func:`open_stale`).

A window is replayed from ``silver.events`` as one version of it, and published later (the quality
stage runs in between): records an ingest commits in that gap are in no published window yet when
the ingest looks, and not in the run that publishes. Each ingest's commit to ``silver.events``
names the earliest record it added per NameServer (:data:`NEW_RECORDS_FROM`), and the publish of a
run marks its own window, and any published one, stale for the records committed after the version
its replay read (:func:`records_since`). A replay reads the version before the commits of ingests
that have not finished (:func:`settled_events_version`): killed halfway, such an ingest leaves
events without their register bodies, and its rows are discarded by the next ingest anyway.

:func:`backfill_windows` turns a time range into the windows to re-run, in order: the published
window ends inside the range (so re-runs cut time as the original runs did), chained from the start.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pyarrow.dataset as pads
from pyspark.sql import SparkSession

from nsreplay.runtime import format_ms, local_frame
from nsreplay.storage import ColumnRange, CommitInfo, Warehouse, changes_rows, dataset, range_filter
from schemas.gold import PUBLISH_LOG, STALE_WINDOWS
from schemas.silver import EVENTS, INGEST_RUNS

#: Commit metadata of an ingest's append to ``silver.events``: JSON ``{namesrv: earliest ts}`` of the
#: records it added.
NEW_RECORDS_FROM = "new_records_from"
#: The job name of a publish's stale marks (an ingest's are ``stale-check``; both may share a run id).
PUBLISH_STALE_JOB = "publish-stale-check"
# Newest commits of silver.events looked at first; the whole history only when these do not settle it.
_RECENT_COMMITS = 32


@dataclass(frozen=True)
class StaleWindow:
    namesrv: str
    window_from: int
    window_to: int
    published_run_id: str
    late_from_ts: int
    detected_by: str
    detected_ms: int


def _published_windows(warehouse: Warehouse, ending_from: int | None = None) -> list[tuple[int, int, str, int, frozenset[str]]]:
    """(window_from, window_to, run_id, published_ms, namesrvs) of every publish row, oldest first;
    with ``ending_from``, of those whose window ends at or after it (only their files are opened).
    Read without Spark (the Delta log's file list, then pyarrow): the publish log is small."""
    if not warehouse.exists(PUBLISH_LOG):
        return []
    where = None if ending_from is None else ColumnRange("window_to", above=ending_from - 1)
    columns = ["window_from", "window_to", "run_id", "published_ms", "namesrvs"]
    rows = dataset(PUBLISH_LOG, warehouse.files(PUBLISH_LOG, where=where)).to_table(columns=columns, filter=range_filter(where)).to_pylist()
    windows = ((r["window_from"], r["window_to"], r["run_id"], r["published_ms"], frozenset(c["namesrv"] for c in r["namesrvs"])) for r in rows)
    return sorted(windows, key=lambda w: (w[3], w[2]))


def new_records_metadata(earliest_new: Mapping[str, int]) -> dict[str, str]:
    """The commit metadata an ingest's append to ``silver.events`` carries (:data:`NEW_RECORDS_FROM`)."""
    return {NEW_RECORDS_FROM: json.dumps(dict(sorted(earliest_new.items())))}


def _unfinished_ingest(warehouse: Warehouse, entry: Mapping[str, Any]) -> bool:
    """Whether a commit of ``silver.events`` is an ingest's append (it carries :data:`NEW_RECORDS_FROM`)
    whose run has not written its run row, which it commits under the same job and run id."""
    if NEW_RECORDS_FROM not in (entry.get("extra") or {}) or not entry.get("run_id") or not entry.get("job"):
        return False
    return not warehouse.committed(INGEST_RUNS, CommitInfo(run_id=entry["run_id"], job=entry["job"]))


def settled_events_version(warehouse: Warehouse) -> tuple[int, tuple[str, ...]]:
    """The version of ``silver.events`` a replay reads, and the ingest runs it leaves out: the latest
    version, or the one before the oldest of the appends by unfinished ingests that are newer than
    every other commit that may change rows (module docstring). A discard of a stopped ingest's rows
    ends the walk like any other such commit: after it, those rows are gone. Reads the newest log
    entries (normally one) and a run-row lookup per ingest append among them."""
    latest = warehouse.version(EVENTS)
    for limit in (_RECENT_COMMITS, None):
        entries = warehouse.history(EVENTS, limit=limit)
        version, left_out, ended = latest, [], False
        for entry in entries:  # newest first
            if _unfinished_ingest(warehouse, entry):
                version = entry["version"] - 1
                left_out.append(entry["run_id"])
            elif changes_rows(entry):
                ended = True
                break
        if ended or len(entries) < _RECENT_COMMITS:
            break
    return version, tuple(sorted(set(left_out)))


def rows_changed_between(warehouse: Warehouse, a: int, b: int) -> bool:
    """Whether any commit of ``silver.events`` after the older of versions ``a`` and ``b``, up to the
    newer, may change its rows (a compaction or a vacuum does not)."""
    low, high = min(a, b), max(a, b)
    return any(c["version"] <= high for c in warehouse.row_commits_since(EVENTS, low))


def records_since(warehouse: Warehouse, version: int, until: int, namesrvs: Mapping[str, int]) -> dict[str, int]:
    """Per NameServer, the earliest ``ts`` at or before ``until`` of the records committed to
    ``silver.events`` after ``version`` (from the ingests' :data:`NEW_RECORDS_FROM`; reads only the log
    entries after ``version``). A commit that may change rows without that metadata (a writer other
    than this version's ingest; a discard of a stopped ingest's rows is not counted, its records come
    back with the ingest that discards them) counts as records of every NameServer in ``namesrvs``
    (NameServer -> the first instant of the window asking) from that instant on."""
    out: dict[str, int] = {}
    for commit in warehouse.row_commits_since(EVENTS, version):
        extra = commit.get("extra") or {}
        if NEW_RECORDS_FROM in extra:
            earliest = {str(ns): int(ts) for ns, ts in json.loads(extra[NEW_RECORDS_FROM]).items()}
        elif "discarded" in extra:
            continue
        else:
            earliest = dict(namesrvs)
        for ns, ts in earliest.items():
            if ts <= until:
                out[ns] = min(ts, out.get(ns, ts))
    return out


def mark_stale(
    spark: SparkSession, warehouse: Warehouse, earliest_new: Mapping[str, int], run_id: str, *, job: str = "stale-check"
) -> list[StaleWindow]:
    """Record the published windows that records newer than their publish make stale: for each
    NameServer, every published window ending at or after its earliest new record. ``job`` names the
    commit (one per run id and job)."""
    if not earliest_new:
        return []
    windows = _published_windows(warehouse, ending_from=min(earliest_new.values()))
    if not windows:
        return []
    latest_by_window: dict[tuple[int, int], str] = {}
    for w_from, w_to, rid, _, _ in windows:
        latest_by_window[(w_from, w_to)] = rid
    now = int(time.time() * 1000)
    stale = [
        StaleWindow(ns, w_from, w_to, rid, first, run_id, now)
        for (w_from, w_to), rid in sorted(latest_by_window.items())
        for ns, first in sorted(earliest_new.items())
        if first <= w_to
    ]
    if stale:
        rows = [(s.namesrv, s.window_from, s.window_to, s.published_run_id, s.late_from_ts, s.detected_by, s.detected_ms) for s in stale]
        warehouse.append(STALE_WINDOWS, local_frame(spark, rows, STALE_WINDOWS.schema), CommitInfo(run_id=run_id, job=job))
    return stale


def late_data_note(stale: Sequence[StaleWindow], warehouse_root: str) -> str:
    """A warning naming the published windows ``stale`` marks, and the backfill that repairs them
    ('' if none)."""
    if not stale:
        return ""
    first = min(s.window_from for s in stale)
    last = max(s.window_to for s in stale)
    windows = len({(s.window_from, s.window_to) for s in stale})
    return (
        f"late data: {windows} published window(s) between {format_ms(first)} and {format_ms(last)} are stale (gold.stale_windows); "
        f"re-run them and every window after them, in order: "
        f"nsreplay backfill --warehouse {shlex.quote(warehouse_root) if warehouse_root else '<dir>'} --from {first}"
    )


def open_stale(warehouse: Warehouse) -> list[StaleWindow]:
    """Stale windows not yet published again since they were detected. Read without Spark: a
    ``Warehouse`` without a session will do (``nsreplay stale`` starts none)."""
    if not warehouse.exists(STALE_WINDOWS):
        return []
    windows = _published_windows(warehouse)
    republished: dict[int, int] = {}  # window_to -> its latest publish
    for _, w_to, _, published, _ in windows:
        republished[w_to] = max(published, republished.get(w_to, published))
    out = []
    for r in dataset(STALE_WINDOWS, warehouse.files(STALE_WINDOWS)).to_table().to_pylist():  # small bookkeeping table
        if republished.get(r["window_to"], -1) <= r["detected_ms"]:
            out.append(StaleWindow(r["namesrv"], r["window_from"], r["window_to"], r["published_run_id"], r["late_from_ts"], r["detected_by"], r["detected_ms"]))
    return sorted(out, key=lambda s: (s.window_to, s.namesrv))


def stale_windows_published_by(warehouse: Warehouse, run_id: str) -> list[StaleWindow]:
    """The open stale windows (:func:`open_stale`) whose latest publish is ``run_id``'s. Reads the
    publish log only when a stale mark names that run."""
    if not warehouse.exists(STALE_WINDOWS):
        return []
    named = dataset(STALE_WINDOWS, warehouse.files(STALE_WINDOWS)).to_table(columns=["published_run_id"], filter=pads.field("published_run_id") == run_id)
    if named.num_rows == 0:
        return []
    return [s for s in open_stale(warehouse) if s.published_run_id == run_id]


def backfill_windows(warehouse: Warehouse, start: int | None, end: int) -> list[tuple[int | None, int]]:
    """The windows ``(after, until]`` that re-run ``(start, end]`` in order: cut at the published
    window ends inside the range (``start`` None: from the first record). ``start`` equal to the start
    of the earliest published window that no window ends at also means None: a run from the first
    record published before ``d6031e5`` names the first record's ts as its start, and the stale-window
    listings print it."""
    windows = _published_windows(warehouse)
    if start is not None and windows and start == min(w[0] for w in windows) and all(w[1] != start for w in windows):
        start = None
    ends = sorted({w_to for _, w_to, _, _, _ in windows if (start is None or w_to > start) and w_to < end})
    cuts = ends + [end]
    out: list[tuple[int | None, int]] = []
    after = start
    for cut in cuts:
        out.append((after, cut))
        after = cut
    return out


__all__ = [
    "NEW_RECORDS_FROM",
    "PUBLISH_STALE_JOB",
    "StaleWindow",
    "backfill_windows",
    "late_data_note",
    "mark_stale",
    "new_records_metadata",
    "open_stale",
    "records_since",
    "rows_changed_between",
    "settled_events_version",
]
