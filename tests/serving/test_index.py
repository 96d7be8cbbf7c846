"""RouteIndex answers exactly like HistorySource (the slow, obviously-correct oracle) on the demo
warehouse: route (request versions 121 and 401, every topic and an unknown one), cluster, topic list,
full snapshots and table rows, at instants around every incident of every NameServer; route history
agrees with point lookups; errors are those of PublishedHistory."""

from __future__ import annotations

import bisect
import json
import random

import pytest
from deltalake import DeltaTable

from nsreplay.history import NotPublishedError, OutsideCoverageError, PublishedHistory
from nsreplay.model import Answer, cluster_info, route_info, same_answer, topic_list
from nsreplay.model import ResponseCode
from nsreplay.model.render import ROUTE_TABLES
from nsreplay.serving.index import RESIDENT, TABLES, OutsideRangeError, RouteIndex, UnknownNamesrvError, UnknownTableError
from schemas.gold import NAMESRV_EPOCHS, ROUTE_CHANGES, TOPIC_QUEUE_INTERVALS


def _same(a: Answer, b: Answer) -> bool:
    """Same code, remark and body — byte for byte (both sides render sorted lists)."""
    return same_answer(a, b) and a == b


def _assert_answers_match(index, oracle, instants_by_ns, topics) -> int:
    """Every route (both request versions), cluster and topic-list answer of ``index`` at every
    instant is the oracle's; returns how many routes were compared."""
    checked = 0
    for ns, instants in instants_by_ns.items():
        for t in instants:
            snap = oracle.snapshot(ns, t)
            for topic in topics[ns]:
                for version in (121, 401):
                    got = index.route(ns, topic, t, request_version=version)
                    want = route_info(snap, topic, request_version=version)
                    assert _same(got, want), (ns, t, topic, version, got, want)
                    checked += 1
            for version in (121, 401):
                assert _same(index.cluster(ns, t, request_version=version), cluster_info(snap, request_version=version)), (ns, t)
                assert _same(index.topics(ns, t, request_version=version), topic_list(snap, request_version=version)), (ns, t)
            assert _same(index.cluster(ns, t, request_version=401, shape="standard"), cluster_info(snap, shape="standard"))
    return checked


def test_route_cluster_topics_match_the_oracle(demo_index, demo_oracle, demo_instants, demo_topics):
    checked = _assert_answers_match(demo_index, demo_oracle, demo_instants, demo_topics)
    assert checked > 1000
    assert {n for n in demo_instants} == {c.namesrv for c in demo_oracle.coverage()}


def test_the_oracle_itself_agrees_on_a_sample(demo_index, demo_oracle, demo_instants, demo_topics):
    """The same through HistorySource's own RouteSource methods (not only its snapshots)."""
    rnd = random.Random(3)
    for ns, instants in demo_instants.items():
        for t in rnd.sample(instants, min(6, len(instants))):
            for topic in rnd.sample(demo_topics[ns], 3) + [demo_topics[ns][-1]]:
                assert _same(demo_index.route(ns, topic, t, request_version=401), demo_oracle.route(ns, topic, t, request_version=401))
            assert _same(demo_index.cluster(ns, t, request_version=0), demo_oracle.cluster(ns, t, request_version=0))
            assert _same(demo_index.topics(ns, t, request_version=0), demo_oracle.topics(ns, t, request_version=0))


def _assert_tables_match(root, index, oracle, instants_by_ns, per_namesrv: int = 15) -> None:
    """At ``per_namesrv`` random instants of each NameServer: the full snapshot is the oracle's, and
    the rows of every table (``/v1/tables``) are the published rows valid then."""
    history = PublishedHistory(root)
    rnd = random.Random(5)
    for ns, instants in instants_by_ns.items():
        for t in rnd.sample(instants, min(per_namesrv, len(instants))):
            assert index.snapshot(ns, t) == oracle.snapshot(ns, t), (ns, t)
            for name, spec in TABLES.items():
                at, tick, rows = index.table_rows(ns, name, t)
                want = history.rows(spec, ns, t)
                for r in want:
                    r.pop("namesrv"), r.pop("run_id")
                    if "broker_addrs" in r:
                        r["broker_addrs"] = {str(i): a for i, a in r["broker_addrs"]}
                key = lambda r: repr(sorted(r.items()))  # noqa: E731
                assert at == t and sorted(rows, key=key) == sorted(want, key=key), (ns, name, t)


def test_snapshots_and_table_rows_match(demo_root, demo_index, demo_oracle, demo_instants):
    _assert_tables_match(demo_root, demo_index, demo_oracle, demo_instants)


