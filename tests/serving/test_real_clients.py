"""Real RocketMQ clients pointed at the remoting endpoint, over a warehouse built by the real pipeline.

The capture (hand-built, 4.9.4 NameServer): topic ``orders`` lives on broker-a (127.0.0.1:PA) alone,
then broker-b (127.0.0.1:PB) joins, then broker-a goes silent and expires at a scan tick:

    T_A    = S +  60 s   orders → {broker-a}
    T_AB   = S + 150 s   orders → {broker-a, broker-b}
    T_B    = S + 350 s   orders → {broker-b}          (broker-a expired at S + 305 s)

* **ali-ons 3.12.0** (npm, pure JS, version 121 → legacy JSON): ``getDefaultTopicRouteInfoFromNameServer``
  through the shim at each instant returns exactly the reference route; an unknown topic fails with 17.
* **rocketmq 0.4.4** (PyPI, the C++ client): ``Producer.send_sync`` looks the route up through the
  shim (code 105) and sends to the master of the historical route; a loopback broker listens at both
  PA and PB, and only the one in the route at the shim's ``as_of`` receives the message. It runs in a
  subprocess so a crash in the native library cannot take pytest down.

Without node/npm packages or the rocketmq package these tests skip, unless ``CI`` is set: then they fail.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from nsreplay.config import load_settings
from nsreplay.model import PROFILE_49, Answer, route_info, same_answer, state_at, topic_not_exist_remark
from nsreplay.model.records import namesrv_start, register_broker
from nsreplay.serving.remoting_server import RemotingServerThread
from nsreplay.serving.source import HistorySource
from nsreplay.storage import Warehouse

CLIENTS = Path(__file__).resolve().parent / "clients"
NS = "10.0.0.10:9876"
S = 1732147200000
T_A, T_AB, T_B = S + 60_000, S + 150_000, S + 350_000
TOPICS = ["orders", "audit"]


def _loopback_broker_module():
    name = "nsreplay_test_loopback_broker"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, CLIENTS / "loopback_broker.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    return sys.modules[name]


def require(available: bool, reason: str) -> None:
    """Skip without ``reason``'s tool, but fail under CI (where .ci/run installs everything)."""
    if not available:
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set: .ci/run must install it)")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def broker_sockets():
    """Two listening sockets on 127.0.0.1 (broker-a's, broker-b's), held open for the whole module.

    The capture names their ports, and the loopback brokers serve on them test after test. Holding them
    keeps the ports ours: a port picked free and then released is in the ephemeral range, and any
    outgoing connection meanwhile (Spark's, a client's) may take it, which failed a CI run with
    "address already in use". Nothing is accepted on them while no loopback broker is serving."""
    sockets = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]
    yield sockets
    for sock in sockets:
        sock.close()


def capture_records(addr_a: str, addr_b: str) -> list[dict]:
    records = [namesrv_start(S, "4.9.4", {}, namesrv=NS)]
    for k in range(7):  # S+1 s … S+181 s, then silent: expires at the tick S+305 s (181 + 120 < 305)
        records.append(register_broker(S + 1_000 + k * 30_000, cluster="c", name="broker-a", addr=addr_a,
                                       topics=TOPICS, five=False, namesrv=NS))
    for k in range(11):  # S+100 s … S+400 s
        records.append(register_broker(S + 100_000 + k * 30_000, cluster="c", name="broker-b", addr=addr_b,
                                       topics=["orders"], five=False, namesrv=NS))
    return records


