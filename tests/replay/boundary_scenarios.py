"""Hand-built boundary scenarios, one NameServer each, in one capture (see test_replay_boundaries)."""

from __future__ import annotations

import base64

from nsreplay.model import route_info, state_at
from nsreplay.model.records import (
    broker_heartbeat,
    channel,
    conn_of,
    namesrv_start,
    register_broker,
    request,
    unregister_broker,
)

S = 1732147200000
END = S + 300_000
LONG_MAX = (1 << 63) - 1
NS_TICK_ORDER = "10.0.1.1:9876"  # 4.9: records at a tick's ts come before its scan; strict 120 s rule
NS_TIMEOUT = "10.0.1.2:9876"  # 5.x: per-broker heartbeatTimeoutMillis, 904 on a tick
NS_SHARED_ADDR = "10.0.1.3:9876"  # 4.9: one address under two brokerNames
NS_STALE_CLOSE = "10.0.1.4:9876"  # 5.x: only the stored connection destroys
NS_RESTART = "10.0.1.5:9876"  # 5.x: restart empties the tables, keeps the KV, restarts the grid
NS_DELETE_49 = "10.0.1.6:9876"  # 4.9: DELETE_TOPIC stays until the dv changes; by cluster
NS_DELETE_5 = "10.0.1.7:9876"  # 5.x: DELETE_TOPIC comes back at the next registration
NS_TWO_CLUSTERS = "10.0.1.8:9876"  # 4.9: one brokerName in two clusters
NS_ACTING = "10.0.1.9:9876"  # 5.x: acting master with supportActingMaster
NS_SHARED_LIVE = "10.0.1.10:9876"  # 4.9: two processes report one address over different connections
NS_STATIC_MAPPINGS = "10.0.1.11:9876"  # 5.x: a body with static-topic mappings skips deleteTopicWithBrokerRegistration
NS_MALFORMED_5 = "10.0.1.12:9876"  # 5.x: topicConfigTable keys that are not the topic names; a broken mapping section
NS_MALFORMED_49 = "10.0.1.13:9876"  # 4.9: the same bodies (4.9 never reads the mapping section)
NS_REGISTER_TOPIC = "10.0.1.14:9876"  # 5.x: REGISTER_TOPIC naming an unknown brokerName, its topic held by another group
NS_SAME_TS = "10.0.1.15:9876"  # 5.x: a read-only request ranked with a registration; records at a restart's ts before it
NS_TWO_STARTS = "10.0.1.16:9876"  # 4.9 then two starts at one ts (4.9, then 5.x): the later one runs on
NS_EPOCH_SPLIT = "10.0.1.17:9876"  # 4.9: one address under two brokerNames, then a restart, then an address each


