"""Spec edges an audit found without a test (semantics spec §2, §3, §5, §6).

Every expected value is derived from the spec line quoted in the test's docstring, never copied from
the model's output. Where practical the five route tables are compared whole (``Snapshot.tables()``
against a table dict built here from the spec), not by counts or single fields.
"""

from __future__ import annotations

from typing import Any, Mapping

import pytest

from nsreplay.model import BrokerData, BrokerLiveInfo, DataVersion, NameServer, QueueData, ResponseCode
from nsreplay.model import records as R

T0 = 1_000_000
P49 = "rocketmq-4.9"
P5 = "rocketmq-5"
PROFILES = [P49, P5]
# 5.x refuses a first registration of an id whose body lists exactly one topic (spec §2, 5.x step 5);
# as in the other model tests, bodies carry the default topic too.
TBW = ("TBW102", 8, 8, 7)
DELETE_TOPIC = 216
REGISTER_TOPIC = 217
QUERY_DATA_VERSION = 322
ADD_WRITE_PERM = 327
TIMEOUT = 120_000  # §2 5.x step 8 "heartbeatTimeoutMillis from header or 120000"; §4 4.9 fixed 120 000 ms


def reg(ts: int, profile: str, **kw: object) -> dict[str, Any]:
    """A REGISTER_BROKER record; defaults: cluster "c", brokerName "b", id 0, topics t + TBW102, dv (0, 1, 1)."""
    kw.setdefault("cluster", "c")
    kw.setdefault("name", "b")
    kw.setdefault("addr", "m:1")
    kw.setdefault("topics", ["t", TBW])
    kw.setdefault("five", profile == P5)
    return R.register_broker(ts, **kw)  # type: ignore[arg-type]


def unreg(ts: int, *, addr: str, name: str = "b", broker_id: int = 0, cluster: str = "c") -> dict[str, Any]:
    return R.unregister_broker(ts, cluster=cluster, name=name, addr=addr, broker_id=broker_id)


def qd(name: str, read: int = 8, write: int = 8, perm: int = 6, sys_flag: int = 0) -> QueueData:
    return QueueData(name, read, write, perm, sys_flag)


def key(profile: str, addr: str, cluster: str = "c") -> object:
    """§1: live / filters key is brokerAddr (4.9) or (clusterName, brokerAddr) (5.x)."""
    return addr if profile == P49 else (cluster, addr)


def live(ts: int, addr: str, dv: tuple[int, int, int] = (0, 1, 1)) -> BrokerLiveInfo:
    """§2 4.9 step 6 / 5.x step 8: {now, timeout, dv, channel, haServerAddr} of a registration at ``ts``
    (the records builder sends haServerAddr host:10912 and uses conn_of(addr) as the channel)."""
    return BrokerLiveInfo(ts, TIMEOUT, DataVersion(*dv), R.conn_of(addr), addr.rsplit(":", 1)[0] + ":10912")


def group(name: str, addrs: Mapping[int, str], cluster: str = "c", acting: bool = False) -> BrokerData:
    return BrokerData(cluster, name, addrs, acting, None)  # type: ignore[arg-type]


def tables(ns: NameServer) -> dict[str, Any]:
    return ns.snapshot().tables()


def expected(*, topics: Mapping[str, Mapping[str, QueueData]], groups: list[BrokerData],
             live_table: Mapping[object, BrokerLiveInfo], filters: Mapping[object, tuple[str, ...]] | None = None
             ) -> dict[str, Any]:
    """The five tables; clusterAddrTable follows from the groups (§2 step 1 adds brokerName to its cluster)."""
    clusters: dict[str, set[str]] = {}
    for g in groups:
        clusters.setdefault(g.cluster, set()).add(g.brokerName)
    return {
        "topicQueueTable": {t: dict(by_name) for t, by_name in topics.items()},
        "brokerAddrTable": {g.brokerName: g for g in groups},
        "clusterAddrTable": {c: frozenset(names) for c, names in clusters.items()},
        "brokerLiveTable": dict(live_table),
        "filterServerTable": dict(filters or {}),
    }


