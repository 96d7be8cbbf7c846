"""A reload after a publish reuses what the served index holds (``RouteIndex.load(previous=...)``):
only the files added to the published table versions since are read, the rows of the files removed
since are gone, and the index is the one a fresh load of the same publish builds, array for array,
answer for answer.

The warehouses are real: the tiny preset replayed and published in windows by the pipeline
(``windowed``: three windows published, a fourth left), then one more window, a re-run of an earlier
window (backfill), a compaction between publishes, and a publish log restored to an older publish.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from nsreplay.config import load_settings
from nsreplay.history import PublishedHistory, latest_publish_row
from nsreplay.serving import index as module
from nsreplay.serving.index import RESIDENT, TABLES, RouteIndex
from nsreplay.storage import CommitInfo, Warehouse
from schemas.gold import PUBLISH_LOG

SHAPES = (("standard", 401), ("legacy", 399))


@pytest.fixture
def merging(monkeypatch):
    """Every table merged whatever the share of its files replaced: the tiny windows are small, and
    the merge (not the fallback to a full read) is what these tests check."""
    monkeypatch.setattr(module, "MERGE_SHARE", float("inf"))


def copy(root: str, target: Path, spark) -> Warehouse:
    shutil.copytree(root, target)
    return Warehouse(str(target), spark, "delta-rs")


def published_files(warehouse: Warehouse, row) -> dict[str, set[str]]:
    """The data files of each resident table's version named by the publish row ``row``."""
    versions = dict(row["table_versions"])
    return {name: {f.path for f in warehouse.files(spec, versions[spec.name])} for name, spec in RESIDENT.items()}


def reloaded(warehouse: Warehouse, previous: RouteIndex, before: dict[str, set[str]]) -> tuple[RouteIndex, RouteIndex]:
    """(the index reloaded from ``previous``, a fresh load), checked equal; every table merged, having
    read exactly the files of its new version that were not in ``before``."""
    incremental = RouteIndex.load(warehouse.root, previous=previous)
    fresh = RouteIndex.load(warehouse.root)
    assert_same_index(incremental, fresh)
    after = published_files(warehouse, latest_publish_row(warehouse))
    for name, load in incremental.loads.items():
        assert not load.full, (name, load)
        assert set(load.files_read) == after[name] - before[name], name
        assert load.files_kept == len(after[name] & before[name]), name
    assert_reused(incremental, previous)
    return incremental, fresh


def assert_reused(incremental: RouteIndex, previous: RouteIndex) -> None:
    """What a merged index takes from the one it was merged from: the BrokerData of every broker row
    kept (and only those), and each map of keys whose key lists did not change (and only those)."""
    kept = {id(b) for b in previous._broker_rows}
    assert sum(id(b) in kept for b in incremental._broker_rows) == incremental.loads["brokerAddrTable"].rows_kept
    for attribute, tables in (("_topic_keys", ["topicQueueTable"]), ("_broker_key", ["brokerAddrTable"]), ("_order_key", ["orderTopicConf"]),
                              ("_topic_brokers", ["topicQueueTable", "brokerAddrTable"])):
        unchanged = all(incremental._tables[t].key_values == previous._tables[t].key_values for t in tables)
        assert (getattr(incremental, attribute) is getattr(previous, attribute)) == unchanged, attribute
    for name, table in incremental._tables.items():
        unchanged = table.key_values == previous._tables[name].key_values
        assert (table.key_values is previous._tables[name].key_values) == unchanged == (table.ns_keys is previous._tables[name].ns_keys), name
        assert table.origin is None, name  # not held


def test_a_reload_of_the_same_publish_reuses_every_map_and_broker_data(demo_root) -> None:
    root = demo_root
    served = RouteIndex.load(root)
    incremental = RouteIndex.load(root, previous=served)
    assert all(not load.full and load.files_read == () for load in incremental.loads.values())
    assert_same_index(incremental, RouteIndex.load(root))
    assert_reused(incremental, served)
    for attribute in ("_topic_keys", "_broker_key", "_order_key", "_topic_brokers"):
        assert getattr(incremental, attribute) is getattr(served, attribute), attribute
    assert all(a is b for a, b in zip(incremental._broker_rows, served._broker_rows, strict=True))