def scenarios() -> list[dict]:
    r: list[dict] = []
    five = {"scanNotActiveBrokerInterval": 5000}
    # (5.x rejects a first registration whose body holds exactly one topic, spec §2 step 5: every
    # 5.x broker here reports TBW102 too, as real brokers report their system topics.)

    # 4.9 ticks at S + 5000 + k*10000. b-c registered at S+4999 expires at S+125000 (124999 < 125000);
    # b-b at S+5000 survives that tick (125000 < 125000 is false); b-a re-registers exactly at
    # S+125000, which is applied before that tick's scan, so it survives although 124999 < 125000.
    ns = NS_TICK_ORDER
    r.append(namesrv_start(S, "4.9.4", {}, namesrv=ns))
    r.append(register_broker(S + 4999, cluster="c", name="b-a", addr="10.1.0.1:10911", topics=["t1"], five=False, namesrv=ns))
    r.append(register_broker(S + 5000, cluster="c", name="b-b", addr="10.1.0.2:10911", topics=["t1"], five=False, namesrv=ns))
    r.append(register_broker(S + 4999, cluster="c", name="b-c", addr="10.1.0.3:10911", topics=["t2"], five=False, namesrv=ns))
    r.append(register_broker(S + 125000, cluster="c", name="b-a", addr="10.1.0.1:10911", topics=["t1"], five=False, namesrv=ns))

    # 5.x ticks at S + 5 + k*5000; a broker with a 10 s timeout registers on a tick, heartbeats (904)
    # on a later tick, then goes silent: 10005 + 10000 < 20005 is false, < 25005 is true.
    # b-never's timeout is Long.MAX_VALUE: the scan's long sum wraps negative, so it expires at the
    # first tick after it registers (S+5005). b-edge's sum is exactly Long.MAX_VALUE: it stays.
    ns = NS_TIMEOUT
    r.append(namesrv_start(S, "5.3.3", five, namesrv=ns))
    r.append(register_broker(S + 5, cluster="c", name="b-t", addr="10.2.0.1:10911", topics=["t", "TBW102"], enable_acting_master=True, heartbeat_timeout=10000, namesrv=ns))
    r.append(broker_heartbeat(S + 10005, cluster="c", name="b-t", addr="10.2.0.1:10911", namesrv=ns))
    r.append(register_broker(S + 7, cluster="c", name="b-long", addr="10.2.0.2:10911", topics=["t", "TBW102"], namesrv=ns))
    r.append(register_broker(S + 12, cluster="c", name="b-never", addr="10.2.0.3:10911", topics=["never", "TBW102"], heartbeat_timeout=LONG_MAX, namesrv=ns))
    r.append(register_broker(S + 13, cluster="c", name="b-edge", addr="10.2.0.4:10911", topics=["edge", "TBW102"], heartbeat_timeout=LONG_MAX - (S + 13), namesrv=ns))

    # 4.9: broker-z and broker-a both hold 10.3.0.1 as id 0 (misconfiguration); when it expires, the
    # first BrokerData in Java order loses it. broker-q is independent and keeps heartbeating.
    ns = NS_SHARED_ADDR
    r.append(namesrv_start(S, "4.9.4", {}, namesrv=ns))
    r.append(register_broker(S + 1000, cluster="c", name="broker-z", addr="10.3.0.1:10911", topics=["tz"], five=False, namesrv=ns))
    r.append(register_broker(S + 2000, cluster="c", name="broker-a", addr="10.3.0.1:10911", topics=["ta"], five=False, namesrv=ns))
    r.append(register_broker(S + 2000, cluster="c", name="broker-a", addr="10.3.0.2:10911", broker_id=1, topics=["ta"], five=False, namesrv=ns))
    for k in range(0, 9):
        r.append(register_broker(S + 3000 + k * 30000, cluster="c", name="broker-q", addr="10.3.0.9:10911", topics=["tq"], five=False, namesrv=ns))
        r.append(register_broker(S + 3001 + k * 30000, cluster="c", name="broker-a", addr="10.3.0.2:10911", broker_id=1, topics=["ta"], five=False, namesrv=ns))

    # 5.x: b-s re-registers on a new connection; a CLOSE of the old one changes nothing, an IDLE of
    # the stored one destroys it at once.
    ns = NS_STALE_CLOSE
    addr = "10.4.0.1:10911"
    r.append(namesrv_start(S, "5.3.3", five, namesrv=ns))
    r.append(register_broker(S + 100, cluster="c", name="b-s", addr=addr, topics=["t", "TBW102"], conn=conn_of(addr, 0), namesrv=ns))
    r.append(register_broker(S + 30100, cluster="c", name="b-s", addr=addr, topics=["t", "TBW102"], conn=conn_of(addr, 1), namesrv=ns))
    r.append(channel(S + 40000, "CLOSE", conn_of(addr, 0), namesrv=ns))
    r.append(register_broker(S + 60100, cluster="c", name="b-s", addr=addr, topics=["t", "TBW102"], conn=conn_of(addr, 1), namesrv=ns))
    r.append(channel(S + 70000, "IDLE", conn_of(addr, 1), namesrv=ns))
    r.append(channel(S + 75000, "CLOSE", "10.9.9.9:1234#client", namesrv=ns))

    # 5.x restart: the KV survives, routes do not; the grid restarts at the new start.
    ns = NS_RESTART
    r.append(namesrv_start(S, "5.3.3", five, namesrv=ns))
    r.append(register_broker(S + 100, cluster="c", name="b-r", addr="10.5.0.1:10911", topics=["t", "TBW102"], namesrv=ns))
    r.append(request(S + 200, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "t", "value": "b-r:4"}, namesrv=ns))
    r.append(namesrv_start(S + 60001, "5.3.3", {"scanNotActiveBrokerInterval": 7000}, namesrv=ns))
    r.append(register_broker(S + 90000, cluster="c", name="b-r", addr="10.5.0.1:10911", topics=["t", "TBW102"], namesrv=ns))

    # DELETE_TOPIC: 4.9 keeps it deleted while the dv is unchanged (5.x brings it back); deleting by
    # cluster touches only that cluster's brokerNames.
    for ns, version, is_five in ((NS_DELETE_49, "4.9.4", False), (NS_DELETE_5, "5.3.3", True)):
        r.append(namesrv_start(S, version, five if is_five else {}, namesrv=ns))
        for k in range(0, 9):
            r.append(register_broker(S + 100 + k * 30000, cluster="c1", name="b-1", addr="10.6.0.1:10911", topics=["t", "shared", "TBW102"], five=is_five, namesrv=ns))
            r.append(register_broker(S + 200 + k * 30000, cluster="c2", name="b-2", addr="10.6.0.2:10911", topics=["shared", "TBW102"], five=is_five, namesrv=ns))
        r.append(request(S + 45000, 216, {"topic": "t"}, namesrv=ns))
        r.append(request(S + 46000, 216, {"topic": "shared", "clusterName": "c1"}, namesrv=ns))

    # 4.9: broker-m registers in two clusters; when it expires it leaves the first cluster set only.
    ns = NS_TWO_CLUSTERS
    r.append(namesrv_start(S, "4.9.4", {}, namesrv=ns))
    r.append(register_broker(S + 100, cluster="alpha", name="broker-m", addr="10.8.0.1:10911", topics=["t"], five=False, namesrv=ns))
    r.append(register_broker(S + 200, cluster="beta", name="broker-m", addr="10.8.0.1:10911", topics=["t"], five=False, namesrv=ns))
    for k in range(0, 9):
        r.append(register_broker(S + 300 + k * 30000, cluster="alpha", name="broker-x", addr="10.8.0.2:10911", topics=["t"], five=False, namesrv=ns))
        r.append(register_broker(S + 400 + k * 30000, cluster="beta", name="broker-y", addr="10.8.0.3:10911", topics=["t"], five=False, namesrv=ns))

    # 5.x acting master: the master leaves, its slave answers as id 0 with the write bit cleared.
    ns = NS_ACTING
    r.append(namesrv_start(S, "5.3.3", {**five, "supportActingMaster": True}, namesrv=ns))
    for k in range(0, 9):
        r.append(register_broker(S + 100 + k * 30000, cluster="c", name="b-h", addr="10.9.0.1:10911", topics=["t", "TBW102"], enable_acting_master=True, namesrv=ns))
        r.append(register_broker(S + 150 + k * 30000, cluster="c", name="b-h", addr="10.9.0.2:10911", broker_id=1, topics=["t", "TBW102"], enable_acting_master=True, namesrv=ns))
    r.append(unregister_broker(S + 100001, cluster="c", name="b-h", addr="10.9.0.1:10911", namesrv=ns))

    # 4.9: broker-p registers 10.10.0.1 once; broker-o (another process, another connection) keeps
    # registering the same address, so the shared live entry never expires and broker-p keeps it.
    ns = NS_SHARED_LIVE
    r.append(namesrv_start(S, "4.9.4", {}, namesrv=ns))
    r.append(register_broker(S + 1000, cluster="c", name="broker-p", addr="10.10.0.1:10911", topics=["tp"], five=False, conn="10.10.9.1:1#p",
                             filter_servers=["10.10.9.9:7777"], namesrv=ns))
    for k in range(0, 9):
        r.append(register_broker(S + 2000 + k * 30000, cluster="c", name="broker-o", addr="10.10.0.1:10911", topics=["to"], five=False, conn="10.10.9.2:2#o", namesrv=ns))

    # 5.x with deleteTopicWithBrokerRegistration: a registration whose body has static-topic mappings
    # does not remove the topics it no longer lists (spec §2 step 7a); one without mappings does. b-k
    # sends the compressed form (the mapping section), b-j the JSON form (topicQueueMappingInfoMap).
    ns = NS_STATIC_MAPPINGS
    r.append(namesrv_start(S, "5.3.3", {**five, "deleteTopicWithBrokerRegistration": True}, namesrv=ns))
    for name, addr, form in (("b-k", "10.11.0.1:10911", "compressed"), ("b-j", "10.11.0.2:10911", "json")):
        for k, (topics, mappings) in enumerate(((["t", "u", "TBW102"], True), (["t", "TBW102"], True), (["t", "TBW102"], True), (["t", "TBW102"], False))):
            r.append(register_broker(S + 100 + k * 30000 + (form == "json"), cluster="c", name=name, addr=addr, topics=topics, dv=(0, 1, 1 + k),
                                     form=form, static_mappings=mappings, namesrv=ns))

    # Malformed bodies, the same to a 5.x NameServer (with deleteTopicWithBrokerRegistration) and a 4.9
    # one. b-m's second JSON body keys topic "T"'s config as "K": 5.x keeps K (a key), drops "gone"
    # and applies T. b-n's first compressed body (version 479) lacks the static-topic mapping section:
    # 5.x answers SYSTEM_ERROR and changes nothing until its whole body 30 s later; 4.9 applies both.
    for ns, version in ((NS_MALFORMED_5, "5.3.3"), (NS_MALFORMED_49, "4.9.4")):
        five_ns = ns == NS_MALFORMED_5
        r.append(namesrv_start(S, version, {**five, "deleteTopicWithBrokerRegistration": True} if five_ns else {}, namesrv=ns))
        for k in range(3):
            renamed = k > 0
            r.append(register_broker(S + 100 + k * 30000, cluster="c", name="b-m", addr="10.12.0.1:10911", dv=(0, 1, 1 + min(k, 1)),
                                     topics=["T", "TBW102"] if renamed else ["K", "T", "gone", "TBW102"],
                                     topic_keys=["K", "TBW102"] if renamed else None, namesrv=ns))
            r.append(register_broker(S + 200 + k * 30000, cluster="c", name="b-n", addr="10.12.0.2:10911", topics=["n", "TBW102"], dv=(0, 1, 1 + k),
                                     form="compressed", mapping_section=b"" if k == 0 else None, namesrv=ns))

    # REGISTER_TOPIC (217) naming b-r, then a brokerName no broker registered: for a topic that exists
    # ("held", registered by b-h only: another replay unit) the entries before the unknown one stay;
    # for a new topic ("fresh") none does (spec §2). Found by the random streams of the replay test.
    ns = NS_REGISTER_TOPIC
    r.append(namesrv_start(S, "5.3.3", five, namesrv=ns))
    for k in range(10):
        r.append(register_broker(S + 100 + k * 30000, cluster="c", name="b-h", addr="10.14.0.1:10911", topics=["held", "TBW102"],
                                 filter_servers=["10.14.9.9:7777"], namesrv=ns))
        r.append(register_broker(S + 200 + k * 30000, cluster="c", name="b-r", addr="10.14.0.2:10911", topics=["r", "TBW102"], namesrv=ns))
    for at, topic in ((S + 1000, "held"), (S + 2000, "fresh")):
        body = {"queueDatas": [{"brokerName": "b-r", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicSysFlag": 0},
                               {"brokerName": "b-ghost", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicSysFlag": 0}]}
        r.append(request(at, 217, {"topic": topic}, body=body, namesrv=ns))
    # A QueueData number beyond a Java int: a body the NameServer cannot decode (SYSTEM_ERROR, nothing
    # changes, spec §2). Its typed gold column (int) could not hold the value either: the replay failed.
    r.append(request(S + 3000, 217, {"topic": "held"}, body={"queueDatas": [
        {"brokerName": "b-r", "readQueueNums": 1 << 31, "writeQueueNums": 4, "perm": 6, "topicSysFlag": 0}]}, namesrv=ns))

    # Ties of one ts (change rows' record_rank and tick_ts): a read-only request before a registration
    # at one ts takes no rank (the registration is 1); a registration and a KV put at a restart's ts,
    # before it, belong to the epoch it ends (tick_ts null: the registration is wiped before any tick,
    # the KV put too, as the documented rule says). Their order here is their seq order (below).
    ns = NS_SAME_TS
    r.append(namesrv_start(S, "5.3.3", five, namesrv=ns))
    r.append(register_broker(S + 100, cluster="c", name="b1", addr="10.15.1.1:10911", topics=["t", "TBW102"], namesrv=ns))
    r.append(request(S + 1000, 105, {"topic": "t"}, namesrv=ns))
    r.append(register_broker(S + 1000, cluster="c", name="b2", addr="10.15.1.2:10911", topics=["t", "TBW102"], namesrv=ns))
    r.append(register_broker(S + 20000, cluster="c", name="b3", addr="10.15.1.3:10911", topics=["t3", "TBW102"], namesrv=ns))
    r.append(request(S + 20000, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "t", "value": "b1:4"}, namesrv=ns))
    r.append(namesrv_start(S + 20000, "5.3.3", five, namesrv=ns))
    for k in range(9):
        r.append(register_broker(S + 20001 + k * 30000, cluster="c", name="b1", addr="10.15.1.1:10911", topics=["t", "TBW102"], namesrv=ns))

    # Two start records at one ts: the later one (5.x, 5 s grid) runs on; the first (4.9, 10 s grid)
    # is an epoch that ends where it starts and runs no tick, no keyframe, and is never the current one.
    ns = NS_TWO_STARTS
    r.append(namesrv_start(S, "4.9.4", {}, namesrv=ns))
    r.append(register_broker(S + 1000, cluster="c", name="b1", addr="10.16.1.1:10911", topics=["t"], five=False, namesrv=ns))
    r.append(namesrv_start(S + 3000, "4.9.4", {"scanNotActiveBrokerInterval": 10000}, namesrv=ns))
    r.append(namesrv_start(S + 3000, "5.3.3", five, namesrv=ns))
    for k in range(9):
        r.append(register_broker(S + 3001 + k * 30000, cluster="c", name="b1", addr="10.16.1.1:10911", topics=["t", "TBW102"], namesrv=ns))

    # A shared address links b-x and b-y until a restart; after it they never meet again, so a
    # window after the restart replays them as two units (the windowed test cuts at S+500, S+1500).
    ns = NS_EPOCH_SPLIT
    r.append(namesrv_start(S, "4.9.4", {}, namesrv=ns))
    r.append(register_broker(S + 100, cluster="c", name="b-x", addr="10.17.0.1:10911", topics=["tx"], five=False, namesrv=ns))
    r.append(register_broker(S + 200, cluster="c", name="b-y", addr="10.17.0.1:10911", topics=["ty"], five=False, namesrv=ns))
    r.append(namesrv_start(S + 1000, "4.9.4", {}, namesrv=ns))
    for k in range(9):
        r.append(register_broker(S + 1100 + k * 30000, cluster="c", name="b-x", addr="10.17.1.1:10911", topics=["tx"], five=False, namesrv=ns))
        r.append(register_broker(S + 1200 + k * 30000, cluster="c", name="b-y", addr="10.17.2.1:10911", topics=["ty"], five=False, namesrv=ns))

    # Two captured answers to GET_ROUTEINFO_BY_TOPIC for "t" on the 5.x DELETE_TOPIC NameServer: the
    # true one (the model's answer, legacy shape for an ali-ons client) and a false "not found".
    ns, at = NS_DELETE_5, S + 250_000
    truth = route_info(state_at(r, ns, at, default_profile="rocketmq-5"), "t", request_version=121)
    r.append(request(at, 105, {"topic": "t"}, conn="10.7.7.7:4444#client", opaque=77, version=121, namesrv=ns))
    r.append({"namesrv": ns, "ts": at + 1, "kind": "response", "code": truth.code, "opaque": 77, "conn": "10.7.7.7:4444#client",
              "body_b64": base64.b64encode(truth.body).decode()})
    r.append(request(at + 10, 105, {"topic": "t"}, conn="10.7.7.7:4444#client", opaque=78, version=401, namesrv=ns))
    r.append({"namesrv": ns, "ts": at + 11, "kind": "response", "code": 17, "opaque": 78, "conn": "10.7.7.7:4444#client",
              "remark": "No topic route info in name server for the topic: t"})

    for i, record in enumerate(sorted(r, key=lambda x: (x["namesrv"], x["ts"]))):
        record["seq"] = i
    # everything ends at the same instant: each NameServer's last record is a read-only query
    r += [request(END, 105, {"topic": "t"}, namesrv=ns, seq=10_000 + i) for i, ns in enumerate({x["namesrv"] for x in r})]
    return r
