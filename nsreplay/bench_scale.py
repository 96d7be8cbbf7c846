"""The scaling benchmark: the rebuild of H hours of captures against the rebuild of ``factor`` × H hours.

design.md's goals for growing input: ``factor`` times the hours of input take at most 1.1 × ``factor``
times the end-to-end time (4 × the hours → ≤ 4.4 × the time), and the driver's memory stays flat
(no event data is collected to the driver).

Contract:

* Both captures come from one generator preset and seed; only ``timing.hours`` differs. They are
  written under ``out`` as ``<preset>-<hours>h`` and reused when the manifest there holds the same
  generator config. Incident counts are per window (``nsreplay.generator.config``), so the larger
  capture's registrations, heartbeats and lookups grow with the hours and its incidents do not.
* Each size is rebuilt by ``nsreplay bench rebuild --captures DIR --samples 0`` in a fresh Python
  process with its own JVM, as a scheduled ``spark-submit`` would be: a run in the same process
  as the other size would inherit its warm JVM. The figures are read from the child's ``json:``
  report line: its end to end (ingest + replay + publish; Spark's start and the floor excluded),
  floor, line count and peak RSS.
* With ``rounds`` > 1 the sizes alternate (small, large, large, small, …) so drift on a shared
  machine hits both, and each size keeps its fastest round and its largest peak RSS.
* "Flat" driver memory is judged on the driver's Python process: the larger run's peak RSS at most
  :data:`FLAT_MEMORY_RATIO` times the smaller's. The driver JVM's peak is reported beside it; with a
  local master that JVM is also the executor, bounded by ``spark.driver.memory``, so it is context
  rather than a verdict.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Mapping

#: Time allowed per unit of input growth (design.md: 4 × the hours → ≤ 4.4 × the time).
LINEAR_SLACK = 1.1
#: The larger run's driver Python peak RSS over the smaller's that still counts as flat.
FLAT_MEMORY_RATIO = 1.2


class ScaleBenchError(RuntimeError):
    """A rebuild run of the scaling benchmark failed or printed no report."""


@dataclass(frozen=True)
class ScaleRun:
    """One size's rebuild, as its ``bench rebuild`` report gave it (best round)."""

    hours: float
    captures: str
    files: int
    lines: int
    capture_bytes: int
    floor_seconds: float
    end_to_end_seconds: float
    driver_python_peak_mb: float
    driver_jvm_peak_mb: float | None


@dataclass(frozen=True)
class ScaleBench:
    factor: float
    rounds: int
    small: ScaleRun
    large: ScaleRun

    @property
    def time_ratio(self) -> float:
        return self.large.end_to_end_seconds / self.small.end_to_end_seconds

    @property
    def time_goal(self) -> float:
        return LINEAR_SLACK * self.factor

    @property
    def lines_ratio(self) -> float:
        return self.large.lines / self.small.lines if self.small.lines else float("inf")

    @property
    def floor_ratio(self) -> float:
        return self.large.floor_seconds / self.small.floor_seconds if self.small.floor_seconds else float("inf")

    @property
    def marginal_ratio(self) -> float:
        """What the added input cost end to end over what it cost the floor: the two runs' differences
        (their fixed costs, such as the JVM's warm-up, cancel out)."""
        added_floor = self.large.floor_seconds - self.small.floor_seconds
        added = self.large.end_to_end_seconds - self.small.end_to_end_seconds
        return added / added_floor if added_floor > 0 else float("inf")

    @property
    def python_memory_ratio(self) -> float:
        return self.large.driver_python_peak_mb / self.small.driver_python_peak_mb

    @property
    def linear(self) -> bool:
        return self.time_ratio <= self.time_goal

    @property
    def flat_memory(self) -> bool:
        return self.python_memory_ratio <= FLAT_MEMORY_RATIO

    def report(self) -> str:
        def row(run: ScaleRun) -> str:
            return (
                f"{run.hours:g} h: {run.files} files, {run.capture_bytes / 1e6:,.1f} MB on disk, {run.lines:,} lines; "
                f"end to end {run.end_to_end_seconds:.1f} s ({run.lines / run.end_to_end_seconds:,.0f} events/s), floor {run.floor_seconds:.1f} s; "
                f"peak RSS driver python {run.driver_python_peak_mb:.0f} MB, driver JVM {run.driver_jvm_peak_mb or 0:.0f} MB"
            )

        def verdict(ok: bool) -> str:
            return "met" if ok else "NOT met"

        jvm = (f"{self.large.driver_jvm_peak_mb / self.small.driver_jvm_peak_mb:.2f}"
               if self.large.driver_jvm_peak_mb and self.small.driver_jvm_peak_mb else "n/a")
        return "\n".join(
            [
                f"each size rebuilt by `nsreplay bench rebuild --samples 0` in a fresh process; best of {self.rounds} round(s), alternating",
                row(self.small),
                row(self.large),
                f"input x{self.factor:g} in hours (x{self.lines_ratio:.2f} in lines) -> end to end x{self.time_ratio:.2f} "
                f"(goal <= {self.time_goal:.2f}: {verdict(self.linear)}); floor x{self.floor_ratio:.2f}",
                f"the added input: end to end +{self.large.end_to_end_seconds - self.small.end_to_end_seconds:.1f} s, "
                f"floor +{self.large.floor_seconds - self.small.floor_seconds:.1f} s: marginal ratio {self.marginal_ratio:.2f} "
                f"(each run's fixed cost cancels out; bench rebuild's ratio includes it)",
                f"driver python peak RSS x{self.python_memory_ratio:.2f} (flat: goal <= {FLAT_MEMORY_RATIO:.2f}: {verdict(self.flat_memory)}); "
                f"driver JVM x{jvm} (local master: also the executor, bounded by spark.driver.memory)",
                "json: " + json.dumps({**asdict(self), "time_ratio": round(self.time_ratio, 3), "lines_ratio": round(self.lines_ratio, 3),
                                       "marginal_ratio": round(self.marginal_ratio, 3),
                                       "python_memory_ratio": round(self.python_memory_ratio, 3), "linear": self.linear,
                                       "flat_memory": self.flat_memory}),
            ]
        )


