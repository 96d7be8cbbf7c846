"""The benchmark reports render from their result values (no Spark needed)."""

from __future__ import annotations

import json

from nsreplay.bench import IngestBench, RebuildBench


def _json(report: str) -> dict:
    return json.loads(next(line for line in report.splitlines() if line.startswith("json: "))[len("json: "):])


def test_ingest_report() -> None:
    bench = IngestBench(files=2, capture_bytes=2_000_000, lines=100, floor_seconds=2.0, ingest_seconds=5.0, accepted=90, duplicates=4,
                        quarantined=6, distinct_bodies=3, driver_python_peak_mb=300.0, driver_jvm_peak_mb=None, stages={"read": 1.5})
    text = bench.report()
    assert "ratio ingest / floor: 2.50; 20 lines/s" in text
    assert _json(text) == {**bench.__dict__, "ratio": 2.5}


def test_rebuild_report_with_and_without_a_profile() -> None:
    values = dict(files=1, capture_bytes=1_000_000, lines=300, floor_seconds=2.0, ingest_seconds=3.0, replay_seconds=2.0, changes=7,
                  sampled_ticks=1000, mismatched_ticks=0, oracle_seconds=9.0, driver_python_peak_mb=300.0, driver_jvm_peak_mb=900.0,
                  stages={"ingest: read": 1.0})
    plain = RebuildBench(**values).report()
    profiled = RebuildBench(**values, profile="task seconds by phase: ...").report()
    assert "ratio end-to-end / floor: 2.50 (goal <= 2.5)" in plain
    assert "reference model check: 1000 sampled ticks, 0 mismatches" in plain
    assert "ground truth: the capture holds no route answer to compare" in plain.splitlines()
    checked = RebuildBench(**values, route_answers=40, route_answers_mismatched=3).report()
    assert "ground truth: 40 captured route answers, 3 differ from the rebuild (gold.route_fidelity)" in checked.splitlines()
    assert (_json(checked)["route_answers"], _json(checked)["route_answers_mismatched"]) == (40, 3)
    assert "task seconds by phase" not in plain
    assert profiled.splitlines() == plain.splitlines()[:-1] + ["task seconds by phase: ...", plain.splitlines()[-1]]
    assert _json(plain) == _json(profiled) == {**values, "jvm_cpu": {}, "ratio": 2.5, "floor_cpu_seconds": None, "cpu_seconds": None, "cpu_ratio": None,
                                               "grid_ticks": 0, "grid_mismatched_ticks": 0, "route_answers": 0, "route_answers_mismatched": 0}
    assert not any(line.startswith("CPU (") for line in plain.splitlines())


def test_rebuild_report_gives_the_cpu_ratio_when_both_cpu_readings_exist() -> None:
    values = dict(files=1, capture_bytes=1_000_000, lines=300, floor_seconds=2.0, ingest_seconds=3.0, replay_seconds=2.0, changes=7,
                  sampled_ticks=0, mismatched_ticks=0, oracle_seconds=0.0, driver_python_peak_mb=300.0, driver_jvm_peak_mb=900.0,
                  stages={"ingest: read": 1.0})
    text = RebuildBench(**values, floor_cpu_seconds=4.0, cpu_seconds=15.0).report()
    assert "CPU (driver, JVM and Python workers; /proc): floor 4.0 s, end to end 15.0 s, ratio 3.75; 20 events per CPU second" in text.splitlines()
    assert _json(text)["cpu_ratio"] == 3.75
    for floor, run in ((None, 15.0), (0.0, 15.0), (4.0, None)):
        unread = RebuildBench(**values, floor_cpu_seconds=floor, cpu_seconds=run).report()
        assert _json(unread)["cpu_ratio"] is None and not any(line.startswith("CPU (") for line in unread.splitlines())


def test_rebuild_report_gives_the_jvm_cpu_of_each_phase() -> None:
    values = dict(files=1, capture_bytes=1_000_000, lines=300, floor_seconds=2.0, ingest_seconds=3.0, replay_seconds=2.0, changes=7,
                  sampled_ticks=0, mismatched_ticks=0, oracle_seconds=0.0, driver_python_peak_mb=300.0, driver_jvm_peak_mb=900.0,
                  stages={"ingest: read": 1.0})
    cpu = {"ingest": {"tasks": 3.0, "jit compiler": 1.5, "gc": 0.3, "other": 0.5, "exited threads": 0.0},
           "replay and publish": {"tasks": 2.0, "jit compiler": 1.0, "gc": 0.0, "other": 0.5, "exited threads": 0.5}}
    lines = RebuildBench(**values, jvm_cpu=cpu).report().splitlines()
    start = lines.index("driver JVM CPU by thread (/proc; in local mode the tasks' JVM side is in it, their Python workers are not):")
    assert lines[start + 1:start + 3] == [
        "  ingest: 5.3 s (tasks 3.0, jit compiler 1.5, gc 0.3, other 0.5, exited threads 0.0)",
        "  replay and publish: 4.0 s (tasks 2.0, jit compiler 1.0, gc 0.0, other 0.5, exited threads 0.5)",
    ]
    assert _json("\n".join(lines))["jvm_cpu"] == cpu
    assert not any(line.startswith("driver JVM CPU") for line in RebuildBench(**values).report().splitlines())


def test_serve_report_says_throughput_was_not_measured_without_wrk() -> None:
    """Without ``wrk`` the throughput is unknown: reported as such (null in the JSON), not as 0 req/s."""
    from dataclasses import asdict

    from nsreplay.serving.bench import ServeBench

    bench = ServeBench(warehouse="w", run_id="r", namesrvs=1, interval_rows=10, index_build_seconds=0.1, index_mb=1.0)
    assert "HTTP throughput (wrk): not measured, wrk is not installed" in bench.report().splitlines()
    assert (asdict(bench)["http_baseline_rps"], asdict(bench)["http_route_rps"]) == (None, None)
    measured = ServeBench(warehouse="w", run_id="r", namesrvs=1, interval_rows=10, index_build_seconds=0.1, index_mb=1.0,
                          http_baseline_rps=4000.0, http_route_rps=3000.0, http_route_5xx=0)
    assert any(line.startswith("HTTP throughput (wrk): baseline /v1/namesrvs 4,000 req/s; random historical routes 3,000 req/s")
               for line in measured.report().splitlines())
