"""A tiny RocketMQ remoting client for the three read-only NameServer questions (tests, benchmarks).

    with RemotingClient.connect("127.0.0.1", 9876) as ns:          # blocking
        reply = ns.route("orders", version=121, as_of="2024-11-21T03:12:05Z")
        reply.answer()                                              # nsreplay.model.Answer

    async with await AsyncRemotingClient.connect("127.0.0.1", 9876) as ns:   # asyncio, pipelined
        replies = await asyncio.gather(*(ns.route(t) for t in topics))

Both send GET_ROUTEINFO_BY_TOPIC (105), GET_BROKER_CLUSTER_INFO (106) and
GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206) — or any :class:`RemotingCommand` via ``request`` — with the
header in either serialize type (``serialize_type=JSON`` or ``ROCKETMQ``), an optional ``asOf`` extField
(epoch ms or ISO-8601) and the client ``version`` to claim (401 = standard JSON answers, below = legacy).
Each request gets a fresh opaque; a response is matched to its request by opaque. A connection that
closes before the answer raises :class:`ConnectionClosed`.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
from dataclasses import replace
from typing import Mapping

from nsreplay.model import Answer
from nsreplay.serving.remoting import (
    FLAG_ONEWAY,
    JSON,
    RemotingCommand,
    decode_payload,
    encode_frame,
    frame_length,
)

__all__ = ["ConnectionClosed", "question", "answer_of", "RemotingClient", "AsyncRemotingClient"]

DEFAULT_VERSION = 401


class ConnectionClosed(ConnectionError):
    """The server closed the connection before answering."""


def question(code: int, *, topic: str | None = None, as_of: int | str | None = None, version: int = DEFAULT_VERSION,
             serialize_type: int = JSON, opaque: int = 0, oneway: bool = False, language: str = "JAVA",
             ext: Mapping[str, str] | None = None) -> RemotingCommand:
    """A request command: extFields ``topic`` and ``asOf`` when given, plus ``ext``."""
    fields = dict(ext or {})
    if topic is not None:
        fields["topic"] = topic
    if as_of is not None:
        fields["asOf"] = str(as_of)
    return RemotingCommand(code=code, language=language, version=version, opaque=opaque,
                           flag=FLAG_ONEWAY if oneway else 0, ext_fields=fields or None,
                           serialize_type=serialize_type)


def answer_of(response: RemotingCommand) -> Answer:
    """A response as the model's :class:`Answer` (code, body, remark) for comparisons."""
    return Answer(response.code, response.body, response.remark)


class RemotingClient:
    """Blocking client: one request in flight at a time."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._opaques = itertools.count(1)

    @classmethod
    def connect(cls, host: str, port: int, timeout: float = 30.0) -> "RemotingClient":
        return cls(socket.create_connection((host, port), timeout=timeout))

    def __enter__(self) -> "RemotingClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def send(self, cmd: RemotingCommand) -> int:
        """Send ``cmd`` with a fresh opaque (no waiting); returns that opaque."""
        opaque = next(self._opaques)
        self._sock.sendall(encode_frame(_with_opaque(cmd, opaque)))
        return opaque

    def request(self, cmd: RemotingCommand) -> RemotingCommand:
        """Send ``cmd`` and return the response with the same opaque."""
        opaque = self.send(cmd)
        while True:
            response = self.receive()
            if response.opaque == opaque and response.is_response:
                return response

    def receive(self) -> RemotingCommand:
        """The next frame from the server."""
        return decode_payload(self._read(frame_length(self._read(4))))

    def _read(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self._sock.recv(n - len(chunks))
            if not chunk:
                raise ConnectionClosed(f"connection closed after {len(chunks)} of {n} bytes")
            chunks += chunk
        return bytes(chunks)

    def route(self, topic: str, **kw: object) -> RemotingCommand:
        return self.request(question(105, topic=topic, **kw))  # type: ignore[arg-type]

    def cluster(self, **kw: object) -> RemotingCommand:
        return self.request(question(106, **kw))  # type: ignore[arg-type]

    def topics(self, **kw: object) -> RemotingCommand:
        return self.request(question(206, **kw))  # type: ignore[arg-type]


class AsyncRemotingClient:
    """asyncio client: requests may be pipelined; a reader task routes responses by opaque."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._opaques = itertools.count(1)
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def connect(cls, host: str, port: int) -> "AsyncRemotingClient":
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    async def __aenter__(self) -> "AsyncRemotingClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._task.cancel()
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError):
            pass

    async def _read_loop(self) -> None:
        error: Exception = ConnectionClosed("connection closed before the answer")
        try:
            while True:
                total = frame_length(await self._reader.readexactly(4))
                response = decode_payload(await self._reader.readexactly(total))
                future = self._pending.pop(response.opaque, None)
                if future is not None and not future.done():
                    future.set_result(response)
        except asyncio.IncompleteReadError:
            pass
        except Exception as exc:
            error = exc
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()

    async def request(self, cmd: RemotingCommand) -> RemotingCommand:
        """Send ``cmd`` with a fresh opaque and wait for its response."""
        if self._task.done():
            raise ConnectionClosed("connection is closed")
        opaque = next(self._opaques)
        future: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._pending[opaque] = future
        self._writer.write(encode_frame(_with_opaque(cmd, opaque)))
        await self._writer.drain()
        return await future

    async def route(self, topic: str, **kw: object) -> RemotingCommand:
        return await self.request(question(105, topic=topic, **kw))  # type: ignore[arg-type]

    async def cluster(self, **kw: object) -> RemotingCommand:
        return await self.request(question(106, **kw))  # type: ignore[arg-type]

    async def topics(self, **kw: object) -> RemotingCommand:
        return await self.request(question(206, **kw))  # type: ignore[arg-type]


def _with_opaque(cmd: RemotingCommand, opaque: int) -> RemotingCommand:
    return replace(cmd, opaque=opaque)
