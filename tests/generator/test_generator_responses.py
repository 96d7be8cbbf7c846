"""Ground-truth ``response`` records for client GET_ROUTEINFO_BY_TOPIC queries (capture-format
``kind = response``, semantics spec §7): pairing with their request, shape by request version, the
TOPIC_NOT_EXIST remark, manifest counts, determinism, skipping near transitions, and the content of
answers in a quiet period."""

from __future__ import annotations

import base64
import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from capture_checks import read_lines

from nsreplay.generator import ConfigError, apply_overrides, generate, preset
from nsreplay.generator.plan import build_plan
from nsreplay.generator.records import RESPONSE
from nsreplay.generator.responses import SKIP_REASONS, not_exist_remark, route_body
from nsreplay.generator.world import build_world

Record = dict[str, Any]

REMARK = re.compile(r"No topic route info in name server for the topic: (.+)\n"
                    r"See (?:http://rocketmq\.apache\.org/docs/faq/|https://rocketmq\.apache\.org/docs/bestPractice/06FAQ) for further details\.")
QUIET = {
    "crashes": 0, "graceful_shutdowns": 0, "promotions": 0, "namesrv_restarts": 0, "partitions": 0,
    "topic_creates": 0, "topic_updates": 0, "topic_deletes": 0, "perm_wipes": 0, "kv_puts": 0, "kv_deletes": 0,
    "traffic.clients": 6, "junk.lines_per_reason": 0, "junk.duplicate_batches": 0,
}


def _unique_records(out: Path) -> list[Record]:
    seen: set[bytes] = set()
    records = []
    for line in read_lines(out):
        if line.record is not None and line.raw not in seen:
            seen.add(line.raw)
            records.append(line.record)
    records.sort(key=lambda r: (r["namesrv"], r["seq"]))
    return records


def _legacy_to_json(raw: bytes) -> Any:
    """The legacy TopicRouteData shape (unquoted integer map keys) parsed: quote the keys first."""
    return json.loads(re.sub(rb"([{,])(\d+):", rb'\1"\2":', raw))


def _body(resp: Record) -> Any:
    if "body_b64" in resp:
        return _legacy_to_json(base64.b64decode(resp["body_b64"]))
    return resp.get("body")


def _pairs(records: list[Record]) -> list[tuple[Record, Record]]:
    """(request, response) pairs: each response with the record just before it in its NameServer's order."""
    out = []
    for prev, rec in zip(records, records[1:]):
        if rec["kind"] == "response":
            out.append((prev, rec))
    return out


@pytest.fixture(scope="module")
def quiet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], list[Record]]:
    """Tiny without incidents, junk or duplicates, with more clients (both answer shapes)."""
    out = tmp_path_factory.mktemp("quiet")
    generate(apply_overrides(preset("tiny"), QUIET), out, workers=2)
    return out, json.loads((out / "_manifest.json").read_text()), _unique_records(out)


def test_every_response_follows_its_request(tiny_records, quiet):
    for records in (tiny_records, quiet[2]):
        pairs = _pairs(records)
        assert pairs
        for req, resp in pairs:
            assert req["kind"] == "request" and req["code"] == 105, "a response comes right after a route query"
            assert (req["namesrv"], req["conn"], req["opaque"]) == (resp["namesrv"], resp["conn"], resp["opaque"])
            assert resp["seq"] == req["seq"] + 1
            assert 1 <= resp["ts"] - req["ts"] <= 3
        by_ns: dict[str, list[Record]] = defaultdict(list)
        for r in records:
            by_ns[r["namesrv"]].append(r)
        for recs in by_ns.values():
            for i, r in enumerate(recs[:-1]):
                if r["kind"] == "response":
                    after = recs[i + 1]
                    assert after["ts"] >= r["ts"], "ts never goes back in seq order"
                    if after["ts"] == r["ts"]:  # only a record that changes no table may share the ts
                        assert after.get("code") in (105, 106, 206) or after.get("event") == "CONNECT"


