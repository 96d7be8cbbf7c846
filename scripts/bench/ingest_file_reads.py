"""What an ingest reads of ``bronze.ingest_files`` before it reads any capture: which listed files
were ingested before, and which of the directory's entries that are not captures were listed before.
Two reads filtered by ``isin`` of the paths (one per question, as ``_already_ingested`` and
``_not_listed_before`` did), one read so filtered, and one read joined with a local frame of the
names (``pipelines.ingest.run._listed_before``), alternating in one process, on a warehouse whose
table records ``--runs`` runs of ``--files`` files each, and a listing of ``--listed`` of those
files (all of them: a schedule that reads one directory) plus ``--ignored`` entries not read. Each
path is looked up under its three S3 names (``s3a://``, ``s3://``, ``s3n://``).

    .venv/bin/python scripts/bench/ingest_file_reads.py --runs 100 --files 100 --listed 10000 --ignored 5 --rounds 4 [--parts 1000] [--dir /tmp/ingest-file-reads]

Prints the seconds of each way per round. With ``--parts N``, then also the lookup of the parts N
files to read may continue (``pipelines.ingest.parts_read_before``: the rows recorded under one of
their paths or with one of their eleven head fingerprints each), filtered by ``isin`` (before) and
joined with a local frame of the keys (now).
"""

from __future__ import annotations

import argparse
import shutil
import time

from pyspark.sql import functions as F

from nsreplay.config import load_settings
from nsreplay.runtime import build_spark, local_frame
from nsreplay.storage import CommitInfo, Warehouse
from pipelines.ingest.capture_files import CaptureFile, CaptureListing
from nsreplay.storage.filesystem import object_uri_aliases
from pipelines.ingest.run import JOB, _listed_before
from schemas.bronze import INGEST_FILES


def _names(files) -> list[str]:
    return sorted({name for f in files for name in object_uri_aliases(f.path)})


def _two_reads(warehouse: Warehouse, listing: CaptureListing) -> tuple[set, set]:
    """The two reads as they were: the files ingested, then (at the end of a run) the entries listed
    before as not_capture, each filtered by ``isin`` of every name a file may be recorded under."""
    known = (warehouse.read(INGEST_FILES).where(~F.col("status").isin("skipped", "unreadable", "not_capture"))
             .where(F.col("source_file").isin(_names(listing.files))))
    ingested = {(r.source_file, r.size_bytes, r.mtime_ms) for r in known.select("source_file", "size_bytes", "mtime_ms").distinct().collect()}
    listed = (warehouse.read(INGEST_FILES).where((F.col("status") == "not_capture") & F.col("source_file").isin(_names(listing.ignored)))
              .select("source_file", "size_bytes", "mtime_ms").distinct().collect())
    return ingested, {(r.source_file, r.size_bytes, r.mtime_ms) for r in listed}


def _one_read_isin(warehouse: Warehouse, listing: CaptureListing) -> tuple[set, set]:
    """The two questions in one read, filtered by ``isin`` of the names."""
    rows = (warehouse.read(INGEST_FILES).where(~F.col("status").isin("skipped", "unreadable"))
            .where(F.col("source_file").isin(_names([*listing.files, *listing.ignored])))
            .select("source_file", "size_bytes", "mtime_ms", (F.col("status") == "not_capture").alias("not_capture")).distinct().collect())
    return ({(r.source_file, r.size_bytes, r.mtime_ms) for r in rows if not r.not_capture},
            {(r.source_file, r.size_bytes, r.mtime_ms) for r in rows if r.not_capture})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--listed", type=int, default=10_000)
    parser.add_argument("--ignored", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--parts", type=int, default=0)
    parser.add_argument("--dir", default="/tmp/ingest-file-reads")
    args = parser.parse_args()
    spark = build_spark(load_settings(), "ingest-file-reads-bench", master="local[2]")
    shutil.rmtree(args.dir, ignore_errors=True)
    warehouse = Warehouse(args.dir, spark, "delta-rs")
    files = [CaptureFile(f"s3a://captures/day/r{r:04d}/f{f:04d}.jsonl", 1000 + f, 1_732_147_200_000 + r) for r in range(args.runs) for f in range(args.files)]
    ignored = tuple(CaptureFile(f"s3a://captures/day/README-{i}.md", 10, 1_732_147_200_000) for i in range(args.ignored))
    for r in range(args.runs):
        rows = [(f"run-{r}", f.path, f.size_bytes, f.mtime_ms, "read", 10, None, 0, f.size_bytes, 10, "0" * 64, "1" * 64, None)
                for f in files[r * args.files:(r + 1) * args.files]]
        rows += [(f"run-{r}", f.path, f.size_bytes, f.mtime_ms, "not_capture", None, "not a capture file by name", *(None,) * 6) for f in ignored if r == 0]
        warehouse.append(INGEST_FILES, local_frame(spark, rows, INGEST_FILES.schema), CommitInfo(run_id=f"run-{r}", job=JOB))
    listing = CaptureListing(files[-args.listed:], ignored)
    print(f"bronze.ingest_files: {len(files) + len(ignored)} rows in {len(warehouse.files(INGEST_FILES))} files; "
          f"listing: {len(listing.files)} files, {len(ignored)} entries not read", flush=True)
    ways = ["two reads, isin (before)", "one read, isin", "one read, joined (now)"]
    for r in range(args.rounds):
        for way in ways if r % 2 == 0 else ways[::-1]:
            started = time.perf_counter()
            if way.startswith("two"):
                ingested, not_capture = _two_reads(warehouse, listing)
            elif way.endswith("isin"):
                ingested, not_capture = _one_read_isin(warehouse, listing)
            else:
                before = _listed_before(spark, warehouse, listing)
                ingested, not_capture = before.ingested, before.not_capture
            print(f"  round {r} {way}: {time.perf_counter() - started:.2f} s", flush=True)
            assert (len(ingested), len(not_capture)) == (len(listing.files), len(ignored))
    if not args.parts:
        return
    paths = [f.path for f in files[-args.parts:]]
    fingerprints = [f"{n:064x}" for n in range(args.parts * 11)]  # none recorded: the rows found are the paths'
    table = warehouse.read(INGEST_FILES).where(F.col("complete_bytes").isNotNull())
    print(f"parts of {len(paths)} files: {len(paths)} paths, {len(fingerprints)} fingerprints", flush=True)
    for r in range(args.rounds):
        for way in ("isin (before)", "joined (now)") if r % 2 == 0 else ("joined (now)", "isin (before)"):
            started = time.perf_counter()
            if way.startswith("isin"):
                found = table.where(F.col("source_file").isin(paths) | F.col("complete_head_sha256").isin(fingerprints))
            else:
                keys = local_frame(spark, [(k,) for k in sorted({*paths, *fingerprints})], "key string")
                found = (table.withColumn("key", F.explode(F.array("source_file", "complete_head_sha256")))
                         .join(F.broadcast(keys), "key", "left_semi").drop("key"))
            rows = found.select("source_file", "complete_bytes").distinct().collect()
            print(f"  round {r} {way}: {time.perf_counter() - started:.2f} s", flush=True)
            assert len(rows) == len(paths)


if __name__ == "__main__":
    main()
