"""``nsreplay serve``: the HTTP API (and, with ``--remoting-port``, the remoting endpoint) on one
asyncio event loop, over the latest published run of a warehouse.

    nsreplay serve --warehouse DIR [--http-port 8080] [--host 127.0.0.1]
                   [--remoting-port 9876 --namesrv ADDR --as-of TIME] [--reload-interval 5]

* Startup: read the ``[serve]`` settings (:mod:`nsreplay.serving.config`; a bad one → a one-line
  error, exit 1, before the warehouse is read), index the latest published run
  (:class:`RouteIndex`; nothing published → a one-line error, exit 1), check
  ``--namesrv``/``--as-of`` against its coverage, listen, print one line saying what is served.
* Reload: every ``--reload-interval`` seconds the ``gold.publish_log`` version is read; when it
  changed and the latest publish names another run or other table versions (a compaction of the
  publish log changes its version, not its latest row), a new index is built in a worker thread
  and then swapped in with one reference assignment. The new index reuses the rows the served one
  holds from files still part of the published versions and reads only the files added since
  (``RouteIndex.load(previous=...)``): a window's reload costs the window, not the history; the
  line it prints says what was read, kept, and read whole (and why). Requests take the reference
  once, so those in flight finish on the old index and none is dropped; a failed rebuild is
  reported on stderr and the old index keeps serving.
* SIGINT/SIGTERM: stop listening, finish, exit 0.
* A request aiohttp cannot parse (a line too long, a bad header, a method that is not one) is
  answered 400 and logged on stderr as one line, without aiohttp's traceback: it is the client's
  error, and a scanner sending junk must not fill the log with tracebacks. A failure of nsreplay's
  own handlers keeps its traceback.
* Connections: each endpoint holds at most :func:`~nsreplay.serving.connections.connection_limit`
  connections; one more is closed when accepted, and refusals are logged
  (:mod:`nsreplay.serving.connections`); the HTTP endpoint's not logged yet are logged when it stops.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from nsreplay.history import latest_publish_row
from nsreplay.runtime import UsageError, format_ms
from nsreplay.serving import connections
from nsreplay.serving.config import ServeConfig, load_serve_config
from nsreplay.serving.http_api import make_app
from nsreplay.serving.index import RouteIndex
from nsreplay.storage import Warehouse
from schemas.gold import PUBLISH_LOG

__all__ = ["IndexHolder", "ServeOptions", "Served", "publish_version", "run", "serve"]


# A connection that sends no request (or only part of one), or stays idle after an answer, is closed
# after this long, as the remoting endpoint closes an idle peer (aiohttp's default is an hour: idle
# connections opened by anyone would hold the process's file descriptors, both endpoints' and the
# reloads', that long).
HTTP_IDLE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class ServeOptions:
    warehouse: str
    host: str = "127.0.0.1"
    http_port: int = 8080
    remoting_port: int | None = None
    namesrv: str | None = None
    as_of: int | None = None
    reload_interval: float = 5.0
    #: The ``[serve]`` limits; None: read from the configuration (conf/base + conf/<env>) at start.
    config: ServeConfig | None = None


class _MalformedRequestsOnOneLine(logging.Filter):
    """Turns aiohttp's record of a request it could not parse into one warning line (see the module
    docstring); every other record passes unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            reason = " ".join(str(exc.message).split())[:200]
            record.msg, record.args = f"nsreplay serve: answered {exc.code} to a malformed request: %s (%s)", (record.getMessage(), reason)
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


class _MalformedRequestsLogged(logging.LoggerAdapter[logging.Logger]):
    """What aiohttp's request handlers log through: as the logger, except that a request it could
    not parse that aiohttp logs at debug level (a bad method in a connection's first request: noise
    from non-HTTP clients to aiohttp) is logged like every other one (then made one line by
    :class:`_MalformedRequestsOnOneLine`)."""

    def debug(self, msg: object, *args: Any, **kwargs: Any) -> None:
        if isinstance(kwargs.get("exc_info"), HttpProcessingError):
            self.error(msg, *args, **kwargs)
        else:
            super().debug(msg, *args, **kwargs)


#: The logger of aiohttp's request handlers in ``nsreplay serve``.
HTTP_SERVER_LOG = logging.getLogger("nsreplay.serving.http")
HTTP_SERVER_LOG.addFilter(_MalformedRequestsOnOneLine())
_HTTP_HANDLERS_LOG = _MalformedRequestsLogged(HTTP_SERVER_LOG, {})


def publish_version(root: str) -> int | None:
    """The latest version of ``gold.publish_log`` (None when there is no such table)."""
    return Warehouse(root, None, "delta-rs").version(PUBLISH_LOG)


