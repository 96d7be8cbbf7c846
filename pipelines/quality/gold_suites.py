"""Great Expectations suites over what a replay run wrote to gold, before it may be published.

Three suites, each over the rows the run wrote (``run_id``):

* ``gold.intervals`` — every interval table together: ``valid_from`` set, ``valid_to`` after it
  when set, causes from the known set, and no two intervals of one key overlapping;
* ``gold.route_changes`` — ops, phases and causes from the known sets, a tick at or after the change;
* ``gold.run`` — one row of run-level facts: scan ticks unique per NameServer, and no NameServer
  with change rows but no state rows (``namesrvs_without_state``: the NameServers themselves are
  compared, not their numbers).

A failed suite stops the publish (:func:`pipelines.replay.run.publish_window` refuses the run).
"""

from __future__ import annotations

from functools import reduce
from typing import Mapping

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from nsreplay.runtime import local_frame
from pipelines.quality.suites import QualityReport, _context, _gx, _validate
from schemas.gold import INTERVAL_KEYS, INTERVAL_TABLES, REPLAY_STATE, ROUTE_CHANGES, SCAN_TICKS

START_CAUSES = ("registered", "heartbeat", "admin", "expired", "unregistered", "channel_closed", "namesrv_restart")
CHANGE_CAUSES = START_CAUSES


def _intervals(tables: Mapping[str, DataFrame], run_id: str) -> DataFrame:
    """All interval rows of the run: (table, key, valid_from, valid_to, causes, overlaps_next)."""
    frames = []
    for name in INTERVAL_TABLES.values():
        spec_name = name.name
        keys = INTERVAL_KEYS[spec_name]
        df = tables[spec_name].where(F.col("run_id") == run_id)
        # the key columns themselves: a null part (4.9's live keys have no cluster) is its own value
        nxt = Window.partitionBy("namesrv", *keys).orderBy("valid_from")
        frames.append(
            df.withColumn("_next_from", F.lead("valid_from").over(nxt))
            .select(
                F.lit(spec_name).alias("table"), "valid_from", "valid_to", "start_cause", "end_cause",
                (F.col("_next_from").isNotNull() & (F.col("valid_to").isNull() | (F.col("valid_to") > F.col("_next_from")))).alias("overlaps_next"),
            )
        )
    return reduce(DataFrame.unionByName, frames)


def validate_replay(spark: SparkSession, *, run_id: str, tables: Mapping[str, DataFrame]) -> QualityReport:
    """Validate the gold rows of one replay run; ``passed`` False means: do not publish."""
    gx = _gx()
    context = _context()
    e = gx.expectations
    intervals = _intervals(tables, run_id)
    rows = _validate(
        context,
        "gold.intervals",
        intervals,
        [
            e.ExpectColumnValuesToNotBeNull(column="valid_from"),
            e.ExpectColumnPairValuesAToBeGreaterThanB(column_A="valid_to", column_B="valid_from", ignore_row_if="either_value_is_missing"),
            e.ExpectColumnValuesToBeInSet(column="start_cause", value_set=list(START_CAUSES)),
            e.ExpectColumnValuesToBeInSet(column="end_cause", value_set=list(START_CAUSES)),
            e.ExpectColumnValuesToBeInSet(column="overlaps_next", value_set=[False]),
        ],
        run_id,
    )
    # only the columns the expectations read: the change values (before/after) are most of the bytes
    changes = tables[ROUTE_CHANGES.name].where(F.col("run_id") == run_id).select("namesrv", "op", "phase", "cause", "tick_ts", "ts")
    rows += _validate(
        context,
        "gold.route_changes",
        changes,
        [
            e.ExpectColumnValuesToBeInSet(column="op", value_set=["put", "remove"]),
            e.ExpectColumnValuesToBeInSet(column="phase", value_set=[0, 1]),
            e.ExpectColumnValuesToBeInSet(column="cause", value_set=list(CHANGE_CAUSES)),
            e.ExpectColumnPairValuesAToBeGreaterThanB(column_A="tick_ts", column_B="ts", or_equal=True, ignore_row_if="either_value_is_missing"),
        ],
        run_id,
    )
    ticks = tables[SCAN_TICKS.name].where(F.col("run_id") == run_id)
    duplicate_ticks = ticks.groupBy("namesrv", "tick_ts").count().where(F.col("count") > 1).count()
    states = tables[REPLAY_STATE.name].where(F.col("run_id") == run_id)
    # the NameServers themselves, not their numbers: one with changes and no state is not made good
    # by another with a state and no changes
    without_state = changes.select("namesrv").distinct().join(states.select("namesrv").distinct(), "namesrv", "left_anti").count()
    run = local_frame(
        spark,
        [(int(duplicate_ticks), int(without_state))],
        "duplicate_ticks long, namesrvs_without_state long",
    )
    rows += _validate(
        context,
        "gold.run",
        run,
        [
            e.ExpectColumnValuesToBeBetween(column="duplicate_ticks", min_value=0, max_value=0),
            e.ExpectColumnValuesToBeBetween(column="namesrvs_without_state", min_value=0, max_value=0),
        ],
        run_id,
    )
    return QualityReport(all(r["success"] for r in rows), tuple(rows))


__all__ = ["validate_replay"]