def test_an_index_built_from_many_parts_answers_like_the_oracle(demo_root, demo_oracle, demo_instants, demo_topics, monkeypatch):
    """Parts of a file each (the demo's topic-route table: six): each part's keys, strings and
    QueueData numbers are coded against the distinct values of the parts before it, and the rows of
    all parts are sorted once. The answers and table rows are still the oracle's, NULLs included."""
    from nsreplay.serving import index as module

    read = {}
    real_parts = module._parts

    def counted(spec, files, columns):
        parts, schema, paths = real_parts(spec, files, columns)

        def each():
            for part in parts:
                read[spec.name] = read.get(spec.name, 0) + 1
                yield part

        return each(), schema, paths

    monkeypatch.setattr(module, "PART_ROWS", 1)
    monkeypatch.setattr(module, "_parts", counted)
    index = RouteIndex.load(demo_root)
    assert read[TOPIC_QUEUE_INTERVALS.name] > 1 and read[TABLES["brokerAddrTable"].name] > 1
    assert _assert_answers_match(index, demo_oracle, demo_instants, demo_topics) > 1000
    _assert_tables_match(demo_root, index, demo_oracle, demo_instants, per_namesrv=5)


def test_tick_is_the_last_tick_of_the_epoch_grid(demo_root, demo_index, demo_instants):
    from nsreplay.storage import Warehouse, dataset
    from schemas.gold import SCAN_TICKS

    history = PublishedHistory(demo_root)
    ticks = dataset(SCAN_TICKS, Warehouse(demo_root, None, "delta-rs").files(SCAN_TICKS, history.versions[SCAN_TICKS.name])).to_table().to_pylist()
    for ns, instants in demo_instants.items():
        grid = sorted((r["tick_ts"], r["epoch_start_ts"]) for r in ticks if r["namesrv"] == ns)
        times = [g[0] for g in grid]
        for t in instants:
            i = bisect.bisect_right(times, t) - 1
            epoch_start = max((r["start_ts"] for r in history.rows(NAMESRV_EPOCHS, ns) if r["start_ts"] <= t), default=None)
            want = grid[i][0] if i >= 0 and (epoch_start is None or grid[i][1] == epoch_start) else None
            assert demo_index.tick_at(ns, t) == want, (ns, t)


def test_latest_state_is_the_end_of_coverage(demo_index, demo_oracle, demo_topics):
    for cov in demo_index.coverage():
        for topic in demo_topics[cov.namesrv][:5]:
            assert _same(demo_index.route(cov.namesrv, topic, None, request_version=401), demo_oracle.route(cov.namesrv, topic, cov.to_ts, request_version=401))
        assert demo_index.table_rows(cov.namesrv, "brokerAddrTable", None)[0] == cov.to_ts


def test_route_history_agrees_with_point_lookups(demo_index, demo_oracle, demo_topics):
    rnd = random.Random(11)
    for cov in demo_index.coverage():
        ns = cov.namesrv
        topics = demo_topics[ns]
        for topic in rnd.sample(topics[:-1], min(4, len(topics) - 1)) + [topics[-1]]:
            entries = demo_index.route_history(ns, topic, None, None)
            assert [e.ts for e in entries] == sorted({e.ts for e in entries})
            missing = ResponseCode.TOPIC_NOT_EXIST
            for e in entries:
                assert _same(e.answer, demo_index.route(ns, topic, e.ts, request_version=401, shape="standard"))
                if e.ts > cov.from_ts:
                    assert e.answer != demo_index.route(ns, topic, e.ts - 1, request_version=401, shape="standard")
                else:  # before the first record the NameServer had no route for anything
                    assert e.answer.code == ResponseCode.SUCCESS
                assert all(c["table"] in ("topicQueueTable", "brokerAddrTable", "orderTopicConf", "filterServerTable") for c in e.changes)
            # completeness: at any instant the answer is that of the last entry at or before it
            times = [e.ts for e in entries]
            for t in [rnd.randint(cov.from_ts, cov.to_ts) for _ in range(4)] + [e.ts - 1 for e in entries if e.ts > cov.from_ts][:6]:
                i = bisect.bisect_right(times, t) - 1
                want = demo_oracle.route(ns, topic, t, request_version=401)
                if i < 0:
                    assert want.code == missing, (ns, topic, t)
                else:
                    assert _same(entries[i].answer, want), (ns, topic, t)
            if entries:  # a window starting at a change reports that change first
                window = demo_index.route_history(ns, topic, entries[-1].ts, cov.to_ts)
                assert window == [entries[-1]]
                assert demo_index.route_history(ns, topic, entries[-1].ts + 1, cov.to_ts) == []
        assert demo_index.route_history(ns, topics[-1], None, None) == []


