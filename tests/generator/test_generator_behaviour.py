"""The tiny capture behaves like real brokers and NameServers (semantics spec §2, §3, §5, §8, §9)."""

from __future__ import annotations

import base64
import json
import statistics
from collections import defaultdict
from typing import Any

from capture_checks import iter_registers

from nsreplay.protocol.register_body import body_crc32, decode_json_register_body, decode_register_body

Record = dict[str, Any]


def _by_ns(records: list[Record]) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        out[r["namesrv"]].append(r)
    return out


def _groups(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["brokerName"]: g for g in manifest["topology"]["groups"]}


def _topics(r: Record) -> dict[str, Any]:
    if "body_b64" in r:
        body = decode_register_body(base64.b64decode(r["body_b64"]), compressed=r["extFields"]["compressed"] == "true",
                                    version=r["version"])
    else:
        body = decode_json_register_body(r["body"], version=r["version"])
    return {"dv": body.data_version, "topics": {c.topic_name: c for c in body.topic_configs}}


def test_seq_is_strictly_increasing_in_processing_order(tiny_records):
    for ns, records in _by_ns(tiny_records).items():
        seqs = [r["seq"] for r in records]
        assert len(seqs) == len(set(seqs)), ns
        ts = [r["ts"] for r in records]  # records are in seq order
        assert ts == sorted(ts), f"{ns}: ts goes backwards in seq order"


def test_every_namesrv_has_a_start_record_and_a_restart_adds_one(tiny_records, tiny_manifest):
    starts = defaultdict(list)
    for r in tiny_records:
        if r["kind"] == "namesrv_start":
            starts[r["namesrv"]].append(r)
            assert r["rocketmq_version"] in ("4.9.4", "5.3.3")
            assert isinstance(r["config"], dict)
    assert set(starts) == set(tiny_manifest["namesrvs"])
    restarts = [i for i in tiny_manifest["incidents"] if i["kind"] == "namesrv_restart"]
    assert restarts
    for rs in restarts:
        times = [r["ts"] for r in starts[rs["namesrv"]]]
        assert rs["up_ms"] in times
        assert not [r for r in tiny_records if r["namesrv"] == rs["namesrv"] and rs["down_ms"] <= r["ts"] < rs["up_ms"]]
    v5 = [r for rs in starts.values() for r in rs if r["rocketmq_version"].startswith("5")]
    assert v5 and all(r["config"]["scanNotActiveBrokerInterval"] == 5000 for r in v5)


def test_brokers_register_with_every_namesrv_every_30_seconds(tiny_records, tiny_manifest):
    groups = _groups(tiny_manifest)
    namesrvs = set(tiny_manifest["namesrvs"])
    times: dict[tuple[str, str], list[int]] = defaultdict(list)
    for r in iter_registers(tiny_records):
        ext = r["extFields"]
        if groups[ext["brokerName"]]["forceRegister"] and len(_topics(r)["topics"]) > 1:
            times[(ext["brokerAddr"], r["namesrv"])].append(r["ts"])
    brokers = {addr for addr, _ in times}
    assert len(brokers) >= 4
    for addr in brokers:
        assert {ns for a, ns in times if a == addr} == namesrvs, addr
    gaps = [b - a for ts in times.values() for a, b in zip(ts, ts[1:])]
    assert abs(statistics.median(gaps) - 30_000) <= 100
    assert sum(29_000 <= g <= 32_000 for g in gaps) / len(gaps) >= 0.8
    assert any(9_900 <= g <= 10_100 for g in gaps), "the second registration comes 10 s after the first"


