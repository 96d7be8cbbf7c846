"""The real shim (HTTP and remoting in one ``nsreplay serve`` process) against the reference model
replaying the demo capture itself — not against the published tables — at sampled scan ticks:
every tick where a broker group changed (registrations, expiries, restarts, promotions) and a
regular sample of the others, every topic of that tick plus an unknown one."""

from __future__ import annotations

import re

import pytest
import requests

from nsreplay.config import load_settings
from nsreplay.model import ResponseCode, replay, route_info, same_answer, topic_not_exist_remark
from nsreplay.serving.remoting_client import RemotingClient, answer_of
from replay.differential import capture_records


@pytest.fixture(scope="module")
def model_ticks(demo_published) -> dict[str, list]:
    """Per NameServer: the model's state at the ticks where brokerAddrTable changed, and every 60th."""
    capture, _ = demo_published
    settings = load_settings()
    chosen: dict[str, list] = {}
    previous: dict[str, object] = {}
    count: dict[str, int] = {}
    records = capture_records(capture)
    until = max(r["ts"] for r in records)  # the covered range ends at the capture's last record
    for state in replay(records, default_profile=settings.replay.default_profile, default_config=settings.replay.default_config, until=until):
        ns = state.namesrv
        count[ns] = count.get(ns, 0) + 1
        groups = state.snapshot.brokerAddrTable
        if groups != previous.get(ns) or count[ns] % 60 == 0:
            chosen.setdefault(ns, []).append(state)
        previous[ns] = groups
    return chosen


def test_http_and_remoting_answers_equal_the_model(demo_published, model_ticks, start_serve) -> None:
    _, root = demo_published
    namesrv = sorted(model_ticks)[0]
    server = start_serve(root, "--remoting-port", "0", "--namesrv", namesrv)
    try:
        port = int(re.search(r"remoting \S*?:(\d+)", server.line, re.IGNORECASE).group(1))
        session = requests.Session()
        compared = 0
        with RemotingClient.connect("127.0.0.1", port) as remoting:
            for ns, states in model_ticks.items():
                for state in states:
                    for topic in sorted(state.snapshot.topicQueueTable)[:12] + ["no-such-topic"]:
                        want = route_info(state.snapshot, topic, request_version=401)
                        r = session.get(f"{server.url}/v1/route/{requests.utils.quote(topic, safe='')}", params={"namesrv": ns, "at": state.tick}, timeout=30)
                        if want.code == ResponseCode.SUCCESS:
                            assert r.status_code == 200 and same_answer(r.content, want.body), (ns, state.tick, topic)
                        else:
                            assert r.status_code == 404 and r.json() == {"code": 17, "remark": topic_not_exist_remark(topic, state.snapshot.profile)}
                        if ns == namesrv:  # the remoting endpoint answers for one NameServer
                            legacy = route_info(state.snapshot, topic, request_version=121)
                            got = answer_of(remoting.route(topic, as_of=state.tick, version=121))
                            assert got.code == legacy.code and got.remark == legacy.remark and same_answer(got, legacy), (state.tick, topic)
                        compared += 1
        assert compared > 500
    finally:
        server.stop()
