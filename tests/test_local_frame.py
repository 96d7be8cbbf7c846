"""local_frame: the DataFrame createDataFrame gives for the same rows (whole frames, nested types
and schema included), computed without a Python worker, and refusing rows that do not fit."""

from __future__ import annotations

import pyarrow as pa
import pytest
from chispa import assert_df_equality
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from nsreplay.runtime import local_frame
from schemas.gold import REPLAY_RUNS

COVERAGE = StructType([StructField("namesrv", StringType(), False), StructField("from_ts", LongType(), False)])
SCHEMA = StructType(
    [
        StructField("run_id", StringType(), False),
        StructField("n", IntegerType(), True),
        StructField("ratio", DoubleType(), True),
        StructField("ok", BooleanType(), False),
        StructField("state", BinaryType(), True),
        StructField("versions", MapType(StringType(), LongType()), True),
        StructField("coverage", ArrayType(COVERAGE, False), True),
    ]
)
ROWS = [
    ("r1", 3, 0.25, True, b"\x00\x01", {"gold.a": 4, "gold.b": 0}, [("10.0.0.1:9876", 1), ("10.0.0.2:9876", 2)]),
    ("r2", None, None, False, None, None, None),
    ("r3", -1, 1.0, True, b"", {}, []),
]


def _python_rdd_in(df) -> bool:
    return "PythonRDD" in df._jdf.queryExecution().toRdd().toDebugString()


def test_local_frame_equals_create_dataframe_whole(spark) -> None:
    expected = spark.createDataFrame(ROWS, SCHEMA)
    assert _python_rdd_in(expected)  # what local_frame avoids
    from_tuples = local_frame(spark, ROWS, SCHEMA)
    from_dicts = local_frame(spark, [dict(zip(SCHEMA.fieldNames(), row)) for row in ROWS], SCHEMA)
    for actual in (from_tuples, from_dicts):
        assert actual.schema == SCHEMA
        assert_df_equality(actual, expected)  # rows in the order given, as createDataFrame keeps them
        assert not _python_rdd_in(actual)


def test_local_frame_takes_a_ddl_schema_and_no_rows(spark) -> None:
    actual = local_frame(spark, [("ns", "u", "s")], "namesrv string, unit string, source string")
    assert_df_equality(actual, spark.createDataFrame([("ns", "u", "s")], "namesrv string, unit string, source string"))
    empty = local_frame(spark, [], REPLAY_RUNS.schema)
    assert empty.schema == REPLAY_RUNS.schema
    assert empty.count() == 0


def test_a_dict_row_may_leave_a_nullable_column_out(spark) -> None:
    actual = local_frame(spark, [{"run_id": "r", "ok": True}], SCHEMA)
    assert actual.collect()[0].asDict() == {"run_id": "r", "n": None, "ratio": None, "ok": True, "state": None, "versions": None, "coverage": None}


@pytest.mark.parametrize(
    ("rows", "error", "message"),
    [
        ([("r1", 3)], ValueError, "2 values for 7 columns"),
        ([{"run_id": "r", "ok": True, "oops": 1}], ValueError, "oops"),
        ([{"ok": True}], ValueError, "'run_id' is not nullable"),
        ([("r1", "3", None, True, None, None, None)], pa.ArrowInvalid, "tried to convert to int32"),
        ([(7, 3, None, True, None, None, None)], pa.ArrowTypeError, "Expected bytes"),
        ([("r1", 2**40, None, True, None, None, None)], pa.ArrowInvalid, "too large"),
    ],
    ids=["short tuple", "unknown name", "null in a non-nullable column", "string for an int", "int for a string", "int out of range"],
)
def test_local_frame_refuses_rows_that_do_not_fit(spark, rows, error, message) -> None:
    with pytest.raises(error, match=message):
        local_frame(spark, rows, SCHEMA)
