"""``bench_rebuild`` end to end on the tiny preset, in the test session's Spark: the sampled ticks
match the reference model and the captured route answers match the rebuild, the JVM's CPU is read
around each timed phase, and the CPU of the whole process tree (driver, JVM, Python workers) around
the floor and the run."""

from __future__ import annotations

from pathlib import Path

from nsreplay.bench import bench_rebuild
from nsreplay.generator import generate, preset
from nsreplay.jvm_threads import KINDS


def test_bench_rebuild_on_the_tiny_preset(spark, tmp_path: Path) -> None:
    generate(preset("tiny"), tmp_path / "captures", workers=2)
    bench = bench_rebuild(str(tmp_path / "captures"), warehouse=str(tmp_path / "warehouse"), samples=12)
    assert (bench.sampled_ticks, bench.mismatched_ticks, bench.grid_mismatched_ticks) == (12, 0, 0)
    assert bench.grid_ticks > 12  # every tick of the grid, not the sample
    # the tiny preset captures route answers (an independent path of the generator): all match
    assert bench.route_answers > 0 and bench.route_answers_mismatched == 0
    assert list(bench.jvm_cpu) == ["ingest", "replay and publish"]
    for phase, kinds in bench.jvm_cpu.items():
        assert set(kinds) == set(KINDS), phase
        assert sum(kinds.values()) > 0, phase  # the session's JVM ran this phase's Spark jobs
    lines = bench.report().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("driver JVM CPU by thread"))
    assert [line.split(":")[0] for line in lines[start + 1:start + 3]] == ["  ingest", "  replay and publish"]
    # the tree holds the JVM (read around the same phases, a few ms wider) and the Python workers
    jvm_total = sum(sum(kinds.values()) for kinds in bench.jvm_cpu.values())
    assert bench.cpu_seconds is not None and bench.cpu_seconds >= jvm_total - 0.5
    assert bench.floor_cpu_seconds is not None and bench.floor_cpu_seconds >= 0
    if bench.floor_cpu_seconds:
        assert bench.cpu_ratio == bench.cpu_seconds / bench.floor_cpu_seconds
        assert any(line.startswith("CPU (driver, JVM and Python workers; /proc): floor ") for line in lines)
