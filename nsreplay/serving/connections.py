"""How many connections each endpoint of the shim holds at once.

Each open connection holds a file descriptor of the one serving process, which also needs descriptors
to read the published files when it reloads. Without a limit, connections anyone opens (and holds up
to the idle timeout) can use up every descriptor: then neither endpoint answers and a reload fails.
Each endpoint therefore holds at most :func:`connection_limit` connections; one over the limit is
closed as soon as it is accepted, and the refusals are logged at most once every
``REFUSAL_LOG_INTERVAL_S``. The connections already held go on being served.
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
    """Counts the connections an endpoint refused and logs them, at most once an interval."""

    def __init__(self, endpoint: str, limit: int) -> None:
        self.endpoint, self.limit = endpoint, limit
        self.count = 0
        self._unlogged = 0
        self._logged_at = float("-inf")

    def refuse(self, transport: asyncio.BaseTransport) -> None:
        transport.abort()
        self.count += 1
        self._unlogged += 1
        now = time.monotonic()
        if now - self._logged_at >= REFUSAL_LOG_INTERVAL_S:
            log.warning("%s: %d connection(s) refused: %d open already, the limit", self.endpoint, self._unlogged, self.limit)
            self._unlogged, self._logged_at = 0, now


class _Refused(asyncio.Protocol):
    def __init__(self, refusals: Refusals) -> None:
        self._refusals = refusals

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._refusals.refuse(transport)


def capped(factory: Callable[[], asyncio.BaseProtocol], open_now: Callable[[], int], refusals: Refusals) -> Callable[[], asyncio.BaseProtocol]:
    """A protocol factory for ``loop.create_server``: ``factory``'s protocol while fewer than
    ``refusals.limit`` connections are open (``open_now``), otherwise one that closes at once."""

    def make() -> asyncio.BaseProtocol:
        if open_now() >= refusals.limit:
            return _Refused(refusals)
        return factory()

    return make