def test_connection_ids_are_stable_for_the_life_of_a_connection(tiny_records):
    by_conn: dict[str, list[Record]] = defaultdict(list)
    for r in tiny_records:
        if "conn" in r:
            by_conn[r["conn"]].append(r)
    assert len(by_conn) > 10
    for conn, records in by_conn.items():
        host_port, _, connect_ts = conn.partition("@")
        assert connect_ts.isdigit()
        assert len({r["namesrv"] for r in records}) == 1, conn
        records.sort(key=lambda r: r["seq"])
        events = [r.get("event") for r in records if r["kind"] == "channel"]
        assert events.count("CONNECT") <= 1 and events.count("CLOSE") <= 1
        if "CONNECT" in events:
            assert records[0].get("event") == "CONNECT" and records[0]["ts"] == int(connect_ts)
        if "CLOSE" in events:
            close_at = next(i for i, r in enumerate(records) if r.get("event") == "CLOSE")
            assert all(r["kind"] == "channel" for r in records[close_at:])
        for r in records:
            if r["kind"] == "channel":
                assert r["remote"] == host_port
        addrs = {r["extFields"]["brokerAddr"] for r in records if r["kind"] == "request" and "brokerAddr" in r["extFields"]
                 and r["code"] in (103, 104, 322, 904)}
        assert len(addrs) <= 1, conn
        if addrs:
            assert addrs.pop().split(":")[0] == host_port.split(":")[0]


def test_a_broker_reuses_its_connection_until_it_closes(tiny_records):
    per_pair: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in iter_registers(tiny_records):
        per_pair[(r["namesrv"], r["extFields"]["brokerAddr"])].append(r["conn"])
    for conns in per_pair.values():
        changes = sum(1 for a, b in zip(conns, conns[1:]) if a != b)
        assert changes <= 4
        assert len(set(conns)) == changes + 1, "a connection, once left, is never used again"


def test_graceful_shutdown_unregisters_everywhere_then_closes(tiny_records, tiny_manifest):
    shutdowns = [i for i in tiny_manifest["incidents"] if i["kind"] == "graceful_shutdown"]
    assert shutdowns
    for inc in shutdowns:
        unregs = [r for r in tiny_records if r["kind"] == "request" and r["code"] == 104
                  and r["extFields"]["brokerAddr"] == inc["brokerAddr"]]
        assert {r["namesrv"] for r in unregs} == set(tiny_manifest["namesrvs"])
        for u in unregs:
            assert u["extFields"]["brokerId"] == str(inc["brokerId"])
            closes = [r for r in tiny_records if r.get("event") == "CLOSE" and r["conn"] == u["conn"]]
            assert len(closes) == 1 and 0 < closes[0]["ts"] - u["ts"] < 1000


def test_crash_restart_and_promotion_are_visible(tiny_records, tiny_manifest):
    incidents = tiny_manifest["incidents"]
    promotions = [i for i in incidents if i["kind"] == "promotion"]
    assert promotions
    for p in promotions:
        ids = [r["extFields"]["brokerId"] for r in iter_registers(tiny_records)
               if r["extFields"]["brokerAddr"] == p["promoted_addr"]]
        assert ids[0] == str(p["promoted_from_id"]) and ids[-1] == "0", "the slave re-registers as id 0"
        if "old_master_returns_ms" in p:
            back = [r for r in iter_registers(tiny_records)
                    if r["extFields"]["brokerAddr"] == p["brokerAddr"] and r["ts"] >= p["old_master_returns_ms"]]
            assert back and all(r["extFields"]["brokerId"] == str(p["old_master_returns_as_id"]) for r in back)
    crashes = [i for i in incidents if i["kind"] in ("crash", "promotion")]
    for c in crashes:
        silent = [r for r in tiny_records if r.get("extFields", {}).get("brokerAddr") == c["brokerAddr"]
                  and c["ts"] < r["ts"] < c.get("restart_ms", c.get("old_master_returns_ms", c["ts"]))]
        assert not silent, "a crashed broker sends nothing until it restarts"
    events = {r["event"] for r in tiny_records if r["kind"] == "channel"}
    assert {"CONNECT", "CLOSE", "IDLE"} <= events


