"""A minimal loopback broker for the C++ client test: just enough of a broker for ``send_sync`` to succeed.

Every request it receives is recorded (:attr:`LoopbackBroker.requests`). SEND_MESSAGE (10) and
SEND_MESSAGE_V2 (310) are answered SUCCESS with the extFields a broker's SendMessageResponseHeader
carries (``msgId``, ``queueId``, ``queueOffset``); every other request (heartbeats, UNREGISTER_CLIENT 35,
…) is answered SUCCESS with no body; oneway requests get nothing. It stores nothing.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass, field

from nsreplay.serving.remoting import FrameError, RemotingCommand, decode_payload, encode_frame, frame_length, response_to

SEND_MESSAGE = 10
SEND_MESSAGE_V2 = 310
SEND_CODES = (SEND_MESSAGE, SEND_MESSAGE_V2)


@dataclass
class LoopbackBroker:
    """Serves on ``listening`` (a bound, listening socket the caller owns and keeps open) from :meth:`start`
    to :meth:`stop`; ``requests`` lists what arrived. The caller holds the socket so that the port stays
    reserved between brokers: a port picked free and released can be taken meanwhile as any connection's
    ephemeral port, and then the broker cannot bind it."""

    listening: socket.socket
    requests: list[RemotingCommand] = field(default_factory=list)
    _server: asyncio.Server | None = None
    _offset: int = 0

    @property
    def port(self) -> int:
        return self.listening.getsockname()[1]

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def codes(self) -> list[int]:
        return [r.code for r in self.requests]

    def sent_topics(self) -> list[str | None]:
        """The topic of every message sent to this broker (SEND_MESSAGE header ``topic`` or V2's ``b``)."""
        return [r.ext("topic") or r.ext("b") for r in self.requests if r.code in SEND_CODES]

    async def start(self) -> None:
        # A duplicate descriptor: closing the server closes it, not the caller's reservation.
        self._server = await asyncio.start_server(self._connection, sock=self.listening.dup())

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def _answer(self, request: RemotingCommand) -> RemotingCommand:
        if request.code in SEND_CODES:
            self._offset += 1
            msg_id = f"7F000001{self.port:08X}{self._offset:016X}"
            ext = {"msgId": msg_id, "queueId": request.ext("queueId") or request.ext("e") or "0",
                   "queueOffset": str(self._offset)}
            return RemotingCommand(code=0, opaque=request.opaque, flag=1, ext_fields=ext,
                                   serialize_type=request.serialize_type)
        return response_to(request, 0)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                total = frame_length(await reader.readexactly(4))
                request = decode_payload(await reader.readexactly(total))
                self.requests.append(request)
                if not request.is_oneway and not request.is_response:
                    writer.write(encode_frame(self._answer(request)))
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, FrameError):
            pass
        finally:
            writer.close()