def test_route_history_changes_are_the_published_rows_of_its_instants(demo_root, demo_index, demo_topics):
    """Each entry's ``changes`` are exactly the ``gold.route_changes`` rows of its instant that touch
    the topic's route (its QueueDatas and order conf, the BrokerData of each brokerName it ever had,
    the filter servers), decoded, in (ts, phase, record_rank, table, key) order. The expected rows come
    from the whole published table version, read by deltalake, not from the files the index picks."""
    history = PublishedHistory(demo_root)
    published = DeltaTable(f"{demo_root}/gold/route_changes", version=history.versions[ROUTE_CHANGES.name]).to_pyarrow_table().to_pylist()
    rnd = random.Random(17)
    checked = 0
    for cov in demo_index.coverage():
        ns = cov.namesrv
        changes = [r for r in published if r["namesrv"] == ns and r["table"] in ROUTE_TABLES]
        changes.sort(key=lambda r: (r["ts"], r["phase"], r["record_rank"] is None, r["record_rank"] or 0, r["table"], r["key"]))
        queues = history.rows(TOPIC_QUEUE_INTERVALS, ns)
        for topic in rnd.sample(demo_topics[ns][:-1], min(5, len(demo_topics[ns]) - 1)):
            names = {r["broker_name"] for r in queues if r["topic"] == topic}
            entries = demo_index.route_history(ns, topic, None, None)
            assert entries
            for e in entries:
                want = [
                    {
                        "table": r["table"], "key": json.loads(r["key"]), "op": r["op"],
                        "before": None if r["before"] is None else json.loads(r["before"]),
                        "after": None if r["after"] is None else json.loads(r["after"]),
                        "cause": r["cause"], "phase": "tick" if r["phase"] == 1 else "record", "tick_ts": r["tick_ts"],
                    }
                    for r in changes
                    if r["ts"] == e.ts and (
                        json.loads(r["key"])[0] == topic if r["table"] in ("topicQueueTable", "orderTopicConf")
                        else json.loads(r["key"])[0] in names if r["table"] == "brokerAddrTable"
                        else True
                    )
                ]
                assert list(e.changes) == want, (ns, topic, e.ts)
                checked += len(want)
    assert checked > 0


def test_reads_of_published_files_in_flight_are_bounded_and_answer_alike(demo_root, demo_index, demo_topics):
    """Route histories and broker-live rows asked from many threads at once, on an index allowed one
    read of published files at a time: no two reads ran together, and every answer is the one the
    shared index gives sequentially."""
    from concurrent.futures import ThreadPoolExecutor

    index = RouteIndex.load(demo_root, stored_reads=1)
    asks = []
    for cov in demo_index.coverage():
        for topic in demo_topics[cov.namesrv][:4]:
            asks.append(("history", cov.namesrv, topic, None))
        for t in (cov.from_ts, (cov.from_ts + cov.to_ts) // 2, cov.to_ts):
            asks.append(("live", cov.namesrv, None, t))

    def ask(source, kind, ns, topic, t):
        return source.route_history(ns, topic, None, None) if kind == "history" else source.table_rows(ns, "brokerLiveTable", t)

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda a: ask(index, *a), asks * 3))
    assert got == [ask(demo_index, *a) for a in asks] * 3
    assert index._changes.most_concurrent == 1 and index._live.most_concurrent == 1


def test_errors_are_those_of_published_history(demo_index, tmp_path):
    cov = demo_index.coverage()[0]
    with pytest.raises(UnknownNamesrvError, match="unknown NameServer"):
        demo_index.route("10.9.9.9:9876", "t", None, request_version=401)
    for t in (cov.from_ts - 1, cov.to_ts + 1, -(10**30), 10**30):
        with pytest.raises(OutsideRangeError) as info:
            demo_index.cluster(cov.namesrv, t, request_version=401)
        assert isinstance(info.value, OutsideCoverageError)
        assert f"[{cov.from_ts}, {cov.to_ts}]" in str(info.value)
    with pytest.raises(UnknownTableError, match="topicQueueTable"):
        demo_index.table_rows(cov.namesrv, "nope", None)
    with pytest.raises(NotPublishedError):
        RouteIndex.load(str(tmp_path))


