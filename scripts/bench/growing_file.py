"""What reading a grown capture file on from its complete part saves, against reading it again whole.

    .venv/bin/python scripts/bench/growing_file.py --source FILE [--mb 200] [--grow 0.05] [--rounds 2] [--rename | --compress]

A plain capture file of about ``--mb`` MB (the first lines of ``--source``, a capture file plain or
gzipped, e.g. one of bench-day's) is ingested, then grows by ``--grow`` of its size and is ingested
again (with ``--rename``, renamed too, as a log that rolls over: ``audit.jsonl`` to
``audit.1.jsonl``; with ``--compress``, compressed as it rolls over, logrotate's ``compress``:
``audit.1.jsonl.gz``, gzip level 6, compressed before the clock starts): the second ingest is what is timed, in a Spark session of its own, as a scheduled run is (its
Python workers start cold: no register body decoded by the first ingest is remembered). Two ways,
alternating round by round in this process, each on a warehouse of its own holding the first ingest:

* **resumed**: the ingest as it is: the grown file is hashed up to the complete part the first
  ingest recorded, and only the lines after it are parsed;
* **whole**: the same ingest with no complete part to resume after (``parts_read_before`` returns
  nothing), as every re-read was before: the whole file parsed again, its old records found to be
  duplicates.

Prints each timing, wall and CPU (this process, its JVM and their Python workers), and the ratios of
the medians (whole / resumed), and checks that both ways leave
the same ``silver.events`` (row count and the sum of the rows' hashes, run ids aside).
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F
from pyspark.sql.types import MapType

from nsreplay.config import load_settings
from nsreplay.process_cpu import read_tree_cpu
from nsreplay.runtime import build_spark
from nsreplay.storage import Warehouse
from pipelines.ingest import run as ingest_run
from schemas.silver import EVENTS


def _lines(source: Path, limit: int) -> list[bytes]:
    """The first lines of ``source`` (plain or gzipped) holding about ``limit`` bytes."""
    opener = gzip.open if source.read_bytes()[:2] == b"\x1f\x8b" else open
    lines, size = [], 0
    with opener(source, "rb") as f:
        for line in f:
            lines.append(line)
            size += len(line)
            if size >= limit:
                break
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, type=Path)
    parser.add_argument("--mb", type=float, default=200)
    parser.add_argument("--grow", type=float, default=0.05)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rename", action="store_true", help="rename the file as it grows (a log rolling over)")
    parser.add_argument("--compress", action="store_true", help="compress the grown file to a new name (a log compressed as it rolls over)")
    args = parser.parse_args()

    lines = _lines(args.source, int(args.mb * 1e6 * (1 + args.grow)))
    cut = int(len(lines) / (1 + args.grow))
    before, after = b"".join(lines[:cut]), b"".join(lines)
    print(f"file: {len(before) / 1e6:.1f} MB, {cut} lines, growing to {len(after) / 1e6:.1f} MB, {len(lines)} lines")
    settings = load_settings()
    session = lambda: build_spark(settings, "bench-growing-file", master="local[2]")  # noqa: E731
    resume_points = ingest_run.parts_read_before
    timings: dict[str, list[float]] = {"resumed": [], "whole": []}
    cpu: dict[str, list[float]] = {"resumed": [], "whole": []}  # this process, its JVM and their Python workers
    tables = {}
    with tempfile.TemporaryDirectory(prefix="nsreplay-growing-") as work:
        for round_no in range(args.rounds):
            for way in ("resumed", "whole") if round_no % 2 == 0 else ("whole", "resumed"):
                root = Path(work) / f"{way}-{round_no}"
                log = Path(work) / "captures" / "audit.jsonl"  # one path: source_file is the same both ways
                log.parent.mkdir(exist_ok=True)
                for rolled in ("audit.1.jsonl", "audit.1.jsonl.gz"):  # the previous round's
                    log.with_name(rolled).unlink(missing_ok=True)
                log.write_bytes(before)
                spark = session()
                ingest_run.run_ingest(spark, Warehouse(str(root / "warehouse"), spark, "delta-rs"), settings, str(log.parent), "first")
                spark.stop()
                log.write_bytes(after)
                if args.rename:
                    log.rename(log.with_name("audit.1.jsonl"))
                elif args.compress:
                    log.with_name("audit.1.jsonl.gz").write_bytes(gzip.compress(after, compresslevel=6, mtime=0))
                    log.unlink()
                spark = session()
                warehouse = Warehouse(str(root / "warehouse"), spark, "delta-rs")
                ingest_run.parts_read_before = resume_points if way == "resumed" else (lambda *_: {})  # type: ignore[assignment]
                try:
                    started, cpu_before = time.perf_counter(), read_tree_cpu(os.getpid())
                    result = ingest_run.run_ingest(spark, warehouse, settings, str(log.parent), "grown")
                    timings[way].append(time.perf_counter() - started)
                    cpu[way].append((read_tree_cpu(os.getpid()) or 0.0) - (cpu_before or 0.0))
                finally:
                    ingest_run.parts_read_before = resume_points  # type: ignore[assignment]
                print(f"round {round_no} {way}: {timings[way][-1]:.1f} s, CPU {cpu[way][-1]:.1f} s; {result.summary().splitlines()[0]}", flush=True)
                events = warehouse.read(EVENTS).drop("run_id")
                for f in events.schema.fields:  # maps cannot be hashed: their entries, sorted, as JSON
                    if isinstance(f.dataType, MapType):
                        events = events.withColumn(f.name, F.to_json(F.array_sort(F.map_entries(f.name))))
                tables[way] = tuple(events.agg(F.count(F.lit(1)), F.sum(F.xxhash64(*events.columns).cast("decimal(38,0)"))).first())  # order-free
                spark.stop()
        same = tables["resumed"] == tables["whole"]
    whole, resumed = statistics.median(timings["whole"]), statistics.median(timings["resumed"])
    whole_cpu, resumed_cpu = statistics.median(cpu["whole"]), statistics.median(cpu["resumed"])
    print(f"median: whole {whole:.1f} s, resumed {resumed:.1f} s; ratio whole/resumed {whole / resumed:.2f}; "
          f"CPU whole {whole_cpu:.1f} s, resumed {resumed_cpu:.1f} s, ratio {whole_cpu / resumed_cpu:.2f}; "
          f"silver.events {'equal' if same else 'DIFFER'}")


if __name__ == "__main__":
    main()