# ------------------------------------------------------------------ 1. 4.9 re-application with an unchanged dv


def test_49_deleted_topic_comes_back_on_register_first_with_the_same_dv() -> None:
    """§2 4.9 step 5: "Only when brokerId == 0: apply the body's topic configs if registerFirst, or if
    `live[brokerAddr]` is absent, or its stored dv differs from the request's (timestamp or counter)."
    Step 4: "registerFirst also becomes true if the id had no address before." Consequence: "4.9: a
    topic removed by DELETE_TOPIC_IN_NAMESRV stays removed until the master's dv changes or registerFirst."

    The broker at m:1 turns slave (id 1: step 3 removes its id-0 entry, the group survives as {1: m:1})
    and then master again, always with dv (0, 1, 1): id 0 had no address, so registerFirst, although
    live[m:1] exists with the same dv."""
    ns = NameServer(P49, {}, T0)
    ns.apply(reg(T0, P49))
    ns.apply(R.request(T0 + 1, DELETE_TOPIC, {"topic": "t"}))
    ns.apply(reg(T0 + 2, P49, broker_id=1))  # a slave applies nothing (step 5: only id 0)
    assert tables(ns) == expected(topics={"TBW102": {"b": qd("b", perm=7)}}, groups=[group("b", {1: "m:1"})],
                                  live_table={"m:1": live(T0 + 2, "m:1")})
    ns.apply(reg(T0 + 3, P49, broker_id=0))
    assert tables(ns) == expected(
        topics={"t": {"b": qd("b")}, "TBW102": {"b": qd("b", perm=7)}},
        groups=[group("b", {0: "m:1"})],
        live_table={"m:1": live(T0 + 3, "m:1")},
    )


@pytest.mark.parametrize("how", ["brokername-without-brokerdata", "unregister-of-another-id"])
def test_49_deleted_topic_comes_back_when_the_masters_live_entry_is_absent(how: str) -> None:
    """§2 4.9 step 5: apply "if registerFirst, or if `live[brokerAddr]` is absent, or its stored dv
    differs". The master's live entry is removed while id 0 keeps m:1 (so no registerFirst), by a 4.9
    unregister of m:1 (§5 4.9 unregister: "1. Remove `live[addr]`, `filters[addr]`. 2. In
    `addrs[brokerName]`, remove the entry **by id** (whatever address it holds)."): naming a brokerName
    with no BrokerData, or naming id 1. The master then registers again with the same dv: applied."""
    ns = NameServer(P49, {}, T0)
    ns.apply(reg(T0, P49, addr="m:1"))
    ns.apply(reg(T0, P49, addr="s:1", broker_id=1))
    ns.apply(R.request(T0 + 1, DELETE_TOPIC, {"topic": "t"}))
    if how == "brokername-without-brokerdata":
        ns.apply(unreg(T0 + 2, addr="m:1", name="ghost", broker_id=0))
        addrs_after = {0: "m:1", 1: "s:1"}
    else:
        ns.apply(unreg(T0 + 2, addr="m:1", name="b", broker_id=1))
        addrs_after = {0: "m:1"}
    assert tables(ns) == expected(topics={"TBW102": {"b": qd("b", perm=7)}}, groups=[group("b", addrs_after)],
                                  live_table={"s:1": live(T0, "s:1")})
    ns.apply(reg(T0 + 3, P49, addr="m:1"))
    assert tables(ns) == expected(
        topics={"t": {"b": qd("b")}, "TBW102": {"b": qd("b", perm=7)}},
        groups=[group("b", addrs_after)],
        live_table={"s:1": live(T0, "s:1"), "m:1": live(T0 + 3, "m:1")},
    )


