"""The real ``nsreplay serve`` on the demo warehouse, over HTTP: every endpoint against the oracle
(HistorySource snapshots rendered by the reference renderer) or the index verified in test_index,
and every error case (400/404/405 with a JSON reason, never a 5xx)."""

from __future__ import annotations

import json
import random

import pytest
import requests

from nsreplay.model import ResponseCode, cluster_info, route_info, same_answer, topic_list, topic_not_exist_remark
from nsreplay.runtime import format_ms


@pytest.fixture(scope="module")
def http(demo_server):
    session = requests.Session()
    yield lambda path, **kw: session.request(kw.pop("method", "GET"), demo_server.url + path, timeout=30, **kw)
    session.close()


def test_startup_line_says_what_is_served(demo_server, demo_index):
    line = demo_server.line
    assert demo_index.run_id in line and demo_server.url in line
    for cov in demo_index.coverage():
        assert cov.namesrv in line and format_ms(cov.from_ts) in line and format_ms(cov.to_ts) in line


def test_namesrvs(http, demo_index):
    r = http("/v1/namesrvs")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json")
    assert r.json() == [
        {"namesrv": c.namesrv, "from": c.from_ts, "to": c.to_ts, "from_iso": format_ms(c.from_ts), "to_iso": format_ms(c.to_ts),
         "profile": c.profile, "run_id": demo_index.run_id}
        for c in demo_index.coverage()
    ]


def test_route_cluster_topics_match_the_oracle(http, demo_oracle, demo_instants, demo_topics):
    rnd = random.Random(17)
    for ns, instants in demo_instants.items():
        for i, t in enumerate(rnd.sample(instants, min(8, len(instants)))):
            at = format_ms(t) if i % 2 else str(t)  # both time syntaxes
            snap = demo_oracle.snapshot(ns, t)
            for topic in demo_topics[ns]:
                r = http(f"/v1/route/{requests.utils.quote(topic, safe='')}", params={"namesrv": ns, "at": at})
                want = route_info(snap, topic, request_version=401)
                assert r.headers["X-Nsreplay-At"] == str(t)
                if want.code == ResponseCode.SUCCESS:
                    assert r.status_code == 200 and r.content == want.body, (ns, t, topic)
                    assert same_answer(r.content, want.body)
                else:
                    assert r.status_code == 404 and r.json() == {"code": 17, "remark": topic_not_exist_remark(topic, snap.profile)}, (ns, t, topic)
            r = http("/v1/cluster", params={"namesrv": ns, "at": at})
            assert r.status_code == 200 and r.content == cluster_info(snap, shape="standard").body
            assert r.json() == json.loads(cluster_info(snap, shape="standard").body)
            r = http("/v1/topics", params={"namesrv": ns, "at": at})
            assert r.status_code == 200 and r.content == topic_list(snap).body


def test_latest_state_when_at_is_omitted(http, demo_oracle, demo_topics):
    for cov in demo_oracle.coverage():
        topic = demo_topics[cov.namesrv][0]
        r = http(f"/v1/route/{topic}", params={"namesrv": cov.namesrv})
        want = demo_oracle.route(cov.namesrv, topic, cov.to_ts, request_version=401)
        assert r.headers["X-Nsreplay-At"] == str(cov.to_ts)
        assert (r.status_code, r.content if want.body else None) == ((200, want.body) if want.body else (404, None))


def test_time_syntaxes_name_the_same_instant(http, demo_index):
    """ISO-8601 with Z or z, an offset percent-encoded or typed with a literal '+' (which a query
    string decodes as a space), a negative offset and epoch milliseconds all select one instant."""
    cov = demo_index.coverage()[-1]
    t = cov.from_ts + (cov.to_ts - cov.from_ts) // 2
    iso = format_ms(t)  # ...T..:..:..mmmZ
    day, clock = iso[:-1].split("T")
    from datetime import datetime, timedelta, timezone

    moment = datetime.fromtimestamp(t / 1000, tz=timezone.utc)
    plus = (moment + timedelta(hours=5, minutes=30)).isoformat(timespec="milliseconds")[:23]
    minus = (moment - timedelta(hours=3)).isoformat(timespec="milliseconds")[:23]
    spellings = [str(t), iso, f"{day}T{clock}z", f"{plus}%2B05:30", f"{plus}+05:30", f"{plus}+0530", f"{minus}-03:00"]
    answers = set()
    for at in spellings:
        r = http(f"/v1/topics?namesrv={cov.namesrv}&at={at}")
        assert r.status_code == 200, (at, r.text)
        answers.add((r.headers["X-Nsreplay-At"], r.content))
    assert answers == {(str(t), http(f"/v1/topics?namesrv={cov.namesrv}&at={t}").content)}


