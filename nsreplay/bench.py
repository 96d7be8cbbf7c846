"""Benchmarks, reported as ratios against a baseline measured in the same process.

``bench_ingest``: the I/O floor (Spark reads the same capture files as text and counts the lines)
versus the full ingest (bronze + silver + quarantine + data quality) on a fresh warehouse. A small
warm-up job runs first so neither side pays for JVM start-up. The machine is shared and noisy: the
ratio is the figure to compare between runs, not the seconds.
"""

from __future__ import annotations

import json
import resource
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass

from nsreplay.config import load_settings
from nsreplay.runtime import build_spark, new_run_id, resolve_path


@dataclass(frozen=True)
class IngestBench:
    files: int
    capture_bytes: int
    lines: int
    floor_seconds: float
    ingest_seconds: float
    accepted: int
    duplicates: int
    quarantined: int
    distinct_bodies: int
    driver_python_peak_mb: float
    driver_jvm_peak_mb: float | None

    @property
    def ratio(self) -> float:
        return self.ingest_seconds / self.floor_seconds if self.floor_seconds else float("inf")

    def report(self) -> str:
        return "\n".join(
            [
                f"capture: {self.files} files, {self.capture_bytes / 1e6:.1f} MB on disk, {self.lines} lines, {self.distinct_bodies} distinct register bodies",
                f"floor  (Spark reads the files as text and counts lines): {self.floor_seconds:.1f} s",
                f"ingest (bronze + silver + quarantine + quality):          {self.ingest_seconds:.1f} s",
                f"ratio ingest / floor: {self.ratio:.2f}; {self.lines / self.ingest_seconds:,.0f} lines/s",
                f"accepted {self.accepted}, duplicates {self.duplicates}, quarantined {self.quarantined}",
                f"peak RSS: driver python {self.driver_python_peak_mb:.0f} MB, driver JVM {self.driver_jvm_peak_mb or 0:.0f} MB",
                "json: " + json.dumps({**asdict(self), "ratio": round(self.ratio, 3)}),
            ]
        )


def _jvm_peak_mb(spark) -> float | None:
    try:
        pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except Exception:  # noqa: BLE001 - not on Linux, or no access: report nothing
        return None
    return None


def bench_ingest(captures: str, *, warehouse: str | None = None, master: str | None = None) -> IngestBench:
    """Measure the ingest of ``captures`` against the read-as-text floor (see module docstring)."""
    from nsreplay.storage import Warehouse
    from pipelines.ingest.capture_files import list_capture_files
    from pipelines.ingest.run import run_ingest
    from schemas.silver import TOPIC_CONFIGS

    settings = load_settings()
    spark = build_spark(settings, "nsreplay-bench-ingest", master=master)
    files = list_capture_files(resolve_path(captures))
    paths = [f.path for f in files]
    spark.range(1000).selectExpr("sum(id)").collect()  # warm-up

    started = time.perf_counter()
    lines = spark.read.text(paths).count()
    floor = time.perf_counter() - started

    scratch = warehouse or tempfile.mkdtemp(prefix="nsreplay-bench-")
    try:
        wh = Warehouse(scratch, spark, settings.warehouse.backend)
        started = time.perf_counter()
        result = run_ingest(spark, wh, settings, resolve_path(captures), new_run_id("bench"))
        seconds = time.perf_counter() - started
        bodies = wh.read(TOPIC_CONFIGS).count()
    finally:
        if warehouse is None:
            shutil.rmtree(scratch, ignore_errors=True)
    return IngestBench(
        files=len(files),
        capture_bytes=sum(f.size_bytes for f in files),
        lines=lines,
        floor_seconds=floor,
        ingest_seconds=seconds,
        accepted=result.accepted,
        duplicates=result.duplicates,
        quarantined=result.quarantined,
        distinct_bodies=bodies,
        driver_python_peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        driver_jvm_peak_mb=_jvm_peak_mb(spark),
    )


__all__ = ["IngestBench", "bench_ingest"]
