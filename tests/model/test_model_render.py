"""Answers to 105 / 106 / 206 and their fastjson serialization (semantics spec §7)."""

from __future__ import annotations

import json

import pytest

from nsreplay.model import (
    Answer,
    BrokerData,
    FrozenDict,
    NameServer,
    QueueData,
    ResponseCode,
    Snapshot,
    canonical,
    cluster_info,
    parse_fastjson,
    route_info,
    same_answer,
    to_fastjson,
    topic_list,
)
from nsreplay.model import records as R

T0 = 1_000_000
TBW = ("TBW102", 8, 8, 7)
SPEC_EXAMPLE = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911"},"brokerName":"b","cluster":"c","enableActingMaster":false}],'
    b'"filterServerTable":{},"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":8,"topicSysFlag":0,'
    b'"writeQueueNums":8}]}'
)
LEGACY_EXAMPLE = SPEC_EXAMPLE.replace(b'{"0":', b"{0:")


def example(profile: str = "rocketmq-5", config: dict[str, object] | None = None, **kw: object) -> NameServer:
    ns = NameServer(profile, config or {}, T0)
    ns.apply(R.register_broker(T0, cluster="c", name="b", addr="10.0.0.1:10911", topics=["t", TBW],
                               five=profile == "rocketmq-5", **kw))  # type: ignore[arg-type]
    return ns


def only_t(ns: NameServer) -> NameServer:
    ns.apply(R.request(T0 + 1, 216, {"topic": "TBW102"}))
    return ns


def test_spec_example_standard_json_byte_exact() -> None:
    answer = route_info(only_t(example()), "t", request_version=401)
    assert answer == Answer(ResponseCode.SUCCESS, SPEC_EXAMPLE, None)


def test_spec_example_legacy_shape_byte_exact() -> None:
    answer = route_info(only_t(example()), "t", request_version=400)
    assert answer.body == LEGACY_EXAMPLE
    for client_version in (121, 63):  # ali-ons, C++ client
        assert route_info(only_t(example()), "t", request_version=client_version).body == LEGACY_EXAMPLE
    with pytest.raises(json.JSONDecodeError):
        json.loads(LEGACY_EXAMPLE)


def test_49_brokerdata_has_no_5x_fields() -> None:
    answer = route_info(only_t(example("rocketmq-4.9")), "t", request_version=479)
    assert answer.body == SPEC_EXAMPLE.replace(b',"enableActingMaster":false', b"")


def test_5x_zone_name_is_rendered_when_set() -> None:
    answer = route_info(example(zone="az-1"), "t", request_version=479)
    assert b'"enableActingMaster":false,"zoneName":"az-1"}' in (answer.body or b"")


def test_topic_not_exist_remark() -> None:
    """FAQUrl.suggestTodo(APPLY_TOPIC_URL): 4.9.4 links the old FAQ page, 5.x its DEFAULT_FAQ_URL."""
    assert route_info(example("rocketmq-4.9"), "missing", request_version=401) == Answer(
        ResponseCode.TOPIC_NOT_EXIST,
        None,
        "No topic route info in name server for the topic: missing\n"
        "See http://rocketmq.apache.org/docs/faq/ for further details.",
    )
    assert route_info(example(), "missing", request_version=479) == Answer(
        ResponseCode.TOPIC_NOT_EXIST,
        None,
        "No topic route info in name server for the topic: missing\n"
        "See https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.",
    )


def test_topic_whose_brokernames_have_no_brokerdata_is_not_found() -> None:
    snap = Snapshot(
        profile="rocketmq-5",
        topicQueueTable=FrozenDict({"t": FrozenDict({"ghost": QueueData("ghost", 8, 8, 6, 0)})}),
        brokerAddrTable=FrozenDict(),
        clusterAddrTable=FrozenDict(),
        brokerLiveTable=FrozenDict(),
        filterServerTable=FrozenDict(),
    )
    assert route_info(snap, "t", request_version=479).code == ResponseCode.TOPIC_NOT_EXIST


def test_route_with_an_empty_brokerdata_is_found() -> None:
    snap = Snapshot(
        profile="rocketmq-5",
        topicQueueTable=FrozenDict({"t": FrozenDict({"b": QueueData("b", 8, 8, 6, 0)})}),
        brokerAddrTable=FrozenDict({"b": BrokerData("c", "b", FrozenDict())}),
        clusterAddrTable=FrozenDict({"c": frozenset({"b"})}),
        brokerLiveTable=FrozenDict(),
        filterServerTable=FrozenDict(),
    )
    assert b'"brokerAddrs":{}' in (route_info(snap, "t", request_version=479).body or b"")


