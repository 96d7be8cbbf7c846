"""What a connection may hold of the shim. Each endpoint closes connections that hold it without
asking anything: one that sends nothing, one that sends part of a request and stops, one left idle
after an answer (the remoting endpoint's own idle test is in test_remoting_edges.py). And each holds
at most a number of connections at once (``nsreplay.serving.connections``): one more is closed when
accepted while those held go on being served, so that connections anyone opens cannot use up the
process's file descriptors and stop both endpoints. The real ``serve`` runs here, in a thread of its
own, with the timeout shortened to a second and the limit lowered to a few connections."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
from typing import Iterator

from nsreplay.serving import connections, server
from nsreplay.serving.remoting_client import RemotingClient, question
from nsreplay.serving.remoting_server import RemotingServerThread
from test_remoting_fuzz import NS, SOURCE

GET = b"GET /v1/namesrvs HTTP/1.1\r\nHost: x\r\n\r\n"


def _closed_by_peer(sock: socket.socket, within: float) -> bool:
    """Whether the server closes ``sock`` within ``within`` seconds (whatever it sends first)."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if sock.recv(65536) == b"":
                return True
        except socket.timeout:
            continue
        except ConnectionError:
            return True
    return False


def _answered(sock: socket.socket) -> bool:
    sock.sendall(GET)
    sock.settimeout(5)
    return sock.recv(65536).startswith(b"HTTP/1.1 200")


def _answered_or_closed(sock: socket.socket) -> str:
    """"answered" when ``sock`` gets a 200 to a request, "closed" when the server closed it instead."""
    try:
        return "answered" if _answered(sock) else "closed"
    except ConnectionError:
        return "closed"


def _refusal_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == connections.__name__]


