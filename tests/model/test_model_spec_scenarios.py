"""Semantics spec §10: the scenarios taken from the NameServer's own unit tests, one test each.

Fixture: cluster "cluster"; brokerNames broker-0..2, each with ids 0, 1, 2 at ``cluster-broker-i:id``;
topics topic-0..9 with 8/8 queues, perm 6. Scenarios that exist in both versions run in both profiles.
"""

from __future__ import annotations

import pytest

from nsreplay.model import (
    BrokerData,
    DataVersion,
    FrozenDict,
    NameServer,
    QueueData,
    ResponseCode,
    cluster_info,
    route_data,
    route_info,
    topic_list,
)
from nsreplay.model import records as R
from nsreplay.model.render import parse_fastjson

PROFILES = ["rocketmq-4.9", "rocketmq-5"]
TOPICS = [f"topic-{i}" for i in range(10)]
T0 = 1_000_000
# 5.x refuses a first registration of an id whose body lists exactly one topic (spec §2, 5.x step 5);
# real brokers always report system topics too, so single-topic tests add the default topic.
TBW = ("TBW102", 8, 8, 7)


def fixture(profile: str, config: dict[str, object] | None = None) -> NameServer:
    ns = NameServer(profile, config or {}, T0)
    for i in range(3):
        for broker_id in range(3):
            outcome = ns.apply(R.register_broker(
                T0 + 100, cluster="cluster", name=f"broker-{i}", addr=f"cluster-broker-{i}:{broker_id}",
                broker_id=broker_id, topics=TOPICS, five=profile == "rocketmq-5",
            ))
            assert outcome.code == ResponseCode.SUCCESS
    return ns


def addrs(ns: NameServer, name: str) -> dict[int, str]:
    return dict(ns.snapshot().brokerAddrTable[name].brokerAddrs)


@pytest.mark.parametrize("profile", PROFILES)
def test_registering_id0_at_the_address_of_id1_replaces_id1(profile: str) -> None:
    ns = fixture(profile)
    ns.apply(R.register_broker(T0 + 200, cluster="cluster", name="broker-0", addr="cluster-broker-0:1",
                               broker_id=0, topics=TOPICS, five=profile == "rocketmq-5"))
    assert addrs(ns, "broker-0") == {0: "cluster-broker-0:1", 2: "cluster-broker-0:2"}


@pytest.mark.parametrize("profile", PROFILES)
def test_unregistering_id2_leaves_ids_0_and_1(profile: str) -> None:
    ns = fixture(profile)
    outcome = ns.apply(R.unregister_broker(T0 + 200, cluster="cluster", name="broker-0",
                                           addr="cluster-broker-0:2", broker_id=2))
    assert outcome.changed and outcome.removals[0].cause == "unregistered"
    assert addrs(ns, "broker-0") == {0: "cluster-broker-0:0", 1: "cluster-broker-0:1"}


def expected_broker_data_json(profile: str, i: int) -> dict[str, object]:
    """broker-i of the fixture as the NameServer serializes a BrokerData (spec §1, §7): ids 0, 1, 2 at
    ``cluster-broker-i:id`` (map keys come back as strings from either shape), cluster "cluster"; 5.x
    adds enableActingMaster (the fixture's brokers send "false"), zoneName is null and so omitted."""
    data: dict[str, object] = {
        "brokerAddrs": {str(broker_id): f"cluster-broker-{i}:{broker_id}" for broker_id in range(3)},
        "brokerName": f"broker-{i}",
        "cluster": "cluster",
    }
    if profile == "rocketmq-5":
        data["enableActingMaster"] = False
    return data


@pytest.mark.parametrize("profile", PROFILES)
def test_fixture_tables_hold_exactly_the_fixture(profile: str) -> None:
    snap = fixture(profile).snapshot()
    assert snap.brokerAddrTable == {
        f"broker-{i}": BrokerData("cluster", f"broker-{i}",
                                  FrozenDict({broker_id: f"cluster-broker-{i}:{broker_id}" for broker_id in range(3)}))
        for i in range(3)
    }
    assert snap.clusterAddrTable == {"cluster": frozenset({"broker-0", "broker-1", "broker-2"})}
    # only the masters (id 0) apply topic configs (spec §2 4.9 step 5, 5.x step 7)
    assert snap.topicQueueTable == {
        t: {f"broker-{i}": QueueData(f"broker-{i}", 8, 8, 6, 0) for i in range(3)} for t in TOPICS
    }
    assert set(snap.brokerLiveTable) == {
        (f"cluster-broker-{i}:{broker_id}" if profile == "rocketmq-4.9" else ("cluster", f"cluster-broker-{i}:{broker_id}"))
        for i in range(3) for broker_id in range(3)
    }
    assert snap.filterServerTable == {}


