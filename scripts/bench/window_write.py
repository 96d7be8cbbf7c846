"""How a window's gold write scales with the history in the table: the overwrite of the last of N
windows with ``where`` as a SQL string (every file of the partitions is opened to find the window's)
and as a ``ColumnRange`` (files pruned by their Delta statistics), alternating in one process.

    .venv/bin/python scripts/bench/window_write.py --windows 400 --rounds 4 [--dir /tmp/window-write]

Prints the seconds of each overwrite. docs/performance.md ("Long histories") has the figures.
"""

from __future__ import annotations

import argparse
import shutil
import time

from pyspark.sql import functions as F
from pyspark.sql import types as T

from nsreplay.config import load_settings
from nsreplay.runtime import build_spark
from nsreplay.storage import ColumnRange, CommitInfo, TableSpec, Warehouse

ROWS_PER_WINDOW = 1000
TABLE = TableSpec(
    "gold.window_write_bench",
    T.StructType([T.StructField("namesrv", T.StringType(), False), T.StructField("ts", T.LongType(), False), T.StructField("value", T.StringType(), True)]),
    partition_by=("namesrv",),
)
NAMESRVS = ["ns-0", "ns-1", "ns-2"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--dir", default="/tmp/window-write")
    args = parser.parse_args()
    spark = build_spark(load_settings(), "window-write-bench", master="local[2]")
    shutil.rmtree(args.dir, ignore_errors=True)
    warehouse = Warehouse(args.dir, spark, "delta-rs")

    def window(i: int):
        ids = spark.range(i * ROWS_PER_WINDOW, (i + 1) * ROWS_PER_WINDOW)
        return ids.select(F.concat(F.lit("ns-"), (F.col("id") % len(NAMESRVS)).cast("string")).alias("namesrv"), F.col("id").alias("ts"),
                          F.lit("x" * 40).alias("value"))

    for i in range(args.windows):
        warehouse.append(TABLE, window(i).repartition(2), CommitInfo(run_id=f"window-{i}", job="replay"))
    print(f"{args.windows} windows, {len(warehouse.files(TABLE))} files", flush=True)
    last = ColumnRange("ts", above=(args.windows - 1) * ROWS_PER_WINDOW - 1, at_most=args.windows * ROWS_PER_WINDOW)
    for r in range(args.rounds):
        for way in ("sql", "range") if r % 2 == 0 else ("range", "sql"):
            started = time.perf_counter()
            warehouse.overwrite(TABLE, window(args.windows - 1), CommitInfo(run_id=f"again-{r}-{way}", job="replay"),
                                where=last if way == "range" else last.sql(), partitions={"namesrv": NAMESRVS})
            print(f"round {r} where as {way}: {time.perf_counter() - started:.2f} s", flush=True)
    assert warehouse.read(TABLE).count() == args.windows * ROWS_PER_WINDOW


if __name__ == "__main__":
    main()
