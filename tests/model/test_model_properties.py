"""Properties over random request sequences: the incremental machinery (snapshot reuse, the
brokerName -> topics index, the body cache, ``Outcome.changed``) never disagrees with the plain state."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from nsreplay.model import NameServer, Snapshot
from nsreplay.model import records as R

T0 = 1_000_000
NAMES = ["broker-a", "broker-b", "broker-z"]
ADDRS = ["10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"]
CLUSTERS = ["c1", "c2"]
TOPICS = ["t1", "t2", "t3", "TBW102"]

topic_lists = st.lists(st.sampled_from(TOPICS), min_size=1, max_size=4, unique=True)
operations = st.one_of(
    st.tuples(st.just("register"), st.sampled_from(CLUSTERS), st.sampled_from(NAMES), st.sampled_from(ADDRS),
              st.integers(0, 2), topic_lists, st.integers(0, 2), st.sampled_from([None, True, False]),
              st.sampled_from([6, 4, 7])),
    st.tuples(st.just("unregister"), st.sampled_from(CLUSTERS), st.sampled_from(NAMES), st.sampled_from(ADDRS),
              st.integers(0, 2)),
    st.tuples(st.just("close"), st.sampled_from(ADDRS)),
    st.tuples(st.just("scan"), st.integers(0, 200_000)),
    st.tuples(st.just("delete"), st.sampled_from(TOPICS), st.sampled_from(["", "c1", "c2"])),
    st.tuples(st.just("wipe"), st.sampled_from(NAMES)),
    st.tuples(st.just("add"), st.sampled_from(NAMES)),
    st.tuples(st.just("heartbeat"), st.sampled_from(CLUSTERS), st.sampled_from(ADDRS)),
    st.tuples(st.just("register_topic"), st.sampled_from(TOPICS), st.lists(st.sampled_from(NAMES + ["ghost"]),
                                                                            max_size=3)),
    st.tuples(st.just("query_dv"), st.sampled_from(CLUSTERS), st.sampled_from(ADDRS), st.integers(0, 2)),
    st.tuples(st.just("put_kv"), st.sampled_from(TOPICS), st.sampled_from(["broker-a:4", "broker-b:8"])),
    st.tuples(st.just("delete_kv"), st.sampled_from(TOPICS)),
)


def _record(op: tuple[Any, ...], ts: int, five: bool) -> dict[str, Any] | None:
    kind = op[0]
    if kind == "register":
        _, cluster, name, addr, broker_id, topics, counter, acting, perm = op
        return R.register_broker(ts, cluster=cluster, name=name, addr=addr, broker_id=broker_id,
                                 topics=[(t, 8, 8, perm) for t in topics], dv=(counter, 1, counter), five=five,
                                 enable_acting_master=acting, filter_servers=["f:1"] if counter == 2 else ())
    if kind == "unregister":
        _, cluster, name, addr, broker_id = op
        return R.unregister_broker(ts, cluster=cluster, name=name, addr=addr, broker_id=broker_id)
    if kind == "close":
        return R.channel(ts, "CLOSE", R.conn_of(op[1]))
    if kind == "delete":
        return R.request(ts, 216, {"topic": op[1], "clusterName": op[2]})
    if kind in ("wipe", "add"):
        return R.request(ts, 205 if kind == "wipe" else 327, {"brokerName": op[1]})
    if kind == "heartbeat":
        return R.broker_heartbeat(ts, cluster=op[1], name="x", addr=op[2])
    if kind == "query_dv":
        _, cluster, addr, counter = op
        return R.query_data_version(ts, cluster=cluster, name="x", addr=addr, dv=(counter, 1, counter))
    if kind == "put_kv":
        return R.request(ts, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": op[1], "value": op[2]})
    if kind == "delete_kv":
        return R.request(ts, 102, {"namespace": "ORDER_TOPIC_CONFIG", "key": op[1]})
    if kind == "register_topic":
        body = {"queueDatas": [{"brokerName": n, "perm": 6, "readQueueNums": 1, "writeQueueNums": 1} for n in op[2]]}
        return R.request(ts, 217, {"topic": op[1]}, body=body)
    return None


def _rebuilt(ns: NameServer) -> Snapshot:
    """The snapshot built from scratch (bypassing the incremental reuse)."""
    cached, version = ns._snapshot, ns._snapshot_version  # noqa: SLF001 - white-box check
    ns._snapshot = None  # noqa: SLF001
    try:
        return ns.snapshot()
    finally:
        ns._snapshot, ns._snapshot_version = cached, version  # noqa: SLF001


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["rocketmq-4.9", "rocketmq-5"]), st.booleans(), st.lists(operations, max_size=40))
def test_incremental_state_matches_the_plain_state(profile: str, delete_unlisted: bool,
                                                   ops: list[tuple[Any, ...]]) -> None:
    ns = NameServer(profile, {"deleteTopicWithBrokerRegistration": delete_unlisted}, T0)
    previous = ns.snapshot()
    ts = T0
    for op in ops:
        ts += 1_000
        if op[0] == "scan":
            ts += op[1]
            removals = ns.scan(ts)
            changed = bool(removals)
        else:
            record = _record(op, ts, profile == "rocketmq-5")
            assert record is not None
            outcome = ns.apply(record)
            changed = outcome.changed
        current = ns.snapshot()
        assert current == _rebuilt(ns)
        assert changed == (current != previous), op
        index = {name: {t for t, by_name in current.topicQueueTable.items() if name in by_name}
                 for by_names in current.topicQueueTable.values() for name in by_names}
        assert {k: v for k, v in ns._topics_by_broker.items()} == index  # noqa: SLF001
        assert all(current.topicQueueTable.values()), "no topic is ever left empty"
        previous = current