@pytest.mark.parametrize("profile", PROFILES)
def test_cluster_info_and_topic_list(profile: str) -> None:
    ns = fixture(profile)
    info = parse_fastjson(cluster_info(ns).body or b"")
    assert info == {
        "brokerAddrTable": {f"broker-{i}": expected_broker_data_json(profile, i) for i in range(3)},
        "clusterAddrTable": {"cluster": ["broker-0", "broker-1", "broker-2"]},
    }
    assert parse_fastjson(topic_list(ns).body or b"") == {"topicList": TOPICS}


def _by_broker_name(items: list[dict[str, object]]) -> dict[object, dict[str, object]]:
    """A list of the answer keyed by brokerName (lists are compared as sets, spec §7)."""
    keyed = {item["brokerName"]: item for item in items}
    assert len(keyed) == len(items), "a brokerName listed twice"
    return keyed


@pytest.mark.parametrize("profile", PROFILES)
def test_route_of_topic0(profile: str) -> None:
    answer = route_info(fixture(profile), "topic-0", request_version=479)
    assert answer.code == ResponseCode.SUCCESS and answer.remark is None
    route = parse_fastjson(answer.body or b"")
    assert isinstance(route, dict)
    # no filter servers anywhere: {}; orderTopicConf is null (orderMessageEnable false) and so omitted
    assert set(route) == {"brokerDatas", "filterServerTable", "queueDatas"}
    assert route["filterServerTable"] == {}
    assert _by_broker_name(route["brokerDatas"]) == {f"broker-{i}": expected_broker_data_json(profile, i) for i in range(3)}
    assert _by_broker_name(route["queueDatas"]) == {
        f"broker-{i}": {"brokerName": f"broker-{i}", "perm": 6, "readQueueNums": 8, "topicSysFlag": 0, "writeQueueNums": 8}
        for i in range(3)
    }


@pytest.mark.parametrize("profile", PROFILES)
def test_delete_topic_makes_the_route_not_found(profile: str) -> None:
    ns = fixture(profile)
    ns.apply(R.request(T0 + 200, 216, {"topic": "topic-0"}))
    answer = route_info(ns, "topic-0", request_version=479)
    assert answer.code == ResponseCode.TOPIC_NOT_EXIST and answer.body is None


@pytest.mark.parametrize("profile", PROFILES)
def test_wipe_keeps_a_read_only_perm_and_add_restores_6(profile: str) -> None:
    ns = NameServer(profile, {}, T0)
    ns.apply(R.register_broker(T0, cluster="cluster", name="broker-0", addr="cluster-broker-0:0",
                               topics=[("ro", 8, 8, 4), TBW], five=profile == "rocketmq-5"))
    ns.apply(R.request(T0 + 1, 205, {"brokerName": "broker-0"}))
    assert ns.snapshot().topicQueueTable["ro"]["broker-0"].perm == 4
    ns.apply(R.request(T0 + 2, 327, {"brokerName": "broker-0"}))
    assert ns.snapshot().topicQueueTable["ro"]["broker-0"].perm == 6


def test_5x_same_address_under_two_clusters_has_two_live_entries() -> None:
    ns = NameServer("rocketmq-5", {}, T0)
    ns.apply(R.register_broker(T0, cluster="c1", name="b1", addr="10.0.0.1:10911", dv=(0, 1, 1), topics=["t", TBW]))
    ns.apply(R.register_broker(T0, cluster="c2", name="b2", addr="10.0.0.1:10911", dv=(0, 2, 2), topics=["t", TBW]))
    live = ns.snapshot().brokerLiveTable
    assert set(live) == {("c1", "10.0.0.1:10911"), ("c2", "10.0.0.1:10911")}
    assert live[("c1", "10.0.0.1:10911")].dataVersion == DataVersion(0, 1, 1)  # each keeps its own dv
    assert live[("c2", "10.0.0.1:10911")].dataVersion == DataVersion(0, 2, 2)
    ns.apply(R.unregister_broker(T0 + 1, cluster="c1", name="b1", addr="10.0.0.1:10911"))
    snap = ns.snapshot()
    assert set(snap.brokerLiveTable) == {("c2", "10.0.0.1:10911")}
    assert snap.brokerLiveTable[("c2", "10.0.0.1:10911")].dataVersion == DataVersion(0, 2, 2)
    assert snap.brokerAddrTable == {"b2": BrokerData("c2", "b2", FrozenDict({0: "10.0.0.1:10911"}))}
    assert snap.clusterAddrTable == {"c2": frozenset({"b2"})}


