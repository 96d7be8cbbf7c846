"""The ``version`` of the endpoint's responses: what the NameServer it replays stamps on its own
(``RemotingCommand.createResponseCommand`` -> ``setCmdVersion`` -> the ``rocketmq.remoting.version``
property ``NamesrvStartup`` sets to ``MQVersion.CURRENT_VERSION``), i.e. the NameServer's release; per
profile, the release the semantics spec was read off. The source is the reference model over a
NameServer that runs 4.9.4 and is restarted as 5.3.3 (no Spark); requests go over real sockets."""

from __future__ import annotations

import re

import pytest

from nsreplay.model import PROFILE_5, PROFILE_49
from nsreplay.model.records import namesrv_start, register_broker
from nsreplay.protocol.mq_version import release_version
from nsreplay.serving.remoting import FLAG_RESPONSE, ROCKETMQ
from nsreplay.serving.remoting_client import RemotingClient, question
from nsreplay.serving.remoting_server import RemotingServerThread, response_version

from model_source import ModelSource

NS = "10.0.0.20:9876"
S = 1732147200000
RESTART = S + 100_000  # 4.9.4 before, 5.3.3 from here on
END = S + 200_000
V4_9_4, V5_3_3 = 401, 479  # MQVersion.Version.V4_9_4.ordinal(), V5_3_3.ordinal()


def upgraded_records() -> list[dict]:
    """One NameServer: 4.9.4 from S, restarted as 5.3.3 at RESTART; broker b-a lists two topics in both
    (5.x refuses a new broker id whose body holds exactly one)."""
    records = [namesrv_start(S, "4.9.4", {}, namesrv=NS)]
    records += [register_broker(S + 1000 + k * 30_000, cluster="c", name="b-a", addr="10.1.0.1:10911",
                                topics=["orders", "audit"], five=False, namesrv=NS) for k in range(3)]
    records.append(namesrv_start(RESTART, "5.3.3", {}, namesrv=NS))
    records += [register_broker(RESTART + 1000 + k * 30_000, cluster="c", name="b-a", addr="10.1.0.1:10911",
                                topics=["orders", "audit"], five=True, namesrv=NS) for k in range(3)]
    return records


SOURCE = ModelSource("upgrade", NS, upgraded_records(), S, END, PROFILE_5)


@pytest.mark.parametrize("release, version", [
    ("4.0.0", 213), ("4.9.3", 399), ("4.9.4", 401), ("4.9.8", 409), ("5.0.0", 413), ("5.1.4", 441), ("5.3.3", 479),
    ("5.9.9", 611),
])
def test_release_version_is_the_mq_version_ordinal(release, version):
    assert release_version(release) == version


@pytest.mark.parametrize("text", ["3.2.6", "4.10.0", "5.3.3-SNAPSHOT", "5.3", "6.0.0", "٤.9.4", " 4.9.4", ""])
def test_release_version_refuses_what_the_enum_does_not_number_so(text):
    with pytest.raises(ValueError):
        release_version(text)


def test_each_profile_answers_with_its_reference_release():
    assert (response_version(PROFILE_49), response_version(PROFILE_5)) == (V4_9_4, V5_3_3)


@pytest.mark.parametrize("t, version", [
    (S + 50_000, V4_9_4), (RESTART - 1, V4_9_4), (RESTART, V5_3_3), (RESTART + 1000, V5_3_3), (END, V5_3_3),
])
@pytest.mark.parametrize("serialize_type", [0, ROCKETMQ])
def test_a_route_answer_carries_the_version_of_the_namesrv_then(t, version, serialize_type):
    with RemotingServerThread(lambda: SOURCE, namesrv=NS, as_of=None) as server, \
            RemotingClient.connect("127.0.0.1", server.port, timeout=10) as client:
        reply = client.route("orders", version=401, as_of=t, serialize_type=serialize_type)
        cluster = client.cluster(version=401, as_of=t, serialize_type=serialize_type)
    want = SOURCE.route(NS, "orders", t, request_version=401)  # found, but not just after the restart
    assert (reply.code, reply.body, reply.flag, reply.language, reply.version) == (want.code, want.body, FLAG_RESPONSE, "JAVA", version)
    assert (cluster.code, cluster.version) == (0, version)


def test_the_legacy_shape_still_follows_the_request_version_not_the_response_version():
    """A 5.3.3 NameServer answers a version-121 client in the legacy shape and stamps 479 on it."""
    with RemotingServerThread(lambda: SOURCE, namesrv=NS, as_of=None) as server, \
            RemotingClient.connect("127.0.0.1", server.port, timeout=10) as client:
        legacy = client.route("orders", version=121)
        standard = client.route("orders", version=401)
    assert (legacy.version, standard.version) == (V5_3_3, V5_3_3)
    assert legacy.body == SOURCE.route(NS, "orders", None, request_version=121).body
    assert re.search(rb'"brokerAddrs":\{0:"10.1.0.1:10911"\}', legacy.body)
    assert re.search(rb'"brokerAddrs":\{"0":"10.1.0.1:10911"\}', standard.body)


@pytest.mark.parametrize("server_as_of, request_, code, version", [
    (None, question(103), 3, V5_3_3),  # not supported: the NameServer at the server's instant (the latest)
    (S + 50_000, question(103), 3, V4_9_4),
    (S + 50_000, question(105, topic="orders", as_of="not a time"), 1, V4_9_4),  # bad asOf: the server's instant
    (S + 50_000, question(105, topic="orders", as_of=END + 1), 1, V5_3_3),  # outside: the end of the range
    (None, question(206, as_of=S - 1), 1, V5_3_3),
    (RESTART + 1, question(105, ext={"asOf": str(S + 10)}), 1, V4_9_4),  # no topic extField: SYSTEM_ERROR
])
def test_errors_carry_the_version_of_the_namesrv_asked(server_as_of, request_, code, version):
    with RemotingServerThread(lambda: SOURCE, namesrv=NS, as_of=server_as_of) as server, \
            RemotingClient.connect("127.0.0.1", server.port, timeout=10) as client:
        reply = client.request(request_)
    assert (reply.code, reply.version, reply.language) == (code, version, "JAVA")


def test_an_unknown_namesrv_is_answered_with_the_4_9_4_version():
    with RemotingServerThread(lambda: SOURCE, namesrv="10.9.9.9:9876", as_of=None) as server, \
            RemotingClient.connect("127.0.0.1", server.port, timeout=10) as client:
        reply = client.route("orders")
    assert (reply.code, reply.version) == (1, V4_9_4)
    assert reply.remark.startswith("no history there: ")
