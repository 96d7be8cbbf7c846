"""Properties over random request sequences: the incremental machinery (snapshot reuse, the
brokerName -> topics index, the body cache, ``Outcome.changed``) never disagrees with the plain state.

The body cache is checked against a shadow NameServer that is pickled and unpickled before every
operation: pickling drops the cache (``BodyCache.__reduce__``), so the shadow decodes every body afresh
while the NameServer under test reuses what it decoded before; both must answer and end up alike."""

from __future__ import annotations

import hashlib
import json
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsreplay.model import NameServer, Outcome, Snapshot
from nsreplay.model import records as R
from nsreplay.model.requests import BodyCache

T0 = 1_000_000
NAMES = ["broker-a", "broker-b", "broker-z"]
ADDRS = ["10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"]
CLUSTERS = ["c1", "c2"]
TOPICS = ["t1", "t2", "t3", "TBW102"]
# REGISTER_BROKER body forms (capture format, spec §8): JSON, raw JSON bytes, compressed with the
# header saying so, compressed with compressed=false (rejected: undecodable), and no body at all
BODY_FORMS = ["json", "raw", "compressed", "compressed_unflagged", "none"]
# bodyCrc32 header: the real CRC of raw bytes, 0 (not checked), or a wrong one (rejected for raw forms)
CRC_MODES = ["real", "zero", "bad"]

topic_lists = st.lists(st.sampled_from(TOPICS), min_size=1, max_size=4, unique=True)
operations = st.one_of(
    st.tuples(st.just("register"), st.sampled_from(CLUSTERS), st.sampled_from(NAMES), st.sampled_from(ADDRS),
              st.integers(0, 2), topic_lists, st.integers(0, 2), st.sampled_from([None, True, False]),
              st.sampled_from([6, 4, 7]), st.sampled_from(BODY_FORMS), st.sampled_from(CRC_MODES), st.booleans()),
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
    st.tuples(st.just("restart"), st.sampled_from(["4.9.4", "5.3.3"]), st.booleans()),
    # the last register's body again, in a (possibly) other form, CRC or with(out) a content id: the
    # body cache's hits (same broker, same bytes) must still check the CRC and the compressed flag
    st.tuples(st.just("resend"), st.sampled_from(BODY_FORMS), st.sampled_from(CRC_MODES), st.booleans()),
)


def _record(op: tuple[Any, ...], ts: int, five: bool) -> dict[str, Any] | None:
    kind = op[0]
    if kind == "register":
        _, cluster, name, addr, broker_id, topics, counter, acting, perm, form, crc_mode, _with_id = op
        record = R.register_broker(
            ts, cluster=cluster, name=name, addr=addr, broker_id=broker_id, topics=[(t, 8, 8, perm) for t in topics],
            dv=(counter, 1, counter), five=five, enable_acting_master=acting,
            filter_servers=["f:1"] if counter == 2 else (),
            form="compressed" if form == "compressed_unflagged" else form,
            compressed_flag=False if form == "compressed_unflagged" else None,
            crc=0 if crc_mode == "zero" else None)
        if crc_mode == "bad":
            real = int(record["extFields"]["bodyCrc32"])  # the real CRC for raw forms, else 0
            record["extFields"]["bodyCrc32"] = str((real + 1) % 2**31 or 1)
        return record
    if kind == "restart":
        return R.namesrv_start(ts, op[1], {"deleteTopicWithBrokerRegistration": op[2]})
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


def _body_id(op: tuple[Any, ...], record: dict[str, Any]) -> str | None:
    """A content id of a register body (as the ingest gives one) when the op asks for it: equal ids
    for equal bodies only (the raw bytes, or the JSON)."""
    if op[0] != "register" or not op[-1]:
        return None
    content = record.get("body_b64")
    if content is None:
        content = json.dumps(record.get("body"), sort_keys=True)
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def _state(snapshot: Snapshot) -> tuple[Any, ...]:
    """What ``Outcome.changed`` and a scan's removals report on: the five route tables and
    orderTopicConf, not the semantics profile (see ``NameServer.apply``)."""
    return (snapshot.tables(), snapshot.orderTopicConf)


