"""What a publish log of one file per run costs its readers, before and after `nsreplay compact`.

    .venv/bin/python scripts/bench/publish_log_reads.py --dir /tmp/publish-log --runs 2000 --rounds 4

Builds, once (kept in ``--dir``): a ``gold.publish_log`` with one single-row file per run, as
``--runs`` hourly windows of three NameServers leave it (each row written with delta-rs, as a
publish writes it: one append). Copies it and compacts the copy (``compact_ledgers`` with
``conf/``'s policy). Then, the two copies alternating in one process, each round times the reads
of it, all without Spark:

* ``latest``: the latest publish row (``latest_publish_row``: every replay, every shim reload,
  compaction, vacuum);
* ``stale check``: the publish rows of the windows ending in the last day (what an ingest that
  added records of the last day reads to mark stale windows);
* ``all windows``: every publish row (``backfill_windows``: every backfill and ``nsreplay stale``).

Prints the files of each copy, the compaction's seconds and each round's seconds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

HOUR = 3_600_000
START = 1_732_147_200_000
NAMESRVS = ("10.0.0.10:9876", "10.0.0.11:9876", "10.0.0.12:9876")


def build(root: Path, runs: int) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    from nsreplay.storage import Warehouse, to_arrow_schema
    from schemas.gold import PUBLISH_LOG, REPLAY_TABLES

    warehouse = Warehouse(str(root), None, "delta-rs")
    warehouse.ensure(PUBLISH_LOG)
    schema = to_arrow_schema(PUBLISH_LOG.schema)
    for i in range(runs):
        end = START + (i + 1) * HOUR
        row = {
            "run_id": f"replay-{i:06d}", "published_ms": end + 90_000, "window_from": end - HOUR, "window_to": end,
            "namesrvs": [{"namesrv": ns, "from_ts": START, "to_ts": end, "profile": "rocketmq-5"} for ns in NAMESRVS],
            "table_versions": [(spec.name, 2 * i + 1) for spec in REPLAY_TABLES],
            "row_counts": [(spec.name, 1000 + i) for spec in REPLAY_TABLES],
            "quality": json.dumps({"units": 68, "fidelity": {"matched": 40, "mismatched": 0}}),
        }
        write_deltalake(warehouse.path(PUBLISH_LOG), pa.Table.from_pylist([row], schema=schema), mode="append")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()

    from nsreplay.compaction import LEDGER_TABLES, LedgerPolicy, compact_ledgers
    from nsreplay.config import load_settings
    from nsreplay.history import latest_publish_row
    from nsreplay.storage import Warehouse
    from pipelines.replay.stale import _published_windows, backfill_windows
    from schemas.gold import PUBLISH_LOG

    base, merged = Path(args.dir) / f"publish-{args.runs}", Path(args.dir) / f"publish-{args.runs}-compacted"
    if not base.exists():
        started = time.perf_counter()
        build(base, args.runs)
        print(f"built {args.runs} publish rows in {time.perf_counter() - started:.0f} s")
    shutil.rmtree(merged, ignore_errors=True)
    shutil.copytree(base, merged)
    started = time.perf_counter()
    compact_ledgers(Warehouse(str(merged), None, "delta-rs"), LedgerPolicy.from_config(load_settings().compact), dry_run=False,
                    run_id="bench-compact", tables=[t for t in LEDGER_TABLES if t[0] is PUBLISH_LOG])
    compaction = time.perf_counter() - started
    for root in (base, merged):
        print(f"{root.name}: {len(Warehouse(str(root), None, 'delta-rs').files(PUBLISH_LOG))} files")
    print(f"compaction: {compaction:.2f} s")

    end = START + args.runs * HOUR
    reads = {
        "latest": lambda w: latest_publish_row(w)["run_id"],
        "stale check": lambda w: len(_published_windows(w, ending_from=end - 24 * HOUR)),
        "all windows": lambda w: len(backfill_windows(w, None, end)),
    }
    for n in range(args.rounds):
        for root in (base, merged) if n % 2 == 0 else (merged, base):
            timings = []
            for name, read in reads.items():
                began = time.perf_counter()
                result = read(Warehouse(str(root), None, "delta-rs"))
                timings.append(f"{name} {time.perf_counter() - began:.2f} s ({result})")
            print(f"round {n + 1} {root.name}: " + ", ".join(timings), flush=True)


if __name__ == "__main__":
    main()
