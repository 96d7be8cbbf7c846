"""The shim's remoting endpoint: a read-only, time-travelling NameServer (interfaces spec §3).

:func:`start_remoting_server` listens for RocketMQ remoting frames (:mod:`nsreplay.serving.remoting`)
and answers, for one NameServer ``namesrv``, what it would have answered at one instant:

* the instant is the request's extField ``asOf`` (ISO-8601 or epoch ms) when present and non-empty,
  else the server's ``as_of``, else (``None``) the latest published state;
* GET_ROUTEINFO_BY_TOPIC (105, extField ``topic``) → SUCCESS with the TopicRouteData (standard JSON for
  request version ≥ 401 or extField ``acceptStandardJsonOnly`` ``true``, legacy shape otherwise), or
  TOPIC_NOT_EXIST (17) with the NameServer's remark; a 105 without any extFields is TOPIC_NOT_EXIST
  for the topic "null", as the NameServer checks no header field then;
* GET_BROKER_CLUSTER_INFO (106) and GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206) → SUCCESS with the body;
* every other request code → REQUEST_CODE_NOT_SUPPORTED (3), remark naming the code and what is served;
* SYSTEM_ERROR (1) when the question cannot be answered: a bad ``asOf`` (remark ``bad asOf: …``), an
  instant outside the covered range or an unknown NameServer (remark ``no history there: …`` with the
  covered range), a 105 whose extFields have no ``topic``, an answer too large for a frame, or a
  failing source;
* oneway requests (flag bit 1) get no response, whatever their code; frames that are themselves
  responses (flag bit 0) are ignored.

A response echoes the request's opaque, sets flag bit 0, is written in the request's serialize type and
carries language ``JAVA`` and the version the NameServer stamps on its responses
(:func:`response_version` of its profile at the instant asked about; see there).

Connections are independent asyncio tasks; requests on one connection are answered in order. A frame
that cannot be decoded (:class:`~nsreplay.serving.remoting.FrameError`: bad or oversized length,
malformed header) closes that connection only, as does :data:`IDLE_TIMEOUT_S` without a byte, or
with an answer the peer does not read (unsent answers are dropped). At most ``max_connections``
connections are held at once (:mod:`nsreplay.serving.connections`); one more is closed when accepted.
Nothing a client sends reaches the source except the three questions: the endpoint cannot change state.

``get_source()`` is called once per request, so a newer publish swapped in by the caller is used from
the next request on. The source is called on the event loop: it is expected to answer from memory (the
shim's index); a slow source (:class:`~nsreplay.serving.source.HistorySource`) stays correct but
serializes requests.

:class:`RemotingServerThread` runs the endpoint on its own loop in a background thread for synchronous
callers (tests, benchmarks).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Callable, Coroutine, TypeVar

from nsreplay.history import OutsideCoverageError
from nsreplay.model import PROFILE_5, PROFILE_49, Answer, ResponseCode
from nsreplay.model.render import STANDARD_JSON_MIN_VERSION
from nsreplay.protocol.mq_version import release_version
from nsreplay.runtime import UsageError, parse_time
from nsreplay.serving import connections
from nsreplay.serving.remoting import (
    EncodeError,
    FrameError,
    RemotingCommand,
    decode_payload,
    encode_frame,
    frame_length,
    response_to,
)
from nsreplay.serving.source import RouteSource

__all__ = [
    "GET_ROUTEINFO_BY_TOPIC",
    "GET_BROKER_CLUSTER_INFO",
    "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
    "SUPPORTED_CODES",
    "PROFILE_RELEASES",
    "UNKNOWN_NAMESRV_VERSION",
    "response_version",
    "IDLE_TIMEOUT_S",
    "answer_request",
    "start_remoting_server",
    "RemotingServerThread",
]

GET_ROUTEINFO_BY_TOPIC = 105
GET_BROKER_CLUSTER_INFO = 106
GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
SUPPORTED_CODES = (GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO, GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
#: The release whose version a NameServer of each profile answers with: the releases the semantics spec
#: was read off (see :func:`response_version`).
PROFILE_RELEASES = {PROFILE_49: "4.9.4", PROFILE_5: "5.3.3"}
#: The version of answers for a NameServer the source does not cover (V4_9_4): no NameServer sends
#: them, the shim does when it serves a name it has no history for.
UNKNOWN_NAMESRV_VERSION = release_version(PROFILE_RELEASES[PROFILE_49])
IDLE_TIMEOUT_S = 120.0  # like the NameServer's all-idle channel timeout

RequestObserver = Callable[[RemotingCommand], None]
T = TypeVar("T")
log = logging.getLogger(__name__)


def response_version(profile: str) -> int:
    """The ``version`` a NameServer of semantics profile ``profile`` puts in every response.

    A NameServer stamps its own ``MQVersion.CURRENT_VERSION`` on its responses
    (:mod:`nsreplay.protocol.mq_version`), so the exact value depends on its release. The published
    tables keep only the profile of each NameServer run (``gold.namesrv_epochs.profile``), not the
    ``rocketmq_version`` of its start record, so the shim answers with the release the semantics
    spec was read off for that profile (:data:`PROFILE_RELEASES`): 401 (V4_9_4) for ``rocketmq-4.9``,
    479 (V5_3_3) for ``rocketmq-5``. A NameServer of another 4.9.x or 5.x release sent its own
    number instead. Raises KeyError for an unknown profile."""
    return release_version(PROFILE_RELEASES[profile])


def _server_version(source: RouteSource, namesrv: str, t: int | None) -> int:
    """The version of ``namesrv``'s responses at ``t``: its profile's there; for an instant it has no
    state at (outside the covered range), its profile at the end of the covered range; for a
    NameServer the source does not know, :data:`UNKNOWN_NAMESRV_VERSION`."""
    for instant in (t, None) if t is not None else (None,):
        try:
            return response_version(source.profile(namesrv, instant))
        except OutsideCoverageError:
            continue
        except Exception:  # a failing source is reported where the answer is asked for
            log.exception("remoting: source failed to name the profile of %s", namesrv)
            break
    return UNKNOWN_NAMESRV_VERSION


def _instant(request: RemotingCommand, as_of: int | None) -> int | None:
    text = request.ext("asOf")
    if text is None or text.strip() == "":
        return as_of
    return parse_time(text)


def answer_request(request: RemotingCommand, source: RouteSource, *, namesrv: str,
                   as_of: int | None) -> RemotingCommand | None:
    """The response to one decoded request (``None`` for oneway requests and stray responses)."""
    if request.is_oneway or request.is_response:
        return None
    try:
        t, bad_as_of = _instant(request, as_of), None
    except UsageError as exc:
        t, bad_as_of = as_of, exc
    version = _server_version(source, namesrv, t)

    def error(code: int, remark: str) -> RemotingCommand:
        return response_to(request, code, remark=remark, version=version)

    if request.code not in SUPPORTED_CODES:
        return error(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                     f"request code {request.code} not supported: this is a read-only NameServer replaying "
                     f"{namesrv}, it answers 105 (route), 106 (cluster info) and 206 (topic list)")
    if bad_as_of is not None:
        return error(ResponseCode.SYSTEM_ERROR, f"bad asOf: {bad_as_of}")
    try:
        if request.code == GET_ROUTEINFO_BY_TOPIC:
            topic = request.ext("topic")
            if topic is None and request.ext_fields is not None:  # the header's @CFNotNull check fails
                return error(ResponseCode.SYSTEM_ERROR, "GET_ROUTEINFO_BY_TOPIC needs extField 'topic'")
            # without any extFields Java checks no header field: the topic is null, and not found
            # extField acceptStandardJsonOnly "true" (Boolean.parseBoolean: any case) asks for standard
            # JSON whatever the version, in 4.9.4 as in 5.x
            standard_only = (request.ext("acceptStandardJsonOnly") or "").lower() == "true"
            asked = max(request.version, STANDARD_JSON_MIN_VERSION) if standard_only else request.version
            answer: Answer = source.route(namesrv, topic, t, request_version=asked)
        elif request.code == GET_BROKER_CLUSTER_INFO:
            answer = source.cluster(namesrv, t, request_version=request.version)
        else:
            answer = source.topics(namesrv, t, request_version=request.version)
    except OutsideCoverageError as exc:
        return error(ResponseCode.SYSTEM_ERROR, f"no history there: {exc}")
    except Exception as exc:  # a failing source must not take the endpoint down
        log.exception("remoting: source failed on code %s", request.code)
        return error(ResponseCode.SYSTEM_ERROR, f"internal error: {type(exc).__name__}: {exc}")
    return response_to(request, answer.code, body=answer.body, remark=answer.remark, version=version)


def _encode_response(request: RemotingCommand, response: RemotingCommand) -> bytes:
    try:
        return encode_frame(response)
    except EncodeError as exc:
        return encode_frame(response_to(request, ResponseCode.SYSTEM_ERROR, remark=f"answer cannot be sent: {exc}",
                                        version=response.version))


async def start_remoting_server(
    get_source: Callable[[], RouteSource],
    *,
    host: str = "127.0.0.1",
    port: int,
    namesrv: str,
    as_of: int | None,
    on_request: RequestObserver | None = None,
    max_connections: int | None = None,
) -> asyncio.Server:
    """Start listening on ``host:port`` (0 = any free port; see ``server.sockets``) and return the
    started :class:`asyncio.Server` (see module docstring). ``on_request``, when given, is called with
    every decoded frame before it is answered (tests use it to see what real clients asked).
    ``max_connections``: the connections held at once (None: :func:`~nsreplay.serving.connections.connection_limit`)."""
    refusals = connections.Refusals("remoting", max_connections or connections.connection_limit())
    held = 0

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal held
        if held >= refusals.limit:
            refusals.refuse(writer.transport)
            return
        held += 1
        try:
            await _converse(reader, writer)
        finally:
            held -= 1

    async def _converse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        try:
            while True:
                try:
                    prefix = await asyncio.wait_for(reader.readexactly(4), IDLE_TIMEOUT_S)
                except asyncio.IncompleteReadError as exc:
                    if exc.partial:
                        log.info("remoting: %s closed inside a length prefix", peer)
                    return
                total = frame_length(prefix)
                payload = await asyncio.wait_for(reader.readexactly(total), IDLE_TIMEOUT_S)
                request = decode_payload(payload)
                if on_request is not None:
                    on_request(request)
                response = answer_request(request, get_source(), namesrv=namesrv, as_of=as_of)
                if response is not None:
                    writer.write(_encode_response(request, response))
                    # a peer that stops reading must not hold the connection forever (Netty's all-idle)
                    await asyncio.wait_for(writer.drain(), IDLE_TIMEOUT_S)
        except FrameError as exc:
            log.info("remoting: closing %s: %s: %s", peer, type(exc).__name__, exc)
        except asyncio.IncompleteReadError:
            log.info("remoting: %s closed inside a frame", peer)
        except (asyncio.TimeoutError, TimeoutError):
            log.info("remoting: closing %s: idle for %.0f s", peer, IDLE_TIMEOUT_S)
            writer.transport.abort()  # answers a non-reading peer left unsent would keep it open
        except (ConnectionError, OSError) as exc:
            log.info("remoting: %s: %s", peer, exc)
        except asyncio.CancelledError:
            pass  # the server is shutting down; end this connection quietly
        except Exception:  # never let one connection's surprise reach the server
            log.exception("remoting: unexpected error on %s", peer)
        finally:
            writer.close()
        try:
            await writer.wait_closed()
        except (Exception, asyncio.CancelledError):
            pass

    return await asyncio.start_server(connection, host, port)


class RemotingServerThread:
    """The endpoint on a private event loop in a daemon thread, for synchronous callers (tests,
    benchmarks)::

        with RemotingServerThread(lambda: source, namesrv="10.0.0.10:9876", as_of=None) as server:
            RemotingClient.connect("127.0.0.1", server.port).route("orders")

    ``port=0`` picks a free port (``server.port`` once entered). :meth:`run` runs a coroutine on the
    server's loop (e.g. to start a companion asyncio server). Leaving the block stops the server,
    cancels its connections and joins the thread."""

    def __init__(self, get_source: Callable[[], RouteSource], *, namesrv: str, as_of: int | None,
                 host: str = "127.0.0.1", port: int = 0, on_request: RequestObserver | None = None,
                 max_connections: int | None = None) -> None:
        self._args = dict(host=host, port=port, namesrv=namesrv, as_of=as_of, on_request=on_request, max_connections=max_connections)
        self._get_source = get_source
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="nsreplay-remoting", daemon=True)
        self.server: asyncio.Server | None = None
        self.port = 0

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        """Run ``coro`` on the server's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def __enter__(self) -> "RemotingServerThread":
        self._thread.start()
        try:
            self.server = self.run(start_remoting_server(self._get_source, **self._args))  # type: ignore[arg-type]
        except BaseException:
            self._stop_loop()
            raise
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.run(self._shutdown())
        finally:
            self._stop_loop()

    async def _shutdown(self) -> None:
        if self.server is not None:
            self.server.close()
        me = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not me]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _stop_loop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()