@pytest.mark.parametrize("enabled", [True, False])
def test_order_topic_conf_only_with_order_message_enable(enabled: bool) -> None:
    ns = example(config={"orderMessageEnable": enabled})
    ns.apply(R.request(T0, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "t", "value": "b:8"}))
    parsed = parse_fastjson(route_info(ns, "t", request_version=479).body or b"")
    assert parsed.get("orderTopicConf") == ("b:8" if enabled else None)


@pytest.mark.parametrize("profile", ["rocketmq-4.9", "rocketmq-5"])
def test_filter_server_table(profile: str) -> None:
    five = profile == "rocketmq-5"
    ns = NameServer(profile, {}, T0)
    ns.apply(R.register_broker(T0, cluster="c", name="b", addr="m:1", topics=["t", TBW], five=five))
    assert parse_fastjson(route_info(ns, "t", request_version=479).body or b"")["filterServerTable"] == {}
    ns.apply(R.register_broker(T0, cluster="c", name="other", addr="o:1", topics=["u", TBW], five=five,
                               filter_servers=["f:9"]))
    ns.apply(R.register_broker(T0, cluster="c", name="b", addr="s:1", broker_id=1, topics=["t", TBW], five=five,
                               filter_servers=["f:1", "f:2"]))
    table = parse_fastjson(route_info(ns, "t", request_version=479).body or b"")["filterServerTable"]
    assert table == {"s:1": ["f:1", "f:2"]}  # addresses without a list are omitted


def test_5x_support_acting_master_rewrite_needs_a_read_only_queue() -> None:
    ns = NameServer("rocketmq-5", {"supportActingMaster": True}, T0)
    ns.apply(R.register_broker(T0, cluster="c", name="b", addr="s1:1", broker_id=1, topics=["t", TBW],
                               enable_acting_master=True))
    ns.apply(R.register_broker(T0, cluster="c", name="b", addr="s2:1", broker_id=2, topics=["t", TBW],
                               enable_acting_master=True))
    parsed = parse_fastjson(route_info(ns, "t", request_version=479).body or b"")
    assert parsed["brokerDatas"][0]["brokerAddrs"] == {"0": "s1:1", "2": "s2:1"}
    ns.apply(R.request(T0 + 1, 327, {"brokerName": "b"}))  # writable again: no rewrite
    parsed = parse_fastjson(route_info(ns, "t", request_version=479).body or b"")
    assert parsed["brokerDatas"][0]["brokerAddrs"] == {"1": "s1:1", "2": "s2:1"}


def test_cluster_info_is_legacy_unless_standard_is_asked() -> None:
    ns = example()
    legacy = cluster_info(ns, request_version=479).body or b""
    assert b'"brokerAddrs":{0:"10.0.0.1:10911"}' in legacy
    standard = cluster_info(ns, shape="standard").body or b""
    assert json.loads(standard) == parse_fastjson(legacy) == {
        "brokerAddrTable": {"b": {"brokerAddrs": {"0": "10.0.0.1:10911"}, "brokerName": "b", "cluster": "c",
                                  "enableActingMaster": False}},
        "clusterAddrTable": {"c": ["b"]},
    }


def test_topic_list() -> None:
    assert topic_list(example()).body == b'{"topicList":["TBW102","t"]}'


def test_to_fastjson_sorts_keys_numerically_and_drops_nulls() -> None:
    value = {"z": None, "m": {10: "x", 2: "y"}, "a": [1, None, "é"]}
    assert to_fastjson(value, legacy=True) == '{"a":[1,null,"é"],"m":{2:"y",10:"x"}}'
    assert to_fastjson(value, legacy=False) == '{"a":[1,null,"é"],"m":{"2":"y","10":"x"}}'


def test_parse_fastjson_leaves_strings_alone() -> None:
    text = '{"k":"{0:1,2:3}",5:{-1:"a, 7:"}}'
    assert parse_fastjson(text) == {"k": "{0:1,2:3}", "5": {"-1": "a, 7:"}}


def test_canonical_and_same_answer_compare_lists_as_sets() -> None:
    a = {"brokerDatas": [{"brokerAddrs": {0: "x"}}, {"brokerAddrs": {1: "y"}}], "queueDatas": [1, 2]}
    b = b'{"queueDatas":[2,1],"brokerDatas":[{"brokerAddrs":{1:"y"}},{"brokerAddrs":{"0":"x"}}]}'
    assert canonical(a) == canonical(b) and same_answer(a, b)
    assert not same_answer(a, b'{"queueDatas":[2,1],"brokerDatas":[]}')
    ns = only_t(example())
    assert same_answer(route_info(ns, "t", request_version=400), route_info(ns, "t", request_version=401))
    assert not same_answer(route_info(ns, "t", request_version=401), route_info(ns, "x", request_version=401))
