"""A replay stage run again under a run id that has written its window already (an Airflow retry of
the task after its run row was committed, or a cleared task): every write is skipped as done, and
the operator reads that, with the counts the earlier try recorded in ``gold.replay_runs``, not
counts computed now under a line that says they were written. Once the run id is published, the
replay stage says that nothing is left to do. Such a retry replays nothing: it answers with the
data files of ``silver.events`` gone, which any replay of the window reads (and, before its quality
stage ran, those of ``silver.quality_results``, where it has no results to find). A try stopped before its
run row (the last of its writes) is replayed again, and records the same counts. A run of the run id
that asks another window than the one it wrote (a ``--from`` or ``--to`` of its own, to any stage)
is refused with the window recorded, the window asked and what to do, and changes nothing.
A run id whose try (stopped after gold writes, or after its run row) a run of another id discarded
and then published over is refused at its retry, and changes nothing; one stopped before its first
gold write committed nothing, and its retry replays the window and publishes it.

The stage is run as ``jobs/rebuild_routes.py --stage replay`` runs it (its ``stage`` function, on
the shared Spark session), on a copy of the windowed warehouse, for its fourth window."""

from __future__ import annotations

import os
import re
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame

from jobs.rebuild_routes import parse_args, stage
from nsreplay.config import load_settings
from nsreplay.runtime import format_ms
from nsreplay.storage import TableSpec, Warehouse
from pipelines.replay.run import RunIdSpentError, latest_publish, replay_window, run_replay
from published import plain
from schemas.gold import PUBLISH_LOG, REPLAY_RUNS, REPLAY_TABLES
from schemas.silver import QUALITY_RESULTS
from schemas.silver import EVENTS
from stopped_runs import killed_after_writes, killed_before_run_row, one_writer

RUN = "w3"


def run_stage(spark, root: str, ends: list[int], name: str, capsys) -> list[str]:
    """The lines ``--stage name`` of run ``RUN`` prints for the fourth window."""
    args = parse_args(["--warehouse", root, "--from", str(ends[2]), "--to", str(ends[3]), "--run-id", RUN, "--stage", name])
    assert stage(spark, load_settings(), args, None, root) == 0
    return capsys.readouterr().out.splitlines()


def without_seconds(line: str) -> str:
    return re.sub(r"; \d+\.\d s$", "; (seconds)", line)


@contextmanager
def events_unreadable(warehouse: Warehouse, aside: Path, *specs: TableSpec) -> Iterator[None]:
    """Every data file of ``silver.events`` (and of ``specs``) moved to ``aside`` (the logs left as
    they are), and back after: a replay of any window reads some of them, so one that runs meanwhile
    fails; so does any read of the others."""
    files = [Path(f) for spec in (EVENTS, *specs) for f in warehouse.file_uris(spec)]
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
    # with what the first try recorded; its quality stage has not run, so there are no gold results
    # to look for (silver.quality_results, every run's, cannot be read either)
    said_then = first[0].removeprefix(f"replay {RUN}: ")
    with events_unreadable(warehouse, tmp_path / "aside-1", QUALITY_RESULTS):
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


def stage_with(spark, root: str, name: str, *flags: str) -> int:
    """``jobs/rebuild_routes.py --warehouse root --run-id RUN --stage name`` with ``flags`` (its
    ``stage`` function, on the shared Spark session)."""
    return stage(spark, load_settings(), parse_args(["--warehouse", root, "--run-id", RUN, "--stage", name, *flags]), None, root)