def _through_pickle(ns: NameServer) -> NameServer:
    """``ns`` pickled and loaded again; the body cache does not survive it."""
    loaded = pickle.loads(pickle.dumps(ns, protocol=pickle.HIGHEST_PROTOCOL))
    assert isinstance(loaded._bodies, BodyCache)  # noqa: SLF001 - white-box check
    assert loaded._bodies._last == {} and loaded._bodies._by_id == {}  # noqa: SLF001
    assert loaded.snapshot() == ns.snapshot() and loaded.version == ns.version
    return loaded


class _Checked:
    """A NameServer under test and its shadow, fed the same operations, checked after each one.

    Before every operation the shadow goes through pickle, which drops its body cache, so it decodes
    every body afresh; the NameServer under test keeps its cache (and its incremental snapshots)."""

    def __init__(self, profile: str, config: dict[str, Any]) -> None:
        self.ns = NameServer(profile, config, T0)
        self.shadow = NameServer(profile, config, T0)
        self.previous = self.ns.snapshot()

    def step(self, op: tuple[Any, ...], ts: int) -> None:
        ns = self.ns
        self.shadow = shadow = _through_pickle(self.shadow)
        if op[0] == "scan":
            removals = ns.scan(ts)
            assert shadow.scan(ts) == removals, op
            changed = bool(removals)
        else:
            record = _record(op, ts, ns.profile == "rocketmq-5")
            assert record is not None
            body_id = _body_id(op, record)
            outcome = ns.apply(record, body_id=body_id)
            assert shadow.apply(record, body_id=body_id) == outcome, op
            assert isinstance(outcome, Outcome)
            changed = outcome.changed
        current = ns.snapshot()
        previous, self.previous = self.previous, current
        assert current == _rebuilt(ns)
        assert shadow.snapshot() == current, op
        assert (shadow.profile, shadow.start_ts, shadow.config) == (ns.profile, ns.start_ts, ns.config)
        assert current.profile == ns.profile and current.config == ns.config
        # Outcome.changed's contract (NameServer.apply): the route tables or orderTopicConf changed
        assert changed == (_state(current) != _state(previous)), op
        if op[0] != "restart":
            assert current.profile == previous.profile, "only a restart switches the profile"
        index = {name: {t for t, by_name in current.topicQueueTable.items() if name in by_name}
                 for by_names in current.topicQueueTable.values() for name in by_names}
        assert {k: v for k, v in ns._topics_by_broker.items()} == index  # noqa: SLF001
        assert all(current.topicQueueTable.values()), "no topic is ever left empty"


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["rocketmq-4.9", "rocketmq-5"]), st.booleans(), st.lists(operations, max_size=40))
def test_incremental_state_matches_the_plain_state(profile: str, delete_unlisted: bool,
                                                   ops: list[tuple[Any, ...]]) -> None:
    checked = _Checked(profile, {"deleteTopicWithBrokerRegistration": delete_unlisted})
    ts = T0
    last_register: tuple[Any, ...] | None = None
    for op in ops:
        ts += 1_000
        if op[0] == "resend":
            if last_register is None:
                continue
            op = last_register[:9] + op[1:]
        if op[0] == "register":
            last_register = op
        if op[0] == "scan":
            ts += op[1]
        checked.step(op, ts)


# Forms that can carry the same body content (a cache hit needs the same bytes or the same JSON):
# the compressed bytes with and without the header's compressed flag; each other form on its own.
SAME_CONTENT_FORMS = [["json"], ["raw"], ["compressed", "compressed_unflagged"], ["none"]]
RESEND_PAIRS = [
    (first, second)
    for forms in SAME_CONTENT_FORMS
    for first in [(form, crc, with_id) for form in forms for crc in CRC_MODES for with_id in (False, True)]
    for second in [(form, crc, with_id) for form in forms for crc in CRC_MODES for with_id in (False, True)]
]


@pytest.mark.parametrize("profile", ["rocketmq-4.9", "rocketmq-5"])
def test_a_resent_body_is_judged_like_a_fresh_one(profile: str) -> None:
    """Every ordered pair of (body form, bodyCrc32, content id) in which one broker resends the same
    body content: the body cache's hit must answer exactly as a fresh decoding does, CRC check and
    compressed flag included (the random sequences above draw such pairs only now and then)."""
    base = ("register", "c1", "broker-a", ADDRS[0], 0, ["t1", "TBW102"], 1, False, 6)
    for first, second in RESEND_PAIRS:
        checked = _Checked(profile, {})
        checked.step(base + first, T0 + 1_000)
        checked.step(base + second, T0 + 2_000)
