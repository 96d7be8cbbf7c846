"""Expiry, unregister, channel events and restart (semantics spec §4, §5), including the cases where
"the first" entry in Java iteration order decides what is removed (orders verified on a JDK 17)."""

from __future__ import annotations

import pytest

from nsreplay.model import NameServer, Outcome, QueueData, ResponseCode, route_data
from nsreplay.model import records as R

T0 = 1_000_000
TBW = ("TBW102", 8, 8, 7)
PROFILES = ["rocketmq-4.9", "rocketmq-5"]
A = "10.0.0.1:10911"


def reg(ts: int, profile: str, **kw: object) -> dict[str, object]:
    kw.setdefault("cluster", "c")
    kw.setdefault("name", "b")
    kw.setdefault("addr", A)
    kw.setdefault("topics", ["t", TBW])
    kw.setdefault("five", profile == "rocketmq-5")
    return R.register_broker(ts, **kw)  # type: ignore[arg-type]


def live_addrs(ns: NameServer) -> set[str]:
    return {k if isinstance(k, str) else k[1] for k in ns.snapshot().brokerLiveTable}


# ----------------------------------------------------------------------------------- the 120 s rule


@pytest.mark.parametrize("profile", PROFILES)
def test_heartbeat_exactly_120000ms_before_the_tick_is_not_expired(profile: str) -> None:
    ns = NameServer(profile, {}, T0)
    ns.apply(reg(T0, profile))
    assert ns.scan(T0 + 120_000) == []
    assert live_addrs(ns) == {A}


@pytest.mark.parametrize("profile", PROFILES)
def test_heartbeat_120001ms_before_the_tick_is_expired_like_an_unregister(profile: str) -> None:
    ns = NameServer(profile, {}, T0)
    ns.apply(reg(T0, profile, filter_servers=["f:1"]))
    removals = ns.scan(T0 + 120_001)
    assert [(r.cause, r.brokerAddr, r.brokerName, r.brokerIds, r.groupRemoved) for r in removals] == [
        ("expired", A, "b", (0,), True)]
    snap = ns.snapshot()
    assert snap.brokerLiveTable == snap.brokerAddrTable == snap.clusterAddrTable == {}
    assert snap.topicQueueTable == snap.filterServerTable == {}


def test_5x_uses_each_entrys_own_heartbeat_timeout() -> None:
    ns = NameServer("rocketmq-5", {}, T0)
    ns.apply(reg(T0, "rocketmq-5", name="fast", addr="f:1", heartbeat_timeout=10_000))
    ns.apply(reg(T0, "rocketmq-5", name="slow", addr="s:1"))
    assert ns.scan(T0 + 10_000) == []
    assert [r.brokerAddr for r in ns.scan(T0 + 10_001)] == ["f:1"]
    assert live_addrs(ns) == {"s:1"}


LONG_MAX = (1 << 63) - 1


@pytest.mark.parametrize("timeout, sum_wraps", [
    (LONG_MAX, True),  # "never": T0 + Long.MAX_VALUE wraps to a negative long
    (LONG_MAX - T0 + 1, True),  # the first timeout whose sum wraps (to Long.MIN_VALUE)
    (LONG_MAX - T0, False),  # the sum is Long.MAX_VALUE itself: no tick is past it
])
def test_5x_timeout_sum_is_a_java_long_that_wraps_past_long_max(timeout: int, sum_wraps: bool) -> None:
    """§4 ``lastUpdateTimestamp + timeout < T`` is a sum of Java longs in scanNotActiveBroker: a sum
    past Long.MAX_VALUE wraps negative, so the entry expires at the first tick after it registered."""
    ns = NameServer("rocketmq-5", {}, T0)
    ns.apply(reg(T0, "rocketmq-5", name="huge", addr="h:1", heartbeat_timeout=timeout))
    ns.apply(reg(T0, "rocketmq-5", name="std", addr="s:1"))
    assert (ns.expiry_horizon() < 0) is sum_wraps
    assert [r.brokerAddr for r in ns.scan(T0 + 1)] == (["h:1"] if sum_wraps else [])
    assert live_addrs(ns) == ({"s:1"} if sum_wraps else {"h:1", "s:1"})
    assert ("huge" in ns.snapshot().brokerAddrTable) is not sum_wraps
    assert [r.brokerAddr for r in ns.scan(T0 + 120_001)] == ["s:1"]