def test_a_run_id_asked_for_another_window_than_it_wrote_is_refused_at_every_stage(spark, windowed, tmp_path, capsys) -> None:
    """The replay stage wrote (ends[2], mid] under the run id. Asked another window — another --to,
    none (up to the last record), another --from, none (from the first record) — the replay stage
    answered with the recorded window as if it were the one asked, and the quality and publish
    stages checked and published it. Each is refused, naming both windows, and writes nothing; the
    window's own flags are still answered, before and after its publish."""
    root = str(tmp_path / "wh")
    shutil.copytree(windowed[0], root)
    ends = windowed[1]
    mid = (ends[2] + ends[3]) // 2
    warehouse = Warehouse(root, spark, "delta-rs")
    own = ["--from", str(ends[2]), "--to", str(mid)]
    assert stage_with(spark, root, "replay", *own) == 0
    recorded = f"run '{RUN}' replayed the window ({format_ms(ends[2])}, {format_ms(mid)}] already, not the window "
    advice = (": a run id replays one window, so it would answer with that one; run the window asked under another run id (--run-id), "
              f"or retry '{RUN}' with --from {format_ms(ends[2])} --to {format_ms(mid)}")
    tables = REPLAY_TABLES + (REPLAY_RUNS, QUALITY_RESULTS, PUBLISH_LOG)

    def refused(name: str, flags: list[str], asked: str) -> None:
        versions = {spec.name: warehouse.version(spec) for spec in tables}
        with pytest.raises(RunIdSpentError) as error:
            stage_with(spark, root, name, *flags)
        assert str(error.value) == f"{recorded}{asked} asked now{advice}"
        assert {spec.name: warehouse.version(spec) for spec in tables} == versions

    last = " (no --to: up to the last record)"
    for replayed in ("written", "published"):
        refused("replay", ["--from", str(ends[2]), "--to", str(ends[3])], f"({format_ms(ends[2])}, {format_ms(ends[3])}]")
        refused("replay", ["--from", str(ends[2])], f"({format_ms(ends[2])}, {format_ms(ends[3])}]{last}")
        refused("replay", ["--from", str(ends[1]), "--to", str(mid)], f"({format_ms(ends[1])}, {format_ms(mid)}]")
        refused("replay", ["--to", str(mid)], f"(the first record, {format_ms(mid)}]")
        refused("replay", [], f"(the first record, {format_ms(ends[3])}]{last}")
        for later in ("quality", "publish"):
            refused(later, ["--from", str(ends[2]), "--to", str(ends[3])], f"({format_ms(ends[2])}, {format_ms(ends[3])}]")
            refused(later, ["--from", str(ends[1])], f"({format_ms(ends[1])}, ...]")
            refused(later, ["--to", str(mid + 1)], f"(..., {format_ms(mid + 1)}]")
        capsys.readouterr()
        # the window's own flags (the end given as ISO-8601, as the refusal names it) are answered as recorded
        assert stage_with(spark, root, "replay", "--from", str(ends[2]), "--to", format_ms(mid)) == 0
        said = capsys.readouterr().out.splitlines()
        assert said[0].startswith(f"replay {RUN}: written already, by an earlier try of this run id at "), said
        assert f"; as recorded then (gold.replay_runs): window up to {format_ms(mid)}, resuming from the state at {format_ms(ends[2])}; " in said[0]
        if replayed == "written":
            assert stage_with(spark, root, "quality", *own) == 0
            assert stage_with(spark, root, "publish") == 0  # no flag asks nothing: the run's own window
            assert capsys.readouterr().out.splitlines()[-1] == f"published run {RUN}: window {format_ms(ends[2])} .. {format_ms(mid)}"


def test_a_retry_asking_another_window_than_its_stopped_try_wrote_is_refused(spark, windowed, tmp_path, monkeypatch) -> None:
    """A try killed after its gold writes for (ends[2], mid], before its run row, retried for
    (ends[2], ends[3]]: its retry skipped every write as done, recorded the asked window and
    published the tables as they were, holding the other window. It is refused, naming the window
    written; the retry of that window then replays it as usual."""
    ends = windowed[1]
    mid = (ends[2] + ends[3]) // 2
    root = str(tmp_path / "wh")
    shutil.copytree(windowed[0], root)
    warehouse = Warehouse(root, spark, "delta-rs")
    with killed_before_run_row(monkeypatch):
        replay_window(spark, warehouse, load_settings(), RUN, window_from=ends[2], window_to=mid)
    gold = {spec.name: warehouse.version(spec) for spec in REPLAY_TABLES + (REPLAY_RUNS,)}
    with pytest.raises(RunIdSpentError) as error:
        replay_window(spark, warehouse, load_settings(), RUN, window_from=ends[2], window_to=ends[3])
    assert re.fullmatch(
        rf"run '{RUN}' stopped after writing gold\.\w+ for the window \({re.escape(format_ms(ends[2]))}, {re.escape(format_ms(mid))}\], "
        rf"not the window \({re.escape(format_ms(ends[2]))}, {re.escape(format_ms(ends[3]))}\] asked now: a retry would keep those writes as "
        rf"done and write the other tables for another window; run the window asked under another run id \(--run-id\), which "
        rf"discards these writes, or retry '{RUN}' with its window \(--from {re.escape(format_ms(ends[2]))} --to {re.escape(format_ms(mid))}\)",
        str(error.value),
    ), str(error.value)
    assert {spec.name: warehouse.version(spec) for spec in REPLAY_TABLES + (REPLAY_RUNS,)} == gold
    retried = replay_window(spark, warehouse, load_settings(), RUN, window_from=ends[2], window_to=mid)
    assert (retried.written_before_ms, retried.resumed_from, retried.window_to) == (None, ends[2], mid)




