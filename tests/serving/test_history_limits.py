"""The bounds of ``GET /v1/history/route/{topic}`` (``[serve]`` in conf/), over real HTTP against the
real ``nsreplay serve`` on the published demo warehouse:

* with the shipped settings every window of the demo is answered whole, exactly as before;
* a shim configured with small limits (a conf/ environment of this test: 5 changes, 9 examined
  instants) answers a window within them whole, refuses a window beyond them with 400 naming the
  setting, its value, the first page and the greatest ``to`` that fits — before reading any change
  row — and pages through any window with ``limit``: the pages join into exactly the uncapped
  answer, no change lost or repeated, changes at one instant never split;
* a page of a run no longer served (a newer publish) is refused 409, never joined to the others;
* bad or absurd parameters are 4xx with a JSON reason, never 5xx; bad settings stop the shim with
  a one-line reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import parse_qsl, quote, urlsplit

import pytest
import requests

from nsreplay.serving.config import load_serve_config

ROOT = Path(__file__).resolve().parents[2]
MAX_CHANGES = 5
MAX_EXAMINED = 9
ENV = "history-limits-test"
FIELDS_OF_A_REFUSAL = {"error", "setting", "value", "first_page", "fits_to"}


def _conf(tmp_path: Path, serve: str, *, base_serve: bool = True) -> dict[str, str]:
    """A copy of conf/ whose environment ENV sets ``serve`` (TOML lines of [serve]); the variables
    that make ``nsreplay serve`` read it. ``base_serve=False`` also drops [serve] from base."""
    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf", conf)
    if not base_serve:
        base = conf / "base" / "nsreplay.toml"
        text = base.read_text()
        start = text.index("[serve]")
        base.write_text(text[:start] + text[text.index("\n[", start) + 1:])
    (conf / ENV).mkdir()
    (conf / ENV / "nsreplay.toml").write_text(f"[serve]\n{serve}\n")
    return {"NSREPLAY_CONF_DIR": str(conf), "NSREPLAY_ENV": ENV}


@pytest.fixture(scope="module")
def capped_env(tmp_path_factory) -> dict[str, str]:
    return _conf(tmp_path_factory.mktemp("capped-conf"), f"history_max_changes = {MAX_CHANGES}\nhistory_max_examined = {MAX_EXAMINED}")


@pytest.fixture(scope="module")
def capped_server(demo_root, capped_env, start_serve) -> Iterator[Any]:
    served = start_serve(demo_root, "--reload-interval", "0", env=capped_env)
    yield served
    assert served.stop() == 0


Get = Callable[..., requests.Response]


def _getter(url: str) -> Iterator[Get]:
    session = requests.Session()
    yield lambda path, **kw: session.get(url + path, timeout=30, **kw)
    session.close()


@pytest.fixture(scope="module")
def capped(capped_server) -> Iterator[Get]:
    yield from _getter(capped_server.url)


@pytest.fixture(scope="module")
def uncapped(demo_server) -> Iterator[Get]:
    yield from _getter(demo_server.url)


def _path(topic: str) -> str:
    return f"/v1/history/route/{quote(topic, safe='')}"


def _expected(entries) -> list[dict[str, Any]]:
    """RouteIndex.route_history entries as the API's JSON answers them (``time`` aside)."""
    import json

    return [{"ts": e.ts, "tick_ts": e.tick_ts, "code": e.answer.code, "route": json.loads(e.answer.body) if e.answer.body else None,
             "changes": json.loads(json.dumps(list(e.changes)))} for e in entries]


def _plain(body: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k != "time"} for e in body]


def _next(r: requests.Response) -> str | None:
    link = r.links.get("next")
    return link["url"] if link else None


def _query(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(url).query))


def _pages(get: Get, topic: str, params: dict[str, str]) -> Iterator[requests.Response]:
    """Every page of a window, following ``Link: rel="next"`` from the request ``params``."""
    r = get(_path(topic), params=params)
    yield r
    while (link := _next(r)) is not None:
        r = get(link)
        yield r