@pytest.mark.parametrize("profile", PROFILES)
def test_deleted_topic_same_dv_live_present_not_register_first(profile: str) -> None:
    """§2 consequence: "4.9: a topic removed by DELETE_TOPIC_IN_NAMESRV stays removed until the
    master's dv changes or registerFirst. 5.x: it comes back at the master's next registration even
    with an unchanged dv (7b: the topic is absent)." Same dv, live entry present, id 0 already held."""
    ns = NameServer(profile, {}, T0)
    ns.apply(reg(T0, profile))
    ns.apply(R.request(T0 + 1, DELETE_TOPIC, {"topic": "t"}))
    ns.apply(reg(T0 + 2, profile))
    topics: dict[str, dict[str, QueueData]] = {"TBW102": {"b": qd("b", perm=7)}}
    if profile == P5:
        topics["t"] = {"b": qd("b")}
    assert tables(ns) == expected(topics=topics, groups=[group("b", {0: "m:1"})],
                                  live_table={key(profile, "m:1"): live(T0 + 2, "m:1")})


# ------------------------------------------------------------------ 2. 5.x conflict rule boundaries


@pytest.mark.parametrize(("state_version", "rejected"), [(4, True), (5, False), (6, False)])
def test_5x_conflict_rule_rejects_only_a_strictly_larger_state_version(state_version: int, rejected: bool) -> None:
    """§2 5.x step 4: "if `brokerAddrs[brokerId]` holds a *different* address whose live entry has a
    larger `dv.stateVersion` than the request's, remove the live entry for (cluster, brokerAddr of the
    request) and stop (reply SUCCESS, empty result)." Equal stateVersion (5 vs 5) is not larger: the
    registration proceeds (step 6 puts the address, 7b applies the topics: the new live entry is
    missing, step 8 stores it)."""
    ns = NameServer(P5, {}, T0)
    ns.apply(reg(T0, P5, addr="a:1", dv=(5, 1, 1)))
    outcome = ns.apply(reg(T0 + 1, P5, addr="b:1", dv=(state_version, 1, 1), topics=[("t", 4, 4, 6), TBW]))
    assert outcome.code == ResponseCode.SUCCESS
    old_live = {("c", "a:1"): live(T0, "a:1", (5, 1, 1))}
    if rejected:
        want = expected(topics={"t": {"b": qd("b")}, "TBW102": {"b": qd("b", perm=7)}},
                        groups=[group("b", {0: "a:1"})], live_table=old_live)
    else:
        want = expected(topics={"t": {"b": qd("b", 4, 4)}, "TBW102": {"b": qd("b", perm=7)}},
                        groups=[group("b", {0: "b:1"})],
                        live_table={**old_live, ("c", "b:1"): live(T0 + 1, "b:1", (state_version, 1, 1))})
    assert tables(ns) == want


def test_5x_conflict_rule_ignores_an_old_address_without_live_entry() -> None:
    """§2 5.x step 4: the request loses only against an old address "whose live entry has a larger
    `dv.stateVersion`"; an old address with no live entry cannot win, so a lower stateVersion goes
    through. The old live entry is removed by an unregister naming a brokerName with no BrokerData
    (§5 5.x step 1 "Remove live and filter entries for (cluster, addr)"; no group, so id 0 keeps a:1)."""
    ns = NameServer(P5, {}, T0)
    ns.apply(reg(T0, P5, addr="a:1", dv=(5, 1, 1)))
    ns.apply(unreg(T0 + 1, addr="a:1", name="ghost"))
    assert tables(ns) == expected(topics={"t": {"b": qd("b")}, "TBW102": {"b": qd("b", perm=7)}},
                                  groups=[group("b", {0: "a:1"})], live_table={})
    outcome = ns.apply(reg(T0 + 2, P5, addr="b:1", dv=(3, 1, 1), topics=[("t", 4, 4, 6), TBW]))
    assert outcome.code == ResponseCode.SUCCESS
    assert tables(ns) == expected(
        topics={"t": {"b": qd("b", 4, 4)}, "TBW102": {"b": qd("b", perm=7)}},
        groups=[group("b", {0: "b:1"})],
        live_table={("c", "b:1"): live(T0 + 2, "b:1", (3, 1, 1))},
    )


