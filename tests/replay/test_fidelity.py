"""The ground-truth check (``gold.route_fidelity``) against an independent oracle.

* Pure: :class:`RouteRows` picks the rows alive at an instant (``valid_to`` exclusive) and follows the
  topic's brokerNames to their BrokerData; :func:`judge_queries` gives the same verdicts whether it
  renders each answer afresh or reuses one it rendered for the same inputs.
* Published demo capture: every captured GET_ROUTEINFO_BY_TOPIC answer, paired with its request by
  plain Python over the capture files, has exactly one fidelity row, whose rebuilt answer is the one
  rendered from the published state at the request's instant (the sweep test_replay_vs_model checks
  against the reference model at every tick) and whose verdict is ``same_answer``.
"""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import orjson
from chispa import assert_df_equality
from differential import gold_snapshots
from pyspark.sql.types import StructType

from nsreplay.history import PublishedHistory
from nsreplay.model import Answer, route_info, same_answer
from nsreplay.storage import Warehouse
from pipelines.replay.fidelity import RouteRows, judge_queries, snapshot_from_rows
from schemas.gold import ROUTE_FIDELITY

GET_ROUTEINFO_BY_TOPIC = 105
NS = "10.0.0.10:9876"


def _row(table: str, key: list, value: object, valid_from: int, valid_to: int | None) -> dict:
    return {"table": table, "key": orjson.dumps(key).decode(), "value": orjson.dumps(value).decode(), "valid_from": valid_from, "valid_to": valid_to}


