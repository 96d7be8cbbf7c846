"""A running ``nsreplay serve`` picks up a newer publish without dropping a request: while a client
keeps asking, another run is replayed and published into the warehouse it serves; every request
succeeds, and afterwards the server reports the new run and answers from it."""

from __future__ import annotations

import threading
import time

import pytest
import requests

from nsreplay.model import ResponseCode, same_answer
from nsreplay.serving.source import HistorySource


@pytest.fixture(scope="module")
def tiny_root(tiny_published, tmp_path_factory) -> str:
    from published import own_copy

    return own_copy(tiny_published, tmp_path_factory.mktemp("tiny-serve"))[1]  # the test publishes into it


class Client(threading.Thread):
    """Keeps requesting routes, the cluster and the NameServer list; records every failure."""

    def __init__(self, url: str, namesrv: str, topics: list[str]) -> None:
        super().__init__(daemon=True)
        self.url, self.namesrv, self.topics = url, namesrv, topics
        self.stop = threading.Event()
        self.failures: list[str] = []
        self.done = 0
        self.run_ids: set[str] = set()

    def run(self) -> None:
        session = requests.Session()
        paths = [f"/v1/route/{t}" for t in self.topics] + ["/v1/cluster", "/v1/topics"]
        i = 0
        while not self.stop.is_set():
            path = paths[i % len(paths)]
            i += 1
            try:
                r = session.get(self.url + path, params={"namesrv": self.namesrv}, timeout=10)
                if not (r.status_code == 200 or (r.status_code == 404 and r.json().get("code") == ResponseCode.TOPIC_NOT_EXIST)):
                    self.failures.append(f"{path}: {r.status_code} {r.text[:200]}")
                self.run_ids.add(r.headers.get("X-Nsreplay-Run", "?"))
            except Exception as exc:  # noqa: BLE001 - any failure is what this test looks for
                self.failures.append(f"{path}: {type(exc).__name__}: {exc}")
            self.done += 1
        session.close()


def test_reload_swaps_the_index_without_dropping_requests(spark, tiny_root, start_serve):
    from nsreplay.config import load_settings
    from nsreplay.storage import Warehouse
    from pipelines.replay.run import run_replay

    old = HistorySource(tiny_root)
    namesrv = old.coverage()[0].namesrv
    served = start_serve(tiny_root, "--reload-interval", "0.2")
    try:
        topics = [t for t in ("TBW102", "no-such-topic")] + [t for t in old.topics(namesrv, None, request_version=401).parsed()["topicList"][:3]]
        client = Client(served.url, namesrv, topics)
        client.start()
        time.sleep(0.5)
        before = client.done
        result = run_replay(spark, Warehouse(tiny_root, spark, "delta-rs"), load_settings(), "tiny-serve-replay-2")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            runs = {r["run_id"] for r in requests.get(served.url + "/v1/namesrvs", timeout=10).json()}
            if runs == {result.run_id}:
                break
            time.sleep(0.1)
        time.sleep(0.3)  # the client keeps going on the new index too
        client.stop.set()
        client.join(timeout=30)
        assert runs == {result.run_id}, "the server did not pick up the new publish"
        assert client.failures == []
        assert client.done > before > 0
        assert client.run_ids == {old.run_id, result.run_id}
        new = HistorySource(tiny_root)
        assert new.run_id == result.run_id != old.run_id
        for topic in topics:
            r = requests.get(f"{served.url}/v1/route/{topic}", params={"namesrv": namesrv}, timeout=10)
            assert r.headers["X-Nsreplay-Run"] == result.run_id
            want = new.route(namesrv, topic, None, request_version=401)
            if want.code == ResponseCode.SUCCESS:
                assert r.status_code == 200 and same_answer(r.content, want.body) and r.content == want.body
            else:
                assert r.status_code == 404 and r.json()["remark"] == want.remark
    finally:
        assert served.stop() == 0
    assert "now serving run " + result.run_id in served.process.stderr.read()


def test_a_compacted_publish_log_is_not_taken_for_a_new_publish(windowed, tmp_path, monkeypatch):
    """`nsreplay compact` rewrites `gold.publish_log` (a new version, the same latest row): the server
    notices the version, finds the run and table versions it serves, and builds no index."""
    import asyncio
    import shutil

    from nsreplay.compaction import LEDGER_TABLES, LedgerPolicy, compact_ledgers
    from nsreplay.serving import server
    from nsreplay.storage import Warehouse
    from schemas.gold import PUBLISH_LOG

    root = str(tmp_path / "wh")
    shutil.copytree(windowed[0], root)
    holder = server.IndexHolder.load(root)
    warehouse = Warehouse(root, None, "delta-rs")
    assert len(warehouse.files(PUBLISH_LOG)) == 3  # one a window: the compaction below merges them
    done = compact_ledgers(warehouse, LedgerPolicy(target_bytes=8 << 20, row_group_rows=100), dry_run=False, run_id="compact",
                           tables=[t for t in LEDGER_TABLES if t[0] is PUBLISH_LOG])
    assert len(done[0].result.removed[0]) == 3 and len(warehouse.files(PUBLISH_LOG)) == 1
    assert server.publish_version(root) != holder.version

    def no_rebuild(*args, **kwargs):
        raise AssertionError("the index was rebuilt for the same publish")

    monkeypatch.setattr(server.RouteIndex, "load", no_rebuild)
    served = holder.get()
    assert asyncio.run(holder.poll()) is False
    assert (holder.get(), holder.reloads, holder.version) == (served, 0, server.publish_version(root))
