"""What the ledgers' small files cost the reads of them, before and after `nsreplay compact`.

    .venv/bin/python scripts/bench/ledger_reads.py --dir /tmp/ledgers --runs 2000 --rounds 3
    .venv/bin/python scripts/bench/ledger_reads.py --dir /tmp/ledgers --runs 2000 --rounds 4 --table publish_log

Builds, once (kept in ``--dir``), a table with one single-row file per run, as ``--runs`` hourly
runs leave it (each row one delta-rs append, as the pipeline's own one-row appends are):

* ``ingest_runs`` (default): ``silver.ingest_runs``. Each round times, in one Spark session, the
  read that ``discard_abandoned`` makes at every ingest (every run id, through ``Warehouse.read``).
* ``publish_log``: ``gold.publish_log`` of hourly windows of three NameServers. Each round times,
  without Spark, the latest publish row (``latest_publish_row``: every replay and shim reload), the
  windows ending in the last day (an ingest's stale check) and every publish row
  (``backfill_windows``: every backfill and ``nsreplay stale``).

Copies the table and compacts the copy (``compact_ledgers`` with ``conf/``'s policy), then runs the
rounds, the two copies alternating. Prints the files of each copy, the compaction's seconds and
each round's seconds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any, Callable

HOUR = 3_600_000
START = 1_732_147_200_000
NAMESRVS = ("10.0.0.10:9876", "10.0.0.11:9876", "10.0.0.12:9876")


def ingest_run_row(i: int) -> dict[str, Any]:
    return dict(
        run_id=f"ingest-{i:06d}", started_ms=START + i * HOUR, finished_ms=START + i * HOUR + 60_000, files_seen=2, files_read=2,
        files_skipped=0, lines_read=1000, accepted=990, duplicates=5, quarantined=5, quarantined_by_reason=[("junk", 5)],
        new_bodies=3, quality_passed=True, status="ok",
    )


def publish_row(i: int) -> dict[str, Any]:
    from schemas.gold import REPLAY_TABLES

    end = START + (i + 1) * HOUR
    return {
        "run_id": f"replay-{i:06d}", "published_ms": end + 90_000, "window_from": end - HOUR, "window_to": end,
        "namesrvs": [{"namesrv": ns, "from_ts": START, "to_ts": end, "profile": "rocketmq-5"} for ns in NAMESRVS],
        "table_versions": [(spec.name, 2 * i + 1) for spec in REPLAY_TABLES],
        "row_counts": [(spec.name, 1000 + i) for spec in REPLAY_TABLES],
        "quality": json.dumps({"units": 68, "fidelity": {"matched": 40, "mismatched": 0}}),
    }


def build(root: Path, spec: Any, rows: Callable[[int], dict[str, Any]], runs: int) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    from nsreplay.storage import Warehouse, to_arrow_schema

    warehouse = Warehouse(str(root), None, "delta-rs")
    warehouse.ensure(spec)
    schema = to_arrow_schema(spec.schema)
    for i in range(runs):
        row = {f.name: None for f in schema}
        row.update(rows(i))
        row = {k: v for k, v in row.items() if k in schema.names}
        write_deltalake(warehouse.path(spec), pa.Table.from_pylist([row], schema=schema), mode="append")


def ingest_run_reads(settings: Any) -> tuple[dict[str, Callable[[str], Any]], Callable[[], None]]:
    """The read of every run id, in a Spark session (and how to stop it)."""
    from nsreplay.runtime import build_spark
    from nsreplay.storage import Warehouse
    from schemas.silver import INGEST_RUNS

    spark = build_spark(settings, "bench-ledger-reads")
    spark.sparkContext.setLogLevel("ERROR")
    read = lambda root: len({r.run_id for r in Warehouse(root, spark, "delta-rs").read(INGEST_RUNS).select("run_id").collect()})  # noqa: E731
    return {"run ids": read}, spark.stop


def publish_log_reads(runs: int) -> tuple[dict[str, Callable[[str], Any]], Callable[[], None]]:
    """The three reads of the publish log, without Spark."""
    from nsreplay.history import latest_publish_row
    from nsreplay.storage import Warehouse
    from pipelines.replay.stale import _published_windows, backfill_windows

    end = START + runs * HOUR
    return {
        "latest": lambda root: latest_publish_row(Warehouse(root, None, "delta-rs"))["run_id"],
        "stale check": lambda root: len(_published_windows(Warehouse(root, None, "delta-rs"), ending_from=end - 24 * HOUR)),
        "all windows": lambda root: len(backfill_windows(Warehouse(root, None, "delta-rs"), None, end)),
    }, lambda: None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--table", choices=("ingest_runs", "publish_log"), default="ingest_runs")
    args = parser.parse_args()

    from nsreplay.compaction import LEDGER_TABLES, LedgerPolicy, compact_ledgers
    from nsreplay.config import load_settings
    from nsreplay.storage import Warehouse
    from schemas.gold import PUBLISH_LOG
    from schemas.silver import INGEST_RUNS

    spec, rows, name = (INGEST_RUNS, ingest_run_row, "runs") if args.table == "ingest_runs" else (PUBLISH_LOG, publish_row, "publish")
    base, merged = Path(args.dir) / f"{name}-{args.runs}", Path(args.dir) / f"{name}-{args.runs}-compacted"
    if not base.exists():
        started = time.perf_counter()
        build(base, spec, rows, args.runs)
        print(f"built {args.runs} rows of {spec.name} in {time.perf_counter() - started:.0f} s")
    shutil.rmtree(merged, ignore_errors=True)
    shutil.copytree(base, merged)
    started = time.perf_counter()
    compact_ledgers(Warehouse(str(merged), None, "delta-rs"), LedgerPolicy.from_config(load_settings().compact), dry_run=False,
                    run_id="bench-compact", tables=[t for t in LEDGER_TABLES if t[0] is spec])
    compaction = time.perf_counter() - started
    for root in (base, merged):
        print(f"{root.name}: {len(Warehouse(str(root), None, 'delta-rs').files(spec))} files")
    print(f"compaction: {compaction:.2f} s")

    reads, stop = ingest_run_reads(load_settings()) if spec is INGEST_RUNS else publish_log_reads(args.runs)
    try:
        for n in range(args.rounds):
            for root in (base, merged) if n % 2 == 0 else (merged, base):
                timings = []
                for label, read in reads.items():
                    began = time.perf_counter()
                    result = read(str(root))
                    timings.append(f"{label} {time.perf_counter() - began:.2f} s ({result})")
                print(f"round {n + 1} {root.name}: " + ", ".join(timings), flush=True)
    finally:
        stop()


if __name__ == "__main__":
    main()