def test_49_ignores_the_heartbeat_timeout_header() -> None:
    ns = NameServer("rocketmq-4.9", {}, T0)
    ns.apply(reg(T0, "rocketmq-4.9", five=True, heartbeat_timeout=10_000))
    assert ns.scan(T0 + 60_000) == []


def test_5x_live_entry_without_a_brokerdata_in_its_cluster_stays_forever() -> None:
    ns = NameServer("rocketmq-5", {}, T0)
    ns.apply(reg(T0, "rocketmq-5", addr="old:1"))
    ns.apply(reg(T0 + 100_000, "rocketmq-5", addr="new:1"))  # id 0 moves; old:1 keeps its live entry
    assert ns.scan(T0 + 120_001) == []  # old:1 expired, but no BrokerData of "c" holds it
    assert live_addrs(ns) == {"old:1", "new:1"}
    assert [r.brokerAddr for r in ns.scan(T0 + 10_000_000)] == ["new:1"]
    assert live_addrs(ns) == {"old:1"}


def test_49_expired_address_held_by_no_brokerdata_only_loses_its_live_entry() -> None:
    ns = NameServer("rocketmq-4.9", {}, T0)
    ns.apply(reg(T0, "rocketmq-4.9", addr="old:1"))
    ns.apply(reg(T0 + 100_000, "rocketmq-4.9", addr="new:1"))
    removals = ns.scan(T0 + 120_001)
    assert [(r.brokerAddr, r.brokerName, r.liveRemoved) for r in removals] == [("old:1", None, True)]
    assert live_addrs(ns) == {"new:1"}


# ----------------------------------------------------------------------------------- unregister


def test_49_unregister_removes_the_id_whatever_address_it_holds() -> None:
    ns = NameServer("rocketmq-4.9", {}, T0)
    ns.apply(reg(T0, "rocketmq-4.9", addr="m:1"))
    ns.apply(reg(T0, "rocketmq-4.9", addr="s:1", broker_id=1))
    ns.apply(R.unregister_broker(T0 + 1, cluster="c", name="b", addr="s:1", broker_id=0))
    snap = ns.snapshot()
    assert dict(snap.brokerAddrTable["b"].brokerAddrs) == {1: "s:1"}
    assert set(snap.brokerLiveTable) == {"m:1"}  # live removed by address


def test_5x_unregister_removes_every_id_holding_the_address() -> None:
    ns = NameServer("rocketmq-5", {}, T0)
    ns.apply(reg(T0, "rocketmq-5", addr="m:1"))
    ns.apply(reg(T0, "rocketmq-5", addr="s:1", broker_id=1))
    ns.apply(R.unregister_broker(T0 + 1, cluster="c", name="b", addr="s:1", broker_id=0))
    assert dict(ns.snapshot().brokerAddrTable["b"].brokerAddrs) == {0: "m:1"}


@pytest.mark.parametrize("profile", PROFILES)
def test_unregister_of_the_last_member_drops_group_cluster_and_queue_data(profile: str) -> None:
    ns = NameServer(profile, {}, T0)
    ns.apply(reg(T0, profile, name="b1", addr="a:1"))
    ns.apply(reg(T0, profile, name="b2", addr="a:2", topics=["t", "only-b2"]))
    ns.apply(R.unregister_broker(T0 + 1, cluster="c", name="b2", addr="a:2"))
    snap = ns.snapshot()
    assert set(snap.brokerAddrTable) == {"b1"} and snap.clusterAddrTable == {"c": frozenset({"b1"})}
    assert set(snap.topicQueueTable) == {"t", "TBW102"} and set(snap.topicQueueTable["t"]) == {"b1"}


# ----------------------------------------------------------------------------------- master death