def test_the_shipped_limits_answer_every_window_of_the_demo_whole_as_before(uncapped, demo_index, demo_topics):
    """conf/base's limits are far above the demo's busiest topic: every topic's whole history is one
    answer, the index's route history (itself checked against the oracle in test_index), with no
    Link and the window it answers in X-Nsreplay-From/To."""
    shipped = load_serve_config(env="base")
    assert (shipped.history_max_changes, shipped.history_max_examined) == (1000, 10000)
    busiest = 0
    for cov in demo_index.coverage():
        for topic in demo_topics[cov.namesrv]:
            r = uncapped(_path(topic), params={"namesrv": cov.namesrv})
            entries = demo_index.route_history(cov.namesrv, topic, None, None)
            busiest = max(busiest, len(entries))
            assert r.status_code == 200, r.text
            assert _plain(r.json()) == _expected(entries), (cov.namesrv, topic)
            assert "Link" not in r.headers
            assert (r.headers["X-Nsreplay-From"], r.headers["X-Nsreplay-To"]) == (str(cov.from_ts), str(cov.to_ts))
    assert MAX_CHANGES < busiest < shipped.history_max_changes


def test_a_window_within_the_limits_is_answered_whole(capped, demo_index, demo_topics):
    """On the capped shim, windows that hold at most MAX_CHANGES changes and need at most
    MAX_EXAMINED instants examined — the longest head of each history that fits, and single
    instants of changes — are answered whole, exactly like the uncapped index, without a Link."""
    checked = 0
    for cov in demo_index.coverage():
        for topic in demo_topics[cov.namesrv][:12]:
            head = demo_index.route_history_page(cov.namesrv, topic, None, None, max_changes=MAX_CHANGES, max_examined=MAX_EXAMINED)
            windows = [(cov.from_ts, head.through)] + [(e.ts, e.ts) for e in head.changes[:2]]
            for start, end in windows:
                r = capped(_path(topic), params={"namesrv": cov.namesrv, "from": str(start), "to": str(end)})
                assert r.status_code == 200, r.text
                assert _plain(r.json()) == _expected(demo_index.route_history(cov.namesrv, topic, start, end)), (cov.namesrv, topic, start, end)
                assert "Link" not in r.headers and (r.headers["X-Nsreplay-From"], r.headers["X-Nsreplay-To"]) == (str(start), str(end))
                checked += 1
    assert checked >= 60


def _refusal(r: requests.Response, setting: str, value: int) -> dict[str, Any]:
    assert r.status_code == 400, r.text
    body = r.json()
    assert set(body) == FIELDS_OF_A_REFUSAL, body
    assert (body["setting"], body["value"]) == (setting, value)
    assert f"[serve] {setting} = {value}" in body["error"] and "limit" in body["error"] and f"to={body['fits_to']}" in body["error"]
    return body


@pytest.mark.parametrize("setting", ["history_max_changes", "history_max_examined"])
def test_a_window_beyond_a_limit_is_refused_with_the_first_page_and_what_fits(capped, demo_index, demo_topics, setting):
    """Beyond a limit: 400 naming the setting and its value, the first page's URL (same window,
    limit = history_max_changes, the run) and ``fits_to``; both lead to answers that are exactly the
    uncapped index's for their windows."""
    refused = 0
    for cov in demo_index.coverage():
        for topic in demo_topics[cov.namesrv]:
            r = capped(_path(topic), params={"namesrv": cov.namesrv})
            if r.status_code == 200 or r.json().get("setting") != setting:
                continue
            body = _refusal(r, setting, MAX_CHANGES if setting == "history_max_changes" else MAX_EXAMINED)
            first = body["first_page"]
            assert urlsplit(first).path == _path(topic)
            assert _query(first) == {"namesrv": cov.namesrv, "from": str(cov.from_ts), "to": str(cov.to_ts), "limit": str(MAX_CHANGES),
                                     "run": demo_index.run_id}
            page = capped(first)
            fits = capped(_path(topic), params={"namesrv": cov.namesrv, "from": str(cov.from_ts), "to": str(body["fits_to"])})
            want = _expected(demo_index.route_history(cov.namesrv, topic, cov.from_ts, body["fits_to"]))
            assert page.status_code == fits.status_code == 200
            assert _plain(page.json()) == _plain(fits.json()) == want
            assert page.headers["X-Nsreplay-To"] == str(body["fits_to"]) and _next(page) is not None
            if setting == "history_max_changes":  # the head that fits holds exactly the most changes an answer may
                assert len(want) == MAX_CHANGES
            refused += 1
    assert refused >= 3, f"no topic of the demo exceeds {setting} on the capped shim"


