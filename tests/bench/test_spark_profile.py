"""The event-log profile of a benchmark: stage costs, their phases, the report (no Spark needed)."""

from __future__ import annotations

import json

import pytest

from nsreplay.spark_profile import StageCost, phase_costs, read_event_log, report, stage_costs


def _task(stage: int, launch: int, finish: int, cpu_ns: int, attempt: int = 0) -> dict:
    return {"Event": "SparkListenerTaskEnd", "Stage ID": stage, "Stage Attempt ID": attempt,
            "Task Info": {"Launch Time": launch, "Finish Time": finish}, "Task Metrics": {"Executor CPU Time": cpu_ns}}


def _stage(stage: int, submitted: int, *scopes: str, attempt: int = 0) -> dict:
    rdds = [{"Scope": json.dumps({"id": str(i), "name": name})} for i, name in enumerate(scopes)] + [{"Name": "no scope"}]
    return {"Event": "SparkListenerStageCompleted",
            "Stage Info": {"Stage ID": stage, "Stage Attempt ID": attempt, "Submission Time": submitted, "RDD Info": rdds}}


EVENTS = [
    {"Event": "SparkListenerApplicationStart", "Timestamp": 0},
    _task(1, 1_000, 3_500, 2_000_000_000),
    _task(1, 1_000, 2_000, 500_000_000),
    _stage(1, 1_000, "Scan text ", "WholeStageCodegen (1)", "Exchange"),
    _task(2, 5_000, 9_000, 1_000_000_000),
    _stage(2, 4_900, "FlatMapGroupsInArrow", "AdaptiveSparkPlan", "Window", "Window"),
    _task(3, 9_500, 9_750, 0, attempt=1),
    _stage(3, 9_400, attempt=1),
    _task(4, 20_000, 21_000, 0),  # a stage that never completed (the run was killed): not counted
]


def test_stage_costs_sum_task_durations_per_completed_stage_attempt() -> None:
    assert stage_costs(EVENTS) == [
        StageCost(1, 1_000, 2, 3.5, 2.5, ("Exchange", "Scan text")),
        StageCost(2, 4_900, 1, 4.0, 1.0, ("FlatMapGroupsInArrow", "Window")),
        StageCost(3, 9_400, 1, 0.25, 0.0, ()),
    ]


def test_phases_take_the_stages_submitted_in_their_span() -> None:
    costs = stage_costs(EVENTS)
    by_phase = phase_costs(costs, [("floor", 0, 4_900), ("replay", 4_900, 9_400)])
    assert {name: [c.stage_id for c in stages] for name, stages in by_phase.items()} == {"floor": [1], "replay": [2], "other": [3]}
    text = report(by_phase, top=1)
    assert text.splitlines()[1:] == [
        "  floor: 3.5 task s in 1 stages, 2 tasks; JVM CPU 2.5 s",
        "    stage 1: 3.5 task s (100 %), 2 tasks: Exchange, Scan text",
        "  replay: 4.0 task s in 1 stages, 1 tasks; JVM CPU 1.0 s",
        "    stage 2: 4.0 task s (100 %), 1 tasks: FlatMapGroupsInArrow, Window",
        "  other: 0.2 task s in 1 stages, 1 tasks; JVM CPU 0.0 s",
        "    stage 3: 0.2 task s (100 %), 1 tasks: -",
    ]


def test_read_event_log_reads_the_rolling_layout_in_order(tmp_path) -> None:
    folder = tmp_path / "eventlog_v2_local-1"
    folder.mkdir()
    lines = [json.dumps(e) for e in EVENTS]
    (folder / "events_2_local-1").write_text("\n".join(lines[4:]) + "\n")
    (folder / "events_1_local-1").write_text("\n".join(lines[:4]) + "\n\n")
    (folder / "appstatus_local-1").write_text("")
    assert list(read_event_log(folder)) == EVENTS
    assert list(read_event_log(tmp_path)) == EVENTS  # the one log of a directory
    (tmp_path / "eventlog_v2_local-2").mkdir()
    with pytest.raises(ValueError, match="holds 2 event logs"):
        list(read_event_log(tmp_path))
    single = tmp_path / "local-3"
    single.write_text("\n".join(lines))
    assert stage_costs(read_event_log(single)) == stage_costs(EVENTS)