# ------------------------------------------------------------------ 3. 5.x step 7a with no topics


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("form", ["no-body", "empty-topic-table"])
def test_delete_with_registration_and_a_master_registration_without_topics(profile: str, form: str) -> None:
    """§2 5.x step 7a: "If NameServer config `deleteTopicWithBrokerRegistration` (default false) and the
    body has no static-topic mappings: remove this brokerName's QueueData from every topic not among the
    keys of the request's topicConfigTable, dropping topics left empty. This happens on every such
    registration, whatever the dv." §2: "A request with no body means dv {stateVersion 0, counter 0,
    timestamp 0} and no topics." So with no body or an empty table, every QueueData of the master's
    brokerName goes; other brokerNames keep theirs. 4.9 step 5: "Topics the broker no longer reports
    are **never** removed by registration" (4.9 has no step 7a): nothing is removed there."""
    ns = NameServer(profile, {"deleteTopicWithBrokerRegistration": True}, T0)
    ns.apply(reg(T0, profile, name="b", addr="a:1", topics=["t", "only-b", TBW]))
    ns.apply(reg(T0, profile, name="b2", addr="a:2", topics=["t", TBW]))
    if form == "no-body":
        record, dv = reg(T0 + 1, profile, name="b", addr="a:1", form="none"), (0, 0, 0)
    else:
        record, dv = reg(T0 + 1, profile, name="b", addr="a:1", topics=[], dv=(0, 1, 2)), (0, 1, 2)
    assert ns.apply(record).code == ResponseCode.SUCCESS
    b2 = {"t": {"b2": qd("b2")}, "TBW102": {"b2": qd("b2", perm=7)}}
    if profile == P5:
        topics = b2
    else:
        topics = {"t": {"b": qd("b"), **b2["t"]}, "only-b": {"b": qd("b")},
                  "TBW102": {"b": qd("b", perm=7), **b2["TBW102"]}}
    assert tables(ns) == expected(
        topics=topics,
        groups=[group("b", {0: "a:1"}), group("b2", {0: "a:2"})],
        live_table={key(profile, "a:1"): live(T0 + 1, "a:1", dv), key(profile, "a:2"): live(T0, "a:2")},
    )


# ------------------------------------------------------------------ 4. unregister edge cases


@pytest.mark.parametrize("profile", PROFILES)
def test_unregister_naming_a_brokername_without_brokerdata_removes_only_live_and_filters(profile: str) -> None:
    """§5 4.9 unregister: "1. Remove `live[addr]`, `filters[addr]`. 2. In `addrs[brokerName]`, remove the
    entry **by id**" (there is no such BrokerData, so nothing else). §5 5.x: "1. Remove live and filter
    entries for (cluster, addr). 2. Remove **every** id in the group whose address equals addr." (no
    group). The groups, clusters and QueueData stay as they were; only that address's entries go."""
    ns = NameServer(profile, {}, T0)
    ns.apply(reg(T0, profile, name="b", addr="a:1", filter_servers=["f:1"]))
    ns.apply(reg(T0, profile, name="b2", addr="a:2", filter_servers=["f:2"]))
    outcome = ns.apply(unreg(T0 + 1, addr="a:1", name="ghost"))
    assert outcome.code == ResponseCode.SUCCESS
    assert tables(ns) == expected(
        topics={"t": {"b": qd("b"), "b2": qd("b2")}, "TBW102": {"b": qd("b", perm=7), "b2": qd("b2", perm=7)}},
        groups=[group("b", {0: "a:1"}), group("b2", {0: "a:2"})],
        live_table={key(profile, "a:2"): live(T0, "a:2")},
        filters={key(profile, "a:2"): ("f:2",)},
    )