@pytest.mark.parametrize("profile", PROFILES)
def test_master_death_keeps_queue_data_and_perm_without_acting_master(profile: str) -> None:
    ns = NameServer(profile, {"supportActingMaster": "true"}, T0)
    ns.apply(reg(T0, profile, addr="m:1"))
    ns.apply(reg(T0 + 60_000, profile, addr="s:1", broker_id=1))
    ns.scan(T0 + 120_001)
    assert dict(ns.snapshot().brokerAddrTable["b"].brokerAddrs) == {1: "s:1"}
    assert ns.snapshot().topicQueueTable["t"]["b"].perm == 6
    route = route_data(ns, "t")
    assert route is not None and route["brokerDatas"][0]["brokerAddrs"] == {1: "s:1"}


@pytest.mark.parametrize("support", [True, False])
def test_5x_master_death_with_acting_master_wipes_write_perm(support: bool) -> None:
    ns = NameServer("rocketmq-5", {"supportActingMaster": support}, T0)
    ns.apply(reg(T0, "rocketmq-5", addr="m:1", enable_acting_master=True))
    ns.apply(reg(T0 + 60_000, "rocketmq-5", addr="s:1", broker_id=1, enable_acting_master=True))
    removals = ns.scan(T0 + 120_001)
    assert [(r.cause, r.brokerAddr, r.groupRemoved) for r in removals] == [("expired", "m:1", False)]
    assert ns.snapshot().topicQueueTable["t"]["b"].perm == 4
    assert ns.snapshot().topicQueueTable["TBW102"]["b"].perm == 5
    route = route_data(ns, "t")
    assert route is not None
    assert route["brokerDatas"][0]["brokerAddrs"] == ({0: "s:1"} if support else {1: "s:1"})
    # the master's return (registerFirst for id 0) restores the perms from its topic configs
    ns.apply(reg(T0 + 130_000, "rocketmq-5", addr="m:1", enable_acting_master=True))
    assert ns.snapshot().topicQueueTable["t"]["b"].perm == 6


def test_5x_a_group_left_with_a_negative_id_keeps_its_write_perm() -> None:
    """§5 step 4 as the NameServer tests it (``isNoMasterExists``: the smallest id left is above 0;
    docs/spec-questions.md, question 15): a member with id -1 left alone is not "no master"."""
    ns = NameServer("rocketmq-5", {"supportActingMaster": True}, T0)
    ns.apply(reg(T0, "rocketmq-5", addr="n:1", broker_id=-1, enable_acting_master=True))  # a prime slave: perm 4
    ns.apply(reg(T0 + 1_000, "rocketmq-5", addr="m:1", enable_acting_master=True))  # the master: perm 6
    ns.apply(reg(T0 + 60_000, "rocketmq-5", addr="n:1", broker_id=-1, enable_acting_master=True))
    assert ns.snapshot().topicQueueTable["t"]["b"].perm == 6
    assert [r.brokerAddr for r in ns.scan(T0 + 121_001)] == ["m:1"]
    assert dict(ns.snapshot().brokerAddrTable["b"].brokerAddrs) == {-1: "n:1"}
    assert ns.snapshot().topicQueueTable["t"]["b"].perm == 6
    route = route_data(ns, "t")
    assert route is not None and route["brokerDatas"][0]["brokerAddrs"] == {-1: "n:1"}


# ----------------------------------------------------------------------------------- channel events


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("event", ["CLOSE", "IDLE", "EXCEPTION"])
def test_closing_the_stored_connection_destroys_the_broker_at_once(profile: str, event: str) -> None:
    ns = NameServer(profile, {}, T0)
    ns.apply(reg(T0, profile, conn="conn-1"))
    outcome = ns.apply(R.channel(T0 + 5, event, "conn-1"))
    assert outcome.changed and [r.cause for r in outcome.removals] == ["channel_closed"]
    assert ns.snapshot().brokerAddrTable == {} and ns.snapshot().brokerLiveTable == {}


@pytest.mark.parametrize("profile", PROFILES)
def test_close_of_a_stale_connection_and_connect_change_nothing(profile: str) -> None:
    ns = NameServer(profile, {}, T0)
    ns.apply(reg(T0, profile, conn="conn-1"))
    ns.apply(reg(T0 + 10, profile, conn="conn-2"))  # the broker reconnected
    before = ns.snapshot()
    for record in (R.channel(T0 + 20, "CLOSE", "conn-1"), R.channel(T0 + 20, "CONNECT", "conn-2"),
                   R.channel(T0 + 20, "CLOSE", "admin#conn0")):
        outcome = ns.apply(record)
        assert not outcome.changed and outcome.removals == ()
    assert ns.snapshot() is before


