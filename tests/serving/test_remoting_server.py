"""The remoting endpoint over the published demo warehouse: its answers are the NameServer's answers at
the asked instant (HistorySource is the reference), in both header types and both JSON shapes."""

from __future__ import annotations

import json
import re
import socket

import pytest

from nsreplay.history import PublishedHistory
from nsreplay.model import Answer, same_answer, topic_not_exist_remark
from nsreplay.runtime import format_ms
from nsreplay.serving.remoting import JSON, ROCKETMQ, RemotingCommand, decode_payload, encode_frame
from nsreplay.serving.remoting_client import RemotingClient, answer_of, question
from nsreplay.serving.remoting_server import RemotingServerThread, answer_request
from nsreplay.serving.source import HistorySource
from schemas.gold import BROKER_ADDR_INTERVALS, TOPIC_QUEUE_INTERVALS

MISSING = "no-such-topic"
#: The version each profile's NameServer stamps on its responses: V4_9_4 and V5_3_3, the releases the
#: semantics spec was read off (test_remoting_version checks the rule itself).
RESPONSE_VERSIONS = {"rocketmq-4.9": 401, "rocketmq-5": 479}


@pytest.fixture(scope="module")
def remoting_source(demo_published) -> HistorySource:
    return HistorySource(demo_published[1])


@pytest.fixture(scope="module")
def remoting_cases(demo_published, remoting_source) -> list[tuple[str, int, list[str]]]:
    """Per NameServer: instants just before and at route changes (interval ends of brokerAddrTable and
    topicQueueTable rows), the ends of the covered range, and the topics whose route changed there."""
    history = PublishedHistory(demo_published[1])
    cases = []
    for cov in remoting_source.coverage():
        boundaries: dict[int, set[str]] = {}
        for row in history.rows(TOPIC_QUEUE_INTERVALS, cov.namesrv):
            for ts in (row["valid_from"], row["valid_to"]):
                if ts is not None and cov.from_ts < ts <= cov.to_ts:
                    boundaries.setdefault(ts, set()).add(row["topic"])
        changed_groups = sorted({row["valid_to"] for row in history.rows(BROKER_ADDR_INTERVALS, cov.namesrv)
                                 if row["valid_to"] is not None and row["valid_to"] <= cov.to_ts})
        picks = sorted(set(changed_groups[:2] + changed_groups[-1:] + sorted(boundaries)[-2:]))
        for ts in picks:
            topics = sorted(boundaries.get(ts, set()))[:2]
            for t in (ts - 1, ts):
                cases.append((cov.namesrv, t, topics))
        cases.append((cov.namesrv, cov.from_ts, []))
        cases.append((cov.namesrv, cov.to_ts, []))
    assert len(cases) > 6
    return cases


def expected_topics(source: HistorySource, namesrv: str, t: int, changed: list[str]) -> list[str]:
    """The changed topics, two listed topics (one found, maybe) and a missing one."""
    listed = json.loads(source.topics(namesrv, t, request_version=401).body)["topicList"]
    return sorted(set(changed) | set(listed[:1]) | set(listed[-1:])) + [MISSING]


def assert_same(response: RemotingCommand, expected: Answer) -> None:
    assert response.is_response
    assert (response.code, response.remark) == (expected.code, expected.remark)
    assert response.body == expected.body  # the very bytes the renderer gave
    assert same_answer(answer_of(response), expected)