@pytest.mark.parametrize("enable_acting_master", [True, False])
def test_5x_unregister_removing_no_id_from_a_masterless_acting_group_clears_the_write_bit(
        enable_acting_master: bool) -> None:
    """§5 5.x step 4: "If the group is not empty and its BrokerData has enableActingMaster and no id 0 is
    left: clear the write bit of that brokerName's QueueData in every topic." The rule does not ask
    whether step 2 removed an id: an unregister of an address the group does not hold still clears it.
    Setup: master leaves an acting-master group {0, 1}; ADD_WRITE_PERM_OF_BROKER (§6 "perm = 6") sets
    the write bit again; then an unregister of x:9 (held by no id) in that group."""
    ns = NameServer(P5, {}, T0)
    ns.apply(reg(T0, P5, addr="m:1", enable_acting_master=enable_acting_master))
    ns.apply(reg(T0, P5, addr="s:1", broker_id=1, enable_acting_master=enable_acting_master))
    ns.apply(unreg(T0 + 1, addr="m:1"))
    ns.apply(R.request(T0 + 2, ADD_WRITE_PERM, {"brokerName": "b"}))
    before = expected(topics={"t": {"b": qd("b")}, "TBW102": {"b": qd("b")}},
                      groups=[group("b", {1: "s:1"}, acting=enable_acting_master)],
                      live_table={("c", "s:1"): live(T0, "s:1")})
    assert tables(ns) == before
    outcome = ns.apply(unreg(T0 + 3, addr="x:9"))
    assert outcome.code == ResponseCode.SUCCESS
    perm = 4 if enable_acting_master else 6
    assert tables(ns) == {**before,
                          "topicQueueTable": {"t": {"b": qd("b", perm=perm)}, "TBW102": {"b": qd("b", perm=perm)}}}


# ------------------------------------------------------------------ 5. REGISTER_TOPIC_IN_NAMESRV (5.x)


def _two_brokers_with_topic_x() -> NameServer:
    ns = NameServer(P5, {}, T0)
    ns.apply(reg(T0, P5, name="b1", addr="a:1", topics=["x", TBW]))
    ns.apply(reg(T0, P5, name="b2", addr="a:2", topics=["x", TBW]))
    return ns


def test_5x_register_topic_entry_without_a_broker_name_aborts_the_rest() -> None:
    """§6 217: "each QueueData stored as given; a brokerName unknown to `addrs` aborts the rest (for an
    existing topic, entries before it stay)". An entry with no brokerName names no brokerName known to
    addrs, so it aborts like an unknown one: for the existing topic x, b1's entry before it is stored,
    b2's after it is not; for a new topic nothing is stored."""
    ns = _two_brokers_with_topic_x()
    body = {"queueDatas": [{"brokerName": "b1", "perm": 6, "readQueueNums": 2, "writeQueueNums": 2},
                           {"perm": 6, "readQueueNums": 2, "writeQueueNums": 2},
                           {"brokerName": "b2", "perm": 6, "readQueueNums": 2, "writeQueueNums": 2}]}
    ns.apply(R.request(T0 + 1, REGISTER_TOPIC, {"topic": "x"}, body=body))
    ns.apply(R.request(T0 + 1, REGISTER_TOPIC, {"topic": "new"}, body=body))
    assert ns.snapshot().topicQueueTable == {
        "x": {"b1": qd("b1", 2, 2), "b2": qd("b2")},
        "TBW102": {"b1": qd("b1", perm=7), "b2": qd("b2", perm=7)},
    }