def test_heartbeats_do_not_change_the_stored_connection() -> None:
    ns = NameServer("rocketmq-5", {}, T0)
    ns.apply(reg(T0, "rocketmq-5", conn="conn-1"))
    ns.apply(R.broker_heartbeat(T0 + 1, cluster="c", name="b", addr=A, conn="conn-2"))
    ns.apply(R.query_data_version(T0 + 2, cluster="c", name="b", addr=A, dv=(0, 1, 1), conn="conn-2"))
    assert not ns.apply(R.channel(T0 + 3, "CLOSE", "conn-2")).changed
    assert ns.apply(R.channel(T0 + 4, "CLOSE", "conn-1")).changed


@pytest.mark.parametrize("profile", PROFILES)
def test_channel_close_destroys_the_first_live_entry_of_the_connection(profile: str) -> None:
    # Java iterates 10.0.0.2:10911 before 10.0.0.1:10911 in both live tables (HashMap(256) and
    # ConcurrentHashMap(256) with key "c_" + addr), whatever the insertion order.
    ns = NameServer(profile, {}, T0)
    ns.apply(reg(T0, profile, name="b1", addr="10.0.0.1:10911", conn="shared"))
    ns.apply(reg(T0, profile, name="b2", addr="10.0.0.2:10911", conn="shared"))
    outcome = ns.apply(R.channel(T0 + 1, "CLOSE", "shared"))
    assert [r.brokerAddr for r in outcome.removals] == ["10.0.0.2:10911"]
    assert set(ns.snapshot().brokerAddrTable) == {"b1"}


# ----------------------------------------------------------------------------------- "the first ..."


def test_49_expiry_takes_the_address_from_the_first_brokerdata_in_java_order() -> None:
    # One address registered as master of two brokerNames; Java's HashMap(128) iterates broker-b
    # (bin 88) before broker-a (bin 91), so broker-b loses the address although it came second.
    ns = NameServer("rocketmq-4.9", {}, T0)
    ns.apply(reg(T0, "rocketmq-4.9", name="broker-a", addr=A))
    ns.apply(reg(T0, "rocketmq-4.9", name="broker-b", addr=A))
    ns.scan(T0 + 120_001)
    snap = ns.snapshot()
    assert set(snap.brokerAddrTable) == {"broker-a"}
    assert dict(snap.brokerAddrTable["broker-a"].brokerAddrs) == {0: A}  # stays, with no live entry
    assert snap.clusterAddrTable == {"c": frozenset({"broker-a"})}
    assert set(snap.topicQueueTable["t"]) == {"broker-a"}


@pytest.mark.parametrize(("profile", "loser"), [("rocketmq-4.9", "broker-z"), ("rocketmq-5", "broker-a")])
def test_first_brokerdata_differs_between_hashmap_and_concurrent_hashmap(profile: str, loser: str) -> None:
    # broker-z / broker-a: bins 48 / 91 in HashMap(128) but 176 / 91 in the 5.x table of 256.
    ns = NameServer(profile, {}, T0)
    ns.apply(reg(T0, profile, name="broker-z", addr=A))
    ns.apply(reg(T0, profile, name="broker-a", addr=A))
    ns.apply(R.channel(T0 + 1, "CLOSE", R.conn_of(A)))
    assert set(ns.snapshot().brokerAddrTable) == {"broker-a", "broker-z"} - {loser}


def test_49_destroy_removes_the_brokername_from_the_first_cluster_set_only() -> None:
    # broker-a joins cluster-b, then (misconfigured) cluster-a; Java iterates cluster-a first.
    ns = NameServer("rocketmq-4.9", {}, T0)
    ns.apply(reg(T0, "rocketmq-4.9", cluster="cluster-b", name="broker-a"))
    ns.apply(reg(T0 + 1, "rocketmq-4.9", cluster="cluster-a", name="broker-a"))
    ns.scan(T0 + 200_000)
    snap = ns.snapshot()
    assert snap.brokerAddrTable == {}
    assert snap.clusterAddrTable == {"cluster-b": frozenset({"broker-a"})}


