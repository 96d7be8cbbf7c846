"""How the reads of ``silver.events`` a replay window makes scale with the history the table holds.

A capture is ingested once, then copies of its events shifted in time (by the capture's span, rounded
up to the hour) are appended until the table holds ``--copies`` spans of history. At each size the
three reads a window after the last published one needs are timed both ways, alternating:

* ``scan`` (before): each NameServer's first and last record by a MIN/MAX over every event, the start
  records by a filter over every event, the window's records by a ``ts`` filter over every file;
* ``log`` (now): the first and last records from the files' statistics in the Delta log
  (``Warehouse.column_bounds``), the start records and the window's records by ``ColumnRange``
  reads that open only the files of the window (the earlier start records are carried in
  ``gold.replay_state``).

The window is the last span. Each way's results are checked equal before any timing counts.

    .venv/bin/python scripts/bench/event_reads.py --captures /tmp/bench-1h --copies 1,24,96 [--rounds 3] [--dir /tmp/event-reads]

Prints the seconds of each way at each size. docs/performance.md ("Long histories") has the figures.
"""

from __future__ import annotations

import argparse
import shutil
import time

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from nsreplay.config import load_settings
from nsreplay.runtime import build_spark
from nsreplay.storage import ColumnRange, CommitInfo, Warehouse
from pipelines.ingest.run import run_ingest
from pipelines.replay.transforms import namesrv_spans
from schemas.silver import EVENTS

HOUR_MS = 3_600_000
START = "kind = 'namesrv_start'"


def scan(warehouse: Warehouse, window: ColumnRange) -> tuple:
    events = warehouse.read(EVENTS)
    spans = namesrv_spans(events)
    starts = sorted(tuple(r) for r in events.where(START).select("namesrv", "ts").collect())
    return spans, starts, events.where(F.expr(window.sql())).count()


def log(warehouse: Warehouse, window: ColumnRange) -> tuple:
    spans = warehouse.column_bounds(EVENTS, "ts", by="namesrv")
    starts = sorted(tuple(r) for r in warehouse.read(EVENTS, where=window).where(START).select("namesrv", "ts").collect())
    return spans, starts, warehouse.read(EVENTS, where=window).count()


def shifted(events: DataFrame, by: int) -> DataFrame:
    ts = F.col("ts") + F.lit(by)
    return events.withColumn("ts", ts).withColumn("event_date", F.date_format(F.timestamp_millis(ts), "yyyy-MM-dd"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--captures", required=True, help="a capture directory (e.g. /tmp/bench-1h from nsreplay generate)")
    parser.add_argument("--copies", default="1,24,96", help="history sizes, in spans of the capture, ascending")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default="/tmp/event-reads")
    args = parser.parse_args()
    sizes = sorted(int(n) for n in args.copies.split(","))
    spark = build_spark(load_settings(), "event-reads-bench", master="local[2]")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    shutil.rmtree(args.dir, ignore_errors=True)
    warehouse = Warehouse(args.dir, spark, "delta-rs")
    run_ingest(spark, warehouse, load_settings(), args.captures, "event-reads-ingest")
    base = warehouse.read(EVENTS).persist()
    first, last = base.agg(F.min("ts"), F.max("ts")).first()
    span = -(-(last - first + 1) // HOUR_MS) * HOUR_MS
    held = 1
    for size in sizes:
        while held < size:
            warehouse.append(EVENTS, shifted(base, held * span), CommitInfo(run_id=f"copy-{held}", job="bench"))
            held += 1
        window = ColumnRange("ts", above=first + (size - 1) * span - 1, at_most=first + size * span)
        files = len(warehouse.files(EVENTS))
        (spans, starts, count), now = scan(warehouse, window), log(warehouse, window)
        in_window = [s for s in starts if window.above < s[1] <= window.at_most]  # the earlier ones are carried now
        assert (spans, in_window, count) == now, "the two ways disagree"
        for r in range(args.rounds):
            for way in ("scan", "log") if r % 2 == 0 else ("log", "scan"):
                started = time.perf_counter()
                (scan if way == "scan" else log)(warehouse, window)
                print(f"history {size} spans ({files} files) round {r} {way}: {time.perf_counter() - started:.2f} s", flush=True)


if __name__ == "__main__":
    main()