def test_answer_shape_follows_the_request_version(quiet):
    _, manifest, records = quiet
    shapes = Counter()
    for req, resp in _pairs(records):
        assert resp["code"] in (0, 17)
        if resp["code"] == 17:
            assert "body" not in resp and "body_b64" not in resp
            continue
        assert resp["remark"] is None and "remark" in resp
        if req["version"] >= 401:
            shapes["json"] += 1
            assert isinstance(resp["body"], dict) and "body_b64" not in resp
        else:
            shapes["legacy"] += 1
            assert "body" not in resp
            raw = base64.b64decode(resp["body_b64"])
            with pytest.raises(ValueError):
                json.loads(raw)  # unquoted integer keys: not JSON
            assert re.search(rb'"brokerAddrs":\{0:"', raw)
            compact = json.dumps(_legacy_to_json(raw), separators=(",", ":")).encode()
            assert raw == re.sub(rb'"(\d+)":', rb"\1:", compact), "compact, nothing but the id keys unquoted"
    assert shapes["json"] > 10 and shapes["legacy"] > 10
    assert dict(shapes) == manifest["responses"]["answered_by_shape"]


def test_topic_not_exist_remark(tiny_records, quiet):
    seen = Counter()
    for records in (tiny_records, quiet[2]):
        five = {r["namesrv"]: r["rocketmq_version"].startswith("5.") for r in records if r["kind"] == "namesrv_start"}
        for req, resp in _pairs(records):
            if resp["code"] == 17:
                seen[five[resp["namesrv"]]] += 1
                assert resp["remark"] == not_exist_remark(req["extFields"]["topic"], five[resp["namesrv"]])
                assert REMARK.fullmatch(resp["remark"]).group(1) == req["extFields"]["topic"]
    assert seen[True] > 0 and seen[False] > 0, seen
    assert not_exist_remark("t") == ("No topic route info in name server for the topic: t\n"
                                     "See http://rocketmq.apache.org/docs/faq/ for further details.")
    assert not_exist_remark("t", five=True) == ("No topic route info in name server for the topic: t\n"
                                                "See https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.")


def test_manifest_counts_the_answers(tiny_records, tiny_manifest, quiet):
    for records, manifest in ((tiny_records, tiny_manifest), (quiet[2], quiet[1])):
        m = manifest["responses"]
        queries = [r for r in records if r["kind"] == "request" and r["code"] == 105]
        responses = [r for r in records if r["kind"] == "response"]
        assert m["route_queries"] == len(queries)
        assert m["answered"] == len(responses) == manifest["records"]["by_kind"]["response"]
        assert m["answered"] + m["skipped"] == m["route_queries"]
        assert sum(m["skipped_by_reason"].values()) == m["skipped"]
        assert set(m["skipped_by_reason"]) == set(SKIP_REASONS)
        assert m["answered_by_code"] == dict(Counter(str(r["code"]) for r in responses))
        assert m["response_fraction"] == 1.0
        for ns, counts in m["per_namesrv"].items():
            assert counts["answered"] == sum(1 for r in responses if r["namesrv"] == ns)
            assert counts["route_queries"] == sum(1 for r in queries if r["namesrv"] == ns)
    assert tiny_manifest["responses"]["skipped"] > 0, "tiny has incidents: some queries are not answerable"


def test_responses_are_deterministic():
    def responses(config):
        plan = build_plan(config)
        return [rec for shard in plan.shards for rec in shard.records if rec[3] == RESPONSE], plan.stats.responses

    cfg = apply_overrides(preset("tiny"), {"traffic.response_fraction": 0.5, "traffic.clients": 4})
    first, stats = responses(cfg)
    again, stats_again = responses(cfg)
    assert first and first == again and stats == stats_again
    assert stats["skipped_by_reason"]["sampled_out"] > 0


def test_response_fraction_knob():
    assert preset("tiny").traffic.response_fraction == preset("demo").traffic.response_fraction == 1.0
    assert preset("bench-hour").traffic.response_fraction == preset("bench-day").traffic.response_fraction == 0.2
    none = build_plan(apply_overrides(preset("tiny"), {"response_fraction": 0}))
    assert none.stats.responses["answered"] == 0 and "response" not in none.stats.by_kind
    assert none.stats.responses["skipped_by_reason"]["sampled_out"] == none.stats.responses["route_queries"] > 0
    with pytest.raises(ConfigError):
        apply_overrides(preset("tiny"), {"response_fraction": 1.5})


