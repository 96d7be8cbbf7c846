"""The ingest's read-and-parse stage two ways, alternating in one warm JVM: as the ingest runs it (the
Python tasks send their Arrow batches to the JVM, which caches the parsed lines) and with each
Python task writing its parsed lines to a Parquet file itself and sending the JVM one row per file
(the first step of the data plane the notes of #3 recommended). Each way then writes what bronze and silver get from the
lines (``bronze.captures_raw`` and ``silver.events`` shapes, plain Parquet), as the ingest's next
stages read them.

    .venv/bin/python scripts/bench/parse_to_parquet.py --captures /tmp/bench-day [--rounds 2] [--dir /tmp/parse-to-parquet]

Prints the seconds of each step per round and way; docs/performance.md has the figures.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from nsreplay.config import load_settings
from nsreplay.runtime import build_spark
from nsreplay.storage.arrow_types import to_arrow_schema
from nsreplay.storage.backend import hadoop_literal
from pipelines.ingest.capture_files import list_capture_files
from pipelines.ingest.records import ParserLimits
from pipelines.ingest.transforms import FileToRead, ParseOptions, ReadOptions, accepted_events, as_events, bronze_lines, file_reader, read_capture_records
from pipelines.quality.rules import event_rules
from schemas.silver import READ_LINE


def _parse_to_files(spark: SparkSession, paths: list[str], read: ReadOptions, parse: ParseOptions, out: str) -> DataFrame:
    """One task per file; each writes the file's READ_LINE rows to ``out/<n>.parquet`` and yields one
    row (file, rows written)."""
    arrow_schema = to_arrow_schema(READ_LINE)

    def write_files(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        batches_of = file_reader(read, parse)
        for batch in batches:
            for index, path in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                rows_written = 0
                with pq.ParquetWriter(f"{out}/part-{index:05d}.parquet", arrow_schema, compression="zstd") as writer:
                    for part in batches_of(FileToRead(path)):
                        writer.write_batch(part)
                        rows_written += part.num_rows
                yield pa.RecordBatch.from_pylist([{"source_file": path, "rows": rows_written}])

    files = spark.sparkContext.parallelize(list(enumerate(paths)), max(1, len(paths)))
    return spark.createDataFrame(files, "index long, source_file string").mapInArrow(write_files, "source_file string, rows long")


def _downstream(parsed: DataFrame, out: str) -> float:
    """Seconds to write the bronze lines and the events (plain Parquet), as the ingest's next stages do."""
    started = time.perf_counter()
    bronze_lines(parsed.withColumn("run_id", F.lit("r")).withColumn("ingest_date", F.lit("2026-11-26"))).write.mode("overwrite").parquet(f"{out}/bronze")
    as_events(accepted_events(parsed)).write.mode("overwrite").partitionBy("namesrv", "event_date").parquet(f"{out}/events")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--captures", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dir", default="/tmp/parse-to-parquet")
    args = parser.parse_args()
    settings = load_settings()
    spark = build_spark(settings, "parse-to-parquet-bench", master="local[2]")
    paths = [f.path for f in list_capture_files(args.captures)]
    ingest = settings.ingest
    rules = event_rules(min_ts=settings.quality.min_ts, max_ts=settings.quality.max_ts)
    parse = ParseOptions(ParserLimits(ingest.known_codes, frozenset(ingest.channel_events)), rules, settings.quality.max_queue_nums, settings.quality.max_perm, ingest.quarantine_keep_bytes)
    read = ReadOptions(ingest.max_line_bytes, ingest.quarantine_keep_bytes)
    started = time.perf_counter()
    floor_lines = spark.read.text([hadoop_literal(p) for p in paths]).count()  # each file itself, not a glob ([ or { in a name)
    print(f"floor: {floor_lines} lines in {time.perf_counter() - started:.1f} s", flush=True)

    for round_no in range(args.rounds):
        for way in (("cached", "direct") if round_no % 2 == 0 else ("direct", "cached")):
            work = f"{args.dir}/{way}"
            shutil.rmtree(work, ignore_errors=True)
            Path(work).mkdir(parents=True)
            started = time.perf_counter()
            if way == "cached":
                parsed = read_capture_records(spark, [FileToRead(p) for p in paths], read, parse).persist(StorageLevel.MEMORY_AND_DISK)
                counts = parsed.groupBy("status", "reason", "source_file").count().collect()
            else:
                Path(f"{work}/lines").mkdir()
                written = _parse_to_files(spark, paths, read, parse, f"{work}/lines").collect()
                parsed = spark.read.schema(READ_LINE).parquet(f"{work}/lines")
                counts = parsed.groupBy("status", "reason", "source_file").count().collect()
                assert sum(r.rows for r in written) == sum(r["count"] for r in counts)
            parse_seconds = time.perf_counter() - started
            downstream = _downstream(parsed, work)
            lines = sum(r["count"] for r in counts)
            print(f"round {round_no + 1} {way:6s}: read and parse {parse_seconds:6.1f} s, bronze + events {downstream:6.1f} s, "
                  f"together {parse_seconds + downstream:6.1f} s ({lines} lines)", flush=True)
            if way == "cached":
                parsed.unpersist()
    spark.stop()


if __name__ == "__main__":
    main()
