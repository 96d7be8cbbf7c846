"""What the ledgers' small files cost the reads every ingest makes, before and after `nsreplay compact`.

    .venv/bin/python scripts/bench/ledger_reads.py --dir /tmp/ledgers --runs 2000 --rounds 3

Builds, once (kept in ``--dir``): a ``silver.ingest_runs`` with one file per run, as ``--runs`` hourly
ingests leave it (one single-row append each, written with delta-rs: a real ingest's run row is the
same one-row file). Copies it and compacts the copy (``compact_ledgers`` with ``conf/``'s policy).
Then, in one Spark session, the two copies alternating, each round times the read that
``discard_abandoned`` makes at every ingest (every run id of the table, through ``Warehouse.read``).
Prints the files of each copy, the compaction's seconds and each round's seconds.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

HOUR = 3_600_000


def build(root: Path, runs: int) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    from nsreplay.storage import Warehouse, to_arrow_schema
    from schemas.silver import INGEST_RUNS

    warehouse = Warehouse(str(root), None, "delta-rs")
    warehouse.ensure(INGEST_RUNS)
    schema = to_arrow_schema(INGEST_RUNS.schema)
    start = 1_732_147_200_000
    for i in range(runs):
        row = {f.name: None for f in schema}
        row.update(
            run_id=f"ingest-{i:06d}", started_ms=start + i * HOUR, finished_ms=start + i * HOUR + 60_000, files_seen=2, files_read=2,
            files_skipped=0, lines_read=1000, accepted=990, duplicates=5, quarantined=5, quarantined_by_reason=[("junk", 5)],
            new_bodies=3, quality_passed=True, status="ok",
        )
        row = {k: v for k, v in row.items() if k in schema.names}
        write_deltalake(warehouse.path(INGEST_RUNS), pa.Table.from_pylist([row], schema=schema), mode="append")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from nsreplay.compaction import LEDGER_TABLES, LedgerPolicy, compact_ledgers
    from nsreplay.config import load_settings
    from nsreplay.runtime import build_spark
    from nsreplay.storage import Warehouse
    from schemas.silver import INGEST_RUNS

    base, merged = Path(args.dir) / f"runs-{args.runs}", Path(args.dir) / f"runs-{args.runs}-compacted"
    if not base.exists():
        started = time.perf_counter()
        build(base, args.runs)
        print(f"built {args.runs} run rows in {time.perf_counter() - started:.0f} s")
    shutil.rmtree(merged, ignore_errors=True)
    shutil.copytree(base, merged)
    started = time.perf_counter()
    tables = [t for t in LEDGER_TABLES if t[0] is INGEST_RUNS]
    compact_ledgers(Warehouse(str(merged), None, "delta-rs"), LedgerPolicy.from_config(load_settings().compact), dry_run=False,
                    run_id="bench-compact", tables=tables)
    compaction = time.perf_counter() - started
    for root in (base, merged):
        print(f"{root.name}: {len(Warehouse(str(root), None, 'delta-rs').files(INGEST_RUNS))} files")
    print(f"compaction: {compaction:.2f} s")

    settings = load_settings()
    spark = build_spark(settings, "bench-ledger-reads")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        for n in range(args.rounds):
            timings = []
            for root in (base, merged) if n % 2 == 0 else (merged, base):
                started = time.perf_counter()
                ids = {r.run_id for r in Warehouse(str(root), spark, "delta-rs").read(INGEST_RUNS).select("run_id").collect()}
                timings.append(f"{root.name} {time.perf_counter() - started:.2f} s ({len(ids)} runs)")
            print(f"round {n + 1}: " + ", ".join(timings))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
