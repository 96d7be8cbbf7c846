"""A window whose gold quality check failed, run again under its run id once the cause is fixed (an
Airflow task cleared with its downstream: the same run id), is replayed, checked and published as if
the failed attempt had never run; run again while the cause is still there, it fails again and
publishes nothing; once published, the run id run again changes nothing. The failed attempts' quality
results stay in ``silver.quality_results``, each with its attempt number.

The cause is a replay defect (a release that writes one scan tick twice, which the ``gold.run`` suite
refuses), fixed by the next release: the gold suites check the replay's own invariants, and no
setting makes a sound replay fail them. The reference is the same window replayed once, cleanly,
under the same run id. Tables are compared whole (chispa), without the ``run_id`` bookkeeping column.
"""

from __future__ import annotations

import shutil

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import pipelines.replay.run as replay_run
from nsreplay.config import load_settings
from nsreplay.runtime import local_frame
from nsreplay.storage import Warehouse
from pipelines.quality.suites import QualityReport
from pipelines.replay.attempts import latest_attempt
from pipelines.replay.run import (
    GoldQualityError,
    PublishRefusedError,
    check_window,
    latest_publish,
    publish_window,
    replay_window,
    run_replay,
)
from published import assert_same_history
from schemas.gold import PUBLISH_LOG, REPLAY_RUNS, REPLAY_TABLES, STALE_WINDOWS
from schemas.silver import QUALITY_RESULTS

RUN = "w3"  # the run id of the windowed warehouse's fourth window, as its scheduler would name it
TABLES = REPLAY_TABLES + (REPLAY_RUNS, PUBLISH_LOG, QUALITY_RESULTS, STALE_WINDOWS)


def window(ends: list[int]) -> dict[str, int]:
    return {"window_from": ends[2], "window_to": ends[3]}


def with_defect(monkeypatch) -> None:
    """A replay release whose scan ticks hold one tick twice (the ``gold.run`` suite's duplicate_ticks)."""
    real = replay_run.scan_ticks

    def doubled(*args, **kwargs) -> DataFrame:
        ticks = real(*args, **kwargs)
        return ticks.unionByName(ticks.orderBy("namesrv", "tick_ts").limit(1))

    monkeypatch.setattr(replay_run, "scan_ticks", doubled)


def copy_of(windowed: tuple[str, list[int]], directory) -> Warehouse:
    root, _ = windowed
    shutil.copytree(root, directory / "wh")
    return Warehouse(str(directory / "wh"), None, "delta-rs")


@pytest.fixture(scope="module")
def reference(spark, windowed, tmp_path_factory) -> Warehouse:
    """The fourth window replayed, checked and published once, cleanly, under ``RUN``."""
    warehouse = copy_of(windowed, tmp_path_factory.mktemp("failed-gold-reference"))
    run_replay(spark, Warehouse(warehouse.root, spark, "delta-rs"), load_settings(), RUN, **window(windowed[1]))
    return Warehouse(warehouse.root, spark, "delta-rs")


def attempt(spark, warehouse: Warehouse, ends: list[int], whole: bool) -> QualityReport:
    """One run of the window under ``RUN``: the three stages one by one, as the scheduler runs them
    (publish only after a passed check), or ``run_replay``. Returns the check's report."""
    if whole:
        try:
            return run_replay(spark, warehouse, load_settings(), RUN, **window(ends)).quality
        except GoldQualityError as exc:
            return exc.report
    replay_window(spark, warehouse, load_settings(), RUN, **window(ends))
    report = check_window(spark, warehouse, RUN)
    if report.passed:
        publish_window(spark, warehouse, RUN)
    return report


def results(spark, rows, attempt_number: int) -> DataFrame:
    """Quality result rows (dicts) as ``silver.quality_results`` rows of attempt ``attempt_number``."""
    return local_frame(spark, [{**r, "attempt": attempt_number} for r in rows], QUALITY_RESULTS.schema)


def run_log(warehouse: Warehouse) -> DataFrame:
    """``gold.replay_runs`` without what differs between two runs of a window (when written, table
    versions, the summary), maps as sorted JSON (sortable)."""
    runs = warehouse.read(REPLAY_RUNS)
    return runs.select("run_id", "window_from", "window_to", F.to_json("namesrvs").alias("namesrvs"),
                       F.to_json(F.array_sort(F.map_entries("row_counts"))).alias("row_counts"))


def versions(warehouse: Warehouse) -> dict[str, int | None]:
    return {spec.name: warehouse.version(spec) for spec in TABLES}


