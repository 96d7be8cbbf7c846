"""The Warehouse on the native delta-spark backend.

Needs the delta-spark jars in the driver JVM. This machine cannot fetch them (no Maven Central), so these
tests skip here; run them with ``NSREPLAY_DELTA=spark`` on a machine that can (tests/storage/conftest.py
then starts the test SparkSession with ``--packages io.delta:delta-spark_2.13:4.0.0``).
"""

from __future__ import annotations

import datetime as dt
import os

import pytest
from chispa import assert_df_equality
from pyspark.sql import types as T

from nsreplay.storage import (
    CommitInfo,
    PredicateViolationError,
    SchemaMismatchError,
    TableSpec,
    VersionNotFoundError,
    Warehouse,
    native_delta_available,
)

pytestmark = pytest.mark.native_delta

SKIP_REASON = (
    "delta-spark jars (io.delta) are not on the classpath; run with NSREPLAY_DELTA=spark on a machine that can "
    "fetch them"
)

D1, D2 = dt.date(2024, 11, 21), dt.date(2024, 11, 22)

EVENTS = TableSpec(
    "silver.events",
    T.StructType(
        [
            T.StructField("namesrv", T.StringType(), False),
            T.StructField("date", T.DateType(), True),
            T.StructField("ts", T.LongType(), False),
            T.StructField("code", T.IntegerType(), True),
        ]
    ),
    partition_by=("namesrv", "date"),
)
ROWS = [("10.0.0.1:9876", D1, 1, 105), ("10.0.0.1:9876", D2, 2, 103), ("50%", D1, 3, 105), ("007", None, 4, 104)]


@pytest.fixture
def native(spark, warehouse_root: str) -> Warehouse:
    if not native_delta_available(spark):
        pytest.skip(SKIP_REASON)
    warehouse = Warehouse(warehouse_root, spark, backend="delta-spark")
    assert warehouse.backend_name == "delta-spark"
    return warehouse


def events(spark, rows):
    return spark.createDataFrame(rows, EVENTS.schema)


def same(actual, expected) -> None:
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_native_is_auto_selected(spark, warehouse_root: str, native: Warehouse) -> None:
    assert Warehouse(warehouse_root, spark).backend_name == "delta-spark"


def test_native_create_append_read_and_idempotency(spark, native: Warehouse) -> None:
    native.ensure(EVENTS)
    native.ensure(EVENTS)
    assert native.version(EVENTS) == 0
    same(native.read(EVENTS), events(spark, []))
    df = events(spark, ROWS)
    assert native.append(EVENTS, df, CommitInfo(run_id="r1", job="ingest")) == 1
    assert native.append(EVENTS, df, CommitInfo(run_id="r1", job="ingest")) is None
    assert native.committed(EVENTS, CommitInfo(run_id="r1", job="ingest"))
    same(native.read(EVENTS), df)
    files = native.files(EVENTS)
    assert sum(f.num_records or 0 for f in files) == len(ROWS)
    assert {f.partition_values["namesrv"] for f in files} == {"10.0.0.1:9876", "50%", "007"}


def test_native_schema_mismatch_and_not_null(spark, native: Warehouse) -> None:
    wrong = spark.createDataFrame([("x", D1, 1, "5")], "namesrv string, date date, ts bigint, code string")
    with pytest.raises(SchemaMismatchError, match="column 'code': expected int, got string"):
        native.append(EVENTS, wrong, CommitInfo(run_id="r1", job="ingest"))
    nullable = T.StructType([T.StructField(f.name, f.dataType, True) for f in EVENTS.schema.fields])
    with pytest.raises(SchemaMismatchError, match="column 'ts' is NOT NULL"):
        native.append(EVENTS, spark.createDataFrame([("x", D1, None, 1)], nullable), CommitInfo(run_id="r2", job="ingest"))
    assert native.version(EVENTS) == 0


def test_native_overwrite_time_travel_and_history(spark, native: Warehouse) -> None:
    native.append(EVENTS, events(spark, ROWS), CommitInfo(run_id="r1", job="ingest", window_from=1, window_to=2))
    replacement = [("10.0.0.1:9876", D1, 9, 105)]
    assert native.overwrite(
        EVENTS, events(spark, replacement), CommitInfo(run_id="r2", job="repair"), partitions={"namesrv": "10.0.0.1:9876"}
    ) == 2
    same(native.read(EVENTS), events(spark, replacement + ROWS[2:]))
    assert native.overwrite(EVENTS, events(spark, [("50%", D1, 10, 105)]), CommitInfo(run_id="r3", job="repair"),
                            where="code = 105") == 3
    same(native.read(EVENTS), events(spark, [("50%", D1, 10, 105), ROWS[3]]))
    with pytest.raises(PredicateViolationError):
        native.overwrite(EVENTS, events(spark, [("x", D1, 11, 1)]), CommitInfo(run_id="r4", job="repair"), where="code = 105")
    same(native.read(EVENTS, version=1), events(spark, ROWS))
    stamps = {h["version"]: h["timestamp"] for h in native.history(EVENTS)}
    same(native.read(EVENTS, timestamp=stamps[1]), events(spark, ROWS))
    with pytest.raises(VersionNotFoundError):
        native.read(EVENTS, version=99)
    history = native.history(EVENTS)
    assert [h["version"] for h in history] == [3, 2, 1, 0]
    assert (history[2]["run_id"], history[2]["job"], history[2]["window_from"], history[2]["window_to"]) == ("r1", "ingest", 1, 2)
    assert history[1]["mode"] == "overwrite" and history[1]["job"] == "repair"


def test_native_restore_is_one_commit_and_idempotent(spark, native: Warehouse) -> None:
    native.append(EVENTS, events(spark, ROWS[:2]), CommitInfo(run_id="r1", job="ingest"))
    native.append(EVENTS, events(spark, ROWS[2:]), CommitInfo(run_id="r2", job="replay"))
    fix = CommitInfo(run_id="r3", job="replay/discard-unpublished")
    assert native.restore(EVENTS, 1, fix) == 3
    same(native.read(EVENTS), events(spark, ROWS[:2]))
    newest = native.history(EVENTS, limit=1)[0]
    assert (newest["operation"], newest["mode"], newest["run_id"], newest["job"]) == ("RESTORE", "restore", "r3", fix.job)
    assert native.restore(EVENTS, 1, fix) is None
    assert native.version(EVENTS) == 3


def test_native_vacuum_keeps_a_kept_versions_files_by_stretching_its_retention(spark, native: Warehouse) -> None:
    native.append(EVENTS, events(spark, ROWS[:2]), CommitInfo(run_id="r1", job="ingest"))  # version 1
    native.overwrite(EVENTS, events(spark, ROWS[2:]), CommitInfo(run_id="r2", job="repair"))  # removes its files
    first = {os.path.relpath(p, native.path(EVENTS)) for p in native.file_uris(EVENTS, 1)}
    # delta-spark cannot be told to keep version 1: the retention reaches back past the commit after it
    assert native.vacuum(EVENTS, retention_hours=0, keep_versions=(1,)).files == ()
    assert set(native.vacuum(EVENTS, retention_hours=0).files) == first
    done = native.vacuum(EVENTS, retention_hours=0, dry_run=False, commit=CommitInfo(run_id="v", job="vacuum"))
    assert set(done.files) == first and not any(os.path.exists(os.path.join(native.path(EVENTS), f)) for f in first)
    same(native.read(EVENTS), events(spark, ROWS[2:]))
