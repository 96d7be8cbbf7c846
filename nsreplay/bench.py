"""Benchmarks, reported as ratios against a baseline measured in the same process.

``bench_ingest``: the I/O floor (Spark reads the same capture files as text and counts the lines)
versus the full ingest (bronze + silver + quarantine + data quality) on a fresh warehouse. A small
warm-up job runs first so neither side pays for JVM start-up, and Great Expectations is imported
while the session starts, as the jobs import it (never while the floor runs). The machine is
shared and noisy: the ratio is the figure to compare between runs, not the seconds.

``bench_rebuild`` also reads the CPU that the floor and the run used: this process, its JVM and the
JVM's Python workers (:mod:`nsreplay.process_cpu`): their ratio is the work the run does per unit
of the floor's work, what it costs on a cluster whatever else the machine runs.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nsreplay.bench_oracle import ModelCheck, check_sampled_ticks
from nsreplay.config import load_settings
from nsreplay.jvm_threads import JvmCpu, read_jvm_cpu
from nsreplay.process_cpu import read_tree_cpu
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
    stages: dict[str, float]

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
                "stages: " + ", ".join(f"{k} {v:.1f} s" for k, v in self.stages.items()),
                f"accepted {self.accepted}, duplicates {self.duplicates}, quarantined {self.quarantined}",
                f"peak RSS: driver python {self.driver_python_peak_mb:.0f} MB, driver JVM {self.driver_jvm_peak_mb or 0:.0f} MB",
                "json: " + json.dumps({**asdict(self), "ratio": round(self.ratio, 3)}),
            ]
        )


def _now_ms() -> int:
    return int(time.time() * 1000)


def _jvm_pid(spark) -> int:
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def _jvm_peak_mb(spark) -> float | None:
    try:
        with open(f"/proc/{_jvm_pid(spark)}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except Exception:  # noqa: BLE001 - not on Linux, or no access: report nothing
        return None
    return None


def _floor(captures: str, master: str | None, app: str, event_log: str | None = None):
    """Spark (warmed up), the settings, the capture files, the floor in seconds, the line count and
    the floor's CPU seconds (this process and all it started, :mod:`nsreplay.process_cpu`; None where
    /proc cannot be read): the time Spark needs to read the same files as text and count their
    lines. With ``event_log`` (a directory), the session writes its Spark event log there."""
    from nsreplay.storage.backend import hadoop_literal
    from pipelines.ingest.capture_files import list_capture_files
    from pipelines.quality.suites import import_in_background, wait_for_import

    settings = load_settings()
    conf = None
    if event_log:
        Path(event_log).mkdir(parents=True, exist_ok=True)
        conf = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": Path(event_log).resolve().as_uri(), "spark.eventLog.compress": "false"}
    import_in_background()  # as the jobs do: Great Expectations while the session starts
    spark = build_spark(settings, app, master=master, conf=conf)
    files = list_capture_files(resolve_path(captures))
    spark.range(1000).selectExpr("sum(id)").collect()  # warm-up
    wait_for_import()  # not while the floor is measured
    cpu_before = read_tree_cpu(os.getpid())
    started = time.perf_counter()
    lines = spark.read.text([hadoop_literal(f.path) for f in files]).count()  # each file itself, not a glob
    seconds = time.perf_counter() - started
    return spark, settings, files, seconds, lines, _cpu_between(cpu_before, read_tree_cpu(os.getpid()))


def _cpu_between(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else round(after - before, 2)


def bench_ingest(captures: str, *, warehouse: str | None = None, master: str | None = None) -> IngestBench:
    """Measure the ingest of ``captures`` against the read-as-text floor (see module docstring)."""
    from nsreplay.storage import Warehouse
    from pipelines.ingest.run import run_ingest
    from schemas.silver import TOPIC_CONFIGS

    spark, settings, files, floor, lines, _ = _floor(captures, master, "nsreplay-bench-ingest")

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
        stages=result.stages,
    )


@dataclass(frozen=True)
class RebuildBench:
    files: int
    capture_bytes: int
    lines: int
    floor_seconds: float
    ingest_seconds: float
    replay_seconds: float
    changes: int
    sampled_ticks: int
    mismatched_ticks: int
    oracle_seconds: float
    driver_python_peak_mb: float
    driver_jvm_peak_mb: float | None
    stages: dict[str, float]
    profile: str = ""
    jvm_cpu: dict[str, dict[str, float]] = field(default_factory=dict)
    floor_cpu_seconds: float | None = None  # CPU of the driver, its JVM and their Python workers
    cpu_seconds: float | None = None  # the same over ingest + replay and publish
    grid_ticks: int = 0  # scan ticks of the published grid compared with the model's (every one)
    grid_mismatched_ticks: int = 0
    route_answers: int = 0  # captured GET_ROUTEINFO_BY_TOPIC answers the run checked (gold.route_fidelity)
    route_answers_mismatched: int = 0

    @property
    def end_to_end_seconds(self) -> float:
        return self.ingest_seconds + self.replay_seconds

    @property
    def ratio(self) -> float:
        return self.end_to_end_seconds / self.floor_seconds if self.floor_seconds else float("inf")

    @property
    def cpu_ratio(self) -> float | None:
        """End-to-end CPU over the floor's CPU: the work done per unit of the floor's work (None
        without both readings)."""
        if self.cpu_seconds is None or not self.floor_cpu_seconds:
            return None
        return self.cpu_seconds / self.floor_cpu_seconds

    def _cpu_line(self) -> list[str]:
        if self.cpu_ratio is None or not self.cpu_seconds:
            return []
        return [
            f"CPU (driver, JVM and Python workers; /proc): floor {self.floor_cpu_seconds:.1f} s, end to end {self.cpu_seconds:.1f} s, "
            f"ratio {self.cpu_ratio:.2f}; {self.lines / self.cpu_seconds:,.0f} events per CPU second"
        ]

    def report(self) -> str:
        return "\n".join(
            [
                f"capture: {self.files} files, {self.capture_bytes / 1e6:.1f} MB on disk, {self.lines} lines",
                f"floor (Spark reads the files as text and counts lines): {self.floor_seconds:.1f} s",
                f"end to end: {self.end_to_end_seconds:.1f} s (ingest {self.ingest_seconds:.1f} s + replay and publish {self.replay_seconds:.1f} s)",
                f"ratio end-to-end / floor: {self.ratio:.2f} (goal <= 2.5); {self.lines / self.end_to_end_seconds:,.0f} events/s; {self.changes} changes",
                "stages: " + ", ".join(f"{k} {v:.1f} s" for k, v in self.stages.items()),
                f"reference model check: {self.sampled_ticks} sampled ticks, {self.mismatched_ticks} mismatches; scan-tick grid: "
                f"{self.grid_ticks} ticks, {self.grid_mismatched_ticks} mismatches ({self.oracle_seconds:.0f} s, not part of end to end)"
                if self.sampled_ticks else "reference model check: skipped (--samples 0)",
                f"ground truth: {self.route_answers} captured route answers, {self.route_answers_mismatched} differ from the rebuild "
                "(gold.route_fidelity)" if self.route_answers else "ground truth: the capture holds no route answer to compare",
                f"peak RSS: driver python {self.driver_python_peak_mb:.0f} MB, driver JVM {self.driver_jvm_peak_mb or 0:.0f} MB",
                *self._cpu_line(),
                *(["driver JVM CPU by thread (/proc; in local mode the tasks' JVM side is in it, their Python workers are not):"]
                  + [f"  {phase}: {JvmCpu(kinds).text()}" for phase, kinds in self.jvm_cpu.items()] if self.jvm_cpu else []),
                *([self.profile] if self.profile else []),
                "json: " + json.dumps({
                    **{k: v for k, v in asdict(self).items() if k != "profile"},
                    "ratio": round(self.ratio, 3),
                    "cpu_ratio": None if self.cpu_ratio is None else round(self.cpu_ratio, 3),
                }),
            ]
        )


def bench_rebuild(
    captures: str, *, warehouse: str | None = None, master: str | None = None, samples: int = 1000, seed: int = 1, event_log: str | None = None
) -> RebuildBench:
    """End-to-end ingest + replay + publish of ``captures`` against the read-as-text floor, then a
    check of ``samples`` random ticks against the reference model (timed separately; 0 skips it).
    The report gives the driver JVM's CPU per phase by kind of thread (:mod:`nsreplay.jvm_threads`;
    on Linux), which task time does not show: JIT compilation, garbage collection.
    With ``event_log`` (a directory), Spark writes its event log there and the report adds where the
    task time went, per phase (:mod:`nsreplay.spark_profile`); the session is stopped at the end."""
    from nsreplay.storage import Warehouse
    from pipelines.ingest.run import run_ingest
    from pipelines.replay.run import run_replay

    floor_started = _now_ms()
    spark, settings, files, floor, lines, floor_cpu = _floor(captures, master, "nsreplay-bench-rebuild", event_log)
    paths = [f.path for f in files]
    marks = [("floor", floor_started)]

    scratch = warehouse or tempfile.mkdtemp(prefix="nsreplay-bench-")
    try:
        wh = Warehouse(scratch, spark, settings.warehouse.backend)
        run_id = new_run_id("bench")
        pid = _jvm_pid(spark)
        cpu = [read_jvm_cpu(pid)]
        run_cpu_before = read_tree_cpu(os.getpid())
        marks.append(("ingest", _now_ms()))
        started = time.perf_counter()
        ingested = run_ingest(spark, wh, settings, resolve_path(captures), run_id)
        ingest_seconds = time.perf_counter() - started
        cpu.append(read_jvm_cpu(pid))
        marks.append(("replay and publish", _now_ms()))
        started = time.perf_counter()
        replay = run_replay(spark, wh, settings, run_id)
        replay_seconds = time.perf_counter() - started
        run_cpu = _cpu_between(run_cpu_before, read_tree_cpu(os.getpid()))
        cpu.append(read_jvm_cpu(pid))
        marks.append(("", _now_ms()))
        jvm_cpu = {  # a reading at the start and end of each timed phase (the marks after the floor's)
            name: dict(after.since(before).seconds)
            for (name, _), before, after in zip(marks[1:-1], cpu, cpu[1:])
            if before is not None and after is not None
        }
        python_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        jvm_peak = _jvm_peak_mb(spark)
        started = time.perf_counter()
        checked = check_sampled_ticks(paths, scratch, samples, seed) if samples > 0 else ModelCheck(0, 0, 0, 0)
        oracle_seconds = time.perf_counter() - started
    finally:
        if warehouse is None:
            shutil.rmtree(scratch, ignore_errors=True)
    profile = ""
    if event_log:
        from nsreplay import spark_profile

        app_id = spark.sparkContext.applicationId
        spark.stop()  # closes the event log
        phases = [(name, start, marks[i + 1][1]) for i, (name, start) in enumerate(marks[:-1])]
        log = Path(event_log) / f"eventlog_v2_{app_id}"  # the rolling layout (Spark 4's default), else one file
        costs = spark_profile.stage_costs(spark_profile.read_event_log(log if log.exists() else Path(event_log) / app_id))
        profile = spark_profile.report(spark_profile.phase_costs(costs, phases))
    return RebuildBench(
        files=len(files), capture_bytes=sum(f.size_bytes for f in files), lines=lines, floor_seconds=floor,
        ingest_seconds=ingest_seconds, replay_seconds=replay_seconds, changes=replay.changes, sampled_ticks=checked.sampled,
        mismatched_ticks=checked.mismatched, oracle_seconds=oracle_seconds, driver_python_peak_mb=python_peak,
        driver_jvm_peak_mb=jvm_peak, stages={**{f"ingest: {k}": v for k, v in ingested.stages.items()}, **{f"replay: {k}": v for k, v in replay.stages.items()}},
        profile=profile, jvm_cpu=jvm_cpu, floor_cpu_seconds=floor_cpu, cpu_seconds=run_cpu,
        grid_ticks=checked.ticks, grid_mismatched_ticks=checked.grid_mismatched,
        route_answers=replay.fidelity["matched"] + replay.fidelity["mismatched"], route_answers_mismatched=replay.fidelity["mismatched"],
    )


__all__ = ["IngestBench", "RebuildBench", "bench_ingest", "bench_rebuild"]


@dataclass(frozen=True)
class IncrementalBench:
    records_before: int
    records_window: int
    split_ts: int
    end_ts: int
    standalone_seconds: float
    incremental_seconds: float
    standalone_changes: int
    incremental_changes: int
    replayed_again: tuple[str, ...] = ()

    @property
    def ratio(self) -> float:
        return self.incremental_seconds / self.standalone_seconds if self.standalone_seconds else float("inf")

    def report(self) -> str:
        return "\n".join(
            [
                f"window (split, end] = ({self.split_ts}, {self.end_ts}]: {self.records_window} records; {self.records_before} records before it",
                f"standalone  (that window's records alone, from an empty state): {self.standalone_seconds:.1f} s, {self.standalone_changes} changes",
                f"incremental (the same window resumed from the previous window's state): {self.incremental_seconds:.1f} s, {self.incremental_changes} changes"
                + (f"; units joined, replayed again: {'; '.join(self.replayed_again)}" if self.replayed_again else ""),
                f"ratio incremental / standalone: {self.ratio:.2f} (goal <= 1.2)",
                "json: " + json.dumps({**asdict(self), "ratio": round(self.ratio, 3)}),
            ]
        )


def _window_alone(whole, alone, split_ts: int) -> tuple[int, int]:
    """Give warehouse ``alone`` the silver rows of ``whole`` that a standalone run of the window after
    ``split_ts`` would have ingested: the records with ``ts > split_ts`` and the register bodies they
    reference. The counts of records at or before the split and after it."""
    from pyspark.sql import functions as F

    from nsreplay.storage import CommitInfo
    from schemas.silver import EVENTS, TOPIC_CONFIGS

    events = whole.read(EVENTS)
    counts = {r.late: r["count"] for r in events.groupBy((F.col("ts") > split_ts).alias("late")).count().collect()}
    later = events.where(F.col("ts") > split_ts)
    commit = CommitInfo(run_id=new_run_id("bench-window"), job="bench/window")
    alone.append(EVENTS, later, commit)
    bodies = whole.read(TOPIC_CONFIGS).join(later.select("body_id").where(F.col("body_id").isNotNull()).distinct(), "body_id", "left_semi")
    alone.append(TOPIC_CONFIGS, bodies, commit)
    return counts.get(False, 0), counts.get(True, 0)


def bench_incremental(captures: str, *, split_ts: int | None = None, master: str | None = None, rounds: int = 2) -> IncrementalBench:
    """One more window resumed from the state of the windows before it, versus the same window's
    records replayed alone from an empty state (the time a standalone run of that window takes).

    Both sides replay, check and publish the window ``(split, end]`` into their own warehouse;
    ingest is done beforehand and not timed: the capture is ingested once, and the standalone side's
    warehouse gets the window's silver records (and the register bodies they use) copied from it.
    ``split_ts`` defaults to the middle of the capture. The sides run alternately ``rounds`` times (a
    re-run of the same window costs the same) and each side's best time is reported."""
    from pyspark.sql import functions as F

    from nsreplay.storage import Warehouse
    from pipelines.ingest.run import run_ingest
    from pipelines.replay.run import run_replay
    from schemas.silver import EVENTS

    settings = load_settings()
    spark = build_spark(settings, "nsreplay-bench-incremental", master=master)
    scratch = tempfile.mkdtemp(prefix="nsreplay-bench-incr-")
    try:
        import os

        whole = Warehouse(os.path.join(scratch, "incremental"), spark, "delta-rs")
        run_ingest(spark, whole, settings, resolve_path(captures), new_run_id("bench-ingest"))
        lo, hi = whole.read(EVENTS).agg(F.min("ts"), F.max("ts")).first()
        split = split_ts if split_ts is not None else (lo + hi) // 2
        alone = Warehouse(os.path.join(scratch, "standalone"), spark, "delta-rs")
        n_before, n_window = _window_alone(whole, alone, split)
        run_replay(spark, whole, settings, new_run_id("bench-before"), window_to=split)  # the history so far (untimed)
        spark.range(1000).selectExpr("sum(id)").collect()
        # Alternate the two sides and keep each side's best time: the machine is shared and noisy.
        standalone_s, incremental_s = float("inf"), float("inf")
        for attempt in range(rounds):
            started = time.perf_counter()
            standalone = run_replay(spark, alone, settings, new_run_id(f"bench-standalone-{attempt}"), window_to=hi)
            standalone_s = min(standalone_s, time.perf_counter() - started)
            started = time.perf_counter()
            incremental = run_replay(spark, whole, settings, new_run_id(f"bench-incremental-{attempt}"), window_from=split, window_to=hi)
            incremental_s = min(incremental_s, time.perf_counter() - started)
        return IncrementalBench(n_before, n_window, split, hi, standalone_s, incremental_s, standalone.changes, incremental.changes,
                                incremental.replayed_again)
    finally:
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)
