"""What the serving shim's reload costs after one more window, as the published history grows: the
full load (``RouteIndex.load``) against the incremental one (``RouteIndex.load(previous=...)``), on
synthetic N-day warehouses made from a published one-day warehouse.

    .venv/bin/python scripts/bench/shim_reload.py --source WAREHOUSE --days 1,16,32 --window 1h --scratch DIR

``--source`` is a published warehouse of one day (bench-day's). For N days the script writes, once,
the tables the shim reads with N time-shifted copies of every row (as ``shim_history.py`` does:
day k shifted by k days, each day one Delta commit written by delta-rs), laid out as the pipeline
lays them out: the rows still open at the end of the history in files of their own (a window's
overwrite rewrites those). Then one more window of ``--window`` (``1h``, ``1d``): a commit that
deletes the open rows' files, one that appends them closed with the window's closed rows (the
source day's rows starting in the window's first ``--window``, shifted by N days), one that appends
the window's rows still open at its end; the publish row naming those versions is kept aside (``next_publish.parquet``).

Each measurement runs in a fresh process: it loads the index of the N-day publish (what a server
holds), appends the next publish row, reloads (full or incremental: alternating, ``--rounds``
rounds), and restores the publish log, so every process starts from the same publish. With
``--code OLD --code NEW`` (two source trees; the default is this one) each round measures both
trees, alternating, one after the other, so that a change is compared with what it replaces in the
same conditions; the script itself is this tree's in both. Reported:
the reload's time, the peak resident memory during the reload (the old index held, as in
``nsreplay serve``; ``VmHWM`` reset just before), the resident memory before it, the files read.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from shim_history import DAY, SHIFTED, TABLES  # the same tables, shifted the same way (this script's folder)

INTERVALS = tuple(t for t in TABLES if t.endswith("_intervals"))
OTHERS = tuple(t for t in TABLES if t not in INTERVALS)
WINDOWS = {"1h": 3_600_000, "1d": DAY}


def _shifted(table, k: int):
    import pyarrow as pa
    import pyarrow.compute as pc

    return pa.table({c: pc.add(table[c], pa.scalar(k * DAY, table[c].type)) if c in SHIFTED else table[c] for c in table.column_names}, schema=table.schema)


def _closed(table, at: int):
    """``table`` with its open rows (``valid_to`` NULL) closed at ``at``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return table.set_column(table.schema.get_field_index("valid_to"), "valid_to", pc.fill_null(table["valid_to"], pa.scalar(at, table["valid_to"].type)))


