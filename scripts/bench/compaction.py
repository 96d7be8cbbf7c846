"""What `nsreplay compact` gives the readers of a long history of hourly windows.

    .venv/bin/python scripts/bench/compaction.py --dir /tmp/compaction --hours 48 --rounds 3

Builds, once (kept in ``--dir``): the demo capture over ``--hours`` hours, ingested and replayed and
published in hourly windows, all but the last hour or two, as a scheduled deployment would. Then
copies that warehouse twice, compacts one copy (``compact_warehouse`` with ``conf/``'s policy), and
replays and publishes the rest in two windows on each copy (the copies alternating), so that the
publish names the compacted versions. Then, in
one process, the two copies alternating, each round measures the reads that grow with the number
of files:

* ``log``: the file list of every compacted table (``Warehouse.files``, the Delta log only);
* ``history``: ``PublishedHistory`` at 24 random covered instants (snapshots and a route each);
* ``shim``: ``RouteIndex.load``, what ``nsreplay serve`` does at start and at each publish;
* ``live``: the shim's broker-live rows at the 24 instants (``/v1/tables/brokerLiveTable``), read
  per request from the files whose statistics may hold the instant;
* ``sql``: the SQL views registered and three analysts' queries of ``notebooks/README.md``.

Prints the files per table, the compaction's seconds, each of the two windows' seconds per copy, and
each round's seconds. docs/performance.md ("Long histories") has the figures.
"""

from __future__ import annotations

import argparse
import random
import shutil
import time
from pathlib import Path

from nsreplay.compaction import HISTORY_TABLES, Policy, compact_warehouse
from nsreplay.config import load_settings
from nsreplay.generator import apply_overrides, generate, preset
from nsreplay.history import PublishedHistory
from nsreplay.runtime import build_spark
from nsreplay.serving.index import RouteIndex
from nsreplay.sql import register_views
from nsreplay.storage import Warehouse
from pipelines.ingest.run import run_ingest
from pipelines.replay.run import run_replay
from schemas.silver import EVENTS

HOUR = 3_600_000
QUERIES = (
    "SELECT `table`, cause, count(*) FROM route_changes GROUP BY ALL",
    "SELECT namesrv, broker_addr, count(*) FROM broker_live GROUP BY ALL",
    "WITH s AS (SELECT namesrv, broker_name FROM broker_addr WHERE alive(valid_from, valid_to, {t})) "
    "SELECT broker_name, collect_set(namesrv) FROM s GROUP BY broker_name",
)


def build(spark, root: Path, hours: int) -> tuple[str, int]:
    """The demo capture over ``hours``, published hourly but for its last hour: (warehouse, its end)."""
    capture = root / "capture"
    warehouse_root = root / "base"
    settings = load_settings()
    if not warehouse_root.exists():
        generate(apply_overrides(preset("demo"), {"timing.hours": hours}), capture, workers=2)
        warehouse = Warehouse(str(warehouse_root), spark, "delta-rs")
        run_ingest(spark, warehouse, settings, str(capture), "ingest")
        low, high = warehouse.column_bounds(EVENTS, "ts")[None]
        after = None
        end = low - low % HOUR + HOUR
        while end < high - HOUR:
            run_replay(spark, warehouse, settings, f"window-{end}", window_from=after, window_to=end)
            after, end = end, end + HOUR
            print(f"published to {end - HOUR}", flush=True)
    warehouse = Warehouse(str(warehouse_root), spark, "delta-rs")
    return str(warehouse_root), warehouse.column_bounds(EVENTS, "ts")[None][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/compaction")
    parser.add_argument("--hours", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    settings = load_settings()
    spark = build_spark(settings, "compaction-bench", master="local[2]")
    root = Path(args.dir)
    base, end = build(spark, root, args.hours)
    copies = {"plain": root / "plain", "compacted": root / "compacted"}
    for path in copies.values():
        shutil.rmtree(path, ignore_errors=True)
        shutil.copytree(base, path)
    warehouses = {name: Warehouse(str(path), spark, "delta-rs") for name, path in copies.items()}
    before = {spec.name: len(warehouses["compacted"].files(spec)) for spec, _ in HISTORY_TABLES}
    started = time.perf_counter()
    compact_warehouse(Warehouse(str(copies["compacted"]), None, "delta-rs"), Policy.from_config(settings.compact), dry_run=False, run_id="compact")
    print(f"compaction: {time.perf_counter() - started:.1f} s", flush=True)
    for spec, _ in HISTORY_TABLES:
        print(f"  {spec.name:<30} {before[spec.name]:>7} -> {len(warehouses['compacted'].files(spec)):>5} files")
    last = max(PublishedHistory(base).coverage(), key=lambda c: c.to_ts).to_ts
    middle = last + HOUR if last + HOUR < end else (last + end) // 2
    # two more windows on each copy, the copies alternating (plain, compacted, compacted, plain):
    # the first one pays for a cold JVM whichever copy runs it
    for i, (name, window_from, window_to) in enumerate(
        (("plain", last, middle), ("compacted", last, middle), ("compacted", middle, end), ("plain", middle, end))
    ):
        started = time.perf_counter()
        run_replay(spark, warehouses[name], settings, f"window-after-{window_from}", window_from=window_from, window_to=window_to)
        print(f"window {window_from}-{window_to} on the {name} copy: {time.perf_counter() - started:.1f} s", flush=True)

    coverage = PublishedHistory(str(copies["plain"])).coverage()
    rng = random.Random(7)
    instants = [(c.namesrv, rng.randrange(c.from_ts, c.to_ts)) for c in rng.choices(coverage, k=24)]

    def log(path: Path) -> None:
        warehouse = Warehouse(str(path), None, "delta-rs")
        for spec, _ in HISTORY_TABLES:
            warehouse.files(spec)

    def history(path: Path) -> None:
        h = PublishedHistory(str(path))
        for namesrv, t in instants:
            snap = h.snapshot_at(namesrv, t)
            for topic in sorted(snap.topicQueueTable)[:1]:
                h.route_at(namesrv, topic, t)

    indexes: dict[Path, RouteIndex] = {}

    def shim(path: Path) -> None:
        indexes[path] = RouteIndex.load(str(path))

    def live(path: Path) -> None:
        for namesrv, t in instants:
            indexes[path].table_rows(namesrv, "brokerLiveTable", t)

    def sql(path: Path) -> None:
        register_views(spark, str(path))
        for query in QUERIES:
            spark.sql(query.format(t=instants[0][1])).collect()

    for r in range(args.rounds):
        for name in (copies if r % 2 == 0 else reversed(list(copies))):
            timings = []
            for what, read in (("log", log), ("history", history), ("shim", shim), ("live", live), ("sql", sql)):
                started = time.perf_counter()
                read(copies[name])
                timings.append(f"{what} {time.perf_counter() - started:.2f} s")
            print(f"round {r} {name:<9}: " + ", ".join(timings), flush=True)


if __name__ == "__main__":
    main()
