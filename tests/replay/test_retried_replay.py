"""A replay stage run again under a run id that has written its window already (an Airflow retry of
the task after its run row was committed, or a cleared task): every write is skipped as done, and
the operator reads that, with the counts the earlier try recorded in ``gold.replay_runs``, not
counts computed now under a line that says they were written. Once the run id is published, the
replay stage says that nothing is left to do.

The stage is run as ``jobs/rebuild_routes.py --stage replay`` runs it (its ``stage`` function, on
the shared Spark session), on a copy of the windowed warehouse, for its fourth window."""

from __future__ import annotations

import re
import shutil

from jobs.rebuild_routes import parse_args, stage
from nsreplay.config import load_settings
from nsreplay.runtime import format_ms
from nsreplay.storage import Warehouse
from schemas.gold import REPLAY_RUNS, REPLAY_TABLES

RUN = "w3"


def run_stage(spark, root: str, ends: list[int], name: str, capsys) -> list[str]:
    """The lines ``--stage name`` of run ``RUN`` prints for the fourth window."""
    args = parse_args(["--warehouse", root, "--from", str(ends[2]), "--to", str(ends[3]), "--run-id", RUN, "--stage", name])
    assert stage(spark, load_settings(), args, None, root) == 0
    return capsys.readouterr().out.splitlines()


def without_seconds(line: str) -> str:
    return re.sub(r"; \d+\.\d s$", "; (seconds)", line)


def test_a_replay_retried_after_it_wrote_says_so_with_the_counts_recorded_then(spark, windowed, tmp_path, capsys) -> None:
    root = str(tmp_path / "wh")
    shutil.copytree(windowed[0], root)
    ends = windowed[1]
    warehouse = Warehouse(root, spark, "delta-rs")

    first = run_stage(spark, root, ends, "replay", capsys)
    assert first[0].startswith(f"replay {RUN}: window up to {format_ms(ends[3])}, resuming from the state at {format_ms(ends[2])}; ")
    assert first[1:] == [f"written, not published: run the quality and publish stages of {RUN}"]
    versions = {spec.name: warehouse.version(spec) for spec in REPLAY_TABLES + (REPLAY_RUNS,)}
    (written_ms,) = [r.written_ms for r in warehouse.read(REPLAY_RUNS).where(f"run_id = '{RUN}'").collect()]

    # the retry: nothing written, and it says so, with what the first try recorded
    said_then = first[0].removeprefix(f"replay {RUN}: ")
    retried = run_stage(spark, root, ends, "replay", capsys)
    assert {spec.name: warehouse.version(spec) for spec in REPLAY_TABLES + (REPLAY_RUNS,)} == versions
    already = f"replay {RUN}: written already, by an earlier try of this run id at {format_ms(written_ms)}"
    assert [without_seconds(line) for line in retried] == [
        without_seconds(f"{already}; nothing written now; as recorded then (gold.replay_runs): {said_then}"),
        f"written, not published: run the quality and publish stages of {RUN}",
    ]

    run_stage(spark, root, ends, "quality", capsys)
    run_stage(spark, root, ends, "publish", capsys)
    # once published, retried again: nothing left to do for the stages after it
    assert [without_seconds(line) for line in run_stage(spark, root, ends, "replay", capsys)] == [
        without_seconds(f"{already}, and published; nothing written now; as recorded then (gold.replay_runs): {said_then}"),
        f"published already: the quality and publish stages of {RUN} have nothing left to do",
    ]
