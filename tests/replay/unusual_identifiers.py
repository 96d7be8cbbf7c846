"""A capture whose identifiers hold unusual characters: the separators a composite key or an encoding
could use (``|``, ``/``, ``:``, ``,``, ``=``, tab, newline, NUL), quotes, backslash, ``%``, spaces
(leading and trailing too), unicode (accents, CJK, an emoji outside the BMP, a combining mark), an
empty name, a 10 KB name, the line breaks JSON leaves unescaped (U+2028, U+2029, U+0085), names that differ only in case, RocketMQ's own system topics, and the
replay's own unit ids (``~kv``, ``~base``, ``~facts``, ``~starts``, ``*``) as brokerNames; and every
spelling RocketMQ gives an IPv6 address (:data:`IPV6_BROKERS`).

Two NameServers, one per profile (4.9 and 5.x), each with brokers registering such topics under such
brokerNames and clusters (one address-valid spelling per broker: the ingest's ``broker_address``
rule takes ``host:port``), haServerAddr, filter servers and connection ids free-form; then
heartbeats, a WIPE/ADD of write perms, a DELETE_TOPIC with a cluster, a REGISTER_TOPIC (5.x), KV
order configs, a channel close, an unregister and expiries, so every table changes with such keys.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from nsreplay.model import route_info, state_at
from nsreplay.model.records import (
    broker_heartbeat, channel, namesrv_start, query_data_version, register_broker, request, unregister_broker,
)

S = 1732147200000

#: Topics that hold every character class above; ``a|b`` and ``a`` (with brokerNames ``c`` and
#: ``b|c``) are the classic key collision of a ``|``-joined key.
TOPICS = (
    "a|b", "a", "x/y", "k=v", "c:d", "p,q", "tab\there", "nl\nline", "nul\u0000z", "quote'", 'dq"', "back\\slash",
    "pct%41", "pct%2F", "sp ace", " lead", "trail ", "é", "中文", "emoji\U0001F600", "e\u0301", "Topic", "topic",
    "%RETRY%group", "%DLQ%group", "rmq_sys_TRANS_HALF_TOPIC", "TBW102", "SCHEDULE_TOPIC_XXXX", "",
    "L" * 10240, '["a","b"]', "{}", "null",
    # line breaks JSON does not escape (written raw when not ASCII-escaped), a byte-order mark
    "ls\u2028x", "ps\u2029x", "nel\u0085x", "\ufeff",
)

#: (cluster, brokerName, address, haServerAddr, filter servers) of each broker group's master.
BROKERS = (
    ("c|1", "b|c", "host-1:10911", "ha|1:10912", ("f|1:1",)),
    ("c|1", "c", "host-2:10911", "ha\t2", ()),
    ("c,1", "b", "host_3.example:10911", "", ("f,2:2", 'f"3')),
    ("集群", "broker/é", "[::1]:10911", "中文:1", ()),
    ("", "emoji\U0001F600b", "HOST-5:10911", "ha 5", ()),
    ("DefaultCluster", "Broker", "host-5:10911", "ha\u00005", ("\u0000",)),
    ("DefaultCluster", "broker", "host-7:10911", "ha\\7", ()),
    ("x" * 10240, " sp ", "host-8:10911", "ha8", ()),
    ("c=1", "~kv", "host-9:10911", "ha9", ()),
    ("c=1", "~base", "host-10:10911", "ha10", ()),
    ("c=1", "~facts", "host-13:10911", "ha13", ()),
    ("c=1", "~starts", "host-14:10911", "ha14", ()),
    ("c=1", "*", "host-11:10911", "ha11", ()),
    ("c/1", "a|b|c", "host-12:10911", "ha\u2028\u0085", ("f\u2029",)),
    ("", "", "host-15:10911", "ha15", ()),
)

#: Brokers on IPv6 hosts, as RocketMQ spells their addresses: without brokerIP1, "[" +
#: Inet6Address.getHostAddress() + "]" (uncompressed, a link-local one with its zone as a name or a
#: number); with brokerIP1 "2001:db8::5", unbracketed (RocketMQ splits an address at its last colon).
#: The two link-local ones differ only in their zone: two addresses to the NameServer.
IPV6_BROKERS = (
    ("v6", "v6-link-local", "[fe80:0:0:0:fc:ff:fe00:1%eth0]:10911", "[fe80:0:0:0:fc:ff:fe00:1%eth0]:10912", ()),
    ("v6", "v6-scope-id", "[fe80:0:0:0:fc:ff:fe00:1%2]:10911", "[fe80:0:0:0:fc:ff:fe00:1%2]:10912",
     ("[fe80:0:0:0:fc:ff:fe00:1%2]:10913",)),
    ("v6", "v6-brokerip1", "2001:db8::5:10911", "2001:db8::5:10912", ("2001:db8::5:10913",)),
    ("v6|b", "v6-loopback", "[0:0:0:0:0:0:0:1]:10911", "[0:0:0:0:0:0:0:1]:10912", ()),
)
BROKERS += IPV6_BROKERS

#: The instant after which only ``*``, ``a|b|c`` and the IPv6 brokers of :data:`BROKERS` have yet to
#: register: a window cut there leaves every group with a reserved-looking name in the window before,
#: and new groups in the window after.
AFTER_RESERVED_NAMES = S + 100 + 11


def _topics_of(index: int) -> list[tuple[str, int, int, int, int]]:
    """The topics broker group ``index`` registers: a slice of :data:`TOPICS` (overlapping), plus
    ``a`` under ``b|c`` and ``a|b`` under ``c`` (the collision pair)."""
    chosen = [TOPICS[(index * 5 + k) % len(TOPICS)] for k in range(9)]
    return [(t, 8, 4 + index % 5, 6, index % 2) for t in dict.fromkeys(chosen)]


def stream(namesrv: str, five: bool) -> list[dict[str, Any]]:
    """One NameServer's records (see module docstring)."""
    config: dict[str, Any] = {"scanNotActiveBrokerInterval": 5000, "orderMessageEnable": True} if five else {"orderMessageEnable": True}
    records = [namesrv_start(S, "5.3.3" if five else "4.9.4", config, namesrv=namesrv)]
    t = S + 100
    for i, (cluster, name, addr, ha, filters) in enumerate(BROKERS):
        conn = f"conn|{name}\u0000{i}#é"
        records.append(register_broker(t + i, cluster=cluster, name=name, addr=addr, topics=_topics_of(i), filter_servers=filters,
                                       five=five, conn=conn, ha_addr=ha or " ", namesrv=namesrv))
        # a slave at another address, id 1
        slave = addr.rsplit(":", 1)[0] + ":10921"
        records.append(register_broker(t + 50 + i, cluster=cluster, name=name, addr=slave, broker_id=1, topics=_topics_of(i),
                                       five=five, conn=f"{conn}|slave", ha_addr=ha, namesrv=namesrv))
    # the collision pair, explicitly
    records.append(register_broker(t + 200, cluster="c|1", name="b|c", addr="host-1:10911", topics=["a", "a|b|c"], dv=(0, 2, 2),
                                   filter_servers=("f|1:1",), five=five, conn=f"conn|b|c\u00000#é", ha_addr="ha|1:10912", namesrv=namesrv))
    records.append(register_broker(t + 201, cluster="c|1", name="c", addr="host-2:10911", topics=["a|b", "b|c"], dv=(0, 2, 2),
                                   five=five, conn="conn|c\u00001#é", ha_addr="ha\t2", namesrv=namesrv))
    # IPv6: one address under two brokerNames; then the brokerIP1 broker (its live entry's stateVersion
    # raised) registering id 0 again with the bracketed spelling of its address, a different address
    # to the NameServer (5.x: a conflict, its smaller stateVersion loses)
    records.append(register_broker(t + 202, cluster="v6", name="v6-twin", addr="2001:db8::5:10911", topics=["v6-topic", "a"],
                                   five=five, conn="conn|v6-twin", ha_addr="2001:db8::5:10912", namesrv=namesrv))
    records.append(register_broker(t + 203, cluster="v6", name="v6-brokerip1", addr="2001:db8::5:10911", topics=["v6-topic"], dv=(3, 2, 2),
                                   filter_servers=("2001:db8::5:10913",), five=five, conn="conn|v6-brokerip1\u000017#é", namesrv=namesrv))
    records.append(register_broker(t + 204, cluster="v6", name="v6-brokerip1", addr="[2001:db8::5]:10911", topics=["v6-topic", "b|c"],
                                   dv=(1, 3, 3), five=five, conn="conn|v6-brokerip1|brackets", ha_addr="[2001:db8::5]:10912", namesrv=namesrv))
    t += 10_000
    # a compressed registration (the compressed form splits a topic line at spaces: names without)
    records.append(register_broker(t, cluster="集群", name="broker/é", addr="[::1]:10911", topics=["中文", "emoji\U0001F600", "a|b", "%RETRY%group"],
                                   dv=(0, 3, 3), five=five, form="compressed", conn="conn|broker/é\u00003#é", ha_addr="中文:1", namesrv=namesrv))
    t += 1000
    records.append(request(t, 205, {"brokerName": "b|c"}, namesrv=namesrv))
    records.append(request(t + 1, 205, {"brokerName": "~kv"}, namesrv=namesrv))
    records.append(request(t + 2, 327, {"brokerName": "broker/é"}, namesrv=namesrv))
    records.append(request(t + 3, 216, {"topic": "Topic", "clusterName": "DefaultCluster"}, namesrv=namesrv))
    records.append(request(t + 4, 216, {"topic": "nul\u0000z"}, namesrv=namesrv))
    records.append(request(t + 5, 216, {"topic": "a|b", "clusterName": "c|1"}, namesrv=namesrv))
    records.append(request(t + 6, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "a|b", "value": "b|c:4;c:2"}, namesrv=namesrv))
    records.append(request(t + 7, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "中文", "value": "broker/é:8"}, namesrv=namesrv))
    records.append(request(t + 8, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "", "value": ""}, namesrv=namesrv))
    records.append(request(t + 9, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "emoji\U0001F600", "value": "~kv:1"}, namesrv=namesrv))
    records.append(request(t + 9, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "q'\"", "value": 'q"\\\n\u0000\U0001F600:1'}, namesrv=namesrv))
    if five:
        qd = [{"brokerName": n, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicSysFlag": 0} for n in ("~base", "*", "emoji\U0001F600b")]
        records.append(request(t + 10, 217, {"topic": "new|topic é"}, body={"queueDatas": qd}, namesrv=namesrv))
    if five:
        records.append(broker_heartbeat(t + 11, cluster="v6", name="v6-link-local", addr="[fe80:0:0:0:fc:ff:fe00:1%eth0]:10911",
                                        conn="conn|v6-link-local\u000015#é", namesrv=namesrv))
    records.append(query_data_version(t + 12, cluster="v6", name="v6-scope-id", addr="[fe80:0:0:0:fc:ff:fe00:1%2]:10911",
                                      dv=(0, 1, 1), conn="conn|v6-scope-id\u000016#é", namesrv=namesrv))
    t += 1000
    records.append(channel(t, "CLOSE", "conn|c\u00001#é", namesrv=namesrv))
    # IPv6 peers as Netty names them: JDK 8 unbracketed, JDK 14+ bracketed, both with the zone
    records.append(channel(t, "CLOSE", "conn|v6-scope-id\u000016#é", remote="fe80:0:0:0:fc:ff:fe00:1%2:40001", namesrv=namesrv))
    records.append(channel(t, "IDLE", "conn|v6-link-local\u000015#é|slave", remote="[fe80:0:0:0:fc:ff:fe00:1%eth0]:40002", namesrv=namesrv))
    records.append(unregister_broker(t + 1, cluster="v6", name="v6-brokerip1", addr="2001:db8::5:10921", broker_id=1, namesrv=namesrv))
    records.append(unregister_broker(t + 1, cluster="集群", name="broker/é", addr="[::1]:10911", broker_id=0, namesrv=namesrv))
    records.append(request(t + 2, 102, {"namespace": "ORDER_TOPIC_CONFIG", "key": "中文"}, namesrv=namesrv))
    # keep a few groups alive while the others expire
    for k in range(0, 200_000, 20_000):
        for cluster, name, addr, ha, filters in BROKERS[2:5]:
            records.append(register_broker(t + 100 + k, cluster=cluster, name=name, addr=addr, topics=[], dv=(0, 4, 4), filter_servers=filters,
                                           five=five, conn=f"keep|{name}", ha_addr=ha or " ", namesrv=namesrv))
    return records


def capture(namesrvs: tuple[str, str] = ("ns-4_9.example:9876", "[fe80:0:0:0:0:0:0:1%eth0]:9876")) -> list[dict[str, Any]]:
    """Both NameServers' records (4.9 first, then 5.x), ``seq`` numbered per NameServer."""
    out = []
    for namesrv, five in zip(namesrvs, (False, True)):
        records = stream(namesrv, five)
        for seq, record in enumerate(records):
            record["seq"] = seq
        out += records
    return out


#: Where :func:`with_route_answers` asks: after the admin requests, before any expiry.
ASKED_AT = S + 12_500


def with_route_answers(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` plus, for every NameServer, GET_ROUTEINFO_BY_TOPIC requests at :data:`ASKED_AT`
    for every topic of :data:`TOPICS` and one that never existed, each with the model's true answer
    captured (legacy shape, raw bytes, for version 121; standard JSON as a ``body`` object for 401),
    on a client connection named with unusual characters too."""
    out = list(records)
    for namesrv in sorted({r["namesrv"] for r in records}):
        own = [r for r in records if r["namesrv"] == namesrv]
        profile = "rocketmq-5" if any(r.get("rocketmq_version", "").startswith("5") for r in own) else "rocketmq-4.9"
        state = state_at(own, namesrv, ASKED_AT, default_profile=profile)
        seq = max(r["seq"] for r in own) + 1
        for opaque, (topic, version) in enumerate(((t, v) for t in (*TOPICS, "never|there é") for v in (121, 401)), start=1000):
            truth = route_info(state, topic, request_version=version)
            conn = "client|é\u0000#1"
            out.append(request(ASKED_AT, 105, {"topic": topic}, conn=conn, opaque=opaque, version=version, namesrv=namesrv, seq=seq))
            response: dict[str, Any] = {"namesrv": namesrv, "ts": ASKED_AT, "kind": "response", "code": truth.code, "opaque": opaque, "conn": conn, "seq": seq + 1}
            if truth.body is not None and version < 401:
                response["body_b64"] = base64.b64encode(truth.body).decode("ascii")
            elif truth.body is not None:
                response["body"] = json.loads(truth.body)
            if truth.remark is not None:
                response["remark"] = truth.remark
            out.append(response)
            seq += 2
    return out