@pytest.mark.parametrize("whole", [False, True], ids=["stage-by-stage", "run_replay"])
def test_a_window_run_again_under_its_run_id_once_its_gold_failure_is_fixed_is_published_as_a_clean_run(
    spark, windowed, reference, tmp_path, monkeypatch, whole
) -> None:
    ends = windowed[1]
    warehouse = Warehouse(copy_of(windowed, tmp_path).root, spark, "delta-rs")
    published = latest_publish(warehouse)

    with_defect(monkeypatch)
    first = attempt(spark, warehouse, ends, whole)
    assert [(r["suite"], r["column"]) for r in first.failures()] == [("gold.run", "duplicate_ticks")]
    with pytest.raises(PublishRefusedError) as refused:
        publish_window(spark, warehouse, RUN)
    # run again before the cause is fixed: replayed anew, refused again, nothing published
    second = attempt(spark, warehouse, ends, whole)
    assert not second.passed
    with pytest.raises(PublishRefusedError):
        publish_window(spark, warehouse, RUN)
    assert latest_publish(warehouse) == published

    monkeypatch.undo()  # the fixed release
    third = attempt(spark, warehouse, ends, whole)

    assert third.passed
    assert latest_publish(warehouse).run_id == RUN
    assert latest_publish(warehouse).coverage == latest_publish(reference).coverage
    # the latest versions, which are the published ones, hold no row of the failed attempts
    assert_same_history(reference, warehouse)
    published_now = latest_publish(warehouse).versions
    for spec in REPLAY_TABLES:
        assert warehouse.version(spec) == published_now[spec.name]
    # one run row per run id: the failed attempts' rows are gone with their writes
    assert_df_equality(run_log(reference), run_log(warehouse), ignore_row_order=True, ignore_nullable=True)
    # every check that ran stays on record, each with its attempt; the last one is the clean run's
    clean = [r.asDict() for r in reference.read(QUALITY_RESULTS).where(F.col("run_id") == RUN).drop("attempt").collect()]
    expected = results(spark, first.rows, 1).unionByName(results(spark, second.rows, 2)).unionByName(results(spark, clean, 3))
    assert_df_equality(expected, warehouse.read(QUALITY_RESULTS).where(F.col("run_id") == RUN), ignore_row_order=True, ignore_nullable=True)

    # the refusal said what to do
    assert "once the cause is fixed, run its replay stage again" in str(refused.value)

    # published: the same run id again changes nothing
    before = versions(warehouse)
    assert attempt(spark, warehouse, ends, whole).passed
    assert versions(warehouse) == before


def test_a_first_window_run_again_after_its_gold_check_failed_is_published_as_a_clean_run(spark, windowed, tmp_path, monkeypatch) -> None:
    """Nothing published yet: the failed attempt's gold writes are put back all the same (to the
    versions before them), so the run again publishes only its own rows."""
    root, ends = windowed
    for directory in ("clean", "rerun"):
        shutil.copytree(root, tmp_path / directory)
    clean, rerun = (Warehouse(str(tmp_path / d), spark, "delta-rs") for d in ("clean", "rerun"))
    for warehouse in (clean, rerun):  # a warehouse with the ingest only: nothing replayed, nothing published
        for spec in REPLAY_TABLES + (REPLAY_RUNS, PUBLISH_LOG, STALE_WINDOWS, QUALITY_RESULTS):
            shutil.rmtree(warehouse.path(spec), ignore_errors=True)
    run_replay(spark, clean, load_settings(), "first", window_to=ends[0])

    with_defect(monkeypatch)
    with pytest.raises(GoldQualityError):
        run_replay(spark, rerun, load_settings(), "first", window_to=ends[0])
    assert latest_publish(rerun) is None
    monkeypatch.undo()
    run_replay(spark, rerun, load_settings(), "first", window_to=ends[0])

    assert_same_history(clean, rerun)
    assert latest_publish(rerun).coverage == latest_publish(clean).coverage


def test_the_latest_attempt_of_a_run_id_is_told_from_the_run_log_commits() -> None:
    def commit(run_id, job, version):
        return {"run_id": run_id, "job": job, "version": version}

    newest_first = [
        commit("other", "replay", 9),
        commit("r", "replay/discard-failed@3", 8),   # attempt 3 discarded attempt 2's run row...
        commit("r", "replay@2", 6),                  # ...written here
        commit("r", "replay/discard-failed@2", 5),
        commit("r", "replay", 3),
        commit(None, None, 0),
    ]
    assert latest_attempt(newest_first, "r") == (3, False)  # attempt 3 has not written its run row yet
    assert latest_attempt(newest_first[2:], "r") == (2, True)
    assert latest_attempt(newest_first[4:], "r") == (1, True)
    assert latest_attempt(newest_first, "other") == (1, True)
    assert latest_attempt(newest_first, "new") is None
