"""How putting back an unpublished run's gold writes scales with the history: rewriting the table
from its published version (the way before) against ``Warehouse.restore``, alternating in one
process, on ``gold.route_changes`` of a warehouse copied to DAYS days.

    .venv/bin/python scripts/bench/discard_unpublished.py --warehouse W --days 30 --rounds 2 [--dir /tmp/discard]

W is a warehouse that has published a replay (e.g. one `nsreplay bench rebuild --warehouse W` of
bench-day). Prints the seconds of each. docs/performance.md ("Long histories") has the figures.
"""

from __future__ import annotations

import argparse
import shutil
import time

from pyspark.sql import functions as F

from nsreplay.config import load_settings
from nsreplay.runtime import build_spark
from nsreplay.storage import CommitInfo, Warehouse
from schemas.gold import ROUTE_CHANGES

DAY_MS = 86_400_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dir", default="/tmp/discard")
    args = parser.parse_args()
    spark = build_spark(load_settings(), "discard-bench", master="local[2]")
    day = Warehouse(args.warehouse, spark, "delta-rs").read(ROUTE_CHANGES)
    base_root = f"{args.dir}/published"
    shutil.rmtree(args.dir, ignore_errors=True)
    base = Warehouse(base_root, spark, "delta-rs")
    for d in range(args.days):  # a commit a day, as windows would make
        base.append(ROUTE_CHANGES, day.withColumn("ts", F.col("ts") + F.lit(d * DAY_MS)), CommitInfo(run_id=f"day-{d}", job="replay"))
    published = base.version(ROUTE_CHANGES)
    rows = base.read(ROUTE_CHANGES).count()
    print(f"{args.days} days: {rows} rows, {sum(f.size for f in base.files(ROUTE_CHANGES)) / 1e6:.1f} MB", flush=True)
    for r in range(args.rounds):
        for way in ("rewrite", "restore") if r % 2 == 0 else ("restore", "rewrite"):
            root = f"{args.dir}/{way}"
            shutil.rmtree(root, ignore_errors=True)
            shutil.copytree(base_root, root)
            warehouse = Warehouse(root, spark, "delta-rs")
            warehouse.append(ROUTE_CHANGES, day.limit(1000), CommitInfo(run_id="unpublished", job="replay"))
            commit = CommitInfo(run_id=f"next-{r}", job="replay/discard-unpublished")
            started = time.perf_counter()
            if way == "rewrite":
                warehouse.overwrite(ROUTE_CHANGES, warehouse.read(ROUTE_CHANGES, version=published), commit)
            else:
                warehouse.restore(ROUTE_CHANGES, published, commit)
            took = time.perf_counter() - started
            assert warehouse.read(ROUTE_CHANGES).count() == rows
            print(f"round {r} {way}: {took:.2f} s", flush=True)


if __name__ == "__main__":
    main()
