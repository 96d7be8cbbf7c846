"""Topics, brokerNames, clusters and addresses with unusual characters (the capture of
``tests/replay/unusual_identifiers.py``: separators, quotes, braces, ``%``, spaces, unicode, system
topics...) served by the Python API, the HTTP shim (topic percent-encoded in the path) and the
remoting shim: each answers exactly what the reference model answers at the same instant.

Over HTTP a topic is a non-empty path segment (``/openapi.json``: ``minLength: 1``) in a request
line of at most 8190 bytes, so the empty topic and the 10 KB one are asked through the other two."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest
import requests

from nsreplay.config import load_settings
from nsreplay.history import PublishedHistory
from nsreplay.model import ResponseCode, cluster_info, route_info, same_answer, topic_list, topic_not_exist_remark
from nsreplay.serving.remoting_client import RemotingClient, answer_of
from nsreplay.storage import Warehouse
from pipelines.ingest.run import run_ingest
from pipelines.replay.run import run_replay
from replay.differential import capture_records, model_steps
from replay.unusual_identifiers import IPV6_BROKERS, TOPICS, capture

NAMESRVS = ("ns-4_9.example:9876", "[fe80:0:0:0:0:0:0:1%eth0]:9876")
ASKED = sorted(set(TOPICS) | {"new|topic é", "b|c", "{x}", "}", "no-such"})


def _over_http(topic: str) -> bool:
    return topic != "" and len(topic.encode("utf-8")) < 4096


@pytest.fixture(scope="module")
def unusual_root(spark, tmp_path_factory) -> tuple[Path, str]:
    """(capture dir, warehouse root) of the unusual-identifier capture, published."""
    capture_dir = tmp_path_factory.mktemp("unusual-served")
    (capture_dir / "all.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in capture(NAMESRVS)), encoding="utf-8")
    root = str(tmp_path_factory.mktemp("unusual-served-wh"))
    warehouse = Warehouse(root, spark, "delta-rs")
    run_ingest(spark, warehouse, load_settings(), str(capture_dir), "unusual-served-ingest")
    run_replay(spark, warehouse, load_settings(), "unusual-served-replay")
    return capture_dir, root


@pytest.fixture(scope="module")
def model_instants(unusual_root) -> dict[str, list]:
    """Per NameServer: the model's steps at a few instants (registrations, admin edits, expiries)."""
    capture_dir, _ = unusual_root
    records = capture_records(capture_dir)
    steps = model_steps(records, max(r["ts"] for r in records), load_settings())
    out = {}
    for ns, own in steps.items():
        at = [s for s in own if s.at_instant]
        out[ns] = [at[i] for i in sorted({0, len(at) // 4, len(at) // 2, 3 * len(at) // 4, len(at) - 1})]
    return out


def test_every_topic_is_served_as_the_model_answers(unusual_root, model_instants, start_serve) -> None:
    _, root = unusual_root
    history = PublishedHistory(root)
    server = start_serve(root, "--reload-interval", "0", "--remoting-port", "0", "--namesrv", NAMESRVS[1])
    wrong = []
    try:
        port = int(re.search(r"remoting \S*?:(\d+)", server.line, re.IGNORECASE).group(1))
        session = requests.Session()
        with RemotingClient.connect("127.0.0.1", port) as remoting:
            for ns, steps in model_instants.items():
                for step in steps:
                    for topic in ASKED:
                        want = route_info(step.snapshot, topic, request_version=401)
                        got = history.route_at(ns, topic, step.ts)
                        if got.code != want.code or not same_answer(got, want):
                            wrong.append(("route_at", ns, step.ts, topic[:40]))
                        if _over_http(topic):
                            path = requests.utils.quote(topic, safe="")
                            r = session.get(f"{server.url}/v1/route/{path}", params={"namesrv": ns, "at": step.ts}, timeout=30)
                            if want.code == ResponseCode.SUCCESS:
                                ok = r.status_code == 200 and same_answer(r.content, want.body)
                            else:
                                ok = r.status_code == 404 and r.json() == {"code": 17, "remark": topic_not_exist_remark(topic, step.snapshot.profile)}
                            if not ok:
                                wrong.append(("http route", ns, step.ts, topic[:40], r.status_code, r.text[:100]))
                            h = session.get(f"{server.url}/v1/history/route/{path}", params={"namesrv": ns, "to": step.ts}, timeout=30)
                            entries = h.json() if h.status_code == 200 else None
                            if want.code == ResponseCode.SUCCESS:  # the last change up to the instant is to the model's route
                                ok = bool(entries) and entries[-1]["code"] == 0 and same_answer(json.dumps(entries[-1]["route"]).encode(), want.body)
                            else:
                                ok = entries is not None and (not entries or entries[-1]["code"] == ResponseCode.TOPIC_NOT_EXIST)
                            if not ok:
                                wrong.append(("http history", ns, step.ts, topic[:40], h.status_code, h.text[:100]))
                        if ns == NAMESRVS[1]:
                            for version in (121, 401):
                                legacy = route_info(step.snapshot, topic, request_version=version)
                                got = answer_of(remoting.route(topic, as_of=step.ts, version=version))
                                if not (got.code == legacy.code and got.remark == legacy.remark and same_answer(got, legacy)):
                                    wrong.append(("remoting", version, step.ts, topic[:40], got.code))
    finally:
        assert server.stop() == 0
    assert not wrong, wrong[:20]


def _ipv6_loopback() -> bool:
    try:
        socket.create_server(("::1", 0), family=socket.AF_INET6).close()
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="this host cannot listen on ::1")
def test_served_on_ipv6_loopback_as_the_model_answers(unusual_root, model_instants, start_serve) -> None:
    """``--host ::1``: both endpoints listen on IPv6, the startup line gives them bracketed, and the
    answers over them (routes, cluster info and topic lists full of IPv6 broker addresses, for the
    NameServer whose own address is a scoped IPv6 one) are the model's."""
    _, root = unusual_root
    server = start_serve(root, "--host", "::1", "--reload-interval", "0", "--remoting-port", "0", "--namesrv", NAMESRVS[1])
    wrong, shown = [], []
    try:
        assert server.url.startswith("http://[::1]:")
        port = int(re.search(r"remoting \[::1\]:(\d+) as ", server.line).group(1))
        asked = ["v6-topic", "a", "中文", "no-such"]
        with RemotingClient.connect("::1", port) as remoting:
            for step in model_instants[NAMESRVS[1]]:
                params = {"namesrv": NAMESRVS[1], "at": step.ts}
                r = requests.get(f"{server.url}/v1/cluster", params=params, timeout=30)
                shown.append(r.text)
                if r.status_code != 200 or r.content != cluster_info(step.snapshot, shape="standard").body:
                    wrong.append(("http cluster", step.ts, r.status_code, r.text[:100]))
                if answer_of(remoting.cluster(as_of=step.ts)) != cluster_info(step.snapshot):
                    wrong.append(("remoting cluster", step.ts))
                if answer_of(remoting.topics(as_of=step.ts)) != topic_list(step.snapshot):
                    wrong.append(("remoting topics", step.ts))
                for topic in asked:
                    want = route_info(step.snapshot, topic, request_version=401)
                    r = requests.get(f"{server.url}/v1/route/{requests.utils.quote(topic, safe='')}", params=params, timeout=30)
                    if not (r.status_code == 200 and same_answer(r.content, want.body) if want.code == ResponseCode.SUCCESS else r.status_code == 404):
                        wrong.append(("http route", step.ts, topic, r.status_code))
                    got = answer_of(remoting.route(topic, as_of=step.ts, version=121))
                    legacy = route_info(step.snapshot, topic, request_version=121)
                    if not (got.code == legacy.code and got.remark == legacy.remark and same_answer(got, legacy)):
                        wrong.append(("remoting route", step.ts, topic, got.code))
        # an instant asked shows every IPv6 broker
        assert any(all(json.dumps(addr) in text for _, _, addr, _, _ in IPV6_BROKERS) for text in shown), [t[:200] for t in shown]
    finally:
        assert server.stop() == 0
    assert not wrong, wrong[:20]


@pytest.mark.skipif(not _ipv6_loopback(), reason="this host cannot listen on ::1")
def test_a_bracketed_host_binds_the_address_it_brackets(unusual_root, start_serve) -> None:
    """``--host [::1]``, the spelling of the startup line's URLs (and of RocketMQ's addresses), binds ::1."""
    _, root = unusual_root
    server = start_serve(root, "--host", "[::1]", "--reload-interval", "0", "--remoting-port", "0", "--namesrv", NAMESRVS[1])
    try:
        assert server.url.startswith("http://[::1]:") and re.search(r"remoting \[::1\]:\d+ as ", server.line), server.line
        r = requests.get(f"{server.url}/v1/namesrvs", timeout=30)
        assert r.status_code == 200 and sorted(n["namesrv"] for n in r.json()) == sorted(NAMESRVS)
    finally:
        assert server.stop() == 0


def test_the_documents_topic_examples_are_topics_the_path_can_carry(unusual_root, start_serve) -> None:
    """/openapi.json gives topics of the warehouse as examples of the path parameter: each must meet
    the parameter's own schema (non-empty, no "/", a request line aiohttp reads), and asking it
    answers a route or code 17, never "no such endpoint" or a 400. This warehouse's first topics in
    sorted order are "", " lead" and "%DLQ%group"."""
    _, root = unusual_root
    server = start_serve(root, "--reload-interval", "0")
    try:
        document = requests.get(f"{server.url}/openapi.json", timeout=30).json()
        for path in ("/v1/route/{topic}", "/v1/history/route/{topic}"):
            (param,) = [p for p in document["paths"][path]["get"]["parameters"] if p["name"] == "topic"]
            examples = [e["value"] for e in param["examples"].values()]
            assert examples, path
            for topic in examples:
                assert len(topic) >= param["schema"]["minLength"] and re.fullmatch(param["schema"]["pattern"].strip("^$"), topic), (path, topic)
                r = requests.get(f"{server.url}{path.replace('{topic}', requests.utils.quote(topic, safe=''))}", params={"namesrv": NAMESRVS[0]}, timeout=30)
                assert r.status_code in (200, 404) and "error" not in r.json(), (path, topic, r.text[:200])
    finally:
        assert server.stop() == 0