def build(source: str, days: int, window: int, target: Path) -> None:
    """The ``days``-day warehouse at ``target`` and its next window (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from deltalake import DeltaTable, write_deltalake

    from nsreplay.history import PublishedHistory

    published = PublishedHistory(source)
    start = min(c.from_ts for c in published.coverage())
    horizon = max(c.to_ts for c in published.coverage())
    before, after = {}, {}
    for name in INTERVALS + OTHERS:
        spec_name = f"gold.{name}"
        table = DeltaTable(f"{source}/gold/{name}", version=published.versions[spec_name]).to_pyarrow_table()
        partitions = DeltaTable(f"{source}/gold/{name}").metadata().partition_columns or None
        path = str(target / "gold" / name)
        for k in range(days):
            day = _shifted(table, k)
            if name in INTERVALS and k == days - 1:  # the open rows in files of their own, as the replay writes them
                open_rows = pc.is_null(day["valid_to"])
                write_deltalake(path, day.filter(pc.invert(open_rows)), mode="append", partition_by=partitions)
                if pc.any(open_rows).as_py():
                    write_deltalake(path, day.filter(open_rows), mode="append", partition_by=partitions)
            elif name in INTERVALS:
                write_deltalake(path, _closed(day, horizon + 1 + k * DAY), mode="append", partition_by=partitions)
            else:
                write_deltalake(path, day, mode="append", partition_by=partitions)
        before[spec_name] = DeltaTable(path).version()
        # the next window: the rows starting in its first `window` ms of the source day, shifted by `days` days
        column = "valid_from" if name in INTERVALS else "ts" if name == "route_changes" else None
        if column is not None:
            new = _shifted(table.filter(pc.less(table[column], pa.scalar(start + window, table[column].type))), days)
            if name in INTERVALS:
                end = start + window + days * DAY
                still_open = pc.or_kleene(pc.is_null(new["valid_to"]), pc.greater(new["valid_to"], pa.scalar(end, new["valid_to"].type)))
                new_open = new.filter(still_open)
                new_open = new_open.set_column(new_open.schema.get_field_index("valid_to"), "valid_to", pa.nulls(new_open.num_rows, new_open["valid_to"].type))
                last = _shifted(table, days - 1)
                previous_open = last.filter(pc.is_null(last["valid_to"]))  # what the open rows' files hold
                DeltaTable(path).delete("valid_to IS NULL")
                write_deltalake(path, pa.concat_tables([_closed(previous_open, horizon + 1 + (days - 1) * DAY), new.filter(pc.invert(still_open))]),
                                mode="append", partition_by=partitions)
                if new_open.num_rows:
                    write_deltalake(path, new_open, mode="append", partition_by=partitions)
            elif new.num_rows:
                write_deltalake(path, new, mode="append", partition_by=partitions)
        after[spec_name] = DeltaTable(path).version()
    log = DeltaTable(f"{source}/gold/publish_log").to_pyarrow_table()
    row = max(log.to_pylist(), key=lambda r: (r["published_ms"], r["run_id"]))
    rows = []
    for versions, extra, suffix in ((before, 0, ""), (after, window, "+window")):
        rows.append({
            **row,
            "table_versions": [(k, versions.get(k, v)) for k, v in row["table_versions"]],
            "namesrvs": [{**c, "to_ts": c["to_ts"] + (days - 1) * DAY + extra} for c in row["namesrvs"]],
            "run_id": f"synthetic-{days}d{suffix}",
            "published_ms": row["published_ms"] + len(rows),
        })
    write_deltalake(str(target / "gold" / "publish_log"), pa.Table.from_pylist(rows[:1], schema=log.schema), mode="append")
    pq.write_table(pa.Table.from_pylist(rows[1:], schema=log.schema), str(target / "next_publish.parquet"))


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(root: str, mode: str) -> dict[str, float]:
    """One fresh process's figures (run by ``--measure``): load the served index, publish the next
    window, reload (``mode``: full or incremental), restore the publish log."""
    import time

    import pyarrow.parquet as pq
    from deltalake import DeltaTable, write_deltalake

    from nsreplay.serving.index import RouteIndex

    served = RouteIndex.load(root)
    log_path = f"{root}/gold/publish_log"
    log = DeltaTable(log_path)
    version = log.version()
    write_deltalake(log_path, pq.read_table(str(Path(root) / "next_publish.parquet")), mode="append")
    try:
        rss = _status_mb("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS: the peak of the reload alone
        started = time.perf_counter()
        index = RouteIndex.load(root, previous=served if mode == "incremental" else None)
        seconds = time.perf_counter() - started
        peak = _status_mb("VmHWM")
    finally:
        DeltaTable(log_path).restore(version)
    assert index.run_id.endswith("+window"), index.run_id
    return {
        "reload_s": seconds, "reload_peak_mb": peak, "rss_before_mb": rss, "held_mb": index.memory_bytes() / 1e6,
        "files_read": sum(len(load.files_read) for load in index.loads.values()),
        "files_kept": sum(load.files_kept for load in index.loads.values()),
        "file_codes_mb": sum(table.file_code.nbytes for table in index._tables.values()) / 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source")
    parser.add_argument("--days", default="1,16")
    parser.add_argument("--window", default="1h", choices=sorted(WINDOWS))
    parser.add_argument("--scratch", default="/tmp/shim-reload")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--code", action="append", help="a source tree to measure (repeat: alternated); default: this one")
    parser.add_argument("--modes", default="full,incremental")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.mode)))
        return
    here = str(Path(__file__).resolve().parents[2])
    trees = [str(Path(c).resolve()) for c in args.code] if args.code else [here]
    modes = args.modes.split(",")
    for days in [int(d) for d in args.days.split(",")]:
        target = Path(args.scratch) / f"{days}d-{args.window}"
        if not (target / "next_publish.parquet").exists():
            build(args.source, days, WINDOWS[args.window], target)
        for r in range(args.rounds):
            runs = [(tree, mode) for mode in modes for tree in trees]
            for tree, mode in runs if r % 2 == 0 else runs[::-1]:
                done = subprocess.run([sys.executable, os.path.abspath(__file__), "--measure", str(target), "--mode", mode],
                                      env={**os.environ, "PYTHONPATH": tree}, cwd=tree, capture_output=True, text=True, check=True)
                figures = json.loads(done.stdout.strip().splitlines()[-1])
                label = f"  {Path(tree).name}" if len(trees) > 1 else ""
                print(f"{days} d +{args.window}{label}  {mode:<11}  " + "  ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in figures.items()), flush=True)


if __name__ == "__main__":
    main()