@contextlib.contextmanager
def _loop_busy(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """The server's event loop busy for the duration of the block: connections opened meanwhile wait
    in the listening socket's backlog and are accepted in one go when it ends, as in a burst."""
    busy, done = threading.Event(), threading.Event()
    loop.call_soon_threadsafe(lambda: busy.set() or done.wait(30))
    assert busy.wait(10), "the server's loop did not run"
    try:
        yield
    finally:
        done.set()


@contextlib.contextmanager
def _serving(root: str) -> Iterator[tuple[str, int]]:
    """``serve`` on a free port in a thread; yields (host, port)."""
    with _serving_on_loop(root) as (_, address):
        yield address


@contextlib.contextmanager
def _serving_on_loop(root: str) -> Iterator[tuple[asyncio.AbstractEventLoop, tuple[str, int]]]:
    """``serve`` on a free port in a thread; yields (its event loop, (host, port))."""
    ready: list[str] = []
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    options = server.ServeOptions(warehouse=root, http_port=0, reload_interval=0)
    thread = threading.Thread(target=loop.run_until_complete, args=(server.serve(options, stop=stop, on_ready=lambda s: ready.append(s.http_url)),))
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while not ready and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready, "serve did not start"
        host, port = ready[0].removeprefix("http://").rsplit(":", 1)
        yield loop, (host, int(port))
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(60)
        loop.close()


def test_idle_http_connections_are_closed_after_the_idle_timeout(demo_root, monkeypatch) -> None:
    monkeypatch.setattr(server, "HTTP_IDLE_TIMEOUT_S", 1.0)
    with _serving(demo_root) as address:
        silent, partial, answered = (socket.create_connection(address, timeout=5) for _ in range(3))
        partial.sendall(b"GET /v1/namesrvs HTTP/1.1\r\nHost: x\r\n")  # no blank line: never complete
        assert _answered(answered)
        closed = {name: _closed_by_peer(sock, 10) for name, sock in (("silent", silent), ("partial", partial), ("idle after an answer", answered))}
        assert closed == {"silent": True, "partial": True, "idle after an answer": True}

        busy = socket.create_connection(address, timeout=5)  # one in use is not closed: a request every half second
        assert all(_answered(busy) and time.sleep(0.5) is None for _ in range(5))
        for sock in (silent, partial, answered, busy):
            sock.close()


def test_http_holds_at_most_its_limit_of_connections(demo_root, monkeypatch) -> None:
    monkeypatch.setattr(connections, "connection_limit", lambda: 2)
    with _serving(demo_root) as address:
        first, second = (socket.create_connection(address, timeout=5) for _ in range(2))
        assert _answered(first) and _answered(second)
        third = socket.create_connection(address, timeout=5)
        assert _closed_by_peer(third, 5), "a connection over the limit is held"
        assert _answered(first) and _answered(second), "the connections held are no longer served"
        first.close()
        deadline = time.monotonic() + 5
        while True:  # the server sees the close a moment later
            fourth = socket.create_connection(address, timeout=5)
            try:
                if _answered(fourth):
                    break
            except (ConnectionError, socket.timeout):
                pass
            fourth.close()
            assert time.monotonic() < deadline, "a connection under the limit again is refused"
            time.sleep(0.1)
        for sock in (second, third, fourth):
            sock.close()


def test_http_counts_connections_accepted_in_one_go_and_logs_every_refusal(demo_root, monkeypatch, caplog) -> None:
    """Connections that arrive together are accepted together (the event loop accepts its whole
    backlog before any of them is connected): the limit holds for them too, in the order they came.
    Refusals made together are logged in one line; those after it within the log interval in one
    more line once the interval has passed, with no further refusal to prompt it."""
    monkeypatch.setattr(connections, "connection_limit", lambda: 4)
    monkeypatch.setattr(connections, "REFUSAL_LOG_INTERVAL_S", 1.0)
    caplog.set_level(logging.WARNING, logger=connections.__name__)
    with _serving_on_loop(demo_root) as (loop, address):
        with _loop_busy(loop):
            burst = [socket.create_connection(address, timeout=5) for _ in range(10)]
        assert [_answered_or_closed(sock) for sock in burst] == ["answered"] * 4 + ["closed"] * 6
        first_line = "http: 6 connection(s) refused: 4 open already, the limit"
        deadline = time.monotonic() + 0.5
        while not _refusal_lines(caplog) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _refusal_lines(caplog) == [first_line]

        late = [socket.create_connection(address, timeout=5) for _ in range(2)]
        assert all(_closed_by_peer(sock, 5) for sock in late)
        assert _refusal_lines(caplog) == [first_line], "logged again within the interval"
        deadline = time.monotonic() + 3
        while len(_refusal_lines(caplog)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _refusal_lines(caplog) == [first_line, "http: 2 connection(s) refused: 4 open already, the limit"]
        assert [_answered_or_closed(sock) for sock in burst[:4]] == ["answered"] * 4
        for sock in burst + late:
            sock.close()
    assert len(_refusal_lines(caplog)) == 2


def test_http_logs_refusals_not_logged_yet_when_it_stops(demo_root, monkeypatch, caplog) -> None:
    """Refusals since the last line, within the log interval (10 s), are logged when serve stops."""
    monkeypatch.setattr(connections, "connection_limit", lambda: 1)
    caplog.set_level(logging.WARNING, logger=connections.__name__)
    with _serving(demo_root) as address:
        held = socket.create_connection(address, timeout=5)
        assert _answered(held)
        refused = [socket.create_connection(address, timeout=5)]
        assert _closed_by_peer(refused[0], 5)
        first_line = "http: 1 connection(s) refused: 1 open already, the limit"
        deadline = time.monotonic() + 0.5
        while not _refusal_lines(caplog) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _refusal_lines(caplog) == [first_line]
        refused += [socket.create_connection(address, timeout=5) for _ in range(2)]
        assert all(_closed_by_peer(sock, 5) for sock in refused[1:])
        assert _refusal_lines(caplog) == [first_line]  # the next line is due 10 s after the first
        for sock in [held, *refused]:
            sock.close()
    assert _refusal_lines(caplog) == [first_line, "http: 2 connection(s) refused: 1 open already, the limit"]


def test_remoting_holds_at_most_its_limit_of_connections() -> None:
    with RemotingServerThread(lambda: SOURCE, namesrv=NS, as_of=None, max_connections=2) as endpoint:
        want = SOURCE.topics(NS, None, request_version=401).body
        first = RemotingClient.connect("127.0.0.1", endpoint.port, timeout=10)
        second = RemotingClient.connect("127.0.0.1", endpoint.port, timeout=10)
        assert first.request(question(206)).body == want and second.request(question(206)).body == want
        third = socket.create_connection(("127.0.0.1", endpoint.port), timeout=5)
        assert _closed_by_peer(third, 5), "a connection over the limit is held"
        assert first.request(question(206)).body == want, "a connection held is no longer served"
        first.close()
        deadline = time.monotonic() + 5
        while True:
            try:
                with RemotingClient.connect("127.0.0.1", endpoint.port, timeout=2) as fourth:
                    assert fourth.request(question(206)).body == want
                break
            except (ConnectionError, OSError, EOFError):
                assert time.monotonic() < deadline, "a connection under the limit again is refused"
                time.sleep(0.1)
        second.close()
        third.close()
