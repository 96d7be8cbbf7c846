"""The delta-rs backend's kept tables (nsreplay/storage/snapshots.py), with real Delta tables on disk:
a kept table brought up to date must read exactly like the table opened afresh, whoever committed."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.schema import Field, PrimitiveType
from pyspark.sql import SparkSession

from nsreplay.storage import CommitInfo, TableNotFoundError, VersionNotFoundError, Warehouse
from nsreplay.storage.backend import TableLocation
from nsreplay.storage.snapshots import KEEP_PER_TABLE, Snapshots
from test_storage_warehouse import D1, EVENTS, assert_same, events


def _state(table: DeltaTable) -> tuple:
    """What a reader of ``table`` sees: version, schema, partitioning, files, properties, the newest
    commits and an app transaction."""
    return (
        table.version(),
        table.schema().to_json(),
        tuple(table.metadata().partition_columns),
        sorted(table.file_uris()),
        table.metadata().configuration,
        [(h["version"], h.get("operation")) for h in table.history(3)],
        table.transaction_version("other-writer"),
    )


def _directory(location: TableLocation) -> str:
    return location.uri.removeprefix("file://")


@pytest.fixture(params=["local", "uri"])
def location(request, tmp_path: Path) -> TableLocation:
    """A table of one commit; "uri": named by a ``file://`` URI and taken for a remote one (its log
    is checked through a pyarrow filesystem, as on object storage)."""
    write_deltalake(str(tmp_path / "t"), pa.table({"a": [0]}))
    local = TableLocation.of(str(tmp_path), ("t",))
    if request.param == "local":
        return local
    return TableLocation(uri=local.spark_uri, spark_uri=local.spark_uri, is_local=False)


def test_a_kept_table_follows_every_kind_of_commit_like_a_fresh_open(location: TableLocation) -> None:
    from deltalake import CommitProperties, Transaction

    snapshots = Snapshots()
    changes = [
        lambda: write_deltalake(location.uri, pa.table({"a": [1]}), mode="append",
                                commit_properties=CommitProperties(app_transactions=[Transaction(app_id="other-writer", version=1)])),
        lambda: DeltaTable(location.uri).alter.add_columns([Field("b", PrimitiveType("string"), nullable=True)]),
        lambda: write_deltalake(location.uri, pa.table({"a": [2], "b": ["x"]}), mode="overwrite"),
        lambda: DeltaTable(location.uri).restore(1),
        lambda: [write_deltalake(location.uri, pa.table({"a": [i]}), mode="append") for i in range(12)],
        lambda: DeltaTable(location.uri).create_checkpoint(),
        lambda: DeltaTable(location.uri).alter.set_table_properties({"delta.checkpointInterval": "4"}),
    ]
    with snapshots.latest(location) as kept:
        assert _state(kept) == _state(DeltaTable(location.uri))
    for change in changes:
        change()
        with snapshots.latest(location) as table:
            assert table is kept  # the same table, brought up to date: not opened again
            assert _state(table) == _state(DeltaTable(location.uri))


def test_a_commit_through_a_kept_table_is_seen_by_the_next_caller(location: TableLocation) -> None:
    snapshots = Snapshots()
    with snapshots.latest(location) as table:
        write_deltalake(location.uri, pa.table({"a": [1]}), mode="append")  # another writer, after the read snapshot
        table.alter.add_columns([Field("b", PrimitiveType("string"), nullable=True)])  # version 2, through it
    with snapshots.latest(location) as table:
        assert _state(table) == _state(DeltaTable(location.uri))
        assert table.version() == 2 and "\"b\"" in table.schema().to_json()


def test_a_version_is_read_as_it_was_whatever_the_kept_tables(location: TableLocation) -> None:
    snapshots = Snapshots()
    for i in range(1, 4):
        write_deltalake(location.uri, pa.table({"a": [i]}), mode="append")
    with snapshots.latest(location) as latest:
        assert latest.version() == 3
    for version in (1, 3, 2, 3):
        with snapshots.at(location, version) as table:
            assert _state(table) == _state(DeltaTable(location.uri, version=version))
    with snapshots.at(location, 3) as table:
        assert table is latest  # the kept table at that version serves it
    with pytest.raises(VersionNotFoundError):
        with snapshots.at(location, 9):
            pass


def test_a_table_made_again_in_its_place_is_opened_afresh(location: TableLocation) -> None:
    snapshots = Snapshots()
    for i in range(1, 6):
        write_deltalake(location.uri, pa.table({"a": [i]}), mode="append")
    with snapshots.latest(location) as table:
        assert table.version() == 5
    shutil.rmtree(_directory(location))
    write_deltalake(location.uri, pa.table({"z": ["new"]}))
    with snapshots.latest(location) as table:
        assert _state(table) == _state(DeltaTable(location.uri))
        assert table.version() == 0
    shutil.rmtree(_directory(location))
    with pytest.raises(TableNotFoundError):
        with snapshots.latest(location):
            pass


def test_callers_at_once_get_tables_of_their_own_and_a_failed_block_keeps_none(location: TableLocation) -> None:
    snapshots = Snapshots()
    callers = KEEP_PER_TABLE + 1
    inside, release = threading.Barrier(callers + 1), threading.Event()  # the callers and this thread
    held: list[DeltaTable] = []

    def caller() -> None:
        with snapshots.latest(location) as table:
            held.append(table)
            inside.wait(timeout=30)
            release.wait(timeout=30)

    threads = [threading.Thread(target=caller) for _ in range(callers)]
    for thread in threads:
        thread.start()
    inside.wait(timeout=30)  # every caller is inside its block at once
    release.set()
    for thread in threads:
        thread.join(timeout=30)
    assert len({id(t) for t in held}) == callers
    assert len(snapshots._kept[location.uri]) == KEEP_PER_TABLE  # the newest are kept, no more
    with pytest.raises(RuntimeError):
        with snapshots.latest(location) as failed:
            raise RuntimeError("the caller failed")
    assert all(t is not failed for t in snapshots._kept[location.uri])


def test_two_warehouses_writing_one_table_by_turns_commit_and_read_exactly(spark: SparkSession, tmp_path: Path) -> None:
    """Two processes' worth of kept tables on one warehouse: each writer's kept read snapshot is
    behind the other's commits when it writes again; versions, app ids and rows stay exact."""
    first, second = (Warehouse(str(tmp_path / "wh"), spark, backend="delta-rs") for _ in range(2))
    rows = [("10.0.0.1:9876", D1, ts, 105, str(ts)) for ts in range(1, 7)]
    versions = []
    for i, row in enumerate(rows):
        writer = (first, second)[i % 2]
        versions.append(writer.append(EVENTS, events(spark, [row]), CommitInfo(run_id=f"r{i}", job="ingest")))
        assert writer.version(EVENTS) == versions[-1]
    assert versions == list(range(1, 7))
    for warehouse in (first, second):
        assert warehouse.committed(EVENTS, CommitInfo(run_id="r5", job="ingest"))
        assert warehouse.append(EVENTS, events(spark, rows[:1]), CommitInfo(run_id="r4", job="ingest")) is None  # the other's run: skipped
        assert_same(warehouse.read(EVENTS), events(spark, rows))
        assert_same(warehouse.read(EVENTS, version=3), events(spark, rows[:3]))