def test_reloads_after_windows_a_backfill_and_a_rewound_publish_equal_fresh_loads(windowed, spark, tmp_path, merging) -> None:
    from pipelines.replay.run import run_backfill, run_replay

    root, ends = windowed
    warehouse = copy(root, tmp_path / "wh", spark)
    first_row = latest_publish_row(warehouse)
    first_publish = warehouse.version(PUBLISH_LOG)
    served = RouteIndex.load(warehouse.root)
    before = published_files(warehouse, first_row)

    # one more window: its commits add files and replace those of the intervals it closed
    run_replay(spark, warehouse, load_settings(), "w3", window_from=ends[2], window_to=ends[3])
    served, _ = reloaded(warehouse, served, before)
    after_w3 = published_files(warehouse, latest_publish_row(warehouse))
    assert any(before[name] - after_w3[name] for name in RESIDENT), "no file was removed: the rows dropped are not tested"

    # a re-run of the middle window: its slice of every table is replaced
    run_backfill(spark, warehouse, load_settings(), "again", start=ends[0], end=ends[1])
    served, _ = reloaded(warehouse, served, after_w3)

    # the publish log rewound to the first publish: the tables' older versions, whose files come back
    rewound = published_files(warehouse, latest_publish_row(warehouse))
    warehouse.restore(PUBLISH_LOG, first_publish, CommitInfo(run_id="rewind", job="test"))
    assert latest_publish_row(warehouse)["run_id"] == first_row["run_id"]
    served, fresh = reloaded(warehouse, served, rewound)
    assert_same_index(served, RouteIndex.load(root))  # the index of the first publish, from the original warehouse too


def test_a_reload_after_a_compaction_and_a_window_equals_a_fresh_load(windowed, spark, tmp_path, merging) -> None:
    from nsreplay.compaction import Policy, compact_warehouse
    from pipelines.replay.run import run_replay

    root, ends = windowed
    warehouse = copy(root, tmp_path / "wh", spark)
    served = RouteIndex.load(warehouse.root)
    before = published_files(warehouse, latest_publish_row(warehouse))
    results = compact_warehouse(warehouse, Policy(target_bytes=128 << 20, span_ms=24 * 3_600_000, row_group_rows=1_000), dry_run=False, run_id="compact-1")
    assert any(r.result is not None and r.result.removed for r in results)
    run_replay(spark, warehouse, load_settings(), "w3", window_from=ends[2], window_to=ends[3])
    after = published_files(warehouse, latest_publish_row(warehouse))
    assert any(len(before[name] - after[name]) > 1 for name in RESIDENT), "no table's files were merged"
    reloaded(warehouse, served, before)


def test_a_table_mostly_replaced_is_read_whole(windowed, spark, tmp_path) -> None:
    """With the default share, a table whose files to read hold more rows than the ones kept is
    read whole (and says why); the index is still a fresh load's."""
    root, _ = windowed
    warehouse = Warehouse(root, None, "delta-rs")
    versions = dict(latest_publish_row(warehouse)["table_versions"])
    spec = RESIDENT["topicQueueTable"]
    files = sorted(warehouse.files(spec, versions[spec.name]), key=lambda f: f.path)
    assert len(files) > 2
    horizon = max(c.to_ts for c in PublishedHistory(root).coverage())
    held, _ = module._resident_table("topicQueueTable", spec, files[:1], horizon, None, None)
    table, load = module._resident_table("topicQueueTable", spec, files, horizon, held, None)
    fresh, _ = module._resident_table("topicQueueTable", spec, files, horizon, None, None)
    assert load.full and "files to read" in load.reason and set(load.files_read) == {f.path for f in files}
    assert_same_table(table, fresh)
    table, load = module._resident_table("topicQueueTable", spec, files[1:], horizon, fresh, None)
    assert not load.full and load.files_read == () and load.files_kept == len(files) - 1
    assert_same_table(table, module._resident_table("topicQueueTable", spec, files[1:], horizon, None, None)[0])


def test_an_index_of_another_warehouse_is_not_reused(windowed, tmp_path) -> None:
    root, _ = windowed
    other = str(tmp_path / "copy")
    shutil.copytree(root, other)
    index = RouteIndex.load(other, previous=RouteIndex.load(root))
    assert all(load.full and "another warehouse" in load.reason for load in index.loads.values())
    assert_same_index(index, RouteIndex.load(other))


# -- comparison of two indexes: the whole held state, then answers -------------------------------------


def assert_same_table(a: module._Intervals, b: module._Intervals, roots: tuple[str, str] = ("", "")) -> None:
    """``a`` and ``b`` hold the same arrays, of the same types; their files are the same below their
    warehouses' ``roots``."""
    for name in ("comp", "valid_to", "key_start", "file_code", "row_values", "row_index"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), name
    for name in ("n", "n_keys", "base", "key_values", "ns_keys", "key_cols", "key_types", "row_columns", "row_types", "schema"):
        assert getattr(a, name) == getattr(b, name), name
    assert all(p.startswith(roots[0]) for p in a.files) and all(p.startswith(roots[1]) for p in b.files)
    assert [p[len(roots[0]):] for p in a.files] == [p[len(roots[1]):] for p in b.files]
    assert a.values.schema == b.values.schema
    for name in a.values.column_names:
        x, y = a.values.column(name).combine_chunks(), b.values.column(name).combine_chunks()
        if pa.types.is_dictionary(x.type):  # the dictionaries and the codes themselves, not only the values
            assert x.dictionary.equals(y.dictionary) and x.indices.equals(y.indices), name
        assert x.equals(y), name


