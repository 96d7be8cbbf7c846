"""A replay stage run again under a run id that has written its window already (an Airflow retry of
the task after its run row was committed, or a cleared task): every write is skipped as done, and
the operator reads that, with the counts the earlier try recorded in ``gold.replay_runs``, not
counts computed now under a line that says they were written. Once the run id is published, the
replay stage says that nothing is left to do. Such a retry replays nothing: it answers with the
data files of ``silver.events`` gone, which any replay of the window reads. A try stopped before its
run row (the last of its writes) is replayed again, and records the same counts.

The stage is run as ``jobs/rebuild_routes.py --stage replay`` runs it (its ``stage`` function, on
the shared Spark session), on a copy of the windowed warehouse, for its fourth window."""

from __future__ import annotations

import os
import re
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from jobs.rebuild_routes import parse_args, stage
from nsreplay.config import load_settings
from nsreplay.runtime import format_ms
from nsreplay.storage import Warehouse
from pipelines.replay.run import replay_window
from schemas.gold import REPLAY_RUNS, REPLAY_TABLES
from schemas.silver import EVENTS
from stopped_runs import killed_before_run_row

RUN = "w3"


def run_stage(spark, root: str, ends: list[int], name: str, capsys) -> list[str]:
    """The lines ``--stage name`` of run ``RUN`` prints for the fourth window."""
    args = parse_args(["--warehouse", root, "--from", str(ends[2]), "--to", str(ends[3]), "--run-id", RUN, "--stage", name])
    assert stage(spark, load_settings(), args, None, root) == 0
    return capsys.readouterr().out.splitlines()


def without_seconds(line: str) -> str:
    return re.sub(r"; \d+\.\d s$", "; (seconds)", line)


@contextmanager
def events_unreadable(warehouse: Warehouse, aside: Path) -> Iterator[None]:
    """Every data file of ``silver.events`` moved to ``aside`` (its log left as is), and back after:
    a replay of any window reads some of them, so one that runs meanwhile fails."""
    files = [Path(f) for f in warehouse.file_uris(EVENTS)]
    assert files
    aside.mkdir()
    moved = [(f, aside / f"{i}.parquet") for i, f in enumerate(files)]
    for src, dst in moved:
        os.replace(src, dst)
    try:
        yield
    finally:
        for src, dst in moved:
            os.replace(dst, src)


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

    # the retry: nothing replayed (silver.events cannot be read), nothing written, and it says so,
    # with what the first try recorded
    said_then = first[0].removeprefix(f"replay {RUN}: ")
    with events_unreadable(warehouse, tmp_path / "aside-1"):
        retried = run_stage(spark, root, ends, "replay", capsys)
    assert {spec.name: warehouse.version(spec) for spec in REPLAY_TABLES + (REPLAY_RUNS,)} == versions
    already = f"replay {RUN}: written already, by an earlier try of this run id at {format_ms(written_ms)}"
    assert [without_seconds(line) for line in retried] == [
        without_seconds(f"{already}; nothing written now; as recorded then (gold.replay_runs): {said_then}"),
        f"written, not published: run the quality and publish stages of {RUN}",
    ]

    run_stage(spark, root, ends, "quality", capsys)
    run_stage(spark, root, ends, "publish", capsys)
    # once published, retried again: nothing replayed, nothing left to do for the stages after it
    with events_unreadable(warehouse, tmp_path / "aside-2"):
        retried = run_stage(spark, root, ends, "replay", capsys)
    assert [without_seconds(line) for line in retried] == [
        without_seconds(f"{already}, and published; nothing written now; as recorded then (gold.replay_runs): {said_then}"),
        f"published already: the quality and publish stages of {RUN} have nothing left to do",
    ]


def test_a_replay_stopped_before_its_run_row_is_replayed_again_by_its_retry(spark, windowed, tmp_path, monkeypatch) -> None:
    """Every gold table written, the run row not (the try was killed in between): the retry is not
    one of a run that wrote its window; it replays the window (its gold writes skipped as done),
    writes the run row, and says what it wrote, as a try never stopped does (on a copy)."""
    ends = windowed[1]
    window = {"window_from": ends[2], "window_to": ends[3]}
    whole = str(tmp_path / "whole")
    shutil.copytree(windowed[0], whole)
    never_stopped = replay_window(spark, Warehouse(whole, spark, "delta-rs"), load_settings(), RUN, **window)

    root = str(tmp_path / "wh")
    shutil.copytree(windowed[0], root)
    warehouse = Warehouse(root, spark, "delta-rs")
    with killed_before_run_row(monkeypatch):
        replay_window(spark, warehouse, load_settings(), RUN, **window)
    gold = {spec.name: warehouse.version(spec) for spec in REPLAY_TABLES}
    assert warehouse.read(REPLAY_RUNS).where(f"run_id = '{RUN}'").count() == 0

    retried = replay_window(spark, warehouse, load_settings(), RUN, **window)
    assert retried.written_before_ms is None
    assert without_seconds(retried.summary()) == without_seconds(never_stopped.summary())
    assert {spec.name: warehouse.version(spec) for spec in REPLAY_TABLES} == gold  # its writes were done: skipped
    assert retried.table_versions == gold