def test_partition_hides_a_broker_then_the_old_connection_idles_out(tiny_records, tiny_manifest):
    partitions = [i for i in tiny_manifest["incidents"] if i["kind"] == "partition"]
    assert partitions
    for p in partitions:
        for ns in p["hidden_from"]:
            mine = [r for r in tiny_records if r["namesrv"] == ns and r.get("extFields", {}).get("brokerAddr") == p["brokerAddr"]]
            assert not [r for r in mine if p["ts"] + 10 <= r["ts"] < p["until_ms"]]
            before = [r for r in mine if r["ts"] < p["ts"]]
            after = [r for r in mine if r["ts"] >= p["until_ms"]]
            assert before and after and before[-1]["conn"] != after[0]["conn"]
            idle = [r for r in tiny_records if r.get("event") == "IDLE" and r["conn"] == before[-1]["conn"]]
            assert len(idle) == 1 and 120_000 < idle[0]["ts"] - before[-1]["ts"] < 121_000


def test_register_headers_follow_the_broker_line(tiny_records, tiny_manifest):
    groups = _groups(tiny_manifest)
    for r in iter_registers(tiny_records):
        ext = r["extFields"]
        g = groups[ext["brokerName"]]
        assert set(ext) >= {"brokerName", "brokerAddr", "clusterName", "haServerAddr", "brokerId", "compressed", "bodyCrc32"}
        assert ext["haServerAddr"] == ext["brokerAddr"].replace(":10911", ":10912")
        if g["line"] == "4.9":
            assert 395 <= r["version"] <= 399
            assert "enableActingMaster" not in ext and "heartbeatTimeoutMillis" not in ext
        else:
            assert 475 <= r["version"] <= 479
            assert ext["enableActingMaster"] == ("true" if g["enableActingMaster"] else "false")
            assert ("heartbeatTimeoutMillis" in ext) == g["enableActingMaster"]


def test_bodies_decode_and_carry_correct_crcs(tiny_records, tiny_manifest):
    groups = _groups(tiny_manifest)
    forms = set()
    for r in iter_registers(tiny_records):
        ext = r["extFields"]
        form = groups[ext["brokerName"]]["body_form"]
        forms.add(form)
        if "body_b64" in r:
            raw = base64.b64decode(r["body_b64"])
            assert int(ext["bodyCrc32"]) == body_crc32(raw) != 0
            assert (ext["compressed"] == "true") == (form == "compressed")
        else:
            assert form == "json"
            raw = json.dumps(r["body"], separators=(",", ":")).encode()
            assert int(ext["bodyCrc32"]) == body_crc32(raw)
            dv = r["body"]["topicConfigSerializeWrapper"]["dataVersion"]
            assert ("stateVersion" in dv) == (groups[ext["brokerName"]]["line"] == "5.x")
        assert len(_topics(r)["topics"]) >= 1
    assert forms == {"json", "raw", "compressed"}


def test_slaves_register_their_masters_table(tiny_records, tiny_manifest):
    groups = _groups(tiny_manifest)
    tables: dict[tuple[str, int], dict[str, Any]] = {}
    compared = 0
    for r in iter_registers(tiny_records):
        decoded = _topics(r)
        if len(decoded["topics"]) < 5:  # incremental registration
            continue
        key = (r["extFields"]["brokerName"], decoded["dv"].counter)
        if key in tables:
            assert tables[key] == decoded, key
            compared += 1
        tables[key] = decoded
    assert compared > 0
    assert all(len({c for (b, c) in tables if b == name}) >= 1 for name in groups)