def test_pages_join_into_exactly_the_uncapped_answer(capped, uncapped, demo_index, demo_topics):
    """Every topic of every NameServer, paged with the largest limit (and, for the busiest topics,
    with limits 1 and 2): each page is the whole answer of its part of the window (X-Nsreplay-From ..
    X-Nsreplay-To, consecutive, covering the window), holds at most ``limit`` changes, and the pages
    joined are the uncapped shim's answer, entry for entry — no change lost or repeated, the several
    change rows of one instant always in one entry of one page."""
    stops = {"changes": 0, "examined": 0}
    several_rows = 0
    for cov in demo_index.coverage():
        ns = cov.namesrv
        wholes = {}
        for topic in demo_topics[ns]:
            whole = uncapped(_path(topic), params={"namesrv": ns})
            assert whole.status_code == 200
            wholes[topic] = whole.json()
        busiest = sorted(wholes, key=lambda t: -len(wholes[t]))[:2]
        for topic, limit in [(topic, MAX_CHANGES) for topic in wholes] + [(topic, n) for topic in busiest for n in (1, 2)]:
            joined: list[dict[str, Any]] = []
            expect_from = cov.from_ts
            for page in _pages(capped, topic, {"namesrv": ns, "limit": str(limit)}):
                assert page.status_code == 200, page.text
                body = page.json()
                start, through = int(page.headers["X-Nsreplay-From"]), int(page.headers["X-Nsreplay-To"])
                assert start == expect_from and start <= through <= cov.to_ts
                assert len(body) <= limit and all(start <= e["ts"] <= through for e in body)
                assert _plain(body) == _expected(demo_index.route_history(ns, topic, start, through))
                link = _next(page)
                if link is None:
                    assert through == cov.to_ts
                else:
                    assert _query(link) == {"namesrv": ns, "from": str(through + 1), "to": str(cov.to_ts), "limit": str(limit), "run": demo_index.run_id}
                    stops["changes" if len(body) == limit else "examined"] += 1
                several_rows += sum(1 for e in body if len(e["changes"]) > 1)
                joined += body
                expect_from = through + 1
            assert joined == wholes[topic], (ns, topic, limit)
            assert len({e["ts"] for e in joined}) == len(joined)
    assert stops["changes"] > 10 and stops["examined"] > 10, stops  # both bounds ended pages
    assert several_rows > 10  # instants of several change rows, each answered whole in one page


def test_a_refusal_reads_no_change_row(demo_root, demo_index, capped_env, start_serve, tmp_path):
    """The bounds are applied before the change rows are read: with gold.route_changes' files gone
    (a history request that reads them answers 503), a window beyond the limits is still refused 400,
    while a window within them answers 503."""
    root = tmp_path / "wh"
    shutil.copytree(demo_root, root)
    assert [f.unlink() or f for f in Path(root, "gold", "route_changes").rglob("*.parquet")]
    cov = demo_index.coverage()[0]
    served = start_serve(str(root), "--reload-interval", "0", env=capped_env)
    try:
        get = lambda **params: requests.get(served.url + _path("BenchmarkTest"), params={"namesrv": cov.namesrv, **params}, timeout=30)  # noqa: E731
        _refusal(get(), "history_max_changes", MAX_CHANGES)
        r = get(**{"limit": "1"})
        assert r.status_code == 503 and "gold.route_changes" in r.json()["error"], r.text
    finally:
        assert served.stop() == 0


