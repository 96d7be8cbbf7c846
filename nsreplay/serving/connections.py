"""How many connections each endpoint of the shim holds at once.

Each open connection holds a file descriptor of the one serving process, which also needs descriptors
to read the published files when it reloads. Without a limit, connections anyone opens (and holds up
to the idle timeout) can use up every descriptor: then neither endpoint answers and a reload fails.
Each endpoint therefore holds at most :func:`connection_limit` connections; one over the limit is
closed as soon as it is accepted. The connections already held go on being served.

A connection is counted from the moment its protocol is made (:func:`capped`) until its connection is
lost, so connections accepted together — the event loop accepts up to a backlog of them in one go,
before any of them is connected — are counted one by one, and no burst gets past the limit.

Refusals are logged (:class:`Refusals`) in lines saying how many were refused since the last line: at
most one line every ``REFUSAL_LOG_INTERVAL_S``, and every refusal within one interval of being made,
even if no other follows it (and those not logged yet when ``nsreplay serve`` stops its HTTP endpoint:
:meth:`Refusals.flush`).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from typing import Callable

RESERVED_DESCRIPTORS = 256  # for the published files a reload reads, logs, the listening sockets
MIN_CONNECTIONS = 16
REFUSAL_LOG_INTERVAL_S = 10.0

log = logging.getLogger(__name__)


def connection_limit() -> int:
    """The connections one endpoint may hold: half of the descriptors the process may open (its soft
    ``RLIMIT_NOFILE``) after a reserve, so that the two endpoints together never take them all."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(MIN_CONNECTIONS, (soft - RESERVED_DESCRIPTORS) // 2)


class Refusals:
    """Counts the connections an endpoint refused and logs them.

    The first refusal after a line (or the first ever) schedules the next line, at the end of the
    current turn of the event loop or ``REFUSAL_LOG_INTERVAL_S`` after the last line, whichever is
    later; that line says how many were refused since the last one. So refusals made together (one
    burst of accepted connections) are one line, there is at most one line an interval, and no
    refusal waits longer than an interval to be logged. :meth:`flush` logs those not logged yet at
    once (the endpoint stops)."""

    def __init__(self, endpoint: str, limit: int) -> None:
        self.endpoint, self.limit = endpoint, limit
        self.count = 0
        self._unlogged = 0
        self._logged_at = float("-inf")
        self._pending: asyncio.TimerHandle | None = None

    def refuse(self, transport: asyncio.BaseTransport) -> None:
        """Close ``transport`` at once and count it (called on the endpoint's event loop)."""
        transport.abort()
        self.count += 1
        self._unlogged += 1
        if self._pending is None:
            loop = asyncio.get_running_loop()  # its clock is time.monotonic's
            self._pending = loop.call_at(max(loop.time(), self._logged_at + REFUSAL_LOG_INTERVAL_S), self.flush)

    def flush(self) -> None:
        """Log the refusals not logged yet (nothing when there are none) and cancel the line pending."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        if self._unlogged:
            log.warning("%s: %d connection(s) refused: %d open already, the limit", self.endpoint, self._unlogged, self.limit)
            self._unlogged, self._logged_at = 0, time.monotonic()


class _Refused(asyncio.Protocol):
    def __init__(self, refusals: Refusals) -> None:
        self._refusals = refusals

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._refusals.refuse(transport)


class _Held(asyncio.Protocol):
    """``inner``'s protocol, which it forwards every event to, counted in ``release``'s endpoint until
    its connection is lost."""

    def __init__(self, inner: asyncio.Protocol, release: Callable[[], None]) -> None:
        self._inner, self._release = inner, release

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        release, self._release = self._release, _nothing
        release()
        self._inner.connection_lost(exc)


def _nothing() -> None:
    pass


def capped(factory: Callable[[], asyncio.Protocol], refusals: Refusals) -> Callable[[], asyncio.Protocol]:
    """A protocol factory for ``loop.create_server``: ``factory``'s protocol while fewer than
    ``refusals.limit`` of its protocols are held, otherwise one that closes its connection at once
    (:meth:`Refusals.refuse`). A protocol is held from the moment it is made until its connection is
    lost: the count does not wait for ``connection_made``, which the event loop calls only after it
    made the protocols of every connection it accepted in one go."""
    held = 0

    def release() -> None:
        nonlocal held
        held -= 1

    def make() -> asyncio.Protocol:
        nonlocal held
        if held >= refusals.limit:
            return _Refused(refusals)
        held += 1
        return _Held(factory(), release)

    return make