def test_a_load_opens_the_log_of_each_table_it_reads_once(demo_root, monkeypatch):
    """The publish log at its latest version, then each table the index reads at the version it
    names, once: the route tables, the epochs, the broker-live table and the route changes (whose
    file lists and statistics the index keeps), and no log twice."""
    from nsreplay.storage import snapshots

    opened, open_table = [], snapshots.open_table

    def recording(location, version=None):
        opened.append((location.uri.rstrip("/").rsplit("/", 1)[-1], version))
        return open_table(location, version)

    monkeypatch.setattr(snapshots, "open_table", recording)
    index = RouteIndex.load(demo_root)
    read = [*TABLES.values(), NAMESRV_EPOCHS, ROUTE_CHANGES]
    assert sorted(opened, key=repr) == sorted([("publish_log", None), *((s.name.split(".")[-1], index.versions[s.name]) for s in read)], key=repr)


def test_the_index_holds_the_route_tables_as_arrays_and_reads_the_live_table_per_request(demo_index):
    """Memory follows the rows of the route tables, kept as arrays, not Python objects; the
    broker-live table, which gains rows with every heartbeat, is not held (the tests above check
    what is read in its place against the oracle)."""
    assert set(demo_index._tables) == set(RESIDENT) == set(TABLES) - {"brokerLiveTable"}
    topics = demo_index._tables["topicQueueTable"]
    assert topics.n > 0 and topics.comp.dtype.name == "int64" and len(topics.key_values) < topics.n
    # per row, only what is not the key, the bisection arrays or a QueueData's distinct numbers
    assert topics.values.column_names == ["start_cause", "end_cause"]
    assert len(demo_index._tq_values) < topics.n and len(demo_index._tq_index) == topics.n
    assert demo_index._live.file_count > 0


@pytest.mark.parametrize("distinct", [(5, 7, 3, 2), (1 << 16,) * 4])
def test_the_queue_numbers_are_held_as_distinct_rows_and_an_index(distinct) -> None:
    """Every row's four numbers come back from (distinct rows, index); with more distinct values per
    column than a combined 62-bit code can hold, by a sort of the rows instead."""
    import numpy as np
    import pyarrow as pa

    from nsreplay.serving.index import _distinct_rows

    rng = np.random.default_rng(7)
    n = max(distinct) * 2
    columns = [pa.chunked_array([rng.integers(-k, k, size=n).astype(np.int32)]) for k in distinct]
    values, index = _distinct_rows(columns)
    rows = np.stack([c.to_numpy() for c in columns], axis=1)
    assert (values[index] == rows).all()
    assert len(values) == len({tuple(r) for r in rows.tolist()})
    empty, none = _distinct_rows([pa.chunked_array([pa.array([], pa.int32())])] * 4)
    assert empty.shape == (0, 4) and none.shape == (0,)


@pytest.mark.parametrize("distinct", [(3, 50, 7), (1 << 16,) * 4])
def test_the_keys_of_a_part_are_its_distinct_rows_with_null_a_value(distinct) -> None:
    """The key columns of a part become (distinct key tuples, each row's index into them), NULL a
    value of its own; with more distinct values than a combined 62-bit code can hold, by a dict."""
    import numpy as np
    import pyarrow as pa

    from nsreplay.serving.index import _distinct_keys

    rng = np.random.default_rng(11)
    n = max(distinct) * 2
    columns = []
    for k in distinct:
        values = [None if v == 0 else f"v{v}" for v in rng.integers(0, k, size=n).tolist()]
        columns.append(pa.chunked_array([pa.array(values[: n // 2], pa.string()), pa.array(values[n // 2 :], pa.string())]))
    keys, index = _distinct_keys(columns)
    rows = list(zip(*(c.to_pylist() for c in columns)))
    assert [keys[i] for i in index.tolist()] == rows
    assert len(keys) == len(set(rows)) and any(None in key for key in keys)


def test_files_are_read_in_order_and_only_a_few_ahead_of_the_index() -> None:
    """``_in_order`` returns the reads in the order of the items whatever order they finish in,
    never starts more than ``ahead`` reads beyond the one last returned, and when the index stops
    early (a failed build) the reads not started are not started."""
    import threading
    import time

    from nsreplay.serving.index import _in_order

    started: list[int] = []
    lock = threading.Lock()

    def read(i: int) -> int:
        with lock:
            started.append(i)
        time.sleep(0.002 * ((7 * i) % 5))  # later items often finish first
        return i * i

    taken = []
    for value in _in_order(range(40), read, 3):
        taken.append(value)
        time.sleep(0.003)  # a slow consumer: the reads could run far ahead if they were not held back
        assert max(started) <= len(taken) - 1 + 3  # the one last returned, and 3 beyond it
    assert taken == [i * i for i in range(40)] and sorted(started) == list(range(40))

    started.clear()
    reads = _in_order(range(40), read, 3)
    assert next(reads) == 0
    reads.close()
    assert set(started) <= {0, 1, 2, 3}
