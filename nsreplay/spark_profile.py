"""Where a benchmark's time went: Spark stages and their task seconds, read from a Spark event log.

A run started with ``spark.eventLog.enabled=true`` leaves one JSON event per line in
``<eventLog.dir>/eventlog_v2_<app id>/events_*`` (or a single file, for the v1 layout). This module
turns those events into :class:`StageCost` rows and assigns every stage to the benchmark phase that was
running when the stage was submitted (:func:`phase_costs`), so a report can say which pipeline step
and which Spark operators used the executors' time.

Task seconds are the sum of the stage's task durations (launch to finish): they include the Python
workers of ``mapInArrow`` / ``applyInArrow`` stages, which ``executorCpuTime`` (JVM threads only)
does not. With ``n`` task slots, a phase whose task seconds are ``n`` times its wall seconds kept
every slot busy.

Pure functions over event dicts; :func:`read_event_log` is the only I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Mapping

_HIDDEN_OPERATORS = ("WholeStageCodegen", "AdaptiveSparkPlan", "CollectMetrics", "MapPartitionsRDD", "mapPartitionsInternal")


@dataclass(frozen=True)
class StageCost:
    """One completed stage attempt: when it was submitted (epoch ms), how many tasks ran, the sum of
    their durations and of their JVM CPU time (seconds), and the Spark operators it ran."""

    stage_id: int
    submitted_ms: int
    tasks: int
    task_seconds: float
    jvm_cpu_seconds: float
    operators: tuple[str, ...]


def read_event_log(path: str | Path) -> Iterator[dict]:
    """The events of a Spark event log: a file, or an ``eventlog_v2_*`` directory (its ``events_*``
    files in order), or a directory holding exactly one of those."""
    root = Path(path)
    if root.is_dir():
        runs = sorted(root.glob("eventlog_v2_*"))
        if len(runs) > 1:
            raise ValueError(f"{root} holds {len(runs)} event logs; give one of them: {', '.join(r.name for r in runs)}")
        folder = runs[0] if runs else root
        files = sorted(folder.glob("events_*"), key=lambda p: int(p.name.split("_")[1]) if p.name.split("_")[1].isdigit() else 0)
        if not files:
            raise ValueError(f"no Spark event log under {root}")
    else:
        files = [root]
    for file in files:
        with open(file, encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    yield json.loads(line)


def _operators(stage_info: Mapping) -> tuple[str, ...]:
    names = set()
    for rdd in stage_info.get("RDD Info", ()):
        scope = rdd.get("Scope")
        if scope:
            names.add(json.loads(scope).get("name", "").strip())
    return tuple(sorted(n for n in names if n and not n.startswith(_HIDDEN_OPERATORS)))


def stage_costs(events: Iterable[Mapping]) -> list[StageCost]:
    """Every completed stage attempt of the log, in submission order."""
    task_seconds: dict[tuple[int, int], float] = {}
    cpu_seconds: dict[tuple[int, int], float] = {}
    tasks: dict[tuple[int, int], int] = {}
    done: dict[tuple[int, int], tuple[int, tuple[str, ...]]] = {}
    for event in events:
        kind = event.get("Event")
        if kind == "SparkListenerTaskEnd":
            key = (event["Stage ID"], event.get("Stage Attempt ID", 0))
            info = event["Task Info"]
            task_seconds[key] = task_seconds.get(key, 0.0) + (info["Finish Time"] - info["Launch Time"]) / 1000
            cpu_seconds[key] = cpu_seconds.get(key, 0.0) + (event.get("Task Metrics") or {}).get("Executor CPU Time", 0) / 1e9
            tasks[key] = tasks.get(key, 0) + 1
        elif kind == "SparkListenerStageCompleted":
            info = event["Stage Info"]
            key = (info["Stage ID"], info.get("Stage Attempt ID", 0))
            done[key] = (info.get("Submission Time", 0), _operators(info))
    costs = [
        StageCost(stage, submitted, tasks.get((stage, attempt), 0), round(task_seconds.get((stage, attempt), 0.0), 3),
                  round(cpu_seconds.get((stage, attempt), 0.0), 3), operators)
        for (stage, attempt), (submitted, operators) in done.items()
    ]
    return sorted(costs, key=lambda c: (c.submitted_ms, c.stage_id))


def phase_costs(costs: Iterable[StageCost], phases: Iterable[tuple[str, int, int]]) -> dict[str, list[StageCost]]:
    """The stages of each phase ``(name, start_ms, end_ms)``: those submitted in ``[start, end)``;
    a stage submitted outside every phase goes under ``"other"``."""
    spans = list(phases)
    out: dict[str, list[StageCost]] = {name: [] for name, _, _ in spans}
    for cost in costs:
        name = next((n for n, lo, hi in spans if lo <= cost.submitted_ms < hi), "other")
        out.setdefault(name, []).append(cost)
    return out


def report(by_phase: Mapping[str, list[StageCost]], *, top: int = 5) -> str:
    """Per phase: stages, tasks, task and JVM CPU seconds; then its ``top`` stages by task seconds."""
    lines = ["task seconds by phase (Spark event log; task seconds include Python workers, JVM CPU does not):"]
    for name, costs in by_phase.items():
        if not costs:
            continue
        total = sum(c.task_seconds for c in costs)
        lines.append(
            f"  {name}: {total:.1f} task s in {len(costs)} stages, {sum(c.tasks for c in costs)} tasks; "
            f"JVM CPU {sum(c.jvm_cpu_seconds for c in costs):.1f} s"
        )
        for c in sorted(costs, key=lambda c: -c.task_seconds)[:top]:
            share = 100 * c.task_seconds / total if total else 0.0
            lines.append(f"    stage {c.stage_id}: {c.task_seconds:.1f} task s ({share:.0f} %), {c.tasks} tasks: {', '.join(c.operators) or '-'}")
    return "\n".join(lines)


__all__ = ["StageCost", "phase_costs", "read_event_log", "report", "stage_costs"]
