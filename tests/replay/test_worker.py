"""gc_paused: the collector is off inside the block and back to its previous state after it.
table_rows: the rows to_pylist gives, with maps as dicts, for chunked, sliced and null maps."""

from __future__ import annotations

import gc

import pyarrow as pa
import pytest

from pipelines.worker import gc_paused, table_rows


def test_gc_paused_restores_the_previous_state_even_on_error() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with gc_paused():
            raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_table_rows_are_to_pylist_with_maps_as_dicts() -> None:
    schema = pa.schema([("ts", pa.int64()), ("ext_fields", pa.map_(pa.string(), pa.string())), ("config", pa.map_(pa.string(), pa.string())), ("tags", pa.list_(pa.string()))])
    first = pa.table(
        {
            "ts": [1, 2, 3],
            "ext_fields": [[("brokerName", "b1"), ("brokerId", "0")], [("x", "y")], []],
            "config": [[("q", "0")], [("a", "1")], None],
            "tags": [["x"], None, []],
        },
        schema=schema,
    )
    second = pa.table({"ts": [4, 5], "ext_fields": [[("k", "v")], [("k", "w"), ("z", "")]], "config": [None, None], "tags": [None, ["y"]]}, schema=schema)
    table = pa.concat_tables([first, second]).slice(1, 4)  # two chunks, both cut
    assert table_rows(table) == [
        {"ts": 2, "ext_fields": {"x": "y"}, "config": {"a": "1"}, "tags": None},
        {"ts": 3, "ext_fields": {}, "config": None, "tags": []},
        {"ts": 4, "ext_fields": {"k": "v"}, "config": None, "tags": None},
        {"ts": 5, "ext_fields": {"k": "w", "z": ""}, "config": None, "tags": ["y"]},
    ]
    expected = [{k: dict(v) if k in ("ext_fields", "config") and v is not None else v for k, v in row.items()} for row in table.to_pylist()]
    assert table_rows(table) == expected
    assert table_rows(table.slice(0, 0)) == []
    nulls = pa.table({"ts": [7], "ext_fields": [None], "config": [None], "tags": [None]}, schema=schema)
    assert table_rows(nulls) == [{"ts": 7, "ext_fields": None, "config": None, "tags": None}]
