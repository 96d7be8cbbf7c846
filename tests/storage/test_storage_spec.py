"""TableSpec / CommitInfo / schema comparison / Arrow mapping: pure Python, no SparkSession."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import types as T

from nsreplay.storage import ColumnRange, CommitInfo, TableSpec, app_transaction_id, schema_differences, to_arrow_schema
from nsreplay.storage.spec import FileColumnStats, bounds_by_partition, retention_covering
from nsreplay.storage.arrow_types import UnsupportedTypeError, partition_value, to_arrow_type
from nsreplay.storage.spec import nullable_schema


def schema(*fields: T.StructField) -> T.StructType:
    return T.StructType(list(fields))


def f(name: str, data_type: T.DataType, nullable: bool = True) -> T.StructField:
    return T.StructField(name, data_type, nullable)


ALL_TYPES = schema(
    f("b", T.BooleanType(), False),
    f("i8", T.ByteType()),
    f("i16", T.ShortType()),
    f("i32", T.IntegerType()),
    f("i64", T.LongType(), False),
    f("f32", T.FloatType()),
    f("f64", T.DoubleType()),
    f("dec", T.DecimalType(12, 3)),
    f("s", T.StringType()),
    f("bin", T.BinaryType()),
    f("d", T.DateType()),
    f("ts", T.TimestampType()),
    f("arr", T.ArrayType(T.StringType(), containsNull=False)),
    f("m", T.MapType(T.StringType(), T.LongType(), valueContainsNull=True)),
    f("st", T.StructType([f("x", T.IntegerType(), False), f("y", T.ArrayType(T.LongType()))])),
    f("p", T.StringType()),
)


# -- TableSpec ----------------------------------------------------------------------------------------


def test_table_spec_accepts_valid_spec_and_normalizes_partition_by() -> None:
    spec = TableSpec("silver.events", ALL_TYPES, partition_by=["p", "d"], description="all types")  # type: ignore[arg-type]
    assert spec.partition_by == ("p", "d")
    assert spec.path_parts == ("silver", "events")
    assert spec.column_names[0] == "b"
    assert "p" not in spec.data_columns and "i64" in spec.data_columns
    assert hash(spec) == hash(TableSpec("silver.events", ALL_TYPES, ("p", "d"), "all types"))


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"name": "silver events"}, ValueError, "invalid table name"),
        ({"name": "silver..events"}, ValueError, "invalid table name"),
        ({"name": "1silver.events"}, ValueError, "invalid table name"),
        ({"schema": "a int"}, TypeError, "StructType"),
        ({"schema": schema()}, ValueError, "no columns"),
        ({"partition_by": ("nope",)}, ValueError, "not a column"),
        ({"partition_by": "p"}, TypeError, "not a str"),
        ({"partition_by": ("st",)}, ValueError, "must be string, boolean, integral or date"),
        ({"partition_by": ("ts",)}, ValueError, "must be string, boolean, integral or date"),
        ({"partition_by": ("p", "p")}, ValueError, "duplicate partition columns"),
        ({"schema": schema(f("a", T.LongType()), f("A", T.LongType()))}, ValueError, "differ only in case"),
        ({"schema": schema(f("a b", T.LongType()))}, ValueError, "invalid column name"),
        ({"schema": schema(f("s", T.StructType([f("x=1", T.LongType())])))}, ValueError, "invalid column name"),
        ({"schema": schema(f("t", T.TimestampNTZType()))}, ValueError, "timestamp_ntz"),
        ({"schema": schema(f("c", T.CharType(3)))}, ValueError, "not supported"),
        ({"schema": schema(f("n", T.NullType()))}, ValueError, "no supported"),
        ({"distinct_columns": ("nope",)}, ValueError, "not a data column"),
        ({"distinct_columns": ("p",), "partition_by": ("p",)}, ValueError, "not a data column"),
        ({"distinct_columns": ("s", "s")}, ValueError, "duplicate distinct columns"),
        ({"distinct_columns": "s"}, TypeError, "not a str"),
    ],
)
def test_table_spec_rejects_invalid_specs(kwargs: dict, error: type, fragment: str) -> None:
    args = {"name": "silver.events", "schema": ALL_TYPES, "partition_by": ()} | kwargs
    with pytest.raises(error, match=fragment):
        TableSpec(**args)


def test_distinct_columns_are_written_without_a_parquet_dictionary() -> None:
    spec = TableSpec("silver.events", ALL_TYPES, partition_by=("p",), distinct_columns=["i64", "s"])  # type: ignore[arg-type]
    assert spec.distinct_columns == ("i64", "s")
    assert spec.parquet_options() == {"parquet.enable.dictionary#i64": "false", "parquet.enable.dictionary#s": "false"}
    assert TableSpec("silver.events", ALL_TYPES).parquet_options() == {}


def test_table_spec_needs_a_data_column() -> None:
    with pytest.raises(ValueError, match="at least one data column"):
        TableSpec("a.b", schema(f("p", T.StringType())), partition_by=("p",))


# -- CommitInfo ---------------------------------------------------------------------------------------


def test_commit_info_app_id_is_stable_and_distinguishes_runs_and_jobs() -> None:
    commit = CommitInfo(run_id="r1", job="ingest", window_from=1, window_to=2, extra={"k": "v"})
    assert commit.app_id == app_transaction_id("ingest", "r1")
    assert commit.app_id == CommitInfo(run_id="r1", job="ingest").app_id  # window / extra are not part of it
    assert commit.app_id.startswith("nsreplay:ingest:")
    assert len({commit.app_id, app_transaction_id("ingest", "r2"), app_transaction_id("replay", "r1")}) == 3
    # Pairs that would collide under naive concatenation do not.
    assert app_transaction_id("a:b", "c") != app_transaction_id("a", "b:c")


def test_commit_info_metadata_and_immutability() -> None:
    extra = {"source": "captures/2024-11-21"}
    commit = CommitInfo(run_id="r1", job="ingest", window_from=10, window_to=20, extra=extra)
    extra["source"] = "changed"
    assert commit.extra == {"source": "captures/2024-11-21"}
    with pytest.raises(TypeError):
        commit.extra["x"] = "y"  # type: ignore[index]
    assert commit.to_metadata() == {
        "nsreplay": 1,
        "run_id": "r1",
        "job": "ingest",
        "window_from": 10,
        "window_to": 20,
        "extra": {"source": "captures/2024-11-21"},
        "app_id": commit.app_id,
    }
    assert hash(commit) == hash(CommitInfo(run_id="r1", job="ingest", window_from=10, window_to=20, extra=dict(commit.extra)))


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"run_id": ""}, ValueError),
        ({"job": "  "}, ValueError),
        ({"run_id": 5}, ValueError),
        ({"window_from": 5, "window_to": 4}, ValueError),
        ({"window_from": 1.5}, TypeError),
        ({"window_to": True}, TypeError),
        ({"extra": {"a": 1}}, TypeError),
        ({"extra": [("a", "b")]}, TypeError),
    ],
)
def test_commit_info_rejects_invalid_values(kwargs: dict, error: type) -> None:
    with pytest.raises(error):
        CommitInfo(**({"run_id": "r1", "job": "ingest"} | kwargs))


# -- schema comparison --------------------------------------------------------------------------------


def test_schema_differences_lists_every_difference() -> None:
    expected = schema(
        f("id", T.LongType(), False),
        f("code", T.IntegerType()),
        f("meta", T.StructType([f("kind", T.StringType()), f("tags", T.MapType(T.StringType(), T.StringType()))])),
        f("gone", T.StringType()),
        f("Name", T.StringType()),
    )
    actual = schema(
        f("code", T.StringType()),
        f("id", T.LongType(), True),  # nullability alone is not a difference by default
        f("meta", T.StructType([f("kind", T.IntegerType()), f("tags", T.MapType(T.StringType(), T.LongType()))])),
        f("name", T.StringType()),
        f("surplus", T.DoubleType()),
    )
    assert schema_differences(expected, actual) == [
        "missing column 'gone' (string)",
        "missing column 'Name' (string) (found 'name': names are case-sensitive)",
        "extra column 'surplus' (double)",
        "column 'code': expected int, got string",
        "column 'meta.kind': expected string, got int",
        "column 'meta.tags{value}': expected string, got bigint",
    ]


def test_schema_differences_nested_order_arrays_and_nullability() -> None:
    expected = schema(
        f("s", T.StructType([f("a", T.LongType()), f("b", T.LongType())])),
        f("xs", T.ArrayType(T.StructType([f("v", T.LongType(), False)]), containsNull=False)),
        f("n", T.LongType(), False),
    )
    actual = schema(
        f("s", T.StructType([f("b", T.LongType()), f("a", T.LongType()), f("c", T.LongType())])),
        f("xs", T.ArrayType(T.StructType([f("v", T.IntegerType(), True)]), containsNull=True)),
        f("n", T.LongType(), True),
    )
    assert schema_differences(expected, actual) == [
        "extra field s.c (bigint)",
        "column 's': struct fields in a different order (expected ['a', 'b'], got ['b', 'a'])",
        "column 'xs[].v': expected bigint, got int",
    ]
    assert schema_differences(expected, actual, nullability=True) == [
        "extra field s.c (bigint)",
        "column 's': struct fields in a different order (expected ['a', 'b'], got ['b', 'a'])",
        "column 'xs': expected containsNull=False, got True",
        "column 'xs[].v': expected NOT NULL, got nullable",
        "column 'xs[].v': expected bigint, got int",
        "column 'n': expected NOT NULL, got nullable",
    ]
    assert schema_differences(expected, expected, nullability=True) == []
    assert schema_differences(expected, nullable_schema(expected)) == []


def test_schema_differences_reports_decimal_precision_and_duplicates() -> None:
    expected = schema(f("d", T.DecimalType(10, 2)))
    assert schema_differences(expected, schema(f("d", T.DecimalType(10, 3)))) == [
        "column 'd': expected decimal(10,2), got decimal(10,3)"
    ]
    assert schema_differences(expected, schema(f("d", T.DecimalType(10, 2)), f("d", T.DecimalType(10, 2)))) == [
        "duplicate column 'd'"
    ]


# -- Arrow mapping ------------------------------------------------------------------------------------


def test_arrow_schema_mapping() -> None:
    arrow = to_arrow_schema(ALL_TYPES)
    assert arrow.field("b").nullable is False
    assert arrow.field("i8").type == pa.int8()
    assert arrow.field("dec").type == pa.decimal128(12, 3)
    assert arrow.field("ts").type == pa.timestamp("us", tz="UTC")
    assert arrow.field("d").type == pa.date32()
    assert arrow.field("arr").type == pa.list_(pa.field("element", pa.string(), nullable=False))
    assert arrow.field("m").type == pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=True))
    assert arrow.field("st").type.field("x").nullable is False
    with pytest.raises(UnsupportedTypeError):
        to_arrow_type(T.DayTimeIntervalType())
    with pytest.raises(UnsupportedTypeError):
        to_arrow_type(T.StringType("UTF8_LCASE"))


def test_arrow_schema_round_trips_through_a_delta_rs_table_at_protocol_1_2(tmp_path) -> None:
    """Spark schema → Arrow → delta-rs table → Delta schema JSON → Spark schema is the identity."""
    table = DeltaTable.create(str(tmp_path / "t"), schema=to_arrow_schema(ALL_TYPES), partition_by=["p"], mode="ignore")
    assert T.StructType.fromJson(json.loads(table.schema().to_json())) == ALL_TYPES
    protocol = table.protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 2)
    assert not protocol.reader_features and not protocol.writer_features


@pytest.mark.parametrize(
    ("text", "data_type", "value"),
    [
        ("10.0.0.1:9876", T.StringType(), "10.0.0.1:9876"),
        ("007", T.StringType(), "007"),
        ("42", T.IntegerType(), 42),
        ("-1", T.LongType(), -1),
        ("true", T.BooleanType(), True),
        ("2024-11-21", T.DateType(), __import__("datetime").date(2024, 11, 21)),
        (None, T.DateType(), None),
    ],
)
def test_partition_value_parses_delta_strings(text, data_type, value) -> None:
    assert partition_value(text, data_type) == value


# -- ColumnRange: an overwrite's prunable predicate ---------------------------------------------------


@pytest.mark.parametrize(
    ("column_range", "sql"),
    [
        (ColumnRange("ts", above=10, at_most=20), "`ts` > 10 AND `ts` <= 20"),
        (ColumnRange("ts", above=10), "`ts` > 10"),
        (ColumnRange("ts", at_most=20), "`ts` <= 20"),
        (ColumnRange("valid_to", above=10, or_null=True), "(`valid_to` IS NULL OR (`valid_to` > 10))"),
        (ColumnRange("ts"), "`ts` IS NOT NULL"),
        (ColumnRange("ts", or_null=True), "true"),
    ],
)
def test_column_range_is_its_sql_predicate(column_range: ColumnRange, sql: str) -> None:
    assert column_range.sql() == sql


@pytest.mark.parametrize(
    ("column_range", "stats", "may_hold"),
    [
        # (rows, nulls, min, max) of the file's column
        (ColumnRange("ts", above=10, at_most=20), (5, 0, 1, 10), False),  # every value at or below the lower bound
        (ColumnRange("ts", above=10, at_most=20), (5, 0, 21, 30), False),  # every value above the upper one
        (ColumnRange("ts", above=10, at_most=20), (5, 0, 10, 11), True),
        (ColumnRange("ts", above=10, at_most=20), (5, 0, 20, 30), True),
        (ColumnRange("ts", above=10, at_most=20), (5, 0, 1, 30), True),  # straddles: Parquet decides
        (ColumnRange("ts", above=10, at_most=20), (5, 5, None, None), False),  # NULLs only, and NULLs are out
        (ColumnRange("ts", above=10, at_most=20), (5, 2, 1, 5), False),
        (ColumnRange("ts", above=10, at_most=20, or_null=True), (5, 2, 1, 5), True),  # its NULLs are in
        (ColumnRange("ts", above=10, or_null=True), (5, 0, 1, 10), False),
        (ColumnRange("ts", above=10, or_null=True), (5, 0, 1, 11), True),
        # unknown statistics never prune (files written before the log carried them)
        (ColumnRange("ts", above=10, at_most=20), (5, None, None, None), True),
        (ColumnRange("ts", above=10, at_most=20), (None, 0, 1, 5), True),
        (ColumnRange("ts", above=10, at_most=20), (5, 0, None, None), True),
    ],
)
def test_column_range_prunes_only_files_proven_outside(column_range: ColumnRange, stats: tuple, may_hold: bool) -> None:
    assert column_range.may_hold(*stats) is may_hold


def test_column_range_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="column"):
        ColumnRange("")
    with pytest.raises(ValueError, match="above"):
        ColumnRange("ts", above="5")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at_most"):
        ColumnRange("ts", at_most=True)


# -- bounds_by_partition: MIN / MAX per partition from the files' statistics ----------------------------


def _stats(part: str | None, rows: int | None, nulls: int | None, low: int | None, high: int | None) -> FileColumnStats:
    return FileColumnStats({"namesrv": part, "day": "2024-11-21"}, rows, nulls, low, high)


def test_bounds_by_partition_is_min_and_max_per_partition_value() -> None:
    files = [
        _stats("a", 5, 0, 10, 20),
        _stats("a", 3, 1, 4, 12),  # some NULLs: its bounds still count
        _stats("b", 2, 0, 30, 30),
        _stats("b", 4, 4, None, None),  # NULLs only: adds nothing
        _stats(None, 1, 0, 7, 7),  # the NULL partition is a group of its own, as in GROUP BY
        _stats("c", 0, 0, None, None),  # no rows
        _stats("d", 2, 2, None, None),  # a partition of NULLs only is absent, as a group whose MIN is NULL
    ]
    assert bounds_by_partition(files, "namesrv") == {"a": (4, 20), "b": (30, 30), None: (7, 7)}
    assert bounds_by_partition(files, "day") == {"2024-11-21": (4, 30)}
    assert bounds_by_partition([], "namesrv") == {}


@pytest.mark.parametrize(
    "unknown",
    [_stats("a", None, 0, 1, 2), _stats("a", 3, None, 1, 2), _stats("a", 3, 0, None, 2), _stats("a", 3, 1, 1, None)],
    ids=["no row count", "no null count", "no minimum", "no maximum"],
)
def test_bounds_by_partition_says_nothing_when_a_file_cannot_tell(unknown: FileColumnStats) -> None:
    assert bounds_by_partition([_stats("a", 5, 0, 10, 20), unknown], "namesrv") is None


def test_a_retention_covering_a_kept_version_reaches_back_past_the_commit_after_it() -> None:
    hour, now = 3_600_000, 1_800_000_000_000
    assert retention_covering(168, None, now) == 168  # nothing removed the kept version's files yet
    assert retention_covering(168, now - 30 * hour, now) == 168  # the retention covers that commit
    assert retention_covering(0, now - 1, now) == 2  # 1 ms old: a whole hour, and one for the clocks
    assert retention_covering(24, now - 30 * hour, now) == 31
    assert retention_covering(24, now - 30 * hour - 1, now) == 32
    assert retention_covering(0, now + hour, now) == 1  # a writer's clock ahead of ours
    with pytest.raises(ValueError, match="retention_hours"):
        retention_covering(-1, None, now)
