"""The scaling benchmark (``nsreplay bench scale``): its verdicts, the order of its runs, the captures
it writes or reuses, and one real run of the command on the tiny preset (two fresh processes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nsreplay.bench_scale import (
    ScaleBench,
    ScaleBenchError,
    ScaleRun,
    best_of,
    bench_scale,
    capture_of,
    rebuild_in_fresh_process,
    report_json,
    round_order,
    run_from_report,
)

ROOT = Path(__file__).resolve().parents[2]


def _run(hours: float, seconds: float, python_mb: float = 300.0, jvm_mb: float | None = 2000.0, lines: int = 1000) -> ScaleRun:
    return ScaleRun(hours=hours, captures=f"/c/{hours:g}h", files=4, lines=lines, capture_bytes=10_000_000, floor_seconds=seconds / 5,
                    end_to_end_seconds=seconds, driver_python_peak_mb=python_mb, driver_jvm_peak_mb=jvm_mb)


def _report(run: ScaleRun, ingest: float) -> str:
    """A ``bench rebuild`` report as that command prints it (the lines before ``json:`` are free text)."""
    payload = {"files": run.files, "capture_bytes": run.capture_bytes, "lines": run.lines, "floor_seconds": run.floor_seconds,
               "ingest_seconds": ingest, "replay_seconds": run.end_to_end_seconds - ingest, "changes": 7,
               "driver_python_peak_mb": run.driver_python_peak_mb, "driver_jvm_peak_mb": run.driver_jvm_peak_mb, "ratio": 3.0}
    return f"capture: …\nend to end: …\njson: {json.dumps(payload)}\n"


@pytest.mark.parametrize(
    ("large_seconds", "large_python_mb", "linear", "flat"),
    [(44.0, 360.0, True, True), (44.1, 300.0, False, True), (30.0, 361.0, True, False)],
)
def test_verdicts_at_the_goals_edges(large_seconds: float, large_python_mb: float, linear: bool, flat: bool) -> None:
    bench = ScaleBench(factor=4, rounds=1, small=_run(6, 10.0), large=_run(24, large_seconds, python_mb=large_python_mb, lines=4100))
    assert (bench.linear, bench.flat_memory) == (linear, flat)
    assert bench.time_goal == pytest.approx(4.4)
    text = bench.report()
    assert f"(goal <= 4.40: {'met' if linear else 'NOT met'})" in text
    assert f"(flat: goal <= 1.20: {'met' if flat else 'NOT met'})" in text
    assert "x4.10 in lines" in text
    data = report_json(text)
    assert (data["linear"], data["flat_memory"], data["lines_ratio"]) == (linear, flat, 4.1)
    assert data["small"] == _run(6, 10.0).__dict__


def test_the_marginal_ratio_compares_what_the_added_input_cost() -> None:
    small = _run(6, 100.0)  # floor 20 s
    large = ScaleRun(**{**_run(24, 220.0).__dict__, "floor_seconds": 60.0})
    bench = ScaleBench(factor=4, rounds=1, small=small, large=large)
    assert bench.marginal_ratio == pytest.approx(3.0)  # +120 s over +40 s of floor
    assert "end to end +120.0 s, floor +40.0 s: marginal ratio 3.00" in bench.report()
    assert report_json(bench.report())["marginal_ratio"] == 3.0
    flat_floor = ScaleBench(factor=4, rounds=1, small=small, large=ScaleRun(**{**large.__dict__, "floor_seconds": 20.0}))
    assert flat_floor.marginal_ratio == float("inf")


def test_the_report_says_when_the_jvm_peak_is_unknown() -> None:
    bench = ScaleBench(factor=2, rounds=1, small=_run(1, 10.0, jvm_mb=None), large=_run(2, 20.0))
    assert "driver JVM xn/a" in bench.report()


def test_rounds_alternate_the_sizes() -> None:
    assert round_order(1) == [0, 1]
    assert round_order(3) == [0, 1, 1, 0, 0, 1]


def test_each_size_keeps_its_fastest_round_and_its_largest_peaks() -> None:
    runs = [_run(6, 12.0, python_mb=310, jvm_mb=1900), _run(6, 10.0, python_mb=300, jvm_mb=None), _run(6, 11.0, python_mb=305, jvm_mb=2100)]
    best = best_of(runs)
    assert (best.end_to_end_seconds, best.driver_python_peak_mb, best.driver_jvm_peak_mb) == (10.0, 310, 2100)


def test_a_rebuild_report_gives_end_to_end_without_the_floor() -> None:
    run = _run(6, 50.0)
    assert run_from_report(6, run.captures, report_json(_report(run, ingest=20.0))) == run


def test_a_report_without_its_json_line_is_an_error() -> None:
    with pytest.raises(ScaleBenchError, match="no 'json:' report line"):
        report_json("capture: …\nend to end: …\n")


def test_captures_are_written_once_per_generator_config(tmp_path: Path) -> None:
    first = capture_of("tiny", 0.1, tmp_path)
    manifest = first / "_manifest.json"
    written = manifest.stat().st_mtime_ns
    assert capture_of("tiny", 0.1, tmp_path) == first and manifest.stat().st_mtime_ns == written  # reused
    assert json.loads(manifest.read_text())["config"]["timing"]["hours"] == 0.1
    reseeded = capture_of("tiny", 0.1, tmp_path, seed=99)  # same directory, another config: written again
    assert reseeded == first and manifest.stat().st_mtime_ns != written
    assert json.loads(manifest.read_text())["seed"] == 99


def test_bench_scale_runs_small_then_large_and_compares_them(tmp_path: Path) -> None:
    seen: list[str] = []
    lines = {}

    def rebuild(captures: str) -> str:
        seen.append(Path(captures).name)
        manifest = json.loads((Path(captures) / "_manifest.json").read_text())
        lines[Path(captures).name] = manifest["lines_total"]
        hours = manifest["config"]["timing"]["hours"]
        return _report(_run(hours, 100.0 * hours, lines=manifest["lines_total"]), ingest=10.0 * hours)

    bench = bench_scale("tiny", 0.1, factor=3, out=tmp_path, rounds=2, rebuild=rebuild)
    assert seen == ["tiny-0.1h", "tiny-0.3h", "tiny-0.3h", "tiny-0.1h"]
    assert (bench.small.hours, bench.large.hours) == (0.1, pytest.approx(0.3))
    assert (bench.small.lines, bench.large.lines) == (lines["tiny-0.1h"], lines["tiny-0.3h"])
    assert bench.time_ratio == pytest.approx(3.0) and bench.linear


@pytest.mark.parametrize(("hours", "factor", "rounds"), [(0, 4, 1), (1, 1, 1), (1, 4, 0)])
def test_bad_arguments_are_refused_before_anything_is_written(tmp_path: Path, hours: float, factor: float, rounds: int) -> None:
    with pytest.raises(ValueError):
        bench_scale("tiny", hours, factor=factor, out=tmp_path, rounds=rounds, rebuild=lambda c: "")
    assert list(tmp_path.iterdir()) == []


def test_the_command_rebuilds_each_size_in_a_fresh_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real command: two generated captures, two ``bench rebuild`` child processes (each its own
    JVM, conf/test's short-lived-JVM settings), one report."""
    monkeypatch.setenv("NSREPLAY_ENV", "test")
    done = subprocess.run(
        [sys.executable, "-m", "nsreplay.cli", "bench", "scale", "--preset", "tiny", "--hours", "0.1", "--factor", "2",
         "--out", str(tmp_path), "--master", "local[1]"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    data = report_json(done.stdout)
    for side, name in (("small", "tiny-0.1h"), ("large", "tiny-0.2h")):
        manifest = json.loads((tmp_path / name / "_manifest.json").read_text())
        run = data[side]
        assert (run["captures"], run["lines"], run["files"]) == (str(tmp_path / name), manifest["lines_total"], len(manifest["files"]))
        assert run["end_to_end_seconds"] > 0 and run["driver_python_peak_mb"] > 0
    assert data["time_ratio"] == pytest.approx(data["large"]["end_to_end_seconds"] / data["small"]["end_to_end_seconds"], abs=1e-3)
    assert data["linear"] == (data["time_ratio"] <= 2.2)
    assert "rebuilding" in done.stdout and "(goal <= 2.20:" in done.stdout


def test_a_failing_rebuild_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real child process that fails (no capture where it looks) gives the command line and exit status."""
    monkeypatch.setenv("NSREPLAY_ENV", "test")
    missing = tmp_path / "missing"
    with pytest.raises(ScaleBenchError, match=rf"the rebuild of {missing} failed \(exit 1\): .* bench rebuild --captures {missing} --samples 0"):
        rebuild_in_fresh_process(str(missing), master="local[1]")