def assert_same_index(a: RouteIndex, b: RouteIndex) -> None:
    assert (a.run_id, a.versions, a.coverage()) == (b.run_id, b.versions, b.coverage())
    assert a._tables.keys() == b._tables.keys() == RESIDENT.keys()
    for name in RESIDENT:
        assert_same_table(a._tables[name], b._tables[name], (a.warehouse_root, b.warehouse_root))
    for name in ("_epochs", "_epoch_starts", "_topic_keys", "_broker_key", "_broker_rows", "_order_key", "_order_conf", "_topic_brokers", "_tq_queues"):
        assert getattr(a, name) == getattr(b, name), name
    assert np.array_equal(a._tq_index, b._tq_index) and np.array_equal(a._tq_values, b._tq_values)
    assert a.memory_bytes() == b.memory_bytes()
    answers = 0
    for cov in a.coverage():
        ns = cov.namesrv
        topics = a.topic_names(ns)
        assert topics == b.topic_names(ns)
        for t in instants(a, ns):
            for shape, version in SHAPES:
                assert a.cluster(ns, t, request_version=version, shape=shape) == b.cluster(ns, t, request_version=version, shape=shape)
                assert a.topics(ns, t, request_version=version, shape=shape) == b.topics(ns, t, request_version=version, shape=shape)
                for topic in (*topics, "no-such-topic"):
                    assert a.route(ns, topic, t, request_version=version, shape=shape) == b.route(ns, topic, t, request_version=version, shape=shape), (ns, topic, t)
                    answers += 1
            for table in TABLES:
                assert a.table_rows(ns, table, t) == b.table_rows(ns, table, t), (ns, table, t)
            assert a.snapshot(ns, t) == b.snapshot(ns, t)
        for topic in topics[:3]:
            assert a.route_history(ns, topic, None, None) == b.route_history(ns, topic, None, None)
    assert answers > 100


def instants(index: RouteIndex, namesrv: str) -> list[int]:
    """Instants of ``namesrv``'s covered range: its ends, every instant at which a held row of it
    starts or ends and the millisecond before (at most 40 of them, spread over the range)."""
    cov = next(c for c in index.coverage() if c.namesrv == namesrv)
    found = {cov.from_ts, cov.to_ts}
    for table in index._tables.values():
        lo, hi = table.ns_keys.get(namesrv, (0, 0))
        edges = table.boundaries(range(lo, hi))
        for ts in edges[(edges >= cov.from_ts) & (edges <= cov.to_ts)].tolist():
            found.update((ts, max(ts - 1, cov.from_ts)))
    ordered = sorted(found)
    step = max(1, len(ordered) // 40)
    return sorted({*ordered[::step], cov.from_ts, cov.to_ts})


@pytest.mark.parametrize("held_size, added_size, nulls, share, prefix", [
    (3, 2, True, 0.3, "v"), (100, 60, True, 0.3, "v"), (200, 40000, False, 0.3, "w"), (0, 5, True, 0.3, "v"), (4, 0, False, 0.3, "v"),
    (40, 50, False, 0.9, "w"),   # int8 held and added, int16 merged: 80 + 100 values
    (200, 3, True, 0.01, "v"),   # int16 held, int8 merged: the kept rows use a few entries
])
def test_a_merged_dictionary_column_is_the_one_made_from_its_rows(held_size, added_size, nulls, share, prefix) -> None:
    """The merge's dictionary column (kept rows of a held one, then an added one, reordered) is the
    column ``_dictionary_array`` makes from those rows' values: the same dictionary (the values used,
    sorted: entries no kept row uses dropped, the index type widened or narrowed by their number),
    the same codes and NULLs."""
    rng = np.random.default_rng(held_size + added_size)

    def column(size: int, n: int, prefix: str) -> pa.DictionaryArray:
        values = [f"{prefix}{v}" for v in rng.integers(0, max(size, 1) * 2, size=n).tolist()] if size else [None] * n
        values = [None if nulls and rng.random() < 0.1 else v for v in values]
        return module._dictionary_array(pa.array(values, pa.string()), np.arange(n, dtype=np.int64))

    held, added = column(held_size, 3000, "v"), column(added_size, 900, prefix)
    rows = np.flatnonzero(rng.random(len(held)) < share)
    order = rng.permutation(len(rows) + len(added))
    got = module._merged_dictionary_array(held, rows, added, order)
    values = pa.concat_arrays([held.dictionary_decode().take(pa.array(rows)), added.dictionary_decode()])
    want = module._dictionary_array(values, order.astype(np.int64))
    assert got.type == want.type and got.dictionary.equals(want.dictionary) and got.indices.equals(want.indices)
    assert got.to_pylist() == values.take(pa.array(order)).to_pylist()