def test_topic_changes_bump_the_data_version_and_register_incrementally(tiny_records, tiny_manifest):
    created = [i for i in tiny_manifest["incidents"] if i["kind"] == "topic_create"]
    assert created
    for inc in created:
        for broker in inc["brokerNames"]:
            regs = [r for r in iter_registers(tiny_records) if r["extFields"]["brokerName"] == broker
                    and r["extFields"]["brokerId"] == "0"]
            before = [_topics(r) for r in regs if r["ts"] < inc["ts"]]
            after = [(r, _topics(r)) for r in regs if r["ts"] > inc["ts"]]
            incremental = [d for r, d in after if list(d["topics"]) == [inc["topic"]]]
            assert incremental, "registerIncrementBrokerData sends only the new topic"
            assert incremental[0]["dv"].counter == before[-1]["dv"].counter + 1
            assert 0 < incremental[0]["dv"].timestamp - inc["ts"] < 2000
            assert inc["topic"] not in before[-1]["topics"]
            full = [d for r, d in after if len(d["topics"]) > 5]
            if _groups(tiny_manifest)[broker]["forceRegister"]:
                assert inc["topic"] in full[0]["topics"] and full[0]["dv"] == incremental[0]["dv"]
            else:  # the NameServer already holds the new DataVersion: QUERY_DATA_VERSION says unchanged
                assert not full
    deleted = [i for i in tiny_manifest["incidents"] if i["kind"] == "topic_delete"]
    assert deleted
    for inc in deleted:
        deletes = [r for r in tiny_records if r["kind"] == "request" and r["code"] == 216
                   and r["extFields"]["topic"] == inc["topic"]]
        assert {r["namesrv"] for r in deletes} == set(tiny_manifest["namesrvs"])
        assert all(("clusterName" in r["extFields"]) == inc["withClusterName"] for r in deletes)


def test_force_register_false_brokers_query_the_data_version(tiny_records, tiny_manifest):
    groups = _groups(tiny_manifest)
    lazy = [name for name, g in groups.items() if not g["forceRegister"]]
    assert lazy
    queries = [r for r in tiny_records if r["kind"] == "request" and r["code"] == 322
               and r["extFields"]["brokerName"] in lazy]
    registers = [r for r in iter_registers(tiny_records) if r["extFields"]["brokerName"] in lazy]
    assert len(queries) > 2 * len(registers) > 0
    for q in queries:
        assert set(q["body"]) == {"counter", "timestamp"}  # a 4.9 DataVersion


def test_admin_and_client_requests(tiny_records):
    codes = {r["code"] for r in tiny_records if r["kind"] == "request"}
    assert {100, 102, 103, 104, 105, 106, 205, 206, 216, 322, 327, 904} <= codes
    routes = [r for r in tiny_records if r["kind"] == "request" and r["code"] == 105]
    assert all(set(r["extFields"]) >= {"topic"} for r in routes)
    wipes = [r for r in tiny_records if r["kind"] == "request" and r["code"] in (205, 327)]
    assert all(set(r["extFields"]) == {"brokerName"} for r in wipes)
    kv = [r for r in tiny_records if r["kind"] == "request" and r["code"] == 100]
    assert all(r["extFields"]["namespace"] == "ORDER_TOPIC_CONFIG" for r in kv)


def test_crash_outcomes_show_as_documented(tiny_records, tiny_manifest):
    crashes = [i for i in tiny_manifest["incidents"] if i["kind"] in ("crash", "promotion")]
    assert {c["outcome"] for c in crashes} >= {"exception", "silent"}
    for c in crashes:
        conns = {r["namesrv"]: r["conn"] for r in iter_registers(tiny_records)
                 if r["extFields"]["brokerAddr"] == c["brokerAddr"] and r["ts"] < c["ts"]}
        assert set(conns) == set(tiny_manifest["namesrvs"])
        for ns, conn in conns.items():
            after = [(r["ts"] - c["ts"], r["event"]) for r in tiny_records
                     if r["kind"] == "channel" and r["conn"] == conn and r["ts"] >= c["ts"]]
            if c["outcome"] == "silent":
                assert after == []
            elif c["outcome"] in ("close", "exception"):
                expected = ["EXCEPTION", "CLOSE"] if c["outcome"] == "exception" else ["CLOSE"]
                assert [e for _, e in after] == expected and all(0 <= d < 100 for d, _ in after)
            else:
                assert [e for _, e in after] == ["IDLE", "CLOSE"]
