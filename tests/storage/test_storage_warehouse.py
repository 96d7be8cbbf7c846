"""The Warehouse on the delta-rs backend (what runs here and in CI), with real Delta tables on disk."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from nsreplay.storage.arrow_types import to_arrow_schema
from nsreplay.storage.deltars_backend import DeltaRsBackend
from table_files import table_files
from nsreplay.storage.spec import nullable_schema
from nsreplay.storage import (
    BackendUnavailableError,
    ColumnRange,
    CommitInfo,
    CompactionResult,
    ConcurrentCommitError,
    DataFile,
    PredicateViolationError,
    SchemaMismatchError,
    StorageError,
    TableNotFoundError,
    TableSpec,
    THINNING_MODE,
    UnsupportedPathError,
    VersionNotFoundError,
    Warehouse,
    dataset,
    native_delta_available,
    range_filter,
)

D1 = dt.date(2024, 11, 21)
D2 = dt.date(2024, 11, 22)

EVENTS = TableSpec(
    name="silver.events",
    schema=T.StructType(
        [
            T.StructField("namesrv", T.StringType(), False),
            T.StructField("date", T.DateType(), True),
            T.StructField("ts", T.LongType(), False),
            T.StructField("code", T.IntegerType(), True),
            T.StructField("body", T.StringType(), True),
        ]
    ),
    partition_by=("namesrv", "date"),
    description="test events",
)

NESTED = TableSpec(
    name="gold.routes",
    schema=T.StructType(
        [
            T.StructField("topic", T.StringType(), False),
            T.StructField(
                "route",
                T.StructType(
                    [
                        T.StructField("broker", T.StringType(), False),
                        T.StructField("queues", T.ArrayType(T.IntegerType()), True),
                    ]
                ),
                True,
            ),
            T.StructField("attrs", T.MapType(T.StringType(), T.StringType()), True),
            T.StructField("valid_from", T.TimestampType(), True),
        ]
    ),
)

ROWS = [
    ("10.0.0.1:9876", D1, 1, 105, "a"),
    ("10.0.0.1:9876", D1, 2, 103, "b"),
    ("10.0.0.1:9876", D2, 3, 105, "c"),
    ("50%", D1, 4, 105, None),
    ("a/b=c", D2, 5, 104, "e"),
    ("007", None, 6, 105, "f"),
]


def events(spark: SparkSession, rows: list[tuple]) -> DataFrame:
    return spark.createDataFrame(rows, EVENTS.schema)


def assert_same(actual: DataFrame, expected: DataFrame) -> None:
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def commit(run_id: str, job: str = "ingest", **kwargs) -> CommitInfo:
    return CommitInfo(run_id=run_id, job=job, **kwargs)


def stored_files(root: str) -> set[str]:
    """Every file below a table root, relative; the Delta log aside. Also checks that no staging is left."""
    assert not os.path.exists(os.path.join(root, "_staging")), "staging directory left behind"
    return set(table_files(root))


def relative_files(wh: Warehouse, version: int) -> set[str]:
    return {os.path.relpath(path, wh.path(EVENTS)) for path in wh.file_uris(EVENTS, version)}


@pytest.fixture
def wh(spark: SparkSession, warehouse_root: str) -> Warehouse:
    warehouse = Warehouse(warehouse_root, spark, backend="delta-rs")
    assert warehouse.backend_name == "delta-rs"
    return warehouse


# -- backend selection, create / ensure -------------------------------------------------------------


def test_auto_selects_delta_rs_without_delta_jars_and_delta_spark_is_refused(spark, warehouse_root) -> None:
    if native_delta_available(spark):
        pytest.skip("delta-spark jars are on the classpath: auto selects the native backend")
    assert Warehouse(warehouse_root, spark).backend_name == "delta-rs"
    with pytest.raises(BackendUnavailableError, match="delta-spark jars"):
        Warehouse(warehouse_root, spark, backend="delta-spark")
    with pytest.raises(ValueError, match="backend must be one of"):
        Warehouse(warehouse_root, spark, backend="parquet")


def test_ensure_creates_the_table_once_with_the_explicit_schema(wh: Warehouse, spark) -> None:
    assert not wh.exists(EVENTS) and wh.version(EVENTS) is None
    wh.ensure(EVENTS)
    wh.ensure(EVENTS)
    assert wh.path(EVENTS) == wh.path("silver.events") == os.path.join(wh.root, "silver", "events")
    assert wh.exists(EVENTS) and wh.version(EVENTS) == 0
    table = DeltaTable(wh.path(EVENTS))
    assert T.StructType.fromJson(json.loads(table.schema().to_json())) == EVENTS.schema
    assert table.metadata().partition_columns == ["namesrv", "date"]
    assert table.metadata().description == "test events"
    assert (table.protocol().min_reader_version, table.protocol().min_writer_version) == (1, 2)
    assert [h["operation"] for h in wh.history(EVENTS)] == ["CREATE TABLE"]


def _dictionary_columns(path: str) -> set[str]:
    """The columns of a Parquet file whose chunks start with a dictionary page."""
    meta = pq.ParquetFile(path).metadata
    return {meta.row_group(g).column(c).path_in_schema for g in range(meta.num_row_groups)
            for c in range(meta.num_columns) if meta.row_group(g).column(c).has_dictionary_page}


def test_distinct_columns_are_written_without_a_dictionary_and_read_back_the_same(wh: Warehouse, spark) -> None:
    plain = TableSpec(EVENTS.name, EVENTS.schema, EVENTS.partition_by, distinct_columns=("ts", "body"))
    rows = [("10.0.0.1:9876", D1, i, 100 + i % 3, f"body-{i % 4}") for i in range(200)]
    wh.append(plain, events(spark, rows), commit("r1"))
    assert_same(wh.read(plain), events(spark, rows))
    found = [_dictionary_columns(uri) for uri in wh.file_uris(plain)]
    assert found and all(columns == {"code"} for columns in found)  # the other data column keeps its dictionary
    other = Warehouse(os.path.join(wh.root, "other"), spark, backend="delta-rs")
    other.append(EVENTS, events(spark, rows), commit("r1"))
    # without the setting, body (4 values) gets one; ts, all different, is left plain by the writer itself
    assert all(_dictionary_columns(uri) == {"code", "body"} for uri in other.file_uris(EVENTS))


def test_read_of_an_empty_table_is_an_empty_dataframe_with_the_schema(wh: Warehouse, spark) -> None:
    wh.ensure(EVENTS)
    assert_same(wh.read(EVENTS), events(spark, []))
    assert wh.files(EVENTS) == []


def test_ensure_adds_new_nullable_columns_in_place_and_old_rows_read_them_as_null(wh: Warehouse, spark) -> None:
    wh.append(EVENTS, events(spark, ROWS[:2]), commit("r0"))
    grown = TableSpec(EVENTS.name, T.StructType(EVENTS.schema.fields + [T.StructField("body_ref", T.StringType(), True)]),
                      partition_by=EVENTS.partition_by)
    wh.ensure(grown)
    assert wh.version(EVENTS) == 2  # one schema commit
    wh.append(grown, spark.createDataFrame([("10.0.0.1:9876", D2, 9, 103, "z", "ref-1")], grown.schema), commit("r1"))
    want = spark.createDataFrame([r + (None,) for r in ROWS[:2]] + [("10.0.0.1:9876", D2, 9, 103, "z", "ref-1")], grown.schema)
    assert_same(wh.read(grown), want)
    wh.ensure(grown)
    assert wh.version(EVENTS) == 3


def test_ensure_on_an_existing_table_with_another_schema_lists_every_difference(wh: Warehouse) -> None:
    wh.ensure(EVENTS)
    changed = TableSpec(
        "silver.events",
        T.StructType(
            [
                T.StructField("namesrv", T.StringType(), False),
                T.StructField("date", T.DateType(), True),
                T.StructField("ts", T.IntegerType(), False),
                T.StructField("code", T.IntegerType(), False),
                T.StructField("extra", T.StringType(), True),
            ]
        ),
        partition_by=("namesrv",),
    )
    with pytest.raises(SchemaMismatchError) as caught:
        wh.ensure(changed)
    assert caught.value.differences == (
        "missing column 'extra' (string)",
        "extra column 'body' (string)",
        "column 'ts': expected int, got bigint",
        "column 'code': expected NOT NULL, got nullable",
        "partitioned by ['namesrv', 'date'], the spec says ['namesrv']",
    )
    assert wh.version(EVENTS) == 0


def test_missing_tables_raise_table_not_found(wh: Warehouse) -> None:
    for call in (lambda: wh.read(EVENTS), lambda: wh.history(EVENTS), lambda: wh.files(EVENTS)):
        with pytest.raises(TableNotFoundError):
            call()
    assert wh.committed(EVENTS, commit("r1")) is False


# -- append -----------------------------------------------------------------------------------------


def test_append_round_trip_with_special_partition_values(wh: Warehouse, spark) -> None:
    df = events(spark, ROWS)
    assert wh.append(EVENTS, df, commit("r1")) == 1
    assert_same(wh.read(EVENTS), df)
    # Hive-escaped directories on disk; delta-rs encodes them once more in the log.
    on_disk = stored_files(wh.path(EVENTS))
    assert any(p.startswith("namesrv=10.0.0.1%3A9876/date=2024-11-21/") for p in on_disk)
    assert any(p.startswith("namesrv=50%25/date=2024-11-21/") for p in on_disk)
    assert any(p.startswith("namesrv=a%2Fb%3Dc/date=2024-11-22/") for p in on_disk)
    assert any(p.startswith("namesrv=007/date=__HIVE_DEFAULT_PARTITION__/") for p in on_disk)
    assert not any(p.startswith("_staging") for p in on_disk)
    log = (Path(wh.path(EVENTS)) / "_delta_log" / "00000000000000000001.json").read_text()
    assert "namesrv=10.0.0.1%253A9876" in log
    # Our paths are exactly delta-rs's own view of the table's files.
    assert sorted(wh.file_uris(EVENTS)) == sorted(DeltaTable(wh.path(EVENTS)).file_uris())


def test_append_reorders_columns_to_the_spec(wh: Warehouse, spark) -> None:
    df = events(spark, ROWS[:2])
    shuffled = df.select("body", "code", "ts", "date", "namesrv")
    assert wh.append(EVENTS, shuffled, commit("r1")) == 1
    read = wh.read(EVENTS)
    assert read.columns == list(EVENTS.column_names)
    assert_same(read, df)


def test_nested_types_and_timestamps_round_trip_as_micros(wh: Warehouse, spark) -> None:
    rows = [
        ("t1", ("b1", [0, 1]), {"k": "v"}, dt.datetime(2024, 11, 21, 3, 12, 5, 123456, tzinfo=dt.timezone.utc)),
        ("t2", None, None, None),
    ]
    df = spark.createDataFrame(rows, NESTED.schema)
    before = spark.conf.get("spark.sql.parquet.outputTimestampType")
    spark.conf.set("spark.sql.parquet.outputTimestampType", "INT96")
    try:
        assert wh.append(NESTED, df, commit("r1")) == 1
        assert spark.conf.get("spark.sql.parquet.outputTimestampType") == "INT96"  # restored
    finally:
        spark.conf.set("spark.sql.parquet.outputTimestampType", before)
    # Maps cannot be sorted or hashed by Spark: compare the rest whole, the maps per topic.
    assert_same(wh.read(NESTED).drop("attrs"), df.drop("attrs"))
    assert {r.topic: r.attrs for r in wh.read(NESTED).select("topic", "attrs").collect()} == {"t1": {"k": "v"}, "t2": None}
    for path in wh.file_uris(NESTED):
        parquet_type = pq.read_schema(path).field("valid_from").type
        assert str(parquet_type).startswith("timestamp[us"), parquet_type


@pytest.mark.parametrize(
    ("make_df", "expected"),
    [
        (
            lambda spark: events(spark, ROWS).drop("body"),
            ["missing column 'body' (string)"],
        ),
        (
            lambda spark: events(spark, ROWS).withColumn("surplus", F.col("ts")),
            ["extra column 'surplus' (bigint)"],
        ),
        (
            # delta-rs would silently cast '5' into the int column: the check must catch it first.
            lambda spark: spark.createDataFrame(
                [("10.0.0.1:9876", D1, 1, "5", "a")],
                "namesrv string, date date, ts bigint, code string, body string",
            ),
            ["column 'code': expected int, got string"],
        ),
        (
            lambda spark: spark.createDataFrame(
                [("10.0.0.1:9876", D1, 1, 105, "a", 9)],
                "namesrv string, date string, ts int, code int, body string, more int",
            ).drop("more").withColumnRenamed("ts", "TS"),
            [
                "missing column 'ts' (bigint) (found 'TS': names are case-sensitive)",
                "column 'date': expected date, got string",
            ],
        ),
    ],
    ids=["missing", "extra", "string-into-int", "several"],
)
def test_schema_mismatch_is_raised_before_anything_is_written(wh: Warehouse, spark, make_df, expected) -> None:
    wh.append(EVENTS, events(spark, ROWS[:1]), commit("r0"))
    files_before = stored_files(wh.path(EVENTS))
    with pytest.raises(SchemaMismatchError) as caught:
        wh.append(EVENTS, make_df(spark), commit("r1"))
    assert list(caught.value.differences) == expected
    for difference in expected:
        assert difference in str(caught.value)
    assert wh.version(EVENTS) == 1
    assert stored_files(wh.path(EVENTS)) == files_before
    assert not wh.committed(EVENTS, commit("r1"))


def test_nested_schema_mismatch_is_raised_before_anything_is_written(wh: Warehouse, spark) -> None:
    wrong = spark.createDataFrame(
        [("t1", ("b1", ["0"]), {"k": 1}, None)],
        "topic string, route struct<broker:string, queues:array<string>>, attrs map<string,int>, valid_from timestamp",
    )
    with pytest.raises(SchemaMismatchError) as caught:
        wh.append(NESTED, wrong, commit("r1"))
    assert caught.value.differences == (
        "column 'route.queues[]': expected int, got string",
        "column 'attrs{value}': expected string, got int",
    )
    assert not wh.exists(NESTED)  # the check ran before the table was even created


def test_null_in_a_not_null_column_fails_the_write_and_commits_nothing(wh: Warehouse, spark) -> None:
    wh.append(EVENTS, events(spark, ROWS[:1]), commit("r0"))
    files_before = stored_files(wh.path(EVENTS))
    nullable = T.StructType([T.StructField(f.name, f.dataType, True) for f in EVENTS.schema.fields])
    bad = spark.createDataFrame([("10.0.0.1:9876", D1, None, 1, "x")], nullable)
    with pytest.raises(SchemaMismatchError, match="column 'ts' is NOT NULL"):
        wh.append(EVENTS, bad, commit("r1"))
    nested_bad = spark.createDataFrame([("t", (None, [1]), None, None)], nullable_schema(NESTED.schema))
    with pytest.raises(SchemaMismatchError, match="column 'route.broker' is NOT NULL"):
        wh.append(NESTED, nested_bad, commit("r1"))
    assert wh.version(EVENTS) == 1 and wh.version(NESTED) == 0
    assert stored_files(wh.path(EVENTS)) == files_before
    assert stored_files(wh.path(NESTED)) == set()


def test_append_is_idempotent_per_run_and_job(wh: Warehouse, spark) -> None:
    first = events(spark, ROWS[:3])
    assert wh.append(EVENTS, first, commit("r1")) == 1
    assert wh.committed(EVENTS, commit("r1"))
    assert not wh.committed(EVENTS, commit("r2"))
    assert wh.append(EVENTS, first, commit("r1")) is None  # re-run: nothing new
    assert wh.version(EVENTS) == 1
    assert_same(wh.read(EVENTS), first)
    second = events(spark, ROWS[3:])
    assert wh.append(EVENTS, second, commit("r2")) == 2
    assert wh.append(EVENTS, second, commit("r2", job="other-job")) == 3  # another job is another writer
    assert_same(wh.read(EVENTS), first.unionByName(second).unionByName(second))


def test_an_empty_append_still_records_the_run(wh: Warehouse, spark) -> None:
    assert wh.append(EVENTS, events(spark, []), commit("r1")) == 1
    assert wh.files(EVENTS) == []
    assert wh.append(EVENTS, events(spark, ROWS), commit("r1")) is None


# -- time travel, history, files ---------------------------------------------------------------------


def test_time_travel_by_version_and_timestamp(wh: Warehouse, spark) -> None:
    v1_rows, v2_rows = events(spark, ROWS[:2]), events(spark, ROWS[2:])
    wh.append(EVENTS, v1_rows, commit("r1"))
    wh.overwrite(EVENTS, v2_rows, commit("r2"))
    assert_same(wh.read(EVENTS, version=0), events(spark, []))
    assert_same(wh.read(EVENTS, version=1), v1_rows)
    assert_same(wh.read(EVENTS, version=2), v2_rows)
    assert_same(wh.read(EVENTS), v2_rows)
    stamps = {h["version"]: h["timestamp"] for h in wh.history(EVENTS)}
    assert stamps[0] <= stamps[1] < stamps[2]
    assert_same(wh.read(EVENTS, timestamp=stamps[1]), v1_rows)
    assert_same(wh.read(EVENTS, timestamp=stamps[2] - 1), v1_rows)
    iso = dt.datetime.fromtimestamp(stamps[1] / 1000, dt.timezone.utc).isoformat(timespec="milliseconds")
    assert_same(wh.read(EVENTS, timestamp=iso), v1_rows)
    assert_same(wh.read(EVENTS, timestamp=iso.replace("+00:00", "Z")), v1_rows)
    assert_same(wh.read(EVENTS, timestamp=stamps[2] + 60_000), v2_rows)
    with pytest.raises(VersionNotFoundError, match="no version at or before"):
        wh.read(EVENTS, timestamp=stamps[0] - 1)
    with pytest.raises(VersionNotFoundError, match="no version 7"):
        wh.read(EVENTS, version=7)
    with pytest.raises(VersionNotFoundError):
        wh.files(EVENTS, version=7)
    with pytest.raises(ValueError, match="not both"):
        wh.read(EVENTS, version=1, timestamp=stamps[1])
    with pytest.raises(ValueError, match="ISO-8601"):
        wh.read(EVENTS, timestamp="yesterday")


def test_history_shows_run_job_window_and_write_details(wh: Warehouse, spark) -> None:
    wh.append(EVENTS, events(spark, ROWS[:2]), commit("r1", window_from=1000, window_to=2000, extra={"files": "3"}))
    wh.overwrite(EVENTS, events(spark, ROWS[:1]), commit("r2", job="repair"), partitions={"date": "2024-11-21"})
    history = wh.history(EVENTS)
    assert [h["version"] for h in history] == [2, 1, 0]
    newest, middle, created = history
    assert {k: newest[k] for k in ("run_id", "job", "window_from", "window_to", "extra", "mode", "predicate")} == {
        "run_id": "r2",
        "job": "repair",
        "window_from": None,
        "window_to": None,
        "extra": {},
        "mode": "overwrite",
        "predicate": "(CAST(`date` AS STRING) IN ('2024-11-21'))",
    }
    assert {k: middle[k] for k in ("run_id", "job", "window_from", "window_to", "extra", "mode", "predicate", "app_id")} == {
        "run_id": "r1",
        "job": "ingest",
        "window_from": 1000,
        "window_to": 2000,
        "extra": {"files": "3"},
        "mode": "append",
        "predicate": None,
        "app_id": commit("r1").app_id,
    }
    assert created["operation"] == "CREATE TABLE" and created["run_id"] is None and created["extra"] == {}
    assert all(isinstance(h["timestamp"], int) for h in history)
    assert wh.history(EVENTS, limit=1) == history[:1]


@pytest.mark.parametrize("name", ["wh#2", "wh?x"])
def test_a_warehouse_whose_path_holds_a_hash_or_a_question_mark_has_a_history(spark, tmp_path, name) -> None:
    """delta-rs 1.6 returns an empty history for a table whose path holds ``#`` or ``?``: every write
    committed, then failed ("committed write ... not found in the history of ..."), and what reads
    the history (abandoned ingests, late data) saw no commit at all. The history is the one the same
    commits have under a plain path."""
    plain = Warehouse(str(tmp_path / "plain"), spark, "delta-rs")
    odd = Warehouse(str(tmp_path / name), spark, "delta-rs")
    for wh in (plain, odd):
        assert wh.append(EVENTS, events(spark, ROWS[:3]), commit("r1", window_from=1, window_to=2)) == 1
        assert wh.overwrite(EVENTS, events(spark, ROWS[:1]), commit("r2", job="repair"), partitions={"date": "2024-11-21"}) == 2
        assert wh.committed(EVENTS, commit("r1")) and wh.append(EVENTS, events(spark, ROWS[:3]), commit("r1")) is None
    assert_same(odd.read(EVENTS), plain.read(EVENTS))
    shown = lambda wh, limit=None: [{k: v for k, v in e.items() if k != "timestamp"} for e in wh.history(EVENTS, limit=limit)]  # noqa: E731
    assert [e["version"] for e in shown(odd)] == [2, 1, 0]
    assert shown(odd) == shown(plain) and shown(odd, 1) == shown(plain, 1)


@pytest.mark.parametrize("name", ["p%20c", "50%", "a\\b"])
def test_a_local_warehouse_path_delta_rs_cannot_use_is_refused_before_anything_is_written(spark, tmp_path, name) -> None:
    """delta-rs 1.6 reads a '%' of a local table path as a URL escape (``p%20c`` is looked for as
    ``p c``) and a backslash as '/': the ingest failed after creating the directories ("Kernel error:
    File not found: .../p c/...") and the readers failed on a path that is not the warehouse's. The
    refusal names the character and the way out; a URI's escapes are its own (``s3a://b/p%20c``)."""
    root = tmp_path / name
    for given in (str(root), root.as_uri()):
        with pytest.raises(UnsupportedPathError, match="delta-rs cannot keep tables in a local directory whose path holds"):
            Warehouse(given, spark, "delta-rs")
        with pytest.raises(UnsupportedPathError):
            Warehouse(given, None, "delta-rs")
    assert not root.exists()
    assert Warehouse("s3a://bucket/p%20c", None, "delta-rs").path("silver.events") == "s3a://bucket/p%20c/silver/events"


def test_files_carry_partition_values_and_record_counts(wh: Warehouse, spark) -> None:
    wh.append(EVENTS, events(spark, ROWS), commit("r1"))
    files = wh.files(EVENTS)
    counted: dict[tuple[str, str | None], int] = {}
    for data_file in files:
        assert set(data_file.partition_values) == {"namesrv", "date"}
        key = (data_file.partition_values["namesrv"], data_file.partition_values["date"])
        counted[key] = counted.get(key, 0) + data_file.num_records
    expected: dict[tuple[str, str | None], int] = {}
    for namesrv, date, *_ in ROWS:
        key = (namesrv, date.isoformat() if date else None)
        expected[key] = expected.get(key, 0) + 1
    assert counted == expected
    for data_file in files:
        assert isinstance(data_file, DataFile)
        assert os.path.isabs(data_file.path) and os.path.getsize(data_file.path) == data_file.size
        assert pq.read_metadata(data_file.path).num_rows == data_file.num_records
    assert wh.file_uris(EVENTS) == [f.path for f in files]
    assert wh.files(EVENTS, version=0) == []


# -- overwrite ---------------------------------------------------------------------------------------


def test_overwrite_by_partition_replaces_only_that_partition(wh: Warehouse, spark) -> None:
    wh.append(EVENTS, events(spark, ROWS), commit("r1"))
    untouched_files = {f.path for f in wh.files(EVENTS) if f.partition_values["namesrv"] != "10.0.0.1:9876"}
    replacement = [("10.0.0.1:9876", D1, 10, 105, "new"), ("10.0.0.1:9876", D2, 11, 105, "new")]
    assert wh.overwrite(EVENTS, events(spark, replacement), commit("r2"), partitions={"namesrv": "10.0.0.1:9876"}) == 2
    assert_same(wh.read(EVENTS), events(spark, replacement + ROWS[3:]))
    assert untouched_files <= {f.path for f in wh.files(EVENTS)}  # other partitions' files were not rewritten
    # Several values, NULL among them, several columns.
    again = [("007", None, 12, 1, "z")]
    assert wh.overwrite(EVENTS, events(spark, again), commit("r3"), partitions={"namesrv": ["007", "50%"], "date": [None, "2024-11-21"]}) == 3
    assert_same(wh.read(EVENTS), events(spark, replacement + [ROWS[4]] + again))


def test_overwrite_where_on_a_data_column_keeps_other_rows(wh: Warehouse, spark) -> None:
    wh.append(EVENTS, events(spark, ROWS), commit("r1"))
    replacement = [("10.0.0.1:9876", D1, 20, 105, "replaced"), ("b:1", D2, 21, 105, "new partition")]
    assert wh.overwrite(EVENTS, events(spark, replacement), commit("r2"), where="code = 105") == 2
    kept = [r for r in ROWS if r[3] != 105]
    assert_same(wh.read(EVENTS), events(spark, kept + replacement))
    assert_same(wh.read(EVENTS, version=1), events(spark, ROWS))


def test_overwrite_where_and_partitions_together(wh: Warehouse, spark) -> None:
    wh.append(EVENTS, events(spark, ROWS), commit("r1"))
    replacement = [("10.0.0.1:9876", D1, 30, 105, "x")]
    version = wh.overwrite(
        EVENTS, events(spark, replacement), commit("r2"), where="code = 105 AND body IS NOT NULL",
        partitions={"namesrv": "10.0.0.1:9876", "date": "2024-11-21"},
    )
    assert version == 2
    expected = [r for r in ROWS if not (r[0] == "10.0.0.1:9876" and r[1] == D1 and r[3] == 105)] + replacement
    assert_same(wh.read(EVENTS), events(spark, expected))


def test_overwrite_counted_counts_the_rows_given_not_the_rows_kept(wh: Warehouse, spark) -> None:
    wh.append(EVENTS, events(spark, ROWS), commit("r1"))
    replacement = [("10.0.0.1:9876", D1, 20, 105, "replaced"), ("b:1", D2, 21, 105, "new partition"), ("b:1", D2, 22, 105, None)]
    # the where-overwrite rewrites the affected files with their other rows; only the given rows count
    assert wh.overwrite_counted(EVENTS, events(spark, replacement), commit("r2"), where="code = 105") == (2, 3)
    assert_same(wh.read(EVENTS), events(spark, [r for r in ROWS if r[3] != 105] + replacement))
    # already committed: nothing runs, and the rows are counted on their own
    assert wh.overwrite_counted(EVENTS, events(spark, replacement[:1]), commit("r2"), where="code = 105") == (None, 1)
    assert wh.overwrite_counted(EVENTS, events(spark, []), commit("r3"), where="code = 105") == (3, 0)
    assert_same(wh.read(EVENTS), events(spark, [r for r in ROWS if r[3] != 105]))


def test_overwrite_counted_counts_rows_on_a_backend_without_observed_writes(wh: Warehouse, spark, monkeypatch) -> None:
    monkeypatch.setattr(type(wh._backend), "observes_writes", False)
    wh.append(EVENTS, events(spark, ROWS), commit("r1"))
    assert wh.overwrite_counted(EVENTS, events(spark, ROWS[:2]), commit("r2")) == (2, 2)
    assert_same(wh.read(EVENTS), events(spark, ROWS[:2]))


def test_overwrite_without_predicate_replaces_the_whole_table(wh: Warehouse, spark) -> None:
    wh.append(EVENTS, events(spark, ROWS), commit("r1"))
    assert wh.overwrite(EVENTS, events(spark, ROWS[:1]), commit("r2")) == 2
    assert_same(wh.read(EVENTS), events(spark, ROWS[:1]))
    assert wh.overwrite(EVENTS, events(spark, ROWS[:1]), commit("r2")) is None  # idempotent too
    assert wh.overwrite(EVENTS, events(spark, []), commit("r3")) == 3
    assert_same(wh.read(EVENTS), events(spark, []))


def test_overwrite_rejects_rows_outside_the_predicate(wh: Warehouse, spark) -> None:
    wh.append(EVENTS, events(spark, ROWS), commit("r1"))
    files_before = stored_files(wh.path(EVENTS))
    outside = events(spark, [("10.0.0.1:9876", D1, 40, 105, "ok"), ("10.0.0.2:9876", D1, 41, 105, "outside")])
    with pytest.raises(PredicateViolationError, match="rows outside the overwrite predicate") as caught:
        wh.overwrite(EVENTS, outside, commit("r2"), partitions={"namesrv": "10.0.0.1:9876"})
    assert isinstance(caught.value, StorageError)
    with pytest.raises(PredicateViolationError):
        wh.overwrite(EVENTS, events(spark, [("x", D1, 42, None, "null code")]), commit("r2"), where="code = 105")
    assert wh.version(EVENTS) == 1
    assert stored_files(wh.path(EVENTS)) == files_before
    assert_same(wh.read(EVENTS), events(spark, ROWS))


def test_overwrite_argument_checks(wh: Warehouse, spark) -> None:
    df = events(spark, ROWS[:1])
    with pytest.raises(ValueError, match="not a partition column"):
        wh.overwrite(EVENTS, df, commit("r1"), partitions={"code": "105"})
    with pytest.raises(TypeError, match="Delta partition strings"):
        wh.overwrite(EVENTS, df, commit("r1"), partitions={"date": D1})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="invalid overwrite predicate"):
        wh.overwrite(EVENTS, df, commit("r1"), where="no_such_column = 1")
    with pytest.raises(ValueError, match="non-empty"):
        wh.overwrite(EVENTS, df, commit("r1"), where=" ")
    with pytest.raises(TypeError, match="CommitInfo"):
        wh.append(EVENTS, df, {"run_id": "r1"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="DataFrame"):
        wh.append(EVENTS, ROWS, commit("r1"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="TableSpec"):
        wh.read("silver.events")  # type: ignore[arg-type]
    assert not wh.exists(EVENTS)


# -- concurrency -------------------------------------------------------------------------------------


def test_a_conflicting_concurrent_overwrite_fails_cleanly(wh: Warehouse, spark, monkeypatch) -> None:
    wh.append(EVENTS, events(spark, ROWS), commit("r1"))
    other = Warehouse(wh.root, spark, backend="delta-rs")
    backend = wh._backend
    original_stage = backend._stage

    def stage_while_another_writer_commits(*args, **kwargs):
        original_stage(*args, **kwargs)
        monkeypatch.setattr(backend, "_stage", original_stage)
        other.overwrite(EVENTS, events(spark, [("50%", D1, 50, 1, "other")]), commit("other"), partitions={"namesrv": "50%"})

    monkeypatch.setattr(backend, "_stage", stage_while_another_writer_commits)
    mine = events(spark, [("50%", D1, 51, 1, "mine")])
    with pytest.raises(ConcurrentCommitError, match="concurrent commit conflicts"):
        wh.overwrite(EVENTS, mine, commit("r2"), partitions={"namesrv": "50%"})
    assert wh.version(EVENTS) == 2
    assert_same(wh.read(EVENTS), events(spark, [r for r in ROWS if r[0] != "50%"] + [("50%", D1, 50, 1, "other")]))
    # No orphans: exactly the files of the committed versions are on disk.
    assert stored_files(wh.path(EVENTS)) == relative_files(wh, 1) | relative_files(wh, 2)
    # The failed write can simply be re-run.
    assert wh.overwrite(EVENTS, mine, commit("r2"), partitions={"namesrv": "50%"}) == 3


def test_the_same_run_committed_concurrently_is_reported_as_skipped(wh: Warehouse, spark, monkeypatch) -> None:
    wh.ensure(EVENTS)
    other = Warehouse(wh.root, spark, backend="delta-rs")
    backend = wh._backend
    original_stage = backend._stage
    df = events(spark, ROWS[:2])

    def stage_while_the_same_run_commits(*args, **kwargs):
        original_stage(*args, **kwargs)
        monkeypatch.setattr(backend, "_stage", original_stage)
        assert other.append(EVENTS, df, commit("r1")) == 1

    monkeypatch.setattr(backend, "_stage", stage_while_the_same_run_commits)
    assert wh.append(EVENTS, df, commit("r1")) is None
    assert wh.version(EVENTS) == 1
    assert_same(wh.read(EVENTS), df)
    assert stored_files(wh.path(EVENTS)) == relative_files(wh, 1)  # our uncommitted files are gone


# -- Spark-free readers ------------------------------------------------------------------------------


def test_spark_free_readers_get_the_same_rows(wh: Warehouse, spark) -> None:
    wh.append(EVENTS, events(spark, ROWS), commit("r1"))
    script = textwrap.dedent(
        """
        import json, sys
        import pyarrow as pa, pyarrow.dataset as pads
        from pyspark.sql import types as T
        from nsreplay.storage import TableSpec, Warehouse, dataset

        spec = TableSpec(sys.argv[2], T.StructType.fromJson(json.loads(sys.argv[3])), tuple(json.loads(sys.argv[4])))
        wh = Warehouse(sys.argv[1], None)                      # no SparkSession, no JVM
        uris = wh.file_uris(spec)
        # 1. plain pyarrow.dataset over file_uris, partitions from the hive directory names
        partitioning = pads.partitioning(pa.schema([("namesrv", pa.string()), ("date", pa.date32())]), flavor="hive")
        plain = pads.dataset(uris, format="parquet", partitioning=partitioning, partition_base_dir=wh.path(spec))
        # 2. the module's helper, partitions from the Delta log
        helper = dataset(spec, wh.files(spec))
        from pyspark import SparkContext
        assert SparkContext._gateway is None, "a JVM was started"
        rows = lambda t: sorted(json.dumps(r, default=str, sort_keys=True) for r in t.to_pylist())
        print(json.dumps({"backend": wh.backend_name,
                          "plain": rows(plain.to_table(columns=list(spec.column_names))),
                          "helper": rows(helper.to_table())}))
        """
    )
    args = [wh.root, EVENTS.name, EVENTS.schema.json(), json.dumps(EVENTS.partition_by)]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    result = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr  # also: no abort at exit (the delta-rs to_pyarrow_* issue)
    output = json.loads(result.stdout)
    expected = sorted(
        json.dumps(dict(zip(EVENTS.column_names, r)), default=str, sort_keys=True) for r in ROWS
    )
    assert output["backend"] == "delta-rs"
    assert output["plain"] == expected
    assert output["helper"] == expected


@pytest.mark.parametrize(("name", "sibling"), [("wh*", "wh-copy"), ("wh{1}", "wh1"), ("wh*", "a:b")])
def test_a_warehouse_whose_path_holds_glob_characters_reads_its_own_files_only(spark, tmp_path, name, sibling) -> None:
    """Spark expands glob characters in the paths it is given to read (Hadoop's globStatus): a
    warehouse at ``wh*`` or ``wh{1}`` read the files of a copy beside it (``wh-copy``, ``wh1``) or
    failed on it ("Wrong basePath", or "Relative path in absolute URI" for a name with a colon)."""
    wh = Warehouse(str(tmp_path / name), spark, "delta-rs")
    wh.append(EVENTS, events(spark, ROWS), commit("r1"))
    import shutil

    shutil.copytree(tmp_path / name, tmp_path / sibling)
    assert_same(wh.read(EVENTS), events(spark, ROWS))
    assert_same(wh.read(EVENTS, where=ColumnRange("ts", 2, 4)), events(spark, ROWS[2:4]))


def test_arrow_dataset_helper_reads_a_table_version(wh: Warehouse, spark) -> None:
    wh.append(EVENTS, events(spark, ROWS[:2]), commit("r1"))
    wh.append(EVENTS, events(spark, ROWS[2:]), commit("r2"))
    table = dataset(EVENTS, wh.files(EVENTS, version=1)).to_table()
    assert sorted(tuple(r.values()) for r in table.to_pylist()) == sorted(ROWS[:2])
    assert dataset(EVENTS, []).to_table().num_rows == 0


def test_warehouse_without_spark_handles_metadata_but_not_data(warehouse_root: str) -> None:
    wh = Warehouse(warehouse_root, None)
    assert wh.backend_name == "delta-rs"
    wh.ensure(EVENTS)
    assert wh.version(EVENTS) == 0
    with pytest.raises(StorageError, match="needs a SparkSession"):
        wh.read(EVENTS)
    with pytest.raises(BackendUnavailableError):
        Warehouse(warehouse_root, None, backend="delta-spark")


# -- restore -----------------------------------------------------------------------------------------


def test_restore_brings_back_a_version_in_one_commit_that_writes_no_data(wh: Warehouse, spark) -> None:
    wh.append(EVENTS, events(spark, ROWS[:4]), commit("r1"))
    wh.overwrite(EVENTS, events(spark, ROWS[:1]), commit("r2", job="replay"), partitions={"date": "2024-11-21"})
    wh.append(EVENTS, events(spark, ROWS[4:]), commit("r3", job="replay"))
    files_before = stored_files(wh.path(EVENTS))
    assert wh.restore(EVENTS, 1, commit("r4", job="replay/discard-unpublished")) == 4
    assert_same(wh.read(EVENTS), events(spark, ROWS[:4]))
    assert relative_files(wh, 4) == relative_files(wh, 1)  # the very files of version 1, re-added
    assert stored_files(wh.path(EVENTS)) == files_before  # and no data file written
    assert_same(wh.read(EVENTS, version=3), events(spark, ROWS[:1] + [ROWS[2]] + ROWS[4:]))  # history kept
    newest = wh.history(EVENTS, limit=1)[0]
    assert (newest["version"], newest["operation"], newest["mode"], newest["run_id"], newest["job"]) == (
        4, "RESTORE", "restore", "r4", "replay/discard-unpublished")
    assert wh.committed(EVENTS, commit("r4", job="replay/discard-unpublished"))


def test_restore_is_idempotent_per_run_and_refuses_a_missing_version(wh: Warehouse, spark) -> None:
    wh.append(EVENTS, events(spark, ROWS[:2]), commit("r1"))
    wh.append(EVENTS, events(spark, ROWS[2:]), commit("r2"))
    assert wh.restore(EVENTS, 1, commit("fix")) == 3
    wh.append(EVENTS, events(spark, ROWS[5:]), commit("r3"))
    assert wh.restore(EVENTS, 1, commit("fix")) is None  # this run restored once already: nothing more
    assert wh.version(EVENTS) == 4
    assert_same(wh.read(EVENTS), events(spark, ROWS[:2] + ROWS[5:]))
    assert wh.restore(EVENTS, 4, commit("other")) is None  # already that version
    with pytest.raises(VersionNotFoundError, match="no version 9"):
        wh.restore(EVENTS, 9, commit("other"))
    with pytest.raises(ValueError, match="non-negative int"):
        wh.restore(EVENTS, None, commit("other"))  # type: ignore[arg-type]
    with pytest.raises(TableNotFoundError):
        wh.restore(NESTED, 0, commit("other"))
    assert wh.version(EVENTS) == 4


def test_restore_to_a_version_before_a_new_column_keeps_the_column(wh: Warehouse, spark) -> None:
    wh.append(EVENTS, events(spark, ROWS[:2]), commit("r0"))
    grown = TableSpec(EVENTS.name, T.StructType(EVENTS.schema.fields + [T.StructField("body_ref", T.StringType(), True)]),
                      partition_by=EVENTS.partition_by)
    wh.ensure(grown)  # version 2 adds the column
    wh.append(grown, spark.createDataFrame([("10.0.0.1:9876", D2, 9, 103, "z", "ref-1")], grown.schema), commit("r1"))
    assert wh.restore(grown, 1, commit("fix")) == 4
    assert wh.version(grown) == 5  # the column, added back
    assert_same(wh.read(grown), spark.createDataFrame([r + (None,) for r in ROWS[:2]], grown.schema))
    wh.ensure(grown)  # the schema is the spec's: nothing to add, no difference
    assert wh.version(grown) == 5


def test_a_compaction_before_a_new_column_is_added_writes_the_columns_of_the_table(wh: Warehouse, spark) -> None:
    """An upgrade's maintenance (``nsreplay compact``) may run before the first write that adds a
    new nullable column (``Warehouse.check`` accepts the table without it): the merged files hold
    the table's columns, as every other file of that version, not the spec's extra one; once the
    column is added, the rows read it as null."""
    wh.append(EVENTS, events(spark, ROWS[:1]), commit("r0"))
    wh.append(EVENTS, events(spark, ROWS[1:2]), commit("r1"))
    grown = TableSpec(EVENTS.name, T.StructType(EVENTS.schema.fields + [T.StructField("body_ref", T.StringType(), True)]),
                      partition_by=EVENTS.partition_by)
    wh.check(grown)  # the column is missing: accepted, nothing written
    done = wh.compact(grown, [wh.files(grown)], sort_by="ts", commit=commit("c1", job="compact"))
    assert done.version == 3 and len(done.added) == 1
    table_columns = [f.name for f in DeltaTable(wh.path(EVENTS)).schema().fields]
    assert "body_ref" not in table_columns
    (merged,) = wh.files(grown)
    assert set(pq.read_schema(merged.path).names) <= set(table_columns)
    log = Path(wh.path(EVENTS), "_delta_log", f"{done.version:020d}.json").read_text().splitlines()
    (stats,) = [json.loads(json.loads(a)["add"]["stats"]) for a in log if '"add"' in a]
    assert "body_ref" not in stats["nullCount"]  # nor in its statistics
    assert_same(wh.read(EVENTS), events(spark, ROWS[:2]))
    wh.ensure(grown)  # the next write's ensure adds the column
    assert_same(wh.read(grown), spark.createDataFrame([r + (None,) for r in ROWS[:2]], grown.schema))


# -- the Delta log's checkpoints ---------------------------------------------------------------------


def _checkpoints(root: str) -> list[int]:
    """The versions of the checkpoints in a table's Delta log."""
    return sorted(int(name.split(".")[0]) for name in os.listdir(os.path.join(root, "_delta_log")) if name.endswith(".checkpoint.parquet"))


def test_a_checkpoint_follows_every_tenth_commit_and_every_version_reads_the_same(wh: Warehouse, spark) -> None:
    """delta-spark's cadence (``delta.checkpointInterval`` 10), not delta-rs's 100: writes, overwrites
    and restores alike; a version read through a checkpoint holds the rows it held before."""
    rows = [("10.0.0.1:9876", D1, ts, 105, str(ts)) for ts in range(1, 30)]
    for i, row in enumerate(rows[:17]):  # versions 1..17 (0 created the table)
        wh.append(EVENTS, events(spark, [row]), commit(f"r{i}"))
    wh.overwrite(EVENTS, events(spark, rows[17:18]), commit("o18", job="replay"), where="ts = 18")  # 18
    assert wh.restore(EVENTS, 8, commit("fix", job="replay/discard-unpublished")) == 19
    for i, row in enumerate(rows[19:22], start=19):  # 20..22
        wh.append(EVENTS, events(spark, [row]), commit(f"r{i}"))
    assert _checkpoints(wh.path(EVENTS)) == [9, 19]
    assert json.loads(Path(wh.path(EVENTS), "_delta_log", "_last_checkpoint").read_text())["version"] == 19
    for version, held in ((8, rows[:8]), (9, rows[:9]), (10, rows[:10]), (18, rows[:18]), (19, rows[:8]), (22, rows[:8] + rows[19:22])):
        assert_same(wh.read(EVENTS, version=version), events(spark, held))
    assert [c["run_id"] for c in wh.history(EVENTS, limit=4)] == ["r21", "r20", "r19", "fix"]  # the history is whole


def test_a_table_that_sets_its_own_checkpoint_interval_keeps_it(wh: Warehouse, spark) -> None:
    DeltaTable.create(wh.path(EVENTS), schema=to_arrow_schema(EVENTS.schema), partition_by=list(EVENTS.partition_by),
                      configuration={"delta.checkpointInterval": "4"})
    wh.ensure(EVENTS)
    for ts in range(1, 12):  # versions 1..11
        wh.append(EVENTS, events(spark, [("10.0.0.1:9876", D1, ts, 105, None)]), commit(f"r{ts}"))
    assert _checkpoints(wh.path(EVENTS)) == [3, 7, 11]  # delta-rs's hook, by the table's setting; none at 9


def test_a_checkpoint_that_cannot_be_written_leaves_the_commit_standing(wh: Warehouse, spark, caplog) -> None:
    wh.ensure(EVENTS)
    blocked = Path(wh.path(EVENTS), "_delta_log", f"{9:020d}.checkpoint.parquet")
    blocked.mkdir()  # the checkpoint of version 9 cannot be written where a directory stands
    for ts in range(1, 11):
        assert wh.append(EVENTS, events(spark, [("10.0.0.1:9876", D1, ts, 105, None)]), commit(f"r{ts}")) == ts
    assert "no checkpoint written after version 9" in caplog.text
    blocked.rmdir()
    assert _checkpoints(wh.path(EVENTS)) == []
    assert wh.version(EVENTS) == 10
    assert_same(wh.read(EVENTS), events(spark, [("10.0.0.1:9876", D1, ts, 105, None) for ts in range(1, 11)]))


# -- statistics, and overwrites that open only the files of their range ------------------------------


def test_files_carry_min_max_and_null_counts_of_their_integer_columns(wh: Warehouse, spark) -> None:
    wh.append(EVENTS, events(spark, ROWS + [("007", None, 7, None, "g")]), commit("r1"))
    actions = pa.table(DeltaTable(wh.path(EVENTS)).get_add_actions(flatten=False)).to_pylist()
    assert actions
    for action in actions:
        content = pq.read_table(os.path.join(wh.path(EVENTS), unquote(action["path"])), columns=["ts", "code"]).to_pydict()
        codes = [c for c in content["code"] if c is not None]
        assert (action["min"]["ts"], action["max"]["ts"], action["null_count"]["ts"]) == (min(content["ts"]), max(content["ts"]), 0)
        assert (action["min"]["code"], action["max"]["code"]) == ((min(codes), max(codes)) if codes else (None, None))
        assert action["null_count"]["code"] == len(content["code"]) - len(codes)
        assert action["num_records"] == len(content["ts"])


@pytest.fixture
def opened(monkeypatch) -> list[set[str]]:
    """The files (relative paths) each overwrite of the delta-rs backend opens to find the rows its
    predicate selects, a set per overwrite."""
    opened: list[set[str]] = []
    original = DeltaRsBackend._files_matching

    def spy(self, spark_, spec, location, files, where):
        opened.append({f["relative"] for f in files})
        return original(self, spark_, spec, location, files, where)

    monkeypatch.setattr(DeltaRsBackend, "_files_matching", spy)
    return opened


def test_an_overwrite_by_column_range_opens_only_the_files_that_may_hold_it(wh: Warehouse, spark, opened: list[set[str]]) -> None:
    for i, chunk in enumerate((ROWS[:2], ROWS[2:4], ROWS[4:])):  # ts 1-2, 3-4, 5-6: one window each
        wh.append(EVENTS, events(spark, chunk), commit(f"w{i}"))
    second_window = relative_files(wh, 2) - relative_files(wh, 1)
    replacement = [("10.0.0.1:9876", D2, 3, 999, "new"), ("50%", D1, 4, 999, None)]
    window = ColumnRange("ts", above=2, at_most=4)
    assert wh.overwrite(EVENTS, events(spark, replacement), commit("w1-again", job="replay"), where=window) == 4
    assert opened == [second_window]  # the other windows' files: pruned by their statistics, never read
    assert_same(wh.read(EVENTS), events(spark, ROWS[:2] + replacement + ROWS[4:]))
    assert wh.history(EVENTS, limit=1)[0]["predicate"] == "(`ts` > 2 AND `ts` <= 4)"
    with pytest.raises(PredicateViolationError):  # the range is the predicate: rows outside it are refused
        wh.overwrite(EVENTS, events(spark, ROWS[:1]), commit("w1-bad", job="replay"), where=window)


def test_an_overwrite_of_rows_written_since_a_version_opens_only_the_files_added_since(wh: Warehouse, spark, opened: list[set[str]]) -> None:
    for i, chunk in enumerate((ROWS[:2], ROWS[2:4], ROWS[4:])):  # versions 1, 2, 3
        wh.append(EVENTS, events(spark, chunk), commit(f"run{i}"))
    since_second = relative_files(wh, 3) - relative_files(wh, 1)
    # the caller's word: the rows it deletes were written at version 2 or after; the first file is not read
    assert wh.overwrite(EVENTS, events(spark, []), commit("discard"), where="code = 105", written_since=2) == 4
    assert opened == [since_second]
    assert_same(wh.read(EVENTS), events(spark, [r for r in ROWS if r[3] != 105 or r in ROWS[:2]]))
    # none written since the latest version: no file is read, and the commit is made all the same
    assert wh.overwrite(EVENTS, events(spark, []), commit("discard-none"), where="code = 103", written_since=5) == 5
    assert opened == [since_second]
    assert_same(wh.read(EVENTS), events(spark, [r for r in ROWS if r[3] != 105 or r in ROWS[:2]]))
    with pytest.raises(ValueError, match="written_since goes with where"):
        wh.overwrite(EVENTS, events(spark, []), commit("bad"), written_since=1)
    with pytest.raises(ValueError, match="written_since must be an int >= 0"):
        wh.overwrite(EVENTS, events(spark, []), commit("bad"), where="code = 1", written_since=-1)


def test_a_read_by_column_range_lists_only_the_files_that_may_hold_it(wh: Warehouse, spark) -> None:
    for i, chunk in enumerate((ROWS[:2], ROWS[2:4], ROWS[4:])):  # ts 1-2, 3-4, 5-6: one window each
        wh.append(EVENTS, events(spark, chunk), commit(f"w{i}"))
    second_window = relative_files(wh, 2) - relative_files(wh, 1)
    window = ColumnRange("ts", above=2, at_most=4)
    read = wh.read(EVENTS, where=window)
    assert_same(read, events(spark, ROWS[2:4]))
    assert sorted(Path(unquote(f)).name for f in read.inputFiles()) == sorted(Path(f).name for f in second_window)
    assert_same(wh.read(EVENTS, version=1, where=window), events(spark, []))
    assert_same(wh.read(EVENTS, where=ColumnRange("code", at_most=104)), events(spark, [r for r in ROWS if r[3] is not None and r[3] <= 104]))
    with pytest.raises(TypeError, match="ColumnRange"):
        wh.read(EVENTS, where="ts > 2")  # type: ignore[arg-type]


def test_column_bounds_are_spark_min_and_max_per_partition_from_the_log_alone(wh: Warehouse, spark, monkeypatch) -> None:
    for i, chunk in enumerate((ROWS[:2], ROWS[2:4], ROWS[4:], [("10.0.0.1:9876", D1, -5, None, "z")])):
        wh.append(EVENTS, events(spark, chunk), commit(f"w{i}"))
    frame = wh.read(EVENTS)
    for column in ("ts", "code"):
        expected = {
            r.namesrv: (r.low, r.high)
            for r in frame.groupBy("namesrv").agg(F.min(column).alias("low"), F.max(column).alias("high")).collect()
            if r.low is not None
        }
        assert wh.column_bounds(EVENTS, column, by="namesrv") == expected
    assert wh.column_bounds(EVENTS, "ts", by="namesrv", version=1) == {"10.0.0.1:9876": (1, 2)}
    assert wh.column_bounds(EVENTS, "ts", by="date") == {"2024-11-21": (-5, 4), "2024-11-22": (3, 5), None: (6, 6)}

    def no_data_file(*args, **kwargs):
        raise AssertionError("a data file was opened")

    monkeypatch.setattr(pq, "read_table", no_data_file)
    monkeypatch.setattr(pq, "ParquetFile", no_data_file)
    monkeypatch.setattr(DeltaRsBackend, "_read_parquet", no_data_file)
    assert wh.column_bounds(EVENTS, "ts", by="namesrv")["10.0.0.1:9876"] == (-5, 3)
    with pytest.raises(ValueError, match="partition column"):
        wh.column_bounds(EVENTS, "ts", by="code")
    with pytest.raises(ValueError, match="data column"):
        wh.column_bounds(EVENTS, "namesrv", by="namesrv")


def test_files_by_column_range_and_their_arrow_filter_give_the_rows_spark_reads(wh: Warehouse, spark) -> None:
    for i, chunk in enumerate((ROWS[:2], ROWS[2:4], ROWS[4:], [("007", None, 7, None, "g")])):
        wh.append(EVENTS, events(spark, chunk), commit(f"w{i}"))
    ranges = [ColumnRange("ts", above=2, at_most=4), ColumnRange("ts", above=5), ColumnRange("code", at_most=104),
              ColumnRange("code", at_most=103, or_null=True), ColumnRange("code"), ColumnRange("ts", above=99)]
    for where in ranges:
        files = wh.files(EVENTS, where=where)
        assert len(files) < len(wh.files(EVENTS)), where  # each range leaves some file out
        got = dataset(EVENTS, files).to_table(filter=range_filter(where)).to_pylist()
        want = [r.asDict() for r in wh.read(EVENTS, where=where).collect()]
        key = lambda r: r["ts"]  # noqa: E731
        assert sorted(got, key=key) == sorted(want, key=key), where
    assert wh.column_bounds(EVENTS, "ts") == {None: (1, 7)}  # by nothing: the whole table
    with pytest.raises(TypeError, match="ColumnRange"):
        wh.files(EVENTS, where="ts > 2")  # type: ignore[arg-type]


def test_file_statistics_prune_by_several_ranges_like_files_does_by_each(wh: Warehouse, spark, monkeypatch) -> None:
    """``file_statistics`` lists every file of a version with its columns' statistics from the log
    alone; a file kept by every one of several ranges is one ``files(where=...)`` keeps for each."""
    for i, chunk in enumerate((ROWS[:2], ROWS[2:4], ROWS[4:], [("007", None, 7, None, "g")])):
        wh.append(EVENTS, events(spark, chunk), commit(f"w{i}"))
    every = wh.files(EVENTS)
    listed = wh.file_statistics(EVENTS, ["ts", "code"])
    assert {f.file for f in listed} == set(every)
    assert len(listed) == len(every) and len(wh.file_statistics(EVENTS, ["ts"], version=1)) == len(wh.files(EVENTS, version=1))
    for f in listed:
        content = pq.read_table(f.file.path, columns=["ts", "code"]).to_pydict()
        codes = [c for c in content["code"] if c is not None]
        assert f.columns["ts"] == (0, min(content["ts"]), max(content["ts"]))
        assert f.columns["code"] == (len(content["code"]) - len(codes), *((min(codes), max(codes)) if codes else (None, None)))
    pairs = [
        (ColumnRange("ts", above=2), ColumnRange("code", at_most=104)),
        (ColumnRange("ts", at_most=5), ColumnRange("code", above=103, or_null=True)),
        (ColumnRange("ts", above=6), ColumnRange("code")),
    ]
    for ranges in pairs:
        kept = {f.file for f in listed if all(f.may_hold(r) for r in ranges)}
        assert kept == set(wh.files(EVENTS, where=ranges[0])) & set(wh.files(EVENTS, where=ranges[1])) and kept < set(every), ranges
    assert all(f.may_hold(ColumnRange("body_length", at_most=-1)) for f in listed)  # statistics not asked for never prune

    def no_data_file(*args, **kwargs):
        raise AssertionError("a data file was opened")

    monkeypatch.setattr(pq, "read_table", no_data_file)
    monkeypatch.setattr(pq, "ParquetFile", no_data_file)
    assert len(wh.file_statistics(EVENTS, ["ts"])) == len(every)
    with pytest.raises(ValueError, match="data column"):
        wh.file_statistics(EVENTS, ["namesrv"])


def test_column_bounds_are_none_when_a_file_has_no_statistics(wh: Warehouse, spark, monkeypatch) -> None:
    import nsreplay.storage.deltars_backend as backend_module

    wh.append(EVENTS, events(spark, ROWS[:2]), commit("w0"))
    # a file added as writers did before the statistics: its add action holds the row count only
    monkeypatch.setattr(backend_module, "_file_stats", lambda metadata: {"numRecords": metadata.num_rows})
    wh.append(EVENTS, events(spark, ROWS[2:4]), commit("w1"))
    monkeypatch.undo()
    assert wh.column_bounds(EVENTS, "ts", by="namesrv", version=1) == {"10.0.0.1:9876": (1, 2)}
    assert wh.column_bounds(EVENTS, "ts", by="namesrv") is None


def test_file_statistics_span_every_row_group_and_say_nothing_they_do_not_know(tmp_path) -> None:
    from nsreplay.storage.deltars_backend import _file_stats

    table = pa.table({
        "ts": pa.array([7, 3, None, None, None, 11], pa.int64()),
        "empty": pa.array([None] * 6, pa.int32()),
        "day": pa.array([dt.date(2024, 11, 21)] * 6),  # a date: its Delta form differs, left out
        "name": pa.array(list("abcdef")),
    })
    pq.write_table(table, tmp_path / "groups.parquet", row_group_size=2)  # three row groups; the second holds NULLs only
    stats = _file_stats(pq.read_metadata(tmp_path / "groups.parquet"))
    assert stats == {"numRecords": 6, "minValues": {"ts": 3}, "maxValues": {"ts": 11}, "nullCount": {"ts": 3, "empty": 6}}
    pq.write_table(table, tmp_path / "bare.parquet", write_statistics=False)
    assert _file_stats(pq.read_metadata(tmp_path / "bare.parquet")) == {"numRecords": 6}


def test_files_written_by_a_commit_are_those_it_added_that_the_table_still_holds(wh: Warehouse, spark) -> None:
    for i, chunk in enumerate((ROWS[:2], ROWS[2:4], ROWS[4:])):
        wh.append(EVENTS, events(spark, chunk), commit(f"w{i}"))
    added = {i: relative_files(wh, i + 1) - (relative_files(wh, i) if i else set()) for i in range(3)}
    for i in range(3):
        found = wh.files_written_by(EVENTS, commit(f"w{i}"))
        assert {Path(f.path).name for f in found} == {Path(f).name for f in added[i]} and found
        assert_same(dataset_frame(spark, found), events(spark, [ROWS[:2], ROWS[2:4], ROWS[4:]][i]))
    assert wh.files_written_by(EVENTS, commit("w0"), newest=2) is None  # not among the newest two commits
    assert wh.files_written_by(EVENTS, commit("w9")) is None
    assert wh.files_written_by(EVENTS, commit("w1", job="replay")) is None  # the same run id, another job
    wh.restore(EVENTS, 2, commit("undo", job="repair"))  # w2's files are removed
    assert wh.files_written_by(EVENTS, commit("w2")) == []
    with pytest.raises(ValueError, match="newest"):
        wh.files_written_by(EVENTS, commit("w1"), newest=0)


def dataset_frame(spark: SparkSession, files) -> DataFrame:
    rows = dataset(EVENTS, files).to_table().to_pylist()
    return events(spark, [tuple(r[c] for c in EVENTS.schema.fieldNames()) for r in rows])


# -- vacuum -------------------------------------------------------------------------------------------


def aged(path: str, days: float) -> None:
    then = dt.datetime.now().timestamp() - days * 86400
    os.utime(path, (then, then))


def staged(root: str, write: str, days: float) -> str:
    """A staging directory of write ``write`` (as the delta-rs backend makes), untouched for ``days``."""
    path = Path(root, "_staging", write, "namesrv=007", "part-0.parquet")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"y" * 20)
    for p in (path, path.parent, path.parent.parent):
        aged(str(p), days)
    return str(path.relative_to(root))


def test_a_vacuum_deletes_only_the_files_neither_a_kept_version_nor_the_latest_names(wh: Warehouse, spark) -> None:
    wh.append(EVENTS, events(spark, ROWS[:3]), commit("w1"))  # version 1
    wh.append(EVENTS, events(spark, ROWS[3:]), commit("w2"))  # version 2: the one a reader keeps
    replacement = [("10.0.0.1:9876", D1, 10, 105, "new")]
    wh.overwrite(EVENTS, events(spark, replacement), commit("w3"), partitions={"namesrv": "10.0.0.1:9876"})  # 3
    wh.overwrite(EVENTS, events(spark, ROWS[3:]), commit("w4"))  # version 4: removes every file
    root = wh.path(EVENTS)
    orphan = os.path.join(root, "namesrv=50%25", "part-never-committed.parquet")  # a write killed before its commit
    Path(orphan).write_bytes(b"x" * 10)
    aged(orphan, 10)
    staged(root, "dead", 10)
    before = table_files(root)
    kept = relative_files(wh, 2) | relative_files(wh, 4)
    expected = {p for p in before if p not in kept}
    # version 1's files are version 2's too; what goes is version 3's replacement (removed by version
    # 4), the file never committed and the staging left by a dead write
    replaced = relative_files(wh, 3) - kept
    assert len(replaced) == 1 and relative_files(wh, 1) <= relative_files(wh, 2)
    assert expected == replaced | {"namesrv=50%25/part-never-committed.parquet", "_staging/dead/namesrv=007/part-0.parquet"}

    listed = wh.vacuum(EVENTS, retention_hours=0, keep_versions=(2,))  # a dry run by default
    assert set(listed.files) == expected and listed.bytes == sum(before[p] for p in expected) and listed.dry_run
    assert table_files(root) == before and wh.version(EVENTS) == 4  # nothing deleted, nothing committed

    done = wh.vacuum(EVENTS, retention_hours=0, keep_versions=(2,), dry_run=False, commit=commit("v1", job="vacuum"))
    assert (done.files, done.bytes, done.kept_versions, done.dry_run) == (listed.files, listed.bytes, (2,), False)
    assert set(table_files(root)) == set(before) - expected
    assert_same(wh.read(EVENTS), events(spark, ROWS[3:]))  # the latest and the kept version read as before
    assert_same(wh.read(EVENTS, version=2), events(spark, ROWS))
    assert wh.restore(EVENTS, 2, commit("back", job="repair")) == 7
    assert_same(wh.read(EVENTS), events(spark, ROWS))
    newest = [(h["version"], h["operation"], h["run_id"], h["job"]) for h in wh.history(EVENTS, limit=3)]
    assert newest == [(7, "RESTORE", "back", "repair"), (6, "VACUUM END", "v1", "vacuum"), (5, "VACUUM START", "v1", "vacuum")]
    with pytest.raises(Exception, match="(?i)not.*(exist|found)"):  # version 3's replacement is gone
        wh.read(EVENTS, version=3).collect()

    # the restore removed version 4's files (a remove action naming them by their full path)
    again = wh.vacuum(EVENTS, retention_hours=0, keep_versions=(7,), dry_run=False, commit=commit("v2", job="vacuum"))
    assert set(again.files) == relative_files(wh, 4) - relative_files(wh, 7) != set() and wh.version(EVENTS) == 9
    assert set(table_files(root)) == set(before) - expected - set(again.files)
    assert_same(wh.read(EVENTS), events(spark, ROWS))
    last = wh.vacuum(EVENTS, retention_hours=0, dry_run=False, commit=commit("v3", job="vacuum"))
    assert last.files == () and last.bytes == 0 and wh.version(EVENTS) == 9  # nothing found: no commit


def test_a_vacuum_keeps_what_was_removed_within_the_retention_and_checks_its_arguments(wh: Warehouse, spark) -> None:
    wh.append(EVENTS, events(spark, ROWS[:3]), commit("w1"))
    wh.overwrite(EVENTS, events(spark, ROWS[3:]), commit("w2"))  # removes version 1's files just now
    orphan = Path(wh.path(EVENTS), "left-over.parquet")
    orphan.write_bytes(b"z")
    aged(str(orphan), 8)
    dead, running = staged(wh.path(EVENTS), "dead", 8), staged(wh.path(EVENTS), "running", 0.01)
    # 8 days old and in no version; the files version 2 removed and a write still staging are recent
    assert wh.vacuum(EVENTS, retention_hours=168).files == (dead, "left-over.parquet")
    assert wh.vacuum(EVENTS, retention_hours=24 * 9).files == ()
    done = wh.vacuum(EVENTS, retention_hours=168, dry_run=False, commit=commit("v", job="vacuum"))
    assert done.files == (dead, "left-over.parquet") and os.path.exists(os.path.join(wh.path(EVENTS), running))
    assert not os.path.exists(os.path.join(wh.path(EVENTS), "_staging", "dead"))
    assert_same(wh.read(EVENTS, version=1), events(spark, ROWS[:3]))
    with pytest.raises(ValueError, match="retention_hours"):
        wh.vacuum(EVENTS, retention_hours=-1)
    with pytest.raises(ValueError, match="retention_hours"):
        wh.vacuum(EVENTS, retention_hours=1.5)  # type: ignore[arg-type]
    with pytest.raises(VersionNotFoundError, match="no version 9"):
        wh.vacuum(EVENTS, retention_hours=0, keep_versions=(9,))
    with pytest.raises(TypeError, match="CommitInfo"):
        wh.vacuum(EVENTS, retention_hours=0, dry_run=False)
    with pytest.raises(TableNotFoundError):
        wh.vacuum(NESTED, retention_hours=0)


COMPACTED = TableSpec(
    name="gold.compacted",
    schema=T.StructType(
        [
            T.StructField("namesrv", T.StringType(), True),
            T.StructField("ts", T.LongType(), False),
            T.StructField("route", NESTED.schema["route"].dataType, True),
            T.StructField("attrs", T.MapType(T.StringType(), T.StringType()), True),
            T.StructField("at", T.TimestampType(), True),
            T.StructField("body", T.StringType(), True),
        ]
    ),
    partition_by=("namesrv",),
    distinct_columns=("body",),
)


def compacted_rows(spark: SparkSession, batch: int) -> DataFrame:
    at = dt.datetime(2024, 11, 21, 3, 12, 5, 123456, tzinfo=dt.timezone.utc)
    rows = [
        (namesrv, 100 * batch + i, (f"b{i}", [i, batch]), {"k": str(i)}, at + dt.timedelta(seconds=i), f"body-{batch}-{i}")
        for i, namesrv in ((3, "10.0.0.1:9876"), (1, "50%"), (2, None), (0, "10.0.0.1:9876"))
    ]
    return spark.createDataFrame(rows, COMPACTED.schema)


def test_a_compaction_merges_each_group_into_one_sorted_file_and_changes_no_row(wh: Warehouse, spark) -> None:
    for batch in (3, 1, 2):  # appended out of order: the merged file is sorted by ts
        wh.append(COMPACTED, compacted_rows(spark, batch).repartition(2), commit(f"w{batch}"))
    before = wh.files(COMPACTED)
    expected = wh.read(COMPACTED)
    by_partition: dict[str | None, list[DataFile]] = {}
    for f in before:
        by_partition.setdefault(f.partition_values["namesrv"], []).append(f)
    groups = [g for g in by_partition.values() if len(g) > 1]
    assert len(groups) == 3

    planned = wh.compact(COMPACTED, groups, sort_by="ts", commit=commit("c1", job="compact"), dry_run=True)
    assert planned.dry_run and planned.version is None and wh.version(COMPACTED) == 3
    assert planned.bytes_before == sum(f.size for g in groups for f in g)

    done = wh.compact(COMPACTED, groups, sort_by="ts", commit=commit("c1", job="compact"), row_group_rows=2)
    assert done.version == 4 and len(done.added) == 3 and done.rows == 12
    assert sorted(done.removed) == sorted(planned.removed)
    after = wh.files(COMPACTED)
    assert len(after) == 3 and {f.partition_values["namesrv"] for f in after} == {"10.0.0.1:9876", "50%", None}
    # Maps cannot be sorted or hashed by Spark: compare the rest whole, the maps per row.
    assert_same(wh.read(COMPACTED).drop("attrs"), expected.drop("attrs"))
    assert sorted((r.ts, r.attrs) for r in wh.read(COMPACTED).collect()) == sorted((r.ts, r.attrs) for r in expected.collect())
    assert_same(wh.read(COMPACTED, version=3).drop("attrs"), expected.drop("attrs"))  # the version before reads as before
    for f in after:
        merged = pq.ParquetFile(f.path)
        assert merged.read().column("ts").to_pylist() == sorted(merged.read().column("ts").to_pylist())
        assert merged.metadata.num_row_groups == -(-merged.metadata.num_rows // 2) and str(merged.schema_arrow.field("at").type).startswith("timestamp[us")
    for f in wh.file_statistics(COMPACTED, ("ts",)):  # the merged files carry the statistics of every write
        values = pq.read_table(f.file.path).column("ts").to_pylist()
        assert f.columns["ts"] == (0, min(values), max(values)) and f.file.num_records == len(values)
    entry = wh.history(COMPACTED, limit=1)[0]
    assert (entry["mode"], entry["job"], entry["run_id"]) == ("compact", "compact", "c1")
    assert wh.row_commits_since(COMPACTED, 3) == [] and len(wh.row_commits_since(COMPACTED, 2)) == 1
    assert not os.path.exists(os.path.join(wh.path(COMPACTED), "_staging"))

    again = wh.compact(COMPACTED, groups, sort_by="ts", commit=commit("c1", job="compact"))  # the same run: done already
    assert (again.version, again.added) == (None, ()) and wh.version(COMPACTED) == 4
    with pytest.raises(ValueError, match="two or more"):
        wh.compact(COMPACTED, [after[:1]], sort_by="ts", commit=commit("c2", job="compact"))
    with pytest.raises(ValueError, match="several partitions"):
        wh.compact(COMPACTED, [after[:2]], sort_by="ts", commit=commit("c2", job="compact"))
    with pytest.raises(ValueError, match="not a data column"):
        wh.compact(COMPACTED, groups, sort_by="namesrv", commit=commit("c2", job="compact"))
    with pytest.raises(ConcurrentCommitError, match="not in its latest version"):  # the planned files were merged
        wh.compact(COMPACTED, groups, sort_by="ts", commit=commit("c3", job="compact"))
    assert wh.version(COMPACTED) == 4


def test_a_compaction_sorts_by_several_columns_in_turn(wh: Warehouse, spark) -> None:
    for batch in (3, 1, 2):
        wh.append(COMPACTED, compacted_rows(spark, batch), commit(f"w{batch}"))
    groups = [[f for f in wh.files(COMPACTED) if f.partition_values["namesrv"] == "10.0.0.1:9876"]]
    expected = wh.read(COMPACTED)
    with pytest.raises(ValueError, match="names no column"):
        wh.compact(COMPACTED, groups, sort_by=(), commit=commit("c1", job="compact"))
    with pytest.raises(ValueError, match="not a data column"):
        wh.compact(COMPACTED, groups, sort_by=("body", "namesrv"), commit=commit("c1", job="compact"))
    done = wh.compact(COMPACTED, groups, sort_by=("at", "ts"), commit=commit("c1", job="compact"))
    assert len(done.added) == 1 and wh.history(COMPACTED, limit=1)[0]["mode"] == "compact"
    merged = pq.read_table([f for f in wh.files(COMPACTED) if f.partition_values["namesrv"] == "10.0.0.1:9876"][0].path)
    pairs = list(zip(merged.column("at").to_pylist(), merged.column("ts").to_pylist()))
    assert pairs == sorted(pairs) and pairs != sorted(pairs, key=lambda p: p[1])  # by at, then ts: not by ts alone
    assert_same(wh.read(COMPACTED).drop("attrs"), expected.drop("attrs"))


def test_removing_named_files_drops_exactly_their_rows_and_is_not_counted_as_a_run_write(wh: Warehouse, spark) -> None:
    for batch in (1, 2, 3):
        wh.append(COMPACTED, compacted_rows(spark, batch), commit(f"w{batch}"))
    expected = wh.read(COMPACTED)
    gone = [f for f in wh.files(COMPACTED) if f.partition_values["namesrv"] == "50%"]
    assert len(gone) == 3

    assert wh.remove_files(COMPACTED, [], mode=THINNING_MODE, commit=commit("t0", job="thin-states")) is None  # nothing: no commit
    version = wh.remove_files(COMPACTED, gone[:2], mode=THINNING_MODE, commit=commit("t1", job="thin-states"))
    assert version == 4 and wh.version(COMPACTED) == 4
    removed_ts = sorted(pq.read_table(f.path).column("ts").to_pylist()[0] for f in gone[:2])
    assert_same(wh.read(COMPACTED).drop("attrs"), expected.where(~((F.col("namesrv") == "50%") & F.col("ts").isin(removed_ts))).drop("attrs"))
    assert_same(wh.read(COMPACTED, version=3).drop("attrs"), expected.drop("attrs"))  # the version before reads as before
    assert all(os.path.exists(f.path) for f in gone)  # on storage until a vacuum
    entry = wh.history(COMPACTED, limit=1)[0]
    assert (entry["mode"], entry["job"], entry["run_id"]) == (THINNING_MODE, "thin-states", "t1")
    assert wh.row_commits_since(COMPACTED, 3) == []  # not taken for another run's writes

    assert wh.remove_files(COMPACTED, gone[:2], mode=THINNING_MODE, commit=commit("t1", job="thin-states")) is None  # the same run: done
    with pytest.raises(ConcurrentCommitError, match="not in its latest version"):
        wh.remove_files(COMPACTED, gone[1:], mode=THINNING_MODE, commit=commit("t2", job="thin-states"))
    with pytest.raises(ValueError, match="named twice"):
        wh.remove_files(COMPACTED, [gone[2], gone[2]], mode=THINNING_MODE, commit=commit("t2", job="thin-states"))
    with pytest.raises(ValueError, match="mode"):
        wh.remove_files(COMPACTED, gone[2:], mode="", commit=commit("t2", job="thin-states"))
    assert wh.version(COMPACTED) == 4


def race_a_compaction(wh: Warehouse, spark, monkeypatch, group: list[DataFile]) -> list[CompactionResult]:
    """Make another process's whole compaction of ``group`` (a Warehouse of its own: its own
    snapshots) run just before ``wh``'s next commit, after that commit's planning; the list gets
    its result."""
    other = Warehouse(wh.root, spark, backend="delta-rs")
    backend = type(wh._backend)
    commit_now = backend._commit
    raced: list[CompactionResult] = []

    def after_the_other_process(self, *args, **kwargs):
        if self is wh._backend and not raced:
            raced.append(other.compact(COMPACTED, [group], sort_by="ts", commit=commit("other", job="compact")))
        return commit_now(self, *args, **kwargs)

    monkeypatch.setattr(backend, "_commit", after_the_other_process)
    return raced


def test_two_compactions_of_one_table_at_once_commit_only_one(wh: Warehouse, spark, monkeypatch) -> None:
    """Two processes compacting one table at once plan the same files from the same version. The one
    that commits second must fail and commit nothing: delta-rs (1.6) let it commit too, and the table
    then held the merged rows twice."""
    for batch in (1, 2, 3):
        wh.append(COMPACTED, compacted_rows(spark, batch), commit(f"w{batch}"))
    expected = wh.read(COMPACTED, version=3)
    group = [f for f in wh.files(COMPACTED) if f.partition_values["namesrv"] == "10.0.0.1:9876"]
    raced = race_a_compaction(wh, spark, monkeypatch, group)
    with pytest.raises(ConcurrentCommitError, match="were removed by a later commit"):
        wh.compact(COMPACTED, [group], sort_by="ts", commit=commit("this", job="compact"))
    assert raced[0].version == 4 and wh.version(COMPACTED) == 4  # the other one's commit only
    assert_same(wh.read(COMPACTED).drop("attrs"), expected.drop("attrs"))
    assert not os.path.exists(os.path.join(wh.path(COMPACTED), "_staging"))
    monkeypatch.undo()
    # the same run again, once the other process's compaction is known: nothing left to merge twice
    with pytest.raises(ConcurrentCommitError, match="not in its latest version"):
        wh.compact(COMPACTED, [group], sort_by="ts", commit=commit("this", job="compact"))


def test_a_removal_racing_a_compaction_of_its_files_commits_nothing(wh: Warehouse, spark, monkeypatch) -> None:
    """As above for ``remove_files`` (what ``thin-states`` commits): the files it removes were merged
    by another process meanwhile; removing them again would leave their rows in the merged file."""
    for batch in (1, 2, 3):
        wh.append(COMPACTED, compacted_rows(spark, batch), commit(f"w{batch}"))
    expected = wh.read(COMPACTED, version=3)
    group = [f for f in wh.files(COMPACTED) if f.partition_values["namesrv"] == "50%"]
    race_a_compaction(wh, spark, monkeypatch, group)
    with pytest.raises(ConcurrentCommitError, match="were removed by a later commit"):
        wh.remove_files(COMPACTED, group[:2], mode=THINNING_MODE, commit=commit("t1", job="thin-states"))
    assert wh.version(COMPACTED) == 4
    assert_same(wh.read(COMPACTED).drop("attrs"), expected.drop("attrs"))


def ctrl_c_as_the_commit_returns(monkeypatch) -> None:
    """Make delta-rs's next commit land and then raise KeyboardInterrupt, as a Ctrl-C that arrives
    while the commit runs in Rust does: Python raises it once the call has returned."""
    commit_now = DeltaTable.create_write_transaction

    def commit_then_ctrl_c(self, *args, **kwargs):
        monkeypatch.setattr(DeltaTable, "create_write_transaction", commit_now)
        commit_now(self, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(DeltaTable, "create_write_transaction", commit_then_ctrl_c)


def test_a_ctrl_c_as_an_append_commits_leaves_the_committed_files_in_place(wh: Warehouse, spark, monkeypatch) -> None:
    """The commit stands, so its files are the table's: deleted as an uncommitted write's would be,
    the table's latest version names files that are gone and no reader can open it (a publish row
    interrupted so made gold.publish_log unreadable for good)."""
    wh.ensure(EVENTS)
    df = events(spark, ROWS[:3])
    ctrl_c_as_the_commit_returns(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        wh.append(EVENTS, df, commit("r1"))
    assert wh.version(EVENTS) == 1
    assert stored_files(wh.path(EVENTS)) == relative_files(wh, 1)  # no staging left, every committed file there
    assert_same(wh.read(EVENTS), df)
    assert wh.append(EVENTS, df, commit("r1")) is None  # the re-run finds it done


def test_a_ctrl_c_as_a_compaction_commits_leaves_the_merged_files_in_place(wh: Warehouse, spark, monkeypatch) -> None:
    for batch in (1, 2, 3):
        wh.append(COMPACTED, compacted_rows(spark, batch), commit(f"w{batch}"))
    expected = wh.read(COMPACTED, version=3)
    group = [f for f in wh.files(COMPACTED) if f.partition_values["namesrv"] == "10.0.0.1:9876"]
    ctrl_c_as_the_commit_returns(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        wh.compact(COMPACTED, [group], sort_by="ts", commit=commit("c1", job="compact"))
    assert wh.version(COMPACTED) == 4
    assert all(os.path.exists(p) for p in wh.file_uris(COMPACTED, 4))
    assert_same(wh.read(COMPACTED).drop("attrs"), expected.drop("attrs"))
    assert not os.path.exists(os.path.join(wh.path(COMPACTED), "_staging"))


@pytest.mark.parametrize(
    "timestamp, ms",
    [
        ("2038-08-06T11:20:50.766Z", 2164706450766),  # through a float: ...765
        ("2024-11-21T00:00:00.123+00:00", 1732147200123),
        ("2024-11-21T05:30:00.001+05:30", 1732147200001),
        ("2024-11-21T00:00:00.999999", 1732147200999),  # floored to the ms, naive as UTC
        ("1969-12-31T23:59:59.999Z", -1),
        (dt.datetime(2038, 8, 6, 11, 20, 50, 766000, tzinfo=dt.timezone.utc), 2164706450766),
    ],
)
def test_a_time_travel_instant_is_its_exact_millisecond(timestamp, ms) -> None:
    """``Warehouse.read(timestamp=...)`` picks the latest commit at or before the instant: one ms
    early, the instant of a commit gave the commit before it (0.6 % of instants went through a float
    to the ms below)."""
    from nsreplay.storage.warehouse import _iso, _timestamp_ms

    assert _timestamp_ms(timestamp) == ms
    assert _timestamp_ms(_iso(ms)) == ms