def _publish_again(root: str, run_id: str) -> None:
    """A newer gold.publish_log row naming the same table versions under another run id (what a
    re-publish looks like to the shim), appended with delta-rs."""
    import deltalake
    import pyarrow as pa

    from nsreplay.history import latest_publish_row
    from nsreplay.storage import Warehouse, dataset
    from schemas.gold import PUBLISH_LOG

    warehouse = Warehouse(root, None, "delta-rs")
    row = latest_publish_row(warehouse)
    assert row is not None
    schema = dataset(PUBLISH_LOG, warehouse.files(PUBLISH_LOG)).schema
    row = {**row, "run_id": run_id, "published_ms": row["published_ms"] + 1}
    deltalake.write_deltalake(f"{root}/gold/publish_log", pa.Table.from_pylist([row], schema=schema), mode="append")


def test_a_page_of_a_run_no_longer_served_is_refused(demo_root, demo_index, capped_env, start_serve, tmp_path):
    """Pages carry the run they belong to: after a newer publish is picked up, the next link of a
    page of the old run answers 409 naming the run served, and the window asked again (without
    ``run``) answers from the new run."""
    root = tmp_path / "wh"
    shutil.copytree(demo_root, root)
    cov = demo_index.coverage()[0]
    served = start_serve(str(root), "--reload-interval", "0.2", env=capped_env)
    try:
        first = requests.get(served.url + _path("BenchmarkTest"), params={"namesrv": cov.namesrv, "limit": "2"}, timeout=30)
        link = _next(first)
        assert first.status_code == 200 and link is not None and _query(link)["run"] == demo_index.run_id
        assert requests.get(served.url + link, timeout=30).status_code == 200
        _publish_again(str(root), "demo-again")
        deadline = time.monotonic() + 60
        while requests.get(served.url + "/v1/namesrvs", timeout=10).json()[0]["run_id"] != "demo-again":
            assert time.monotonic() < deadline, "the shim did not pick up the new publish"
            time.sleep(0.1)
        r = requests.get(served.url + link, timeout=30)
        assert r.status_code == 409 and r.json()["run"] == "demo-again" and set(r.json()) == {"error", "run"}, r.text
        assert "demo-again" in r.json()["error"] and demo_index.run_id in r.json()["error"]
        again = requests.get(served.url + _path("BenchmarkTest"), params={"namesrv": cov.namesrv, "limit": "2"}, timeout=30)
        assert again.status_code == 200 and again.headers["X-Nsreplay-Run"] == "demo-again" and _query(_next(again))["run"] == "demo-again"
        assert again.json() == first.json()  # the same versions: the same history
    finally:
        assert served.stop() == 0


@pytest.mark.parametrize(
    "params, status, says",
    [
        ({"limit": "0"}, 400, "not a whole number from 1 to 5"),
        ({"limit": "-1"}, 400, "not a whole number from 1 to 5"),
        ({"limit": "6"}, 400, "[serve] history_max_changes = 5"),
        ({"limit": "1.5"}, 400, "not a whole number"),
        ({"limit": "abc"}, 400, "not a whole number"),
        ({"limit": "１"}, 400, "not a whole number"),
        ({"limit": "9" * 40}, 400, "not a whole number"),
        ({"limit": "1e3"}, 400, "not a whole number"),
        ({"limit": ""}, 400, "empty"),
        ({"run": ""}, 400, "empty"),
        ({"page": "2"}, 400, "unknown parameter 'page'"),
        ({"from": "2024-11-21T01:00:00Z", "to": "2024-11-21T00:00:00Z", "limit": "2"}, 400, "after"),
        ({"from": "1732154399848", "to": "1732147200000"}, 400, "after"),
        ({"from": "-5"}, 404, "outside the covered range"),
        ({"from": "-5", "to": "-1", "limit": "1"}, 404, "outside the covered range"),
        ({"to": "99999999999999999999"}, 404, "outside the covered range"),
        ({"from": "0", "to": "9999999999999", "limit": "5"}, 404, "outside the covered range"),
        ({"from": "1970-01-01T00:00:00Z", "to": "9999-12-31T23:59:59Z"}, 404, "outside the covered range"),
        ({"from": "bad", "limit": "1"}, 400, "not a time"),
        ({"run": "another-run"}, 409, "not the run served"),
    ],
)
def test_bad_or_absurd_parameters_answer_4xx(capped, demo_index, params, status, says):
    ns = demo_index.coverage()[0].namesrv
    r = capped(_path("BenchmarkTest"), params={"namesrv": ns, **params})
    assert r.status_code == status, r.text
    assert says in r.json()["error"], r.text


