"""What the serving shim's index costs as the published history grows: load time, peak memory, and
the latency of each kind of lookup, on synthetic N-day warehouses made from a published one-day
warehouse.

    .venv/bin/python scripts/bench/shim_history.py --source WAREHOUSE --days 1,4 --scratch DIR
    .venv/bin/python scripts/bench/shim_history.py --source WAREHOUSE --days 1,4 --scratch DIR \\
        --code /tmp/old-tree --code .          # the same on two code trees, alternating

``--source`` is a published warehouse of one day (bench-day's). For N days the script writes, once,
the tables the shim reads with N time-shifted copies of every row (day k shifted by k days; the
rows still open at the end of a day but the last are closed there, so the copies form one history),
each copy one Delta commit written by delta-rs (so with statistics), and a publish row naming the
new versions and the extended coverage.

Each measurement runs in a fresh process (``--code`` picks the source tree it imports), so the
peak resident memory is that of loading one index. In that process: the load, then, at random
covered instants (the same ones for every code tree), the route of a random topic (the in-memory
baseline), the broker-live rows of ``/v1/tables``, a full snapshot, and a topic's route history
over one day.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

DAY = 86_400_000
TABLES = (
    "topic_queue_intervals", "broker_addr_intervals", "cluster_addr_intervals", "broker_live_intervals",
    "filter_server_intervals", "order_topic_intervals", "namesrv_epochs", "route_changes",
)
SHIFTED = ("valid_from", "valid_to", "ts", "tick_ts", "start_ts", "end_ts", "first_tick", "last_update_ts")
OPEN_ENDS = ("valid_to",)


def build(source: str, days: int, target: Path) -> None:
    """The synthetic ``days``-day warehouse at ``target`` (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable, write_deltalake

    from nsreplay.history import PublishedHistory

    published = PublishedHistory(source)
    horizon = max(c.to_ts for c in published.coverage())
    versions = {}
    for name in TABLES:
        spec_name = f"gold.{name}"
        table = DeltaTable(f"{source}/gold/{name}", version=published.versions[spec_name]).to_pyarrow_table()
        partitions = DeltaTable(f"{source}/gold/{name}").metadata().partition_columns
        for k in range(days):
            columns = {}
            for c in table.column_names:
                column = table[c]
                if c in OPEN_ENDS and k < days - 1:
                    column = pc.fill_null(column, pa.scalar(horizon + 1, column.type))
                columns[c] = pc.add(column, pa.scalar(k * DAY, column.type)) if c in SHIFTED else column
            write_deltalake(str(target / "gold" / name), pa.table(columns), mode="append", partition_by=partitions or None)
        versions[spec_name] = DeltaTable(str(target / "gold" / name)).version()
    log = DeltaTable(f"{source}/gold/publish_log").to_pyarrow_table()
    row = max(log.to_pylist(), key=lambda r: (r["published_ms"], r["run_id"]))
    row["table_versions"] = [(k, versions.get(k, v)) for k, v in row["table_versions"]]
    row["namesrvs"] = [{**c, "to_ts": c["to_ts"] + (days - 1) * DAY} for c in row["namesrvs"]]
    row["run_id"] = f"synthetic-{days}d"
    write_deltalake(str(target / "gold" / "publish_log"), pa.Table.from_pylist([row], schema=log.schema), mode="append")


def _peak_mb() -> float:
    """This process's peak resident memory (``VmHWM``: unlike ``ru_maxrss`` it does not carry the
    parent's peak across the exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(root: str, lookups: int, seed: int) -> dict[str, float]:
    """One fresh process's figures (run by ``--measure``)."""
    import random
    import statistics
    import time

    from nsreplay.serving.index import RouteIndex

    started = time.perf_counter()
    index = RouteIndex.load(root)
    out: dict[str, float] = {"load_s": time.perf_counter() - started, "load_peak_mb": _peak_mb(), "held_mb": index.memory_bytes() / 1e6}
    rnd = random.Random(seed)
    coverage = index.coverage()
    asks = []
    for _ in range(lookups):
        cov = rnd.choice(coverage)
        topics = index.topic_names(cov.namesrv)
        asks.append((cov.namesrv, rnd.choice(topics), rnd.randint(cov.from_ts, cov.to_ts), cov))
    timings: dict[str, list[float]] = {"route_ms": [], "live_rows_ms": [], "snapshot_ms": [], "route_history_day_ms": []}
    for ns, topic, t, cov in asks:
        for name, call in (
            ("route_ms", lambda: index.route(ns, topic, t, request_version=401)),
            ("live_rows_ms", lambda: index.table_rows(ns, "brokerLiveTable", t)),
            ("snapshot_ms", lambda: index.snapshot(ns, t)),
            ("route_history_day_ms", lambda: index.route_history(ns, topic, max(cov.from_ts, t - DAY), t)),
        ):
            began = time.perf_counter()
            call()
            timings[name].append((time.perf_counter() - began) * 1000)
    out.update({name: statistics.median(values) for name, values in timings.items()})
    out["peak_mb"] = _peak_mb()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source")
    parser.add_argument("--days", default="1,4")
    parser.add_argument("--scratch", default="/tmp/shim-history")
    parser.add_argument("--code", action="append", help="source tree to import nsreplay from (repeatable; default: this one)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--lookups", type=int, default=40)
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.lookups, 11)))
        return
    here = str(Path(__file__).resolve().parents[2])
    codes = args.code or [here]
    for days in [int(d) for d in args.days.split(",")]:
        target = Path(args.scratch) / f"{days}d"
        if not (target / "gold" / "publish_log").exists():
            build(args.source, days, target)
        for r in range(args.rounds):
            for code in codes if r % 2 == 0 else list(reversed(codes)):
                env = {**os.environ, "PYTHONPATH": os.path.abspath(code)}
                done = subprocess.run([sys.executable, os.path.abspath(__file__), "--measure", str(target), "--lookups", str(args.lookups)],
                                      env=env, cwd=os.path.abspath(code), capture_output=True, text=True, check=True)
                figures = json.loads(done.stdout.strip().splitlines()[-1])
                print(f"{days} d  {code}  " + "  ".join(f"{k} {v:.1f}" for k, v in figures.items()), flush=True)


if __name__ == "__main__":
    main()