def test_tables(http, demo_index, demo_instants):
    rnd = random.Random(2)
    for ns, instants in demo_instants.items():
        for t in rnd.sample(instants, 3):
            for table in ("topicQueueTable", "brokerAddrTable", "clusterAddrTable", "brokerLiveTable", "filterServerTable", "orderTopicConf"):
                r = http(f"/v1/tables/{table}", params={"namesrv": ns, "at": str(t)})
                at, tick, rows = demo_index.table_rows(ns, table, t)
                assert r.status_code == 200
                assert r.json() == {"namesrv": ns, "table": table, "at": t, "tick": tick, "run_id": demo_index.run_id, "rows": json.loads(json.dumps(rows))}
                assert tick is None or tick <= t


def test_history(http, demo_index, demo_topics):
    for cov in demo_index.coverage():
        for topic in demo_topics[cov.namesrv][:4]:
            entries = demo_index.route_history(cov.namesrv, topic, None, None)
            r = http(f"/v1/history/route/{topic}", params={"namesrv": cov.namesrv})
            assert r.status_code == 200
            body = r.json()
            assert [(e["ts"], e["tick_ts"], e["code"], e["route"]) for e in body] == [
                (e.ts, e.tick_ts, e.answer.code, json.loads(e.answer.body) if e.answer.body else None) for e in entries
            ]
            assert [e["changes"] for e in body] == [json.loads(json.dumps(list(e.changes))) for e in entries]
            if len(entries) >= 2:  # a window: only its changes
                lo, hi = entries[1].ts, entries[-1].ts
                r = http(f"/v1/history/route/{topic}", params={"namesrv": cov.namesrv, "from": format_ms(lo), "to": str(hi)})
                assert [e["ts"] for e in r.json()] == [e.ts for e in entries if lo <= e.ts <= hi]


def test_head_is_served_without_a_body(http, demo_index):
    cov = demo_index.coverage()[0]
    r = http("/v1/cluster", method="HEAD", params={"namesrv": cov.namesrv})
    assert r.status_code == 200 and r.content == b""


@pytest.mark.parametrize(
    "method, path, params, status, says",
    [
        ("GET", "/v1/route/x", {"at": "bad"}, 400, "not a time"),
        ("GET", "/v1/route/x", {"at": "2024-13-45T00:00:00Z"}, 400, "not a time"),
        ("GET", "/v1/cluster", {"at": "１２３"}, 400, "not a time"),
        ("GET", "/v1/route/x", {"at": ""}, 400, "empty"),
        ("GET", "/v1/route/x", {"when": "1"}, 400, "unknown parameter 'when'"),
        ("GET", "/v1/route/x?at=1&at=2", {}, 400, "more than once"),
        ("GET", "/v1/route/x", {"at": "99999999999999999999999999"}, 404, "outside the covered range"),
        ("GET", "/v1/route/x", {"at": "0001-01-01T00:00:00+14:00"}, 404, "outside the covered range"),
        ("GET", "/v1/topics", {"at": "-1"}, 404, "outside the covered range"),
        ("GET", "/v1/tables/nope", {}, 404, "unknown table"),
        ("GET", "/v1/history/route/x", {"from": "2024-11-21T01:00:00Z", "to": "2024-11-21T00:00:00Z"}, 400, "after"),
        ("GET", "/v1/history/route/x", {"from": "1"}, 404, "outside the covered range"),
        ("GET", "/v1/nothing", {}, 404, "no such endpoint"),
        ("GET", "/v1/route/", {}, 404, "no such endpoint"),
        ("POST", "/v1/route/x", {}, 405, "read-only"),
        ("PUT", "/v1/namesrvs", {}, 405, "read-only"),
        ("DELETE", "/v1/tables/brokerLiveTable", {}, 405, "read-only"),
    ],
)
def test_errors(http, demo_index, method, path, params, status, says):
    r = http(path, method=method, params={"namesrv": demo_index.coverage()[0].namesrv, **params})
    assert r.status_code == status, r.text
    assert says in r.json()["error"], r.text


def test_outside_range_names_the_range(http, demo_index):
    cov = demo_index.coverage()[-1]
    for at in (str(cov.from_ts - 1), format_ms(cov.to_ts + 1)):
        r = http("/v1/route/x", params={"namesrv": cov.namesrv, "at": at})
        assert r.status_code == 404
        message = r.json()["error"]
        assert f"[{cov.from_ts}, {cov.to_ts}]" in message and format_ms(cov.from_ts) in message and format_ms(cov.to_ts) in message


def test_unknown_or_missing_namesrv(http, demo_index):
    r = http("/v1/cluster", params={"namesrv": "10.9.9.9:9876"})
    assert r.status_code == 404 and "unknown NameServer" in r.json()["error"]
    assert all(c.namesrv in r.json()["error"] for c in demo_index.coverage())
    r = http("/v1/cluster")
    assert r.status_code == 400 and "'namesrv' is required" in r.json()["error"]