def test_a_repeated_limit_is_refused(capped, demo_index):
    r = capped(_path("BenchmarkTest") + f"?namesrv={demo_index.coverage()[0].namesrv}&limit=1&limit=2")
    assert r.status_code == 400 and "more than once" in r.json()["error"], r.text


def test_the_document_states_the_limits_of_the_shim(capped, demo_index):
    """/openapi.json gives the served limit as the largest ``limit``, the window headers, and the
    bodies of a refusal and of a 409, which real ones conform to."""
    import jsonschema

    doc = capped("/openapi.json").json()
    op = doc["paths"]["/v1/history/route/{topic}"]["get"]
    params = {p["name"]: p for p in op["parameters"]}
    assert params["limit"]["schema"] == {"type": "integer", "minimum": 1, "maximum": MAX_CHANGES}
    assert {"Link", "X-Nsreplay-From", "X-Nsreplay-To"} <= set(op["responses"]["200"]["headers"])
    assert {"$ref": "#/components/schemas/HistoryTooLong"} in op["responses"]["400"]["content"]["application/json"]["schema"]["anyOf"]
    assert op["responses"]["409"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/RunChanged"}
    schemas = doc["components"]["schemas"]
    assert set(schemas["HistoryTooLong"]["required"]) == FIELDS_OF_A_REFUSAL
    ns = demo_index.coverage()[0].namesrv
    refused = capped(_path("BenchmarkTest"), params={"namesrv": ns})
    conflict = capped(_path("BenchmarkTest"), params={"namesrv": ns, "run": "another-run"})
    assert (refused.status_code, conflict.status_code) == (400, 409)
    jsonschema.validate(refused.json(), schemas["HistoryTooLong"])
    jsonschema.validate(conflict.json(), schemas["RunChanged"])


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_the_capped_history_conforms_to_its_document(capped_server, mode):
    """schemathesis on the history operation of the capped shim (where refusals, pages and 409s are
    common): never a 5xx, every answer as documented (status, content type, body schema)."""
    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from schemathesis import GenerationMode

    schema = schemathesis.openapi.from_url(f"{capped_server.url}/openapi.json")
    [operation] = [r.ok() for r in schema.get_all_operations() if r.ok().label == "GET /v1/history/route/{topic}"]
    statuses: set[int] = set()

    @given(case=operation.as_strategy(generation_mode=GenerationMode(mode)))
    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True)
    def check(case) -> None:
        response = case.call_and_validate(base_url=capped_server.url, excluded_checks=[schemathesis.checks.positive_data_acceptance])
        assert response.status_code < 500
        statuses.add(response.status_code)

    check()
    assert statuses and max(statuses) < 500


@pytest.mark.parametrize(
    "serve, base_serve, says",
    [
        ("history_max_changes = 0", True, "[serve] history_max_changes must be a positive integer, not 0"),
        ("history_max_changes = 'many'", True, "[serve] history_max_changes must be a positive integer"),
        ("history_max_changes = 20\nhistory_max_examined = 10", True, "history_max_examined (10) must be at least history_max_changes (20)"),
        ("history_max_changes = 20", False, "[serve] history_max_examined is missing from the configuration"),
    ],
)
def test_bad_settings_stop_the_shim_with_a_one_line_reason(demo_root, tmp_path, serve, base_serve, says):
    env = _conf(tmp_path, serve, base_serve=base_serve)
    nsreplay = ROOT / ".venv" / "bin" / "nsreplay"
    command = [str(nsreplay)] if nsreplay.exists() else [sys.executable, "-m", "nsreplay.cli"]
    run = subprocess.run([*command, "serve", "--warehouse", demo_root, "--http-port", "0"], capture_output=True, text=True, timeout=60,
                         cwd=ROOT, env={**os.environ, **env})
    lines = run.stderr.splitlines()
    assert run.returncode == 1 and run.stdout == "", (run.stdout, run.stderr)
    assert len(lines) == 1 and ": ConfigError: " in lines[0] and says in lines[0], run.stderr