def test_49_unregister_removes_the_brokername_from_the_named_cluster() -> None:
    ns = NameServer("rocketmq-4.9", {}, T0)
    ns.apply(reg(T0, "rocketmq-4.9", cluster="cluster-b", name="broker-a"))
    ns.apply(reg(T0 + 1, "rocketmq-4.9", cluster="cluster-a", name="broker-a"))
    ns.apply(R.unregister_broker(T0 + 2, cluster="cluster-b", name="broker-a", addr=A))
    assert ns.snapshot().clusterAddrTable == {"cluster-a": frozenset({"broker-a"})}


def test_5x_destroy_looks_only_at_brokerdata_of_the_entrys_cluster() -> None:
    # One address under two clusters (misconfigured). The connection is shared, so the CLOSE destroys
    # the *first* live entry holding it (spec §5 "Channel events") and then, for that entry's cluster
    # only, the first BrokerData holding the address (spec §5 "5.x unregister, expiry and channel
    # destroy"). Derivation by hand (spec §1), 5.x live table = ConcurrentHashMap(256) = 512 bins,
    # a key hashing like the string cluster + "_" + addr:
    #   h("c1_10.0.0.1:10911") = -634677257  = 0xDA2B97F7; spread = 0xDA2B97F7 ^ 0x0000DA2B = 0xDA2B4DDC;
    #                                          bin = 0xDA2B4DDC & 511 = 0x1DC = 476
    #   h("c2_10.0.0.1:10911") = -1145211434 = 0xBBBD75D6; spread = 0xBBBD75D6 ^ 0x0000BBBD = 0xBBBDCE6B;
    #                                          bin = 0xBBBDCE6B & 511 = 0x06B = 107
    # (the two hashes differ by 31**15 mod 2**32: "1" -> "2" at index 1 of 17 chars). Bin 107 comes
    # before bin 476, so Java iterates (c2, A) first although it was inserted second (checked with
    # ConcurrentHashMap<String, _>(256) on a JDK 17: [c2_10.0.0.1:10911, c1_10.0.0.1:10911]).
    # The only BrokerData of c2 holding A is broker-a: it loses A, becomes empty and is dropped with
    # cluster c2 and its QueueData. Plausible bugs give other answers: insertion order (or any order
    # putting c1 first) removes broker-b instead; ignoring the cluster when looking for the BrokerData
    # also removes broker-b, which addrs (256 bins) iterates first: "broker-b" spreads to bin 88,
    # "broker-a" to bin 91.
    ns = NameServer("rocketmq-5", {}, T0)
    ns.apply(reg(T0, "rocketmq-5", cluster="c1", name="broker-b", addr=A))
    ns.apply(reg(T0, "rocketmq-5", cluster="c2", name="broker-a", addr=A))
    before = ns.snapshot()
    outcome = ns.apply(R.channel(T0 + 1, "CLOSE", R.conn_of(A)))
    assert outcome.changed and outcome.code == ResponseCode.SUCCESS
    assert [(r.cause, r.clusterName, r.brokerAddr, r.brokerName, r.brokerIds, r.groupRemoved, r.liveRemoved)
            for r in outcome.removals] == [("channel_closed", "c2", A, "broker-a", (0,), True, True)]
    snap = ns.snapshot()
    assert set(snap.brokerAddrTable) == {"broker-b"}
    assert snap.brokerAddrTable["broker-b"] == before.brokerAddrTable["broker-b"]
    assert (snap.brokerAddrTable["broker-b"].cluster, dict(snap.brokerAddrTable["broker-b"].brokerAddrs)) == (
        "c1", {0: A})
    assert snap.clusterAddrTable == {"c1": frozenset({"broker-b"})}
    assert set(snap.brokerLiveTable) == {("c1", A)}
    assert snap.brokerLiveTable[("c1", A)] == before.brokerLiveTable[("c1", A)]
    assert snap.topicQueueTable == {"t": {"broker-b": QueueData("broker-b", 8, 8, 6, 0)},
                                    "TBW102": {"broker-b": QueueData("broker-b", 8, 8, 7, 0)}}
    assert snap.filterServerTable == {}