def published_tables(warehouse: Warehouse) -> dict[str, DataFrame]:
    """Every gold table as the latest publish names it, without run_id (:func:`published.plain`)."""
    versions = latest_publish(warehouse).versions
    return {spec.name: plain(warehouse.read(spec, version=versions[spec.name])) for spec in REPLAY_TABLES}


@pytest.mark.parametrize(("stopped", "other_to"), [
    ("after 3 gold writes", "end"),
    ("after 3 gold writes", "mid"),
    ("after every gold write", "end"),
    ("after its run row", "end"),
])
def test_a_retry_of_a_run_whose_writes_another_run_published_over_is_refused(spark, windowed, tmp_path, monkeypatch, stopped: str,
                                                                              other_to: str) -> None:
    """The run id's try stopped (after some gold writes, after all of them, or after its run row:
    the replay stage done, quality and publish not), then a run of another id replayed the window
    (or a shorter one, up to ``mid``), discarding that try's writes, and published it; then the run
    id is retried (an Airflow retry of its task). Its commits are older than the published versions,
    so the checks of the commits since the publish did not see them: its retry skipped its writes as
    done and published the other run's rows as its own (beside its own, or, other run's window
    being shorter, tables that end at ``mid`` beside tables that end at the window's end); one that
    had written its run row answered as written and had its publish refused with "re-run its replay
    stage", which answers the same again. The replay stage refuses it, and changes nothing."""
    ends = windowed[1]
    mid = (ends[2] + ends[3]) // 2
    window = {"window_from": ends[2], "window_to": ends[3]}
    root = str(tmp_path / "wh")
    shutil.copytree(windowed[0], root)
    warehouse = Warehouse(root, spark, "delta-rs")
    if stopped == "after 3 gold writes":
        with killed_after_writes(monkeypatch, 3):
            replay_window(spark, warehouse, one_writer(), RUN, **window)
    elif stopped == "after every gold write":
        with killed_before_run_row(monkeypatch):
            replay_window(spark, warehouse, load_settings(), RUN, **window)
    else:
        replay_window(spark, warehouse, load_settings(), RUN, **window)
    run_replay(spark, warehouse, load_settings(), "other", window_from=ends[2], window_to=ends[3] if other_to == "end" else mid)
    assert latest_publish(warehouse).run_id == "other"
    tables = REPLAY_TABLES + (REPLAY_RUNS, QUALITY_RESULTS, PUBLISH_LOG)
    versions = {spec.name: warehouse.version(spec) for spec in tables}
    before = published_tables(warehouse)

    with pytest.raises(RunIdSpentError) as error:
        stage_with(spark, root, "replay", "--from", str(ends[2]), "--to", str(ends[3]))
    assert re.fullmatch(
        rf"run '{RUN}' committed to gold\.\w+ before \(a write or a discard\), and run 'other' has published since, over those "
        rf"commits: a retry would skip them as done and publish the table without them, or with the other run's rows; if that "
        rf"publish holds the window asked, nothing is left to do; otherwise run the window under another run id \(--run-id\)",
        str(error.value),
    ), str(error.value)
    assert {spec.name: warehouse.version(spec) for spec in tables} == versions
    assert latest_publish(warehouse).run_id == "other"
    after = published_tables(warehouse)
    for name, df in before.items():
        assert_df_equality(df, after[name], ignore_row_order=True, ignore_nullable=True)


def test_a_retry_of_a_run_stopped_before_its_first_gold_write_replays_over_another_runs_publish(spark, windowed, tmp_path, monkeypatch) -> None:
    """A try stopped before its first gold write committed nothing: a run of another id that
    published the window since leaves its retry nothing to skip, so the retry replays the window
    and publishes it, the same rows as that run's."""
    ends = windowed[1]
    window = {"window_from": ends[2], "window_to": ends[3]}
    root = str(tmp_path / "wh")
    shutil.copytree(windowed[0], root)
    warehouse = Warehouse(root, spark, "delta-rs")
    with killed_after_writes(monkeypatch, 0):
        replay_window(spark, warehouse, one_writer(), RUN, **window)
    run_replay(spark, warehouse, load_settings(), "other", **window)
    before = published_tables(warehouse)
    retried = run_replay(spark, warehouse, load_settings(), RUN, **window)
    assert retried.written_before_ms is None and latest_publish(warehouse).run_id == RUN
    after = published_tables(warehouse)
    for name, df in before.items():
        assert_df_equality(df, after[name], ignore_row_order=True, ignore_nullable=True)