@pytest.mark.parametrize("topic", ["x", "new"])
@pytest.mark.parametrize(("field", "value"), [("readQueueNums", 1 << 31), ("writeQueueNums", -(1 << 31) - 1), ("perm", 1 << 40), ("topicSysFlag", 1 << 64)])
def test_5x_register_topic_with_a_number_beyond_a_java_int_changes_nothing(topic: str, field: str, value: int) -> None:
    """§2 "A body that cannot be decoded: SYSTEM_ERROR, nothing changes": a QueueData's numbers are
    Java ints, which the NameServer's JSON decoder cannot fill from a larger value. The whole body
    fails, the entries before the bad one included; the edges of the range decode."""
    ns = _two_brokers_with_topic_x()
    before = ns.snapshot()
    entries = [{"brokerName": "b1", "perm": 6, "readQueueNums": 2, "writeQueueNums": 2}, {"brokerName": "b2", "perm": 6, "readQueueNums": 2, "writeQueueNums": 2}]
    bad = {"queueDatas": [entries[0], {**entries[1], field: value}]}
    outcome = ns.apply(R.request(T0 + 1, REGISTER_TOPIC, {"topic": topic}, body=bad))
    assert (outcome.code, outcome.remark, outcome.changed) == (ResponseCode.SYSTEM_ERROR, f"queueDatas.{field} is out of range of a Java int", False)
    assert ns.snapshot() == before
    edges = {"queueDatas": [{**entries[0], field: (1 << 31) - 1}, {**entries[1], field: -(1 << 31)}]}
    assert ns.apply(R.request(T0 + 2, REGISTER_TOPIC, {"topic": topic}, body=edges)).code == ResponseCode.SUCCESS
    stored = ns.snapshot().topicQueueTable[topic]
    assert (getattr(stored["b1"], field), getattr(stored["b2"], field)) == ((1 << 31) - 1, -(1 << 31))


@pytest.mark.parametrize("topic", ["x", "new"])
def test_5x_register_topic_with_empty_queue_datas_changes_nothing(topic: str) -> None:
    """§6 217: "body TopicRouteData: each QueueData stored as given" — with no QueueData nothing is
    stored (no empty topic is created, an existing one is left as it was)."""
    ns = _two_brokers_with_topic_x()
    before = ns.snapshot()
    outcome = ns.apply(R.request(T0 + 1, REGISTER_TOPIC, {"topic": topic}, body={"queueDatas": []}))
    assert not outcome.changed
    assert ns.snapshot() == before


# ------------------------------------------------------------------ 6. body without filterServerList


@pytest.mark.parametrize("profile", PROFILES)
def test_json_register_body_without_filter_server_list_counts_as_an_empty_list(profile: str) -> None:
    """§2 4.9 step 7 (5.x step 9 "Filter servers as 4.9"): "an empty list removes `filters[brokerAddr]`;
    a non-empty list is stored. A body without the field, and a request without a body, count as an
    empty list. Only the pre-3.0.11 form (request version < 37 ...) leaves `filters` untouched." The
    request is version 479 and its body is otherwise complete (its new topic u is applied)."""
    ns = NameServer(profile, {}, T0)
    ns.apply(reg(T0, profile, filter_servers=["f:1", "f:2"]))
    assert ns.snapshot().filterServerTable == {key(profile, "m:1"): ("f:1", "f:2")}
    record = reg(T0 + 1, profile, topics=["t", "u", TBW], dv=(0, 1, 2))
    del record["body"]["filterServerList"]
    assert record["version"] >= 37 and "topicConfigSerializeWrapper" in record["body"]
    assert ns.apply(record).code == ResponseCode.SUCCESS
    assert tables(ns) == expected(
        topics={"t": {"b": qd("b")}, "u": {"b": qd("b")}, "TBW102": {"b": qd("b", perm=7)}},
        groups=[group("b", {0: "m:1"})],
        live_table={key(profile, "m:1"): live(T0 + 1, "m:1", (0, 1, 2))},
        filters={},
    )