def report_json(output: str) -> dict:
    """The object of the last ``json:`` line of a benchmark's printed report."""
    lines = [line for line in output.splitlines() if line.startswith("json: ")]
    if not lines:
        raise ScaleBenchError("the rebuild printed no 'json:' report line")
    return json.loads(lines[-1][len("json: "):])


def run_from_report(hours: float, captures: str, report: Mapping[str, object]) -> ScaleRun:
    """One size's figures from a ``bench rebuild`` json report."""
    return ScaleRun(
        hours=hours,
        captures=captures,
        files=int(report["files"]),
        lines=int(report["lines"]),
        capture_bytes=int(report["capture_bytes"]),
        floor_seconds=float(report["floor_seconds"]),
        end_to_end_seconds=float(report["ingest_seconds"]) + float(report["replay_seconds"]),
        driver_python_peak_mb=float(report["driver_python_peak_mb"]),
        driver_jvm_peak_mb=None if report.get("driver_jvm_peak_mb") is None else float(report["driver_jvm_peak_mb"]),
    )


def best_of(runs: list[ScaleRun]) -> ScaleRun:
    """The fastest round, with the largest peak RSS seen over all rounds."""
    fastest = min(runs, key=lambda r: r.end_to_end_seconds)
    jvm = [r.driver_jvm_peak_mb for r in runs if r.driver_jvm_peak_mb is not None]
    return ScaleRun(**{**asdict(fastest), "driver_python_peak_mb": max(r.driver_python_peak_mb for r in runs),
                       "driver_jvm_peak_mb": max(jvm) if jvm else None})


def round_order(rounds: int) -> list[int]:
    """Which size runs when (0 small, 1 large): small, large, then large, small, … alternating."""
    order: list[int] = []
    for i in range(rounds):
        order += [0, 1] if i % 2 == 0 else [1, 0]
    return order


def rebuild_in_fresh_process(captures: str, master: str | None = None) -> str:
    """``nsreplay bench rebuild --captures DIR --samples 0`` in a new Python process (its own JVM);
    its standard output. Spark's log goes to this process's standard error."""
    command = [sys.executable, "-m", "nsreplay.cli", "bench", "rebuild", "--captures", captures, "--samples", "0"]
    if master:
        command += ["--master", master]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        tail = "\n".join(done.stdout.splitlines()[-20:])
        raise ScaleBenchError(f"the rebuild of {captures} failed (exit {done.returncode}): {' '.join(command)}\n{tail}")
    return done.stdout


def capture_of(preset_name: str, hours: float, out: Path, *, seed: int | None = None) -> Path:
    """The capture of ``preset_name`` with ``timing.hours`` (and ``seed``) set, under ``out``; written
    unless a capture of the very same generator config is there already."""
    from nsreplay.generator import apply_overrides, generate, preset
    from nsreplay.generator.config import config_to_dict

    overrides: dict[str, object] = {"timing.hours": hours}
    if seed is not None:
        overrides["seed"] = seed
    config = apply_overrides(preset(preset_name), overrides)
    target = out / f"{preset_name}-{hours:g}h"
    manifest = target / "_manifest.json"
    wanted = json.loads(json.dumps(config_to_dict(config)))
    if not manifest.is_file() or json.loads(manifest.read_text()).get("config") != wanted:
        print(generate(config, target).describe(), flush=True)
    return target


def bench_scale(
    preset_name: str,
    hours: float,
    *,
    factor: float = 4.0,
    out: Path,
    rounds: int = 1,
    seed: int | None = None,
    rebuild: Callable[[str], str] | None = None,
) -> ScaleBench:
    """Rebuild ``hours`` and ``factor`` × ``hours`` of ``preset_name`` and compare them (see module
    docstring). ``rebuild`` maps a capture directory to a ``bench rebuild`` report (default: a fresh
    process, :func:`rebuild_in_fresh_process`)."""
    if hours <= 0 or factor <= 1:
        raise ValueError(f"need hours > 0 and factor > 1 (got hours={hours}, factor={factor})")
    if rounds < 1:
        raise ValueError(f"need at least one round (got {rounds})")
    run = rebuild or rebuild_in_fresh_process
    sizes = [hours, hours * factor]
    captures = [str(capture_of(preset_name, h, out, seed=seed)) for h in sizes]
    results: list[list[ScaleRun]] = [[], []]
    for size in round_order(rounds):
        print(f"rebuilding {captures[size]} ({sizes[size]:g} h)", flush=True)
        results[size].append(run_from_report(sizes[size], captures[size], report_json(run(captures[size]))))
    return ScaleBench(factor=factor, rounds=rounds, small=best_of(results[0]), large=best_of(results[1]))


__all__ = ["FLAT_MEMORY_RATIO", "LINEAR_SLACK", "ScaleBench", "ScaleBenchError", "ScaleRun", "bench_scale", "capture_of",
           "rebuild_in_fresh_process", "report_json", "run_from_report"]