def _queue(broker_name: str) -> dict:
    return {"brokerName": broker_name, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicSysFlag": 0}


GROUP_A = {"cluster": "c", "brokerName": "a", "brokerAddrs": {"0": "10.1.0.1:10911"}, "enableActingMaster": False, "zoneName": None}
GROUP_B = {"cluster": "c", "brokerName": "b", "brokerAddrs": {"0": "10.1.0.2:10911"}, "enableActingMaster": False, "zoneName": None}
CANDIDATES = [
    _row("topicQueueTable", ["t", "a"], _queue("a"), 100, 200),
    _row("topicQueueTable", ["t", "b"], _queue("b"), 150, None),
    _row("topicQueueTable", ["other", "a"], _queue("a"), 0, None),
    _row("brokerAddrTable", ["a"], GROUP_A, 0, None),
    _row("brokerAddrTable", ["b"], GROUP_B, 0, 300),
    _row("orderTopicConf", ["t"], "a:4", 120, None),
    _row("orderTopicConf", ["other"], "a:8", 0, None),
]


def _alive(topic: str, ts: int) -> set[tuple[str, str]]:
    return {(r["table"], r["key"]) for r in RouteRows(CANDIDATES).alive(topic, ts)}


def test_rows_alive_at_an_instant_follow_the_topic_to_its_broker_groups() -> None:
    assert _alive("t", 99) == set()
    assert _alive("t", 100) == {("topicQueueTable", '["t","a"]'), ("brokerAddrTable", '["a"]')}
    assert _alive("t", 150) == {
        ("topicQueueTable", '["t","a"]'), ("topicQueueTable", '["t","b"]'), ("brokerAddrTable", '["a"]'), ("brokerAddrTable", '["b"]'),
        ("orderTopicConf", '["t"]'),
    }
    # valid_to is exclusive: at 200 the topic has left broker a, so a's BrokerData is not needed
    assert _alive("t", 200) == {("topicQueueTable", '["t","b"]'), ("brokerAddrTable", '["b"]'), ("orderTopicConf", '["t"]')}
    assert _alive("t", 300) == {("topicQueueTable", '["t","b"]'), ("orderTopicConf", '["t"]')}


def _query(query_id: str, ts: int, version: int, captured: Answer) -> dict:
    body = None if captured.body is None else captured.body.decode()
    return {
        "namesrv": NS, "query_id": query_id, "ts": ts, "topic": "t", "request_version": version, "captured_code": captured.code,
        "captured_body": body, "captured_body_b64": None, "captured_remark": captured.remark, "profile": "rocketmq-5",
        "config": [("orderMessageEnable", "true")],
    }


def test_verdicts_do_not_depend_on_reusing_rendered_answers() -> None:
    def rendered(ts: int, version: int) -> Answer:
        rows = RouteRows(CANDIDATES).alive("t", ts)
        return route_info(snapshot_from_rows(rows, "rocketmq-5", {"orderMessageEnable": "true"}), "t", request_version=version)

    right, stale, absent = rendered(160, 401), rendered(110, 401), rendered(50, 401)
    queries = [
        _query("q1", 160, 401, right), _query("q2", 170, 401, right), _query("q3", 170, 401, stale),
        _query("q4", 160, 100, right),  # same content in the legacy shape: lists and keys compare as the spec says
        _query("q5", 50, 401, absent), _query("q6", 170, 401, absent),
    ]
    together = judge_queries(queries, CANDIDATES, "run")
    alone = [row for q in queries for row in judge_queries([q], CANDIDATES, "run")]
    assert together == alone
    assert [(r["rebuilt_code"], r["match"]) for r in together] == [(0, True), (0, True), (0, False), (0, True), (17, True), (0, False)]
    assert together[3]["rebuilt"] == rendered(160, 100).body.decode() != together[0]["rebuilt"]


def test_a_captured_answer_that_is_not_json_is_a_mismatch_not_an_error() -> None:
    """A response record's ``body_b64`` can hold any bytes (the ingest cannot know which request a
    response answers): a captured answer that is not JSON in either shape is judged a mismatch, and
    its text kept, where it used to fail the replay's task."""
    rows = RouteRows(CANDIDATES).alive("t", 160)
    right = route_info(snapshot_from_rows(rows, "rocketmq-5", {"orderMessageEnable": "true"}), "t", request_version=401)
    cut = right.body[: len(right.body) // 2]
    queries = [_query("q1", 160, 401, right), {**_query("q2", 160, 401, right), "captured_body": None, "captured_body_b64": base64.b64encode(cut).decode()},
               {**_query("q3", 160, 401, right), "captured_body": None, "captured_body_b64": base64.b64encode(b"\xff\xfe").decode()}]
    judged = judge_queries(queries, CANDIDATES, "run")
    assert [(r["captured_code"], r["rebuilt_code"], r["match"], r["captured"]) for r in judged] == [
        (0, 0, True, right.body.decode()), (0, 0, False, cut.decode()), (0, 0, False, "\ufffd\ufffd")]
    assert same_answer(Answer(0, cut, None), Answer(0, cut, None)) and not same_answer(cut, right.body)


# ------------------------------------------------------------------------------------ the demo capture


def _route_records(capture: Path) -> list[dict]:
    """The distinct GET_ROUTEINFO_BY_TOPIC requests and the responses of the capture files (the clean
    preset: no junk; a duplicated record counts once)."""
    seen: dict[bytes, dict] = {}
    for path in sorted(capture.glob("*.jsonl*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as lines:
            for line in lines:
                record = orjson.loads(line)
                if record["kind"] == "response" or (record["kind"] == "request" and record["code"] == GET_ROUTEINFO_BY_TOPIC):
                    seen.setdefault(orjson.dumps(record, option=orjson.OPT_SORT_KEYS), record)
    return list(seen.values())


def _captured(response: dict) -> Answer:
    if "body_b64" in response:
        body = base64.b64decode(response["body_b64"])
    elif "body" in response:
        body = json.dumps(response["body"]).encode()
    else:
        body = None
    return Answer(response["code"], body, response.get("remark"))


def _published_routes(history: PublishedHistory, asked: set[tuple[str, int, str, int]]) -> dict[tuple[str, int, str, int], Answer]:
    """The route answer at each asked (namesrv, ts, topic, request version), from the published state
    at ``ts`` (one sweep over each NameServer's intervals: differential.gold_snapshots)."""
    answers = {}
    for namesrv in {ns for ns, _, _, _ in asked}:
        by_ts: dict[int, list[tuple[str, int]]] = {}
        for ns, ts, topic, version in asked:
            if ns == namesrv:
                by_ts.setdefault(ts, []).append((topic, version))
        for ts, snapshot, _ in gold_snapshots(history, namesrv, sorted(by_ts)):
            for topic, version in by_ts[ts]:
                answers[(namesrv, ts, topic, version)] = route_info(snapshot, topic, request_version=version)
    return answers


def test_every_captured_route_answer_is_judged_against_the_published_route(spark, demo_published) -> None:
    capture, root = demo_published
    records = _route_records(capture)
    requests: dict[tuple, list[dict]] = {}
    for r in records:
        if r["kind"] == "request" and "topic" in r.get("extFields", {}):
            requests.setdefault((r["namesrv"], r["conn"], r["opaque"]), []).append(r)
    pairs = []
    for response in (r for r in records if r["kind"] == "response"):
        asked = [q for q in requests.get((response["namesrv"], response["conn"], response["opaque"]), []) if q["ts"] <= response["ts"]]
        if asked:
            latest = max(q["ts"] for q in asked)
            (request,) = [q for q in asked if q["ts"] == latest]  # the capture has no tie to break
            pairs.append((request, response))
    published = _published_routes(PublishedHistory(root), {(q["namesrv"], q["ts"], q["extFields"]["topic"], q["version"]) for q, _ in pairs})
    expected, captured_values = [], {}
    for request, response in pairs:
        topic, version = request["extFields"]["topic"], request["version"]
        captured = _captured(response)
        rebuilt = published[(request["namesrv"], request["ts"], topic, version)]
        expected.append((request["namesrv"], request["ts"], topic, version, captured.code, rebuilt.code, same_answer(captured, rebuilt),
                         None if rebuilt.body is None else rebuilt.body.decode()))
        captured_values[(request["namesrv"], request["ts"], topic)] = (
            captured.body.decode("utf-8", "replace") if "body_b64" in response else response.get("body"))
    assert len(expected) > 100 and {e[6] for e in expected} == {True}, "the demo's answers all agree with the model"
    columns = ["namesrv", "ts", "topic", "request_version", "captured_code", "rebuilt_code", "match", "rebuilt"]
    want = spark.createDataFrame(expected, StructType([ROUTE_FIDELITY.schema[c] for c in columns]))
    gold = Warehouse(root, spark, "delta-rs").read(ROUTE_FIDELITY)
    assert_df_equality(gold.select(*columns), want, ignore_row_order=True, ignore_nullable=True)
    # the captured answer is kept as captured: raw bytes as their text, a JSON body as the same value
    kept = {(r.namesrv, r.ts, r.topic): r.captured for r in gold.select("namesrv", "ts", "topic", "captured").collect()}
    assert {k: v if v is None or isinstance(captured_values.get(k), str) else json.loads(v) for k, v in kept.items()} == captured_values
