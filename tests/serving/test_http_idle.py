"""The HTTP endpoint closes connections that hold it without asking anything, as the remoting endpoint
does (tests/serving/test_remoting_edges.py): one that sends nothing, one that sends part of a request
and stops, one left idle after an answer. Until this was set, aiohttp kept each for an hour, so idle
connections anyone opened could use up the process's file descriptors and stop both endpoints. The
real ``serve`` runs here, in a thread of its own, with the timeout shortened to a second."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

from nsreplay.serving import server


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


def test_idle_http_connections_are_closed_after_the_idle_timeout(demo_root, monkeypatch) -> None:
    monkeypatch.setattr(server, "HTTP_IDLE_TIMEOUT_S", 1.0)
    ready: list[str] = []
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    options = server.ServeOptions(warehouse=demo_root, http_port=0, reload_interval=0)
    thread = threading.Thread(target=loop.run_until_complete, args=(server.serve(options, stop=stop, on_ready=lambda s: ready.append(s.http_url)),))
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while not ready and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready, "serve did not start"
        host, port = ready[0].removeprefix("http://").rsplit(":", 1)

        def connect() -> socket.socket:
            return socket.create_connection((host, int(port)), timeout=5)

        silent, partial, answered = connect(), connect(), connect()
        partial.sendall(b"GET /v1/namesrvs HTTP/1.1\r\nHost: x\r\n")  # no blank line: never complete
        answered.sendall(b"GET /v1/namesrvs HTTP/1.1\r\nHost: x\r\n\r\n")
        answered.settimeout(5)
        assert answered.recv(65536).startswith(b"HTTP/1.1 200")
        closed = {name: _closed_by_peer(sock, 10) for name, sock in (("silent", silent), ("partial", partial), ("idle after an answer", answered))}
        assert closed == {"silent": True, "partial": True, "idle after an answer": True}

        busy = connect()  # a connection in use is not closed: a request every half second, for 2.5 s
        for _ in range(5):
            busy.sendall(b"GET /v1/namesrvs HTTP/1.1\r\nHost: x\r\n\r\n")
            busy.settimeout(5)
            assert busy.recv(65536).startswith(b"HTTP/1.1 200")
            time.sleep(0.5)
        for sock in (silent, partial, answered, busy):
            sock.close()
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(60)
        loop.close()