class IndexHolder:
    """The index currently served; ``get`` is the ``get_source`` both front ends call per request."""

    def __init__(self, root: str, index: RouteIndex, version: int | None) -> None:
        self.root = root
        self.index = index
        self.version = version
        self.reloads = 0

    def get(self) -> RouteIndex:
        return self.index

    @classmethod
    def load(cls, root: str) -> "IndexHolder":
        version = publish_version(root)  # read first: a publish during the build is seen next poll
        return cls(root, RouteIndex.load(root), version)

    async def poll(self) -> bool:
        """Rebuild off the event loop if a newer publish exists; True when the index was swapped."""
        version = await asyncio.to_thread(publish_version, self.root)
        if version == self.version:
            return False
        if await asyncio.to_thread(self._serves_latest):
            self.version = version
            return False
        index = await asyncio.to_thread(RouteIndex.load, self.root, previous=self.index)
        self.version = version
        if index.run_id == self.index.run_id and index.versions == self.index.versions:
            return False
        self.index = index  # the atomic swap
        self.reloads += 1
        print(f"nsreplay serve: now serving {index.describe()} (index built in {index.build_seconds:.1f} s, {_how_built(index)})", file=sys.stderr, flush=True)
        return True

    def _serves_latest(self) -> bool:
        """Whether the latest publish row names the run and table versions served (one small read)."""
        row = latest_publish_row(Warehouse(self.root, None, "delta-rs"))
        return row is not None and row["run_id"] == self.index.run_id and dict(row["table_versions"]) == self.index.versions

    async def watch(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.poll()
            except Exception as exc:  # noqa: BLE001 - keep serving the old index
                print(f"nsreplay serve: reload failed, still serving run {self.index.run_id}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)


def _how_built(index: RouteIndex) -> str:
    """What a reload read: e.g. ``read 3 files, kept 120 (41,200 rows)``, and the tables read whole and why."""
    loads = index.loads.values()
    merged = [load for load in loads if not load.full]
    text = f"read {sum(len(load.files_read) for load in loads)} files, kept {sum(load.files_kept for load in merged)} ({sum(load.rows_kept for load in merged):,} rows)"
    whole = [f"{name}: {load.reason}" for name, load in index.loads.items() if load.full and load.reason]
    return text + ("; read whole: " + "; ".join(whole) if whole else "")


@dataclass
class Served:
    """What :func:`serve` started (given to ``on_ready``)."""

    holder: IndexHolder
    http_url: str
    remoting_address: str | None
    line: str


def _check_remoting(options: ServeOptions, index: RouteIndex) -> tuple[str, int | None]:
    covered = {c.namesrv: c for c in index.coverage()}
    namesrv = options.namesrv
    if namesrv is None:
        if len(covered) != 1:
            raise UsageError(f"--remoting-port needs --namesrv: the warehouse covers {len(covered)} NameServers ({', '.join(sorted(covered))})")
        namesrv = next(iter(covered))
    if namesrv not in covered:
        raise UsageError(f"--namesrv {namesrv}: not in the published run {index.run_id}; known: {', '.join(sorted(covered)) or 'none'}")
    if options.as_of is not None:
        index.check(namesrv, options.as_of)  # OutsideRangeError names the range
    return namesrv, options.as_of


async def _start_remoting(holder: IndexHolder, options: ServeOptions, namesrv: str, as_of: int | None) -> asyncio.AbstractServer:
    try:
        from nsreplay.serving.remoting_server import start_remoting_server
    except ImportError as exc:  # the remoting endpoint is a separate module
        raise UsageError(f"--remoting-port: the remoting endpoint is not available in this installation ({exc})") from exc
    return await start_remoting_server(holder.get, host=options.host, port=options.remoting_port or 0, namesrv=namesrv, as_of=as_of)


async def serve(options: ServeOptions, *, stop: asyncio.Event | None = None, on_ready: Callable[[Served], Awaitable[None] | None] | None = None) -> None:
    """Serve until ``stop`` is set (or the task is cancelled). ``http_port=0`` picks a free port."""
    config = options.config or load_serve_config()  # ConfigError before the index is built
    holder = await asyncio.to_thread(IndexHolder.load, options.warehouse)
    index = holder.index
    remoting = _check_remoting(options, index) if options.remoting_port is not None else None
    stop = stop or asyncio.Event()

    runner = web.AppRunner(make_app(holder.get, config), access_log=None, handle_signals=False, logger=_HTTP_HANDLERS_LOG,
                           keepalive_timeout=HTTP_IDLE_TIMEOUT_S)
    await runner.setup()
    http_server: asyncio.AbstractServer | None = None
    remoting_server: asyncio.AbstractServer | None = None
    watcher: asyncio.Task[None] | None = None
    refusals = connections.Refusals("http", connections.connection_limit())
    try:
        # aiohttp's protocol factory behind a limit of open connections (nsreplay.serving.connections)
        handlers = runner.server
        assert handlers is not None
        factory = connections.capped(handlers, refusals)
        http_server = await asyncio.get_running_loop().create_server(factory, options.host, options.http_port, reuse_address=True)
        port = http_server.sockets[0].getsockname()[1]
        host = options.host if ":" not in options.host else f"[{options.host}]"
        http_url = f"http://{host}:{port}"
        remoting_address = None
        if remoting is not None:
            remoting_server = await _start_remoting(holder, options, *remoting)
            rport = remoting_server.sockets[0].getsockname()[1]
            remoting_address = f"{host}:{rport}"
        ranges = ", ".join(f"{c.namesrv} {format_ms(c.from_ts)}..{format_ms(c.to_ts)}" for c in index.coverage())
        line = f"nsreplay serve: run {index.run_id}; NameServers {ranges}; HTTP {http_url}/v1/ (OpenAPI {http_url}/openapi.json)"
        if remoting is not None:
            line += f"; remoting {remoting_address} as {remoting[0]} at {format_ms(remoting[1]) if remoting[1] is not None else 'the latest state'}"
        line += f"; index built in {index.build_seconds:.1f} s"
        print(line, flush=True)
        if options.reload_interval > 0:
            watcher = asyncio.create_task(holder.watch(options.reload_interval))
        if on_ready is not None:
            result = on_ready(Served(holder, http_url, remoting_address, line))
            if asyncio.iscoroutine(result):
                await result
        await stop.wait()
    finally:
        if watcher is not None:
            watcher.cancel()
        if remoting_server is not None:
            remoting_server.close()
        if http_server is not None:
            http_server.close()
        refusals.flush()
        await runner.cleanup()


def run(options: ServeOptions) -> int:
    """Serve until SIGINT/SIGTERM; 0 on a clean stop."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await serve(options, stop=stop)

    asyncio.run(main())
    print("nsreplay serve: stopped", file=sys.stderr, flush=True)
    return 0
