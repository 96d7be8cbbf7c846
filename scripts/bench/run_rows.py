"""How finding one run's row in ``gold.replay_runs`` scales with the runs the table holds: by a filter
over the whole table (Spark lists and opens every run's file) and from the files of the run's commit
(``pipelines.replay.run.run_rows``), alternating in one process. The quality and publish stages of
every scheduled window do this.

    .venv/bin/python scripts/bench/run_rows.py --runs 100,400 --rounds 3 [--dir /tmp/run-rows]

Prints the seconds of each lookup of the newest run. docs/performance.md ("Long histories") has the
figures.
"""

from __future__ import annotations

import argparse
import shutil
import time

from pyspark.sql import functions as F

from nsreplay.config import load_settings
from nsreplay.runtime import build_spark, local_frame
from nsreplay.storage import CommitInfo, Warehouse
from pipelines.replay.run import JOB, run_rows
from schemas.gold import REPLAY_RUNS


def _row(i: int) -> tuple:
    ms = 1_732_147_200_000 + i * 3_600_000
    return (f"run-{i}", ms, ms - 3_600_000, ms, [("10.0.0.10:9876", 0, ms, "rocketmq-4.9")], {"gold.scan_ticks": i}, {"gold.scan_ticks": 7}, "{}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="100,400")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default="/tmp/run-rows")
    args = parser.parse_args()
    spark = build_spark(load_settings(), "run-rows-bench", master="local[2]")
    shutil.rmtree(args.dir, ignore_errors=True)
    warehouse = Warehouse(args.dir, spark, "delta-rs")
    written = 0
    for runs in [int(n) for n in args.runs.split(",")]:
        for i in range(written, runs):
            warehouse.append(REPLAY_RUNS, local_frame(spark, [_row(i)], REPLAY_RUNS.schema), CommitInfo(run_id=f"run-{i}", job=JOB))
        written = runs
        newest = f"run-{runs - 1}"
        print(f"{runs} runs, {len(warehouse.files(REPLAY_RUNS))} files", flush=True)
        for r in range(args.rounds):
            for way in ("scan", "commit") if r % 2 == 0 else ("commit", "scan"):
                started = time.perf_counter()
                if way == "scan":
                    rows = [row.asDict(recursive=True) for row in warehouse.read(REPLAY_RUNS).where(F.col("run_id") == newest).collect()]
                else:
                    rows = run_rows(warehouse, REPLAY_RUNS, JOB, newest)
                print(f"  round {r} {way}: {time.perf_counter() - started:.2f} s", flush=True)
                assert [row["run_id"] for row in rows] == [newest]


if __name__ == "__main__":
    main()