def test_no_answer_near_a_broker_incident(tiny_records, tiny_manifest):
    """Nothing is answered for a topic while one of its groups is within 130 s + a scan interval of a
    crash, shutdown, promotion or partition, or while its NameServer restarted that recently."""
    world = build_world(preset("tiny"))
    groups_of = {t.config.topic_name: {world.groups[g].name for g in t.groups} for t in world.topics}
    window = 130_000 + 5_000
    incidents = tiny_manifest["incidents"]
    checked = 0
    for req, resp in _pairs(tiny_records):
        topic = req["extFields"]["topic"]
        for inc in incidents:
            if inc["kind"] == "namesrv_restart" and inc["namesrv"] == resp["namesrv"]:
                assert not inc["down_ms"] <= req["ts"] < inc["up_ms"] + window
            if inc["kind"] in ("crash", "graceful_shutdown", "promotion", "partition") \
                    and inc["brokerName"] in groups_of.get(topic, ()):
                if inc["kind"] == "partition" and resp["namesrv"] not in inc["hidden_from"]:
                    continue
                checked += 1
                assert not inc["ts"] <= req["ts"] < inc["ts"] + window, (inc, req)
    assert checked > 0


def test_quiet_answers_list_exactly_the_groups_of_the_topic(quiet):
    """No incident at all: every answer names exactly the groups the topic lives on, with every member
    under its id and the topic's own queue config; unknown topics get TOPIC_NOT_EXIST."""
    _, manifest, records = quiet
    world = build_world(apply_overrides(preset("tiny"), QUIET))
    v5_namesrvs = {ns.addr for ns in world.namesrvs if ns.is_v5}
    specs = {t.config.topic_name: t for t in world.topics}
    answered = 0
    for req, resp in _pairs(records):
        topic = req["extFields"]["topic"]
        spec = specs.get(topic)
        if spec is None:
            assert topic.endswith("-missing") and resp["code"] == 17
            continue
        assert resp["code"] == 0
        body = _body(resp)
        assert body["filterServerTable"] == {} and "orderTopicConf" not in body
        expected = {world.groups[g].name for g in spec.groups}
        assert {q["brokerName"] for q in body["queueDatas"]} == expected
        assert {b["brokerName"] for b in body["brokerDatas"]} == expected
        cfg = spec.config
        for q in body["queueDatas"]:
            assert (q["readQueueNums"], q["writeQueueNums"], q["perm"], q["topicSysFlag"]) == \
                (cfg.read_queue_nums, cfg.write_queue_nums, cfg.perm, 0)
            assert list(q) == sorted(q)
        for b in body["brokerDatas"]:
            grp = next(g for g in world.groups if g.name == b["brokerName"])
            assert b["cluster"] == grp.cluster
            assert b["brokerAddrs"] == {str(m.initial_id): m.addr for m in grp.members}
            if resp["namesrv"] in v5_namesrvs:
                assert b["enableActingMaster"] == (grp.is_v5 and grp.acting_master)
            else:
                assert "enableActingMaster" not in b
            assert "zoneName" not in b and list(b) == sorted(b)
        answered += 1
    assert answered > 100
    skipped = {k: v for k, v in manifest["responses"]["skipped_by_reason"].items() if v}
    # Only the start of the window (NameServer start, first registrations) is in flux.
    assert set(skipped) <= {"namesrv_restart", "topic_transition", "broker_transition", "no_room"}
    first_answer = min(r["ts"] for r in records if r["kind"] == "response")
    assert first_answer - manifest["window"]["start_ms"] >= 135_000
    assert manifest["responses"]["answered"] >= 0.8 * manifest["responses"]["route_queries"]


def test_route_body_shapes():
    bds = [("broker-a", "C", ((0, "10.0.0.1:10911"), (1, "10.0.0.2:10911")), False)]
    qds = [("broker-a", (8, 4, 6, 0))]
    standard = route_body(bds, qds, legacy=False)
    assert standard == ('{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},'
                        '"brokerName":"broker-a","cluster":"C","enableActingMaster":false}],"filterServerTable":{},'
                        '"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,'
                        '"writeQueueNums":4}]}')
    legacy = route_body([(n, c, a, None) for n, c, a, _ in bds], qds, legacy=True)
    assert '"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}' in legacy and "enableActingMaster" not in legacy
    addrs = _legacy_to_json(legacy.encode())["brokerDatas"][0]["brokerAddrs"]
    assert addrs == {"0": "10.0.0.1:10911", "1": "10.0.0.2:10911"}
