"""What discarding a stopped ingest costs as the warehouse's history grows: the rows of the stopped
run looked for in every file of its four tables (before), or in the files added since its first
commit to each (``Warehouse.overwrite``'s ``written_since``, now).

    .venv/bin/python scripts/bench/discard_abandoned.py --dir /tmp/discard --runs 12 --rounds 3

Builds, once (kept in ``--dir``): ``--runs`` hourly tiny captures (the tiny preset, each its own
hour and seed), each ingested by its own run, then one more ingested by a run stopped just before
its ``silver.ingest_runs`` row (its bronze lines, events, quarantine rows and file marks are
committed). Each round copies that warehouse twice and times ``discard_abandoned`` on each copy in
one Spark session, the two ways alternating (the way before: the same code with every table's
``written_since`` unknown, which looks at every file); then checks that both copies end with the
same rows. Prints the files of the four tables and each round's seconds.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

HOUR = 3_600_000


class Stopped(RuntimeError):
    pass


def build(base: Path, runs: int) -> None:
    from nsreplay.config import load_settings
    from nsreplay.generator import apply_overrides, generate, preset
    from nsreplay.storage import Warehouse
    from pipelines.ingest.run import run_ingest
    from schemas.silver import INGEST_RUNS

    from nsreplay.runtime import build_spark

    spark = build_spark(load_settings(), "bench-discard-build", master="local[2]")
    tiny = preset("tiny")
    root = base / "wh"
    root.mkdir(parents=True)
    for i in range(runs + 1):
        capture = base / f"capture-{i:03d}"
        config = apply_overrides(tiny, {"seed": str(100 + i), "timing.start_ms": str(tiny.timing.start_ms + i * HOUR)})
        generate(config, capture, workers=1)

        class StopsBeforeRunRow(Warehouse):
            def append(self, spec, df, commit):
                if spec is INGEST_RUNS:
                    raise Stopped("stopped before its run row")
                return super().append(spec, df, commit)

        warehouse = (StopsBeforeRunRow if i == runs else Warehouse)(str(root), spark, "delta-rs")
        try:
            run_ingest(spark, warehouse, load_settings(), str(capture), f"hour-{i:03d}" if i < runs else "stopped")
        except Stopped:
            pass
        print(f"built run {i + 1}/{runs + 1}", flush=True)
    (base / "built").write_text(str(runs))
    spark.stop()


def comparable(df):
    """``df`` with its map columns as sorted JSON (set operations refuse maps)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import MapType

    for f in df.schema.fields:
        if isinstance(f.dataType, MapType):
            df = df.withColumn(f.name, F.to_json(F.array_sort(F.map_entries(f.name))))
    return df


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    base = Path(args.dir)
    if not (base / "built").exists():
        shutil.rmtree(base, ignore_errors=True)
        build(base, args.runs)

    import pipelines.ingest.abandoned as abandoned
    from nsreplay.config import load_settings
    from nsreplay.runtime import build_spark
    from nsreplay.storage import Warehouse
    from pipelines.ingest.run import JOB
    from schemas.bronze import CAPTURES_RAW, INGEST_FILES
    from schemas.silver import EVENTS, QUARANTINE

    tables = (EVENTS, QUARANTINE, INGEST_FILES, CAPTURES_RAW)
    spark = build_spark(load_settings(), "bench-discard", master="local[2]")
    source = Warehouse(str(base / "wh"), spark, "delta-rs")
    print("files: " + ", ".join(f"{spec.name} {len(source.files(spec))}" for spec in tables))
    now = abandoned.written_since

    def before(history, runs):  # the way before: where the runs' rows are is not known, every file is looked at
        return None

    timings: dict[str, list[float]] = {"every file (before)": [], "files since the run (now)": []}
    for r in range(args.rounds):
        copies = {}
        ways = list(timings.items()) if r % 2 == 0 else list(reversed(timings.items()))
        for label, seconds in ways:
            root = base / f"round-{label.split()[0]}"
            shutil.rmtree(root, ignore_errors=True)
            shutil.copytree(base / "wh", root)
            warehouse = Warehouse(str(root), spark, "delta-rs")
            abandoned.written_since = now if "now" in label else before
            started = time.perf_counter()
            discarded = abandoned.discard_abandoned(spark, warehouse, JOB, f"next-{r}")
            seconds.append(time.perf_counter() - started)
            assert discarded == ("stopped",), discarded
            copies[label] = warehouse
        a, b = copies.values()
        for spec in tables:
            left, right = comparable(a.read(spec)), comparable(b.read(spec))
            assert left.exceptAll(right).isEmpty() and right.exceptAll(left).isEmpty(), spec.name
    abandoned.written_since = now
    for label, seconds in timings.items():
        print(f"{label}: " + " / ".join(f"{s:.2f}" for s in seconds) + " s")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