def test_answers_match_history_at_every_instant(remoting_source, remoting_cases):
    by_namesrv: dict[str, list[tuple[int, list[str]]]] = {}
    for namesrv, t, changed in remoting_cases:
        by_namesrv.setdefault(namesrv, []).append((t, changed))
    for namesrv, instants in by_namesrv.items():
        with RemotingServerThread(lambda: remoting_source, namesrv=namesrv, as_of=None) as server, \
                RemotingClient.connect("127.0.0.1", server.port) as client:
            for t, changed in instants:
                response_version = RESPONSE_VERSIONS[remoting_source.snapshot(namesrv, t).profile]
                snapshot_answers = {}
                for topic in expected_topics(remoting_source, namesrv, t, changed):
                    for version in (121, 401):
                        expected = remoting_source.route(namesrv, topic, t, request_version=version)
                        snapshot_answers[topic] = expected
                        for st in (JSON, ROCKETMQ):
                            response = client.route(topic, version=version, serialize_type=st, as_of=t)
                            assert response.serialize_type == st and response.version == response_version
                            assert_same(response, expected)
                profile = next(c.profile for c in remoting_source.coverage() if c.namesrv == namesrv)
                assert snapshot_answers[MISSING] == Answer(17, None, topic_not_exist_remark(MISSING, profile))
                for st in (JSON, ROCKETMQ):
                    assert_same(client.cluster(serialize_type=st, as_of=t, version=121),
                                remoting_source.cluster(namesrv, t, request_version=121))
                    assert_same(client.topics(serialize_type=st, as_of=t, version=401),
                                remoting_source.topics(namesrv, t, request_version=401))


def test_shapes_follow_the_request_version(remoting_source, remoting_cases):
    namesrv, t, _ = remoting_cases[-1]
    listed = json.loads(remoting_source.topics(namesrv, t, request_version=401).body)["topicList"]
    topic = next(x for x in listed if remoting_source.route(namesrv, x, t, request_version=401).code == 0)
    with RemotingServerThread(lambda: remoting_source, namesrv=namesrv, as_of=t) as server, \
            RemotingClient.connect("127.0.0.1", server.port) as client:
        legacy = client.route(topic, version=121).body.decode()
        standard = client.route(topic, version=401).body.decode()
    assert re.search(r'"brokerAddrs":\{\d+:"', legacy)
    assert re.search(r'"brokerAddrs":\{"\d+":"', standard)
    assert same_answer(legacy.encode(), json.loads(standard))
    with pytest.raises(ValueError):
        json.loads(legacy)


def test_default_instant_and_as_of_override(remoting_source, remoting_cases):
    def changes():  # (namesrv, t, topic) whose route at t differs from the one at t - 1
        for namesrv, t, changed in remoting_cases:
            for topic in changed:
                before = remoting_source.route(namesrv, topic, t - 1, request_version=401)
                at = remoting_source.route(namesrv, topic, t, request_version=401)
                if not same_answer(before, at):
                    yield namesrv, t, topic, before, at

    namesrv, t, topic, before, at = next(changes())
    latest = remoting_source.route(namesrv, topic, None, request_version=401)
    with RemotingServerThread(lambda: remoting_source, namesrv=namesrv, as_of=t - 1) as server, \
            RemotingClient.connect("127.0.0.1", server.port) as client:
        assert_same(client.route(topic), before)  # the server's --as-of
        assert_same(client.route(topic, as_of=t), at)  # asOf in epoch ms overrides it
        assert_same(client.route(topic, as_of=format_ms(t)), at)  # ... and in ISO-8601
        assert_same(client.route(topic, as_of=""), before)  # an empty asOf counts as absent
    with RemotingServerThread(lambda: remoting_source, namesrv=namesrv, as_of=None) as server, \
            RemotingClient.connect("127.0.0.1", server.port) as client:
        assert_same(client.route(topic), latest)


