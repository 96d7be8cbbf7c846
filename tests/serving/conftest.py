"""Fixtures of the serving-shim tests: the demo warehouse (tests/conftest.py) indexed once, its
oracle (HistorySource), instants worth checking, and a real ``nsreplay serve`` process on it."""

from __future__ import annotations

import os
import random
import re
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

import pytest

ROOT = Path(__file__).resolve().parents[2]
NSREPLAY = str(ROOT / ".venv" / "bin" / "nsreplay") if (ROOT / ".venv" / "bin" / "nsreplay").exists() else None

# causes of changes that are not the steady heartbeat: expiries, restarts, promotions, admin edits...
INCIDENT_CAUSES = ("namesrv_restart", "channel_closed", "expired", "unregistered", "admin")


@dataclass
class Served:
    """A running ``nsreplay serve`` subprocess."""

    process: subprocess.Popen
    url: str
    line: str

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                return self.process.wait()
        return self.process.returncode


def start_serve(root: str, *extra: str, timeout: float = 60.0, env: Mapping[str, str] | None = None) -> Served:
    """Start ``nsreplay serve --warehouse root --http-port 0 ...`` and wait for its startup line
    (``env``: variables added to the environment, e.g. ``NSREPLAY_CONF_DIR``/``NSREPLAY_ENV``)."""
    command = [NSREPLAY] if NSREPLAY else [sys.executable, "-m", "nsreplay.cli"]
    process = subprocess.Popen(
        [*command, "serve", "--warehouse", root, "--http-port", "0", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if selector.select(timeout=0.5):
            line = process.stdout.readline()
            match = re.search(r"HTTP (http://\S+?)/v1/", line)
            if match:
                return Served(process, match.group(1), line.strip())
            if not line and process.poll() is not None:
                break
        elif process.poll() is not None:
            break
    process.kill()
    raise RuntimeError(f"nsreplay serve did not start: {process.stderr.read()[-2000:]}")


@pytest.fixture(scope="session")
def demo_root(request) -> str:
    """The demo warehouse root: the session's ``demo_published`` (built through the real pipeline),
    or, for quick local iterations on the shim alone, an already published demo warehouse named by
    ``NSREPLAY_SERVING_TEST_WAREHOUSE`` (then no Spark starts)."""
    return os.environ.get("NSREPLAY_SERVING_TEST_WAREHOUSE") or request.getfixturevalue("demo_published")[1]


@pytest.fixture(scope="session")
def demo_index(demo_root):
    from nsreplay.serving.index import RouteIndex

    return RouteIndex.load(demo_root)


@pytest.fixture(scope="session")
def demo_oracle(demo_root):
    from nsreplay.serving.source import HistorySource

    return HistorySource(demo_root)


def _table(root: str, spec):
    from nsreplay.history import PublishedHistory
    from nsreplay.storage import Warehouse, dataset

    history = PublishedHistory(root)
    return dataset(spec, Warehouse(root, None, "delta-rs").files(spec, history.versions[spec.name])).to_table()


@pytest.fixture(scope="session")
def demo_instants(demo_root, demo_index) -> dict[str, list[int]]:
    """Per NameServer: t-1, t, t+1 around every (re)start (gold.namesrv_epochs), a few scan ticks that
    expired brokers (gold.scan_ticks.removals) and a few changes of every (table, cause) of
    gold.route_changes that is not a heartbeat (expiries, channel closes, unregistrations, restarts,
    admin edits, and every BrokerData change: promotions), plus random instants and both ends of the
    covered range."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from schemas.gold import NAMESRV_EPOCHS, ROUTE_CHANGES, SCAN_TICKS

    changes = _table(demo_root, ROUTE_CHANGES)
    incidents = changes.filter(pc.or_(pc.is_in(changes.column("cause"), value_set=pa.array(INCIDENT_CAUSES)),
                                      pc.equal(changes.column("table"), "brokerAddrTable")))
    epochs = _table(demo_root, NAMESRV_EPOCHS)
    ticks = _table(demo_root, SCAN_TICKS)
    ticks = ticks.filter(pc.greater(ticks.column("removals"), 0))
    rnd = random.Random(20241121)
    out: dict[str, list[int]] = {}
    for cov in demo_index.coverage():
        ns = cov.namesrv
        mine = incidents.filter(pc.equal(incidents.column("namesrv"), ns)).select(["ts", "table", "cause"]).to_pylist()
        by_kind: dict[tuple[str, str], list[int]] = {}
        for r in mine:
            by_kind.setdefault((r["table"], r["cause"]), []).append(r["ts"])
        centres = set(epochs.filter(pc.equal(epochs.column("namesrv"), ns)).column("start_ts").to_pylist())  # (re)starts
        removal_ticks = sorted(set(ticks.filter(pc.equal(ticks.column("namesrv"), ns)).column("tick_ts").to_pylist()))
        centres |= set(rnd.sample(removal_ticks, min(2, len(removal_ticks))))  # expiries
        for times in by_kind.values():  # a few of every kind of change (promotions: brokerAddrTable)
            distinct = sorted(set(times))
            centres |= set(rnd.sample(distinct, min(2, len(distinct))))
        centres = sorted(centres)
        instants = {t + d for t in centres for d in (-1, 0, 1)}
        instants |= {rnd.randint(cov.from_ts, cov.to_ts) for _ in range(8)}
        instants |= {cov.from_ts, cov.to_ts}
        out[ns] = sorted(t for t in instants if cov.from_ts <= t <= cov.to_ts)
    return out


@pytest.fixture(scope="session")
def demo_topics(demo_root) -> dict[str, list[str]]:
    """Per NameServer: every topic it ever had a route for, plus one that never existed."""
    import pyarrow.compute as pc

    from schemas.gold import TOPIC_QUEUE_INTERVALS

    table = _table(demo_root, TOPIC_QUEUE_INTERVALS)
    out = {}
    for ns in set(table.column("namesrv").to_pylist()):
        out[ns] = sorted(set(table.filter(pc.equal(table.column("namesrv"), ns)).column("topic").to_pylist())) + ["no-such-topic-%"]
    return out


@pytest.fixture(scope="session", name="start_serve")
def start_serve_fixture():
    """:func:`start_serve`, for tests that start their own server."""
    return start_serve


@pytest.fixture(scope="session")
def demo_server(demo_root) -> Iterator[Served]:
    """``nsreplay serve`` on the demo warehouse (no reloads), for the whole session."""
    served = start_serve(demo_root, "--reload-interval", "0")
    yield served
    assert served.stop() == 0