# ----------------------------------------------------------------------------------- restart


@pytest.mark.parametrize("profile", PROFILES)
def test_restart_empties_every_table_but_keeps_the_kv_store(profile: str) -> None:
    ns = NameServer(profile, {"orderMessageEnable": "true"}, T0)
    ns.apply(reg(T0, profile, filter_servers=["f:1"]))
    ns.apply(R.request(T0, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "t", "value": "b:8"}))
    outcome = ns.apply(R.namesrv_start(T0 + 50, "4.9.4" if profile == "rocketmq-4.9" else "5.3.3",
                                       {"orderMessageEnable": True}))
    assert outcome.changed and [r.cause for r in outcome.removals] == ["namesrv_restart"]
    snap = ns.snapshot()
    assert all(table == {} for table in snap.tables().values())
    assert snap.orderTopicConf == {"t": "b:8"}
    assert ns.start_ts == T0 + 50
    ns.apply(reg(T0 + 60, profile))
    route = route_data(ns, "t")
    assert route is not None and route["orderTopicConf"] == "b:8"


def test_restart_that_finds_the_tables_empty_reports_no_change_even_switching_profile() -> None:
    # Outcome.changed's contract (NameServer.apply): the route tables and orderTopicConf, not the
    # profile. The KV store survives the restart (spec §4), so nothing it covers changes here.
    ns = NameServer("rocketmq-4.9", {}, T0)
    ns.apply(R.request(T0, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "t", "value": "b:8"}))
    before, version = ns.snapshot(), ns.version
    outcome = ns.apply(R.namesrv_start(T0 + 7, "5.3.3"))
    assert outcome == Outcome(ResponseCode.SUCCESS, None, False, "namesrv_restart", ())
    after = ns.snapshot()
    assert (before.profile, after.profile) == ("rocketmq-4.9", "rocketmq-5")
    assert after != before  # a snapshot comparison sees the switch (as TickState.changed does)
    assert after.tables() == before.tables() and after.orderTopicConf == {"t": "b:8"} == before.orderTopicConf
    assert ns.version == version


@pytest.mark.parametrize("profile", PROFILES)
def test_restart_with_only_a_stranded_live_entry_left_is_a_change(profile: str) -> None:
    # id 0 moves from old:1 to new:1 (old:1 keeps its live entry), then new:1 unregisters: the group,
    # its cluster and topics are gone, and the live table alone still holds old:1
    ns = NameServer(profile, {}, T0)
    ns.apply(reg(T0, profile, addr="old:1"))
    ns.apply(reg(T0 + 1, profile, addr="new:1"))
    ns.apply(R.unregister_broker(T0 + 2, cluster="c", name="b", addr="new:1"))
    snap = ns.snapshot()
    assert snap.brokerAddrTable == snap.clusterAddrTable == snap.topicQueueTable == snap.filterServerTable == {}
    assert live_addrs(ns) == {"old:1"}
    outcome = ns.apply(R.namesrv_start(T0 + 3, "4.9.4" if profile == "rocketmq-4.9" else "5.3.3"))
    assert outcome.changed
    assert [(r.cause, r.brokerAddr, r.brokerName, r.liveRemoved) for r in outcome.removals] == [
        ("namesrv_restart", "old:1", None, True)]
    assert ns.snapshot().brokerLiveTable == {}


def test_restart_can_switch_profile_and_tick_grid() -> None:
    ns = NameServer("rocketmq-4.9", {}, T0)
    assert (ns.first_tick, ns.tick_interval) == (T0 + 5_000, 10_000)
    ns.apply(R.namesrv_start(T0 + 7, "5.3.3", {"scanNotActiveBrokerInterval": "2000"}))
    assert (ns.profile, ns.first_tick, ns.tick_interval) == ("rocketmq-5", T0 + 12, 2_000)
    assert ns.apply(reg(T0 + 8, "rocketmq-5")).code == ResponseCode.SUCCESS
    assert set(ns.snapshot().brokerLiveTable) == {("c", A)}