# ------------------------------------------------------------------ 7. slaves that are not prime


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("delete_with_registration", [False, True])
def test_slave_with_the_master_present_applies_no_topics(profile: str, delete_with_registration: bool) -> None:
    """§2 5.x step 7: "Topic work is done only by the master (id 0) or by a *prime slave*: header
    enableActingMaster present, id != 0, and id == smallest id in the group." With id 0 present, id 1
    is not the smallest: neither 7a (no removal of TBW102, which the slave omits) nor 7b (no change to
    t, no new topic u). 4.9 step 5: "Only when brokerId == 0: apply the body's topic configs"."""
    ns = NameServer(profile, {"deleteTopicWithBrokerRegistration": delete_with_registration}, T0)
    ns.apply(reg(T0, profile, addr="m:1", enable_acting_master=True))
    outcome = ns.apply(reg(T0 + 1, profile, addr="s:1", broker_id=1, enable_acting_master=True,
                           topics=[("t", 2, 2, 6), "u"], dv=(0, 1, 7)))
    assert outcome.code == ResponseCode.SUCCESS
    assert tables(ns) == expected(
        topics={"t": {"b": qd("b")}, "TBW102": {"b": qd("b", perm=7)}},
        groups=[group("b", {0: "m:1", 1: "s:1"}, acting=profile == P5)],
        live_table={key(profile, "m:1"): live(T0, "m:1"), key(profile, "s:1"): live(T0 + 1, "s:1", (0, 1, 7))},
    )


def test_5x_slave_that_is_not_the_smallest_id_applies_no_topics() -> None:
    """§2 5.x step 7: a prime slave needs "id == smallest id in the group"; without a master, id 1 is
    prime (7b: "A prime slave of a group with enableActingMaster first clears the write bit") and id 2
    is not: its body changes nothing, not even with deleteTopicWithBrokerRegistration (7a)."""
    ns = NameServer(P5, {"deleteTopicWithBrokerRegistration": True}, T0)
    ns.apply(reg(T0, P5, addr="s1:1", broker_id=1, enable_acting_master=True))
    prime = {"t": {"b": qd("b", perm=4)}, "TBW102": {"b": qd("b", perm=5)}}
    assert ns.snapshot().topicQueueTable == prime
    outcome = ns.apply(reg(T0 + 1, P5, addr="s2:1", broker_id=2, enable_acting_master=True,
                           topics=[("t", 2, 2, 6), "u"], dv=(0, 1, 7)))
    assert outcome.code == ResponseCode.SUCCESS
    assert tables(ns) == expected(
        topics=prime,
        groups=[group("b", {1: "s1:1", 2: "s2:1"}, acting=True)],
        live_table={("c", "s1:1"): live(T0, "s1:1"), ("c", "s2:1"): live(T0 + 1, "s2:1", (0, 1, 7))},
    )


# ------------------------------------------------------------------ 8. QUERY_DATA_VERSION without a body


@pytest.mark.parametrize(("profile", "refreshed"), [(P49, False), (P5, True)])
def test_query_data_version_without_a_body(profile: str, refreshed: bool) -> None:
    """§3: "QUERY_DATA_VERSION (322): 4.9 refreshes lastUpdateTimestamp only when the body's dv equals
    the stored one; 5.x refreshes it unconditionally (if the entry exists)." Without a body there is no
    body dv to equal the stored one: 4.9 does not refresh; 5.x does. Nothing else changes."""
    ns = NameServer(profile, {}, T0)
    ns.apply(reg(T0, profile))
    ext = {"clusterName": "c", "brokerAddr": "m:1", "brokerName": "b", "brokerId": "0"}
    record = R.request(T0 + 10, QUERY_DATA_VERSION, ext, conn=R.conn_of("m:1"))
    assert "body" not in record and "body_b64" not in record
    ns.apply(record)
    assert tables(ns) == expected(
        topics={"t": {"b": qd("b")}, "TBW102": {"b": qd("b", perm=7)}},
        groups=[group("b", {0: "m:1"})],
        live_table={key(profile, "m:1"): live(T0 + 10 if refreshed else T0, "m:1")},
    )
