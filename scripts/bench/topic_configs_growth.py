"""How a window's replay scales with the register bodies ``silver.topic_configs`` holds: the replay
of bench-day's window on a copy of its silver tables, with ``silver.topic_configs`` padded to DAYS
days of bodies (copies under other body ids, a commit a day, as daily ingests would add them).

    .venv/bin/python scripts/bench/topic_configs_growth.py --warehouse W --days 1,30 [--dir /tmp/bodies]

W is a warehouse that ingested bench-day (e.g. one ``nsreplay bench rebuild --warehouse W``). Each
DAYS gets a fresh copy, and its replay (``replay_window``: read, replay the units, write gold; no
quality check, no publish) runs in this process, one after the other. Run it from each checkout to
compare codes; docs/performance.md ("Long histories") has the figures.
"""

from __future__ import annotations

import argparse
import shutil
import time

from pyspark.sql import functions as F

from nsreplay.config import load_settings
from nsreplay.runtime import build_spark
from nsreplay.storage import CommitInfo, Warehouse
from pipelines.replay.run import replay_window
from schemas.silver import TOPIC_CONFIGS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--days", default="1,30")
    parser.add_argument("--dir", default="/tmp/bodies")
    args = parser.parse_args()
    settings = load_settings()
    spark = build_spark(settings, "topic-configs-growth-bench", master="local[2]")
    shutil.rmtree(args.dir, ignore_errors=True)
    for days in [int(d) for d in args.days.split(",")]:
        root = f"{args.dir}/{days}d"
        shutil.copytree(f"{args.warehouse}/silver", f"{root}/silver")
        warehouse = Warehouse(root, spark, "delta-rs")
        bodies = warehouse.read(TOPIC_CONFIGS, version=warehouse.version(TOPIC_CONFIGS)).localCheckpoint()
        for d in range(1, days):
            other = bodies.withColumn("body_id", F.concat(F.lit(f"day{d}-"), F.col("body_id")))
            warehouse.append(TOPIC_CONFIGS, other, CommitInfo(run_id=f"ingest-day-{d}", job="ingest"))
        size = sum(f.size for f in warehouse.files(TOPIC_CONFIGS))
        started = time.perf_counter()
        result = replay_window(spark, warehouse, settings, f"growth-{days}d")
        took = time.perf_counter() - started
        print(f"{days} days of bodies ({size / 1e6:.1f} MB): replay {took:.1f} s; stages {result.stages}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
