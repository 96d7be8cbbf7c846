"""cancelled_ticks / cancel_ticks: a window that ends before a restart gives its last change rows the
next tick of a grid the restart cancels; the next window, which sees the start record, nulls them
(with_tick's rule: null when the NameServer restarts first). Grids written out by hand."""

from __future__ import annotations

from chispa import assert_df_equality

from pipelines.replay.history import Epoch, cancel_ticks, cancelled_ticks
from schemas.gold import ROUTE_CHANGES

A, B, C = "10.0.0.1:9876", "10.0.0.2:9876", "10.0.0.3:9876"


def epoch(namesrv: str, start: int, end: int, first_tick: int, interval: int) -> Epoch:
    return Epoch(namesrv, start, end, "rocketmq-5", {}, first_tick, interval)


def test_only_a_start_before_the_next_tick_cancels_it() -> None:
    grid = [
        # A: ticks 1005, 1010, ...; after = 1012, the next tick 1015; restart at 1014 (before it)
        epoch(A, 1000, 1014, 1005, 5), epoch(A, 1014, 2001, 1019, 5),
        # B: restart exactly at the next tick (1015): that tick does not run in the old epoch
        epoch(B, 1000, 1015, 1005, 5), epoch(B, 1015, 2001, 1020, 5),
        # C: restart after the next tick (1016): the tick ran, nothing to cancel
        epoch(C, 1000, 1016, 1005, 5), epoch(C, 1016, 2001, 1021, 5),
    ]
    assert cancelled_ticks(grid, 1012) == {A: (1010, 1014), B: (1010, 1015)}
    # the last epoch of a NameServer ends at the end of the covered range, not at a start
    assert cancelled_ticks([epoch(A, 1000, 1013, 1005, 5)], 1012) == {}
    # before the first tick of an epoch: its first tick is the one a restart can cancel, for every
    # row since the epoch's start (a record at the start's ts, after it, included)
    assert cancelled_ticks([epoch(A, 1000, 1004, 1005, 5), epoch(A, 1004, 2001, 1009, 5)], 1002) == {A: (999, 1004)}
    # a start record at `after` itself belongs to the window that ended there
    assert cancelled_ticks([epoch(A, 1000, 1012, 1005, 5), epoch(A, 1012, 2001, 1017, 5)], 1012) == {}


def test_cancel_ticks_nulls_the_ticks_at_or_after_the_restart_of_rows_before_it(spark) -> None:
    def row(namesrv: str, ts: int, tick: int | None) -> tuple:
        return (namesrv, ts, tick, 0, 1, "brokerLiveTable", "k", "put", None, "{}", "registered", "r")

    rows = [row(A, 1011, 1015), row(A, 1012, 1015), row(A, 1009, 1010), row(B, 1012, 1015), row(C, 1012, 1015)]
    changes = spark.createDataFrame(rows, ROUTE_CHANGES.schema)
    got = cancel_ticks(changes, {A: (1010, 1014), B: (1010, 1015)})
    expected = [row(A, 1011, None), row(A, 1012, None), row(A, 1009, 1010), row(B, 1012, None), row(C, 1012, 1015)]
    assert_df_equality(got, spark.createDataFrame(expected, ROUTE_CHANGES.schema), ignore_row_order=True, ignore_nullable=True)