@pytest.fixture(scope="module")
def route_change(request, tmp_path_factory, broker_sockets) -> dict:
    """The capture above ingested, replayed and published; ports, records and the warehouse root.
    (Spark is asked for here, not as an argument, so that a missing client skips before it starts.)"""
    from pipelines.ingest.run import run_ingest
    from pipelines.replay.run import run_replay

    spark = request.getfixturevalue("spark")

    port_a, port_b = (sock.getsockname()[1] for sock in broker_sockets)
    records = capture_records(f"127.0.0.1:{port_a}", f"127.0.0.1:{port_b}")
    capture = tmp_path_factory.mktemp("real-clients")
    (capture / "ns.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    root = str(tmp_path_factory.mktemp("real-clients-wh"))
    warehouse = Warehouse(root, spark, "delta-rs")
    run_ingest(spark, warehouse, load_settings(), str(capture), "rc-ingest")
    run_replay(spark, warehouse, load_settings(), "rc-replay")
    return {"root": root, "records": records, "port_a": port_a, "port_b": port_b, "sockets": broker_sockets}


def reference(route_change: dict, topic: str, t: int, version: int) -> Answer:
    """The answer of the reference model, which the published history must match."""
    snap = state_at(route_change["records"], NS, t, default_profile=PROFILE_49)
    return route_info(snap, topic, request_version=version)


def brokers(answer: Answer) -> dict[str, dict[str, str]]:
    return {b["brokerName"]: b["brokerAddrs"] for b in answer.parsed()["brokerDatas"]}


def test_the_published_history_has_the_route_change(route_change):
    """The fixture is what the client tests rely on (and the pipeline agrees with the model)."""
    a, b = f"127.0.0.1:{route_change['port_a']}", f"127.0.0.1:{route_change['port_b']}"
    source = HistorySource(route_change["root"])
    expected = {T_A: {"broker-a": {"0": a}}, T_AB: {"broker-a": {"0": a}, "broker-b": {"0": b}},
                T_B: {"broker-b": {"0": b}}}
    for t, groups in expected.items():
        for version in (63, 121, 401):
            published = source.route(NS, "orders", t, request_version=version)
            assert published == reference(route_change, "orders", t, version)
            assert brokers(published) == groups
    assert source.route(NS, "audit", T_B, request_version=121) == Answer(17, None, topic_not_exist_remark("audit"))


# ------------------------------------------------------------------------------------ ali-ons


def run_ali_ons(port: int, *topics: str) -> dict:
    result = subprocess.run(["node", str(CLIENTS / "route.js"), f"127.0.0.1:{port}", *topics],
                            capture_output=True, text=True, timeout=60, cwd=CLIENTS)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def ali_ons() -> None:
    """ali-ons 3.12.0 under node (checked before the warehouse is built)."""
    require(shutil.which("node") is not None, "node is not installed (apt-get install nodejs npm)")
    package = CLIENTS / "node_modules" / "ali-ons" / "package.json"
    require(package.exists(), "ali-ons is not installed (npm ci --prefix tests/serving/clients)")
    assert json.loads(package.read_text())["version"] == "3.12.0"


@pytest.fixture(scope="module")
def cpp_client():
    """The rocketmq package (C++ client) and the loopback broker module."""
    require(importlib.util.find_spec("rocketmq") is not None,
            "the rocketmq package is not installed (its only wheel is for Linux x86_64; there: .venv/bin/pip install rocketmq==0.4.4)")
    return _loopback_broker_module()


def test_ali_ons_gets_the_historical_route(ali_ons, route_change):
    source = HistorySource(route_change["root"])
    audit_codes = {}
    for t in (T_A, T_AB, T_B):
        seen = []
        with RemotingServerThread(lambda: source, namesrv=NS, as_of=t, on_request=seen.append) as server:
            out = run_ali_ons(server.port, "orders", "audit", "no-such-topic")
        expected = reference(route_change, "orders", t, 121)
        assert same_answer(out["orders"]["route"], expected), (t, out["orders"])
        assert same_answer(out["orders"]["route"], source.route(NS, "orders", t, request_version=121))
        audit = reference(route_change, "audit", t, 121)
        audit_codes[t] = audit.code
        if audit.code == 0:
            assert same_answer(out["audit"]["route"], audit)
        else:
            assert out["audit"]["error"] == {"name": "MQClientException", "code": 17, "message": audit.remark}
        assert out["no-such-topic"]["error"] == {"name": "MQClientException", "code": 17,
                                                 "message": topic_not_exist_remark("no-such-topic")}
        assert [(r.code, r.version, r.language, dict(r.ext_fields)) for r in seen] == [
            (105, 121, "JAVA", {"topic": topic}) for topic in ("orders", "audit", "no-such-topic")]
    assert audit_codes == {T_A: 0, T_AB: 0, T_B: 17}  # audit lived on broker-a only, which expired


# ------------------------------------------------------------------------------------ C++ client


def send_with_cpp(port: int, topic: str, home: Path) -> dict:
    """``send_sync`` of one message by the C++ client in a subprocess (its logs go under ``home``)."""
    env = {**os.environ, "HOME": str(home)}
    result = subprocess.run([sys.executable, str(CLIENTS / "cpp_send.py"), f"127.0.0.1:{port}", topic],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, f"the C++ client process failed ({result.returncode}): {result.stderr[-2000:]}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_cpp_client_sends_to_the_historical_master(cpp_client, route_change, tmp_path):
    broker_module = cpp_client
    source = HistorySource(route_change["root"])
    ports = {"broker-a": route_change["port_a"], "broker-b": route_change["port_b"]}
    sockets = dict(zip(("broker-a", "broker-b"), route_change["sockets"]))
    for t, target in ((T_A, "broker-a"), (T_B, "broker-b")):
        master = brokers(reference(route_change, "orders", t, 63))[target]["0"]
        assert master == f"127.0.0.1:{ports[target]}"
        seen = []
        with RemotingServerThread(lambda: source, namesrv=NS, as_of=t, on_request=seen.append) as server:
            loopbacks = {name: broker_module.LoopbackBroker(sock) for name, sock in sockets.items()}
            for loopback in loopbacks.values():
                server.run(loopback.start())
            try:
                result = send_with_cpp(server.port, "orders", tmp_path)
            finally:
                for loopback in loopbacks.values():
                    server.run(loopback.stop())
        assert result.get("status") == "OK", result
        lookups = [(r.code, r.language, r.version, r.ext("topic")) for r in seen]
        assert (105, "CPP", 63, "orders") in lookups
        assert loopbacks[target].sent_topics() == ["orders"]  # connected to the historical master
        other = next(name for name in loopbacks if name != target)
        assert loopbacks[other].requests == []
        assert result["msg_id"] and result["offset"] == 1


def test_cpp_client_cannot_send_to_an_unknown_topic(cpp_client, route_change, tmp_path):
    broker_module = cpp_client
    source = HistorySource(route_change["root"])
    seen = []
    with RemotingServerThread(lambda: source, namesrv=NS, as_of=T_AB, on_request=seen.append) as server:
        loopbacks = [broker_module.LoopbackBroker(sock) for sock in route_change["sockets"]]
        for loopback in loopbacks:
            server.run(loopback.start())
        try:
            result = send_with_cpp(server.port, "no-such-topic", tmp_path)
        finally:
            for loopback in loopbacks:
                server.run(loopback.stop())
    assert "status" not in result and result["error"] == "ProducerSendSyncFailed", result
    assert "No route info of this topic: no-such-topic" in result["message"]
    assert {r.ext("topic") for r in seen if r.code == 105} == {"no-such-topic", "TBW102"}
    assert all(lb.sent_topics() == [] for lb in loopbacks)
