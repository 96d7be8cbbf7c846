"""Late input: which published windows it makes stale, and the re-runs (backfill) that repair them.

A record that arrives after the window holding its ``ts`` was published changes that window and,
through the carried state, every window after it. :func:`mark_stale` (called by every ingest run
that added records) compares the earliest new record of each NameServer with the published windows
and appends one ``gold.stale_windows`` row per window to re-run. A stale row stays open until a run
publishes that window again after the row was detected (:func:`open_stale`).

:func:`backfill_windows` turns a time range into the windows to re-run, in order: the published
window ends inside the range (so re-runs cut time as the original runs did), chained from the start.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Mapping

import pyarrow.dataset as pads
from pyspark.sql import SparkSession

from nsreplay.runtime import local_frame
from nsreplay.storage import ColumnRange, CommitInfo, Warehouse, dataset, range_filter
from schemas.gold import PUBLISH_LOG, STALE_WINDOWS


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


def mark_stale(spark: SparkSession, warehouse: Warehouse, earliest_new: Mapping[str, int], run_id: str) -> list[StaleWindow]:
    """Record the published windows that records newer than their publish make stale: for each
    NameServer, every published window ending at or after its earliest new record."""
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
        warehouse.append(STALE_WINDOWS, local_frame(spark, rows, STALE_WINDOWS.schema), CommitInfo(run_id=run_id, job="stale-check"))
    return stale


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


__all__ = ["StaleWindow", "backfill_windows", "mark_stale", "open_stale"]