def test_errors_unsupported_codes_and_read_only(remoting_source):
    cov = remoting_source.coverage()[0]
    topic = json.loads(remoting_source.topics(cov.namesrv, None, request_version=401).body)["topicList"][0]
    latest = remoting_source.route(cov.namesrv, topic, None, request_version=401)
    with RemotingServerThread(lambda: remoting_source, namesrv=cov.namesrv, as_of=None) as server, \
            RemotingClient.connect("127.0.0.1", server.port) as client:
        for st in (JSON, ROCKETMQ):
            after = client.route(topic, as_of=cov.to_ts + 1, serialize_type=st)
            assert after.code == 1 and after.body is None
            assert after.remark.startswith("no history there: ")
            assert f"[{cov.from_ts}, {cov.to_ts}]" in after.remark
            before = client.route(topic, as_of=cov.from_ts - 1, serialize_type=st)
            assert before.code == 1 and f"[{cov.from_ts}, {cov.to_ts}]" in before.remark
            bad = client.route(topic, as_of="yesterday", serialize_type=st)
            assert bad.code == 1 and bad.remark.startswith("bad asOf: not a time: 'yesterday'")
            # extFields without a topic fail the header's check; without any extFields (a binary header's
            # empty map is none), Java checks no field and looks the null topic up: not found
            for ext in ({"asOf": str(cov.to_ts)},) + (({},) if st == JSON else ()):
                no_topic = client.request(RemotingCommand(code=105, ext_fields=ext, serialize_type=st))
                assert (no_topic.code, no_topic.remark) == (1, "GET_ROUTEINFO_BY_TOPIC needs extField 'topic'"), ext
            for ext in (None,) + (({},) if st == ROCKETMQ else ()):
                null_topic = client.request(RemotingCommand(code=105, ext_fields=ext, serialize_type=st))
                profile = next(c.profile for c in remoting_source.coverage() if c.namesrv == cov.namesrv)
                assert (null_topic.code, null_topic.body) == (17, None), ext
                assert null_topic.remark == topic_not_exist_remark(None, profile)
                assert null_topic.remark.startswith("No topic route info in name server for the topic: null\n")
            # writes and everything else: REQUEST_CODE_NOT_SUPPORTED, nothing changes
            for code in (103, 104, 216, 205, 100, 0, 34, 10, -1, 30000):
                body = json.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": {}}}).encode()
                response = client.request(RemotingCommand(code=code, ext_fields={"topic": topic, "brokerName": "x"},
                                                          body=body, serialize_type=st))
                assert response.code == 3 and response.body is None
                assert response.remark.startswith(f"request code {code} not supported: this is a read-only NameServer")
        assert_same(client.route(topic), latest)
    with RemotingServerThread(lambda: remoting_source, namesrv="10.255.255.1:9876", as_of=None) as server, \
            RemotingClient.connect("127.0.0.1", server.port) as client:
        unknown = client.route(topic)
        assert unknown.code == 1 and "unknown NameServer '10.255.255.1:9876'" in unknown.remark


def test_oneway_gets_no_response_and_responses_are_ignored(remoting_source):
    cov = remoting_source.coverage()[0]
    with RemotingServerThread(lambda: remoting_source, namesrv=cov.namesrv, as_of=None) as server, \
            RemotingClient.connect("127.0.0.1", server.port, timeout=10) as client:
        client.send(question(105, topic="x", oneway=True))
        client.send(question(103, oneway=True, serialize_type=ROCKETMQ))
        client.send(RemotingCommand(code=0, flag=1, opaque=5))  # a stray response
        opaque = client.send(question(206))
        reply = client.receive()
        assert reply.opaque == opaque and reply.code == 0
        client._sock.settimeout(0.5)
        with pytest.raises(socket.timeout):
            client.receive()


def test_partial_frames_across_reads(remoting_source):
    cov = remoting_source.coverage()[0]
    expected = remoting_source.topics(cov.namesrv, None, request_version=401)
    raw = encode_frame(question(206, opaque=42)) * 2 + encode_frame(question(206, opaque=43, serialize_type=ROCKETMQ))
    with RemotingServerThread(lambda: remoting_source, namesrv=cov.namesrv, as_of=None) as server, \
            socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(len(raw)):  # one byte per write
            sock.sendall(raw[i:i + 1])
        replies = [RemotingClient(sock).receive() for _ in range(3)]
    assert [r.opaque for r in replies] == [42, 42, 43]
    assert [r.serialize_type for r in replies] == [JSON, JSON, ROCKETMQ]
    for reply in replies:
        assert_same(reply, expected)


def test_answer_request_without_a_socket(remoting_source):
    cov = remoting_source.coverage()[0]
    request = question(106, opaque=9, version=121, serialize_type=ROCKETMQ)
    response = answer_request(request, remoting_source, namesrv=cov.namesrv, as_of=cov.from_ts)
    assert (response.opaque, response.flag, response.serialize_type) == (9, 1, ROCKETMQ)
    assert_same(response, remoting_source.cluster(cov.namesrv, cov.from_ts, request_version=121))
    assert answer_request(question(106, oneway=True), remoting_source, namesrv=cov.namesrv, as_of=None) is None
    decoded = decode_payload(encode_frame(response)[4:])
    assert decoded == response