def test_openapi_document_describes_every_endpoint(http, demo_index):
    doc = http("/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    assert set(doc["paths"]) == {"/v1/namesrvs", "/v1/route/{topic}", "/v1/cluster", "/v1/topics", "/v1/tables/{table}", "/v1/history/route/{topic}", "/openapi.json"}
    for path, item in doc["paths"].items():
        assert {"200", "400", "404", "405"} <= set(item["get"]["responses"]), path
    # an unknown topic: 404 code 17 for its route, an empty list for its history (as answered)
    topic = {path: next(p["description"] for p in doc["paths"][path]["get"]["parameters"] if p["name"] == "topic")
             for path in ("/v1/route/{topic}", "/v1/history/route/{topic}")}
    assert topic["/v1/route/{topic}"].endswith("an unknown topic answers 404 code 17).")
    assert topic["/v1/history/route/{topic}"].endswith("a topic whose route never changed in the window answers an empty list).")
    ns = demo_index.coverage()[0].namesrv
    answered = http(f"/v1/history/route/no-such-topic?namesrv={ns}")
    assert (answered.status_code, answered.json()) == (200, [])


def _raw_request(url: str, request: bytes) -> bytes:
    """Send ``request`` as is on a fresh connection; the first bytes of the answer."""
    import socket
    from urllib.parse import urlsplit

    where = urlsplit(url)
    with socket.create_connection((where.hostname, where.port), timeout=10) as conn:
        conn.sendall(request)
        return conn.recv(200)


def test_a_malformed_request_is_answered_400_and_logged_on_one_line(demo_root, start_serve):
    served = start_serve(demo_root, "--reload-interval", "0")
    try:
        too_long = b"GET /v1/route/" + b"A" * 10_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
        bad_header = b"GET /v1/namesrvs HTTP/1.1\r\nHost: x\r\nBad Header: \x01\r\n\r\n"
        bad_method = b"GARBAGE\r\n\r\n"  # aiohttp logs this one at debug level (noise from non-HTTP clients)
        for request in (too_long, bad_header, bad_method):
            status_line = _raw_request(served.url, request).split(b"\r\n", 1)[0]
            assert status_line in (b"HTTP/1.0 400 Bad Request", b"HTTP/1.1 400 Bad Request"), status_line
        assert requests.get(served.url + "/v1/namesrvs", timeout=10).status_code == 200  # still serving
    finally:
        assert served.stop() == 0
    err = served.process.stderr.read()
    logged = [line for line in err.splitlines() if "malformed request" in line]
    assert len(logged) == 3 and "Traceback" not in err, err[-3000:]
    assert all(line.startswith("nsreplay serve: answered 400 to a malformed request: Error handling request from 127.0.0.1") for line in logged)
    reason = logged[2].rsplit(" (", 1)[1]  # aiohttp's C and Python parsers word it differently
    assert "method" in reason and "GARBAGE" in reason, logged[2]


def test_files_read_per_request_that_cannot_be_read_are_answered_503_and_the_routes_still_served(demo_root, demo_index, start_serve, tmp_path):
    """The broker-live table and the route changes are read from the published files per request:
    when they are gone (a vacuum that kept too little), the lookups that read them (the live table,
    route history) answer 503 naming the table, each logged on one line, and everything held in
    memory still answers."""
    import shutil
    from pathlib import Path

    root = tmp_path / "wh"
    shutil.copytree(demo_root, root)  # Delta keeps relative paths: the copy is the same warehouse
    for table in ("broker_live_intervals", "route_changes"):
        removed = [f.unlink() or f for f in Path(root, "gold", table).rglob("*.parquet")]
        assert removed
    cov = demo_index.coverage()[0]
    topic = requests.utils.quote(demo_index.topic_names(cov.namesrv)[0], safe="")
    served = start_serve(str(root), "--reload-interval", "0")
    try:
        get = lambda path: requests.get(served.url + path, params={"namesrv": cov.namesrv}, timeout=30)  # noqa: E731
        r = get("/v1/tables/brokerLiveTable")
        assert r.status_code == 503 and "gold.broker_live_intervals" in r.json()["error"], r.text
        r = get(f"/v1/history/route/{topic}")
        assert r.status_code == 503 and "gold.route_changes" in r.json()["error"], r.text
        assert get("/v1/tables/topicQueueTable").status_code == 200 and get(f"/v1/route/{topic}").status_code == 200
        assert get("/v1/cluster").status_code == 200 and get("/v1/topics").status_code == 200
    finally:
        assert served.stop() == 0
    err = served.process.stderr.read()
    assert "Traceback" not in err, err[-3000:]
    for table in ("gold.broker_live_intervals", "gold.route_changes"):
        assert len([line for line in err.splitlines() if table in line]) == 1, err[-3000:]
