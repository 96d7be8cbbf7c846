"""What a connection may hold of the shim. Each endpoint closes connections that hold it without
asking anything: one that sends nothing, one that sends part of a request and stops, one left idle
after an answer (the remoting endpoint's own idle test is in test_remoting_edges.py). And each holds
at most a number of connections at once (``nsreplay.serving.connections``): one more is closed when
accepted while those held go on being served, so that connections anyone opens cannot use up the
process's file descriptors and stop both endpoints. The real ``serve`` runs here, in a thread of its
own, with the timeout shortened to a second and the limit lowered to two."""

from __future__ import annotations

import asyncio
import contextlib
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


@contextlib.contextmanager
def _serving(root: str) -> Iterator[tuple[str, int]]:
    """``serve`` on a free port in a thread; yields (host, port)."""
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
        yield host, int(port)
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
