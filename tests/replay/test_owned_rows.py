"""What each gold table's slice of a window is (``owned_rows``): a range of one integer data column,
so that the window's writes and reads can skip the files of other windows by their statistics. The
window tests (test_windows.py) check that these slices add up to one run over the whole range."""

from __future__ import annotations

from pyspark.sql import types as T

from pipelines.replay.run import owned_rows
from pipelines.replay.windows import Window
from schemas.gold import INTERVAL_TABLES, NAMESRV_EPOCHS, REPLAY_STATE, REPLAY_TABLES, ROUTE_CHANGES

MIDDLE, LATEST, FIRST_AND_ONLY = Window(100, 200, latest=False), Window(100, 200, latest=True), Window(None, 200, latest=True)


def test_every_gold_table_has_a_slice_on_an_integer_data_column_the_files_have_statistics_of() -> None:
    for window in (MIDDLE, LATEST):
        owned = owned_rows(window)
        assert set(owned) == {spec.name for spec in REPLAY_TABLES}
        for spec in REPLAY_TABLES:
            if spec is NAMESRV_EPOCHS:  # one row per (re)start: rewritten whole
                assert owned[spec.name] is None
                continue
            column = owned[spec.name].column
            assert column not in spec.partition_by, spec.name  # partition columns are not in the files' statistics
            assert isinstance(spec.schema[column].dataType, (T.LongType, T.IntegerType)), spec.name


def test_the_slices_are_the_windows_ownership_rules() -> None:
    intervals = INTERVAL_TABLES["topicQueueTable"].name
    assert owned_rows(MIDDLE)[ROUTE_CHANGES.name].sql() == "`ts` > 100 AND `ts` <= 200"
    assert owned_rows(LATEST)[ROUTE_CHANGES.name].sql() == "`ts` > 100"  # and what a killed later run left
    assert owned_rows(MIDDLE)[intervals].sql() == "`valid_to` > 100 AND `valid_to` <= 200"  # ended inside
    assert owned_rows(LATEST)[intervals].sql() == "(`valid_to` IS NULL OR (`valid_to` > 100))"  # and still open
    for window in (MIDDLE, LATEST, FIRST_AND_ONLY):
        assert owned_rows(window)[REPLAY_STATE.name].sql() == "`window_to` > 199 AND `window_to` <= 200"
    first = owned_rows(FIRST_AND_ONLY)
    assert {name for name, owned in first.items() if owned is not None} == {REPLAY_STATE.name}  # the rest: whole tables