def _acting_master_group(enable_acting_master: bool, support_acting_master: bool) -> NameServer:
    ns = NameServer("rocketmq-5", {"supportActingMaster": support_acting_master}, T0)
    for broker_id, addr in ((0, "master:10911"), (1, "slave:10911")):
        ns.apply(R.register_broker(T0, cluster="cluster", name="broker-0", addr=addr, broker_id=broker_id,
                                   topics=["topic-0", TBW], enable_acting_master=enable_acting_master))
    ns.apply(R.unregister_broker(T0 + 1, cluster="cluster", name="broker-0", addr="master:10911"))
    return ns


def _route(ns: NameServer) -> tuple[dict[int, str], int]:
    route = route_data(ns, "topic-0")
    assert route is not None
    return route["brokerDatas"][0]["brokerAddrs"], route["queueDatas"][0]["perm"]


def test_5x_acting_master_shows_the_slave_as_id0_read_only() -> None:
    ns = _acting_master_group(enable_acting_master=True, support_acting_master=True)
    assert _route(ns) == ({0: "slave:10911"}, 4)
    assert dict(ns.snapshot().brokerAddrTable["broker-0"].brokerAddrs) == {1: "slave:10911"}  # only the view


def test_5x_without_acting_master_the_slave_stays_id1_with_perm_6() -> None:
    ns = _acting_master_group(enable_acting_master=False, support_acting_master=True)
    assert _route(ns) == ({1: "slave:10911"}, 6)


def test_5x_master_registering_again_restores_the_group_and_perm() -> None:
    ns = _acting_master_group(enable_acting_master=True, support_acting_master=True)
    ns.apply(R.register_broker(T0 + 2, cluster="cluster", name="broker-0", addr="master:10911",
                               topics=["topic-0", TBW], enable_acting_master=True))
    assert _route(ns) == ({0: "master:10911", 1: "slave:10911"}, 6)


@pytest.mark.parametrize("profile", PROFILES)
def test_slave_re_registering_as_id0_then_old_master_as_id1(profile: str) -> None:
    five = profile == "rocketmq-5"
    ns = NameServer(profile, {}, T0)
    ns.apply(R.register_broker(T0, cluster="cluster", name="b", addr="m:1", broker_id=0, topics=["t", TBW], five=five))
    ns.apply(R.register_broker(T0, cluster="cluster", name="b", addr="s:1", broker_id=1, topics=["t", TBW], five=five))
    ns.apply(R.unregister_broker(T0 + 1, cluster="cluster", name="b", addr="m:1", broker_id=0))
    ns.apply(R.register_broker(T0 + 2, cluster="cluster", name="b", addr="s:1", broker_id=0, topics=["t", TBW], five=five))
    assert addrs(ns, "b") == {0: "s:1"}
    ns.apply(R.register_broker(T0 + 3, cluster="cluster", name="b", addr="m:1", broker_id=1, topics=["t", TBW], five=five))
    assert addrs(ns, "b") == {0: "s:1", 1: "m:1"}


@pytest.mark.parametrize("delete_with_registration", [True, False])
def test_5x_delete_topic_with_broker_registration(delete_with_registration: bool) -> None:
    ns = NameServer("rocketmq-5", {"deleteTopicWithBrokerRegistration": str(delete_with_registration)}, T0)
    ns.apply(R.register_broker(T0, cluster="cluster", name="b0", addr="b0:1", topics=["keep", "drop"]))
    ns.apply(R.register_broker(T0, cluster="cluster", name="b1", addr="b1:1", topics=["keep", "drop"]))
    ns.apply(R.register_broker(T0 + 1, cluster="cluster", name="b0", addr="b0:1", topics=["keep"]))
    topics = ns.snapshot().topicQueueTable
    assert set(topics["keep"]) == {"b0", "b1"}
    assert set(topics["drop"]) == ({"b1"} if delete_with_registration else {"b0", "b1"})
    assert topics["drop"]["b1"] == QueueData("b1", 8, 8, 6, 0)
