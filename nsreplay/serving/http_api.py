"""The shim's HTTP API (interfaces.md §2) on aiohttp: read-only JSON over a :class:`RouteIndex`.

    app = make_app(lambda: holder.index)      # the current index; swapped atomically on reload
    web.run_app(app, host="127.0.0.1", port=8080, access_log=None)

Contract (the OpenAPI document in :mod:`nsreplay.serving.openapi` is the detailed one):

* GET/HEAD only (others: 405), nothing is ever written;
* bad parameters → 400 ``{"error": ...}``; unknown NameServer, instant outside the covered range,
  unknown path or table → 404 ``{"error": ...}``; a topic without a route → 404 with the
  NameServer's own ``{"code": 17, "remark": ...}``;
* every handler runs behind one guard (:func:`_guard`), so no input can produce a 5xx; published
  files that cannot be read (the broker-live table, read per request) → 503, an operational fault;
* each request takes the index reference once and answers from it, so a reload never changes
  an answer half way;
* ``/v1/tables`` and ``/v1/history`` answer from a worker thread: a read of the broker-live table's
  files or a long history never holds up the route lookups on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Awaitable, Callable, Mapping

import orjson
from aiohttp import web

from nsreplay.history import OutsideCoverageError
from nsreplay.model import ResponseCode
from nsreplay.runtime import UsageError, format_ms, parse_time
from nsreplay.serving.index import RouteIndex, UnknownTableError
from nsreplay.serving.openapi import HISTORY_PARAMS, ROUTE_PARAMS, openapi_document
from nsreplay.serving.stored import StoredReadError

__all__ = ["BadRequest", "make_app"]

log = logging.getLogger(__name__)

_JSON = "application/json"
_STANDARD = 401  # answer as to a client of version >= 401: standard JSON
IndexGetter = Callable[[], RouteIndex]


class BadRequest(ValueError):
    """A request parameter is wrong (400); the message says which and why."""


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(status=status, body=orjson.dumps({"error": message}), content_type=_JSON, headers=headers)


def _ok(body: bytes, index: RouteIndex, at: int | None = None, status: int = 200) -> web.Response:
    headers = {"X-Nsreplay-Run": index.run_id}
    if at is not None:
        headers["X-Nsreplay-At"] = str(at)
    return web.Response(status=status, body=body, content_type=_JSON, charset="utf-8", headers=headers)


def _query(request: web.Request, allowed: tuple[str, ...]) -> dict[str, str]:
    """The query parameters, each at most once, non-empty, and among ``allowed``."""
    query = request.query
    if not query:
        return {}
    out: dict[str, str] = {}
    for name, value in query.items():
        if name not in allowed:
            accepted = ", ".join(allowed) or "none"
            raise BadRequest(f"unknown parameter {name!r} (accepted: {accepted})")
        if name in out:
            raise BadRequest(f"parameter {name!r} given more than once")
        if not value.strip():
            raise BadRequest(f"parameter {name!r} is empty")
        out[name] = value
    return out


# A "+" written as is in a query string is decoded as a space (form encoding), so
# "?at=2024-11-21T05:40:00+05:30" arrives as "2024-11-21T05:40:00 05:30". A space followed by
# hh[:mm] right after a time of day can only be such an offset: read it back as "+hh[:mm]".
_PLUS_OFFSET = re.compile(r"^(\d{4}-?\d{2}-?\d{2}[Tt ]\d{2}(?::?\d{2}(?::?\d{2}(?:[.,]\d+)?)?)?) (\d{2}(?::?\d{2})?)$")


def _time(params: Mapping[str, str], name: str) -> int | None:
    text = params.get(name)
    if text is None:
        return None
    text = _PLUS_OFFSET.sub(r"\1+\2", text.strip())
    if not text.isascii():
        raise BadRequest(f"{name}: not a time: {text[:100]!r} (ASCII ISO-8601 or epoch milliseconds only)")
    try:
        return parse_time(text)
    except (UsageError, ValueError, OverflowError, OSError) as exc:
        raise BadRequest(f"{name}: not a time: {text[:100]!r} (use ISO-8601 like 2024-11-21T03:12:05Z, or epoch milliseconds)") from exc


def _namesrv(index: RouteIndex, params: Mapping[str, str]) -> str:
    name = params.get("namesrv")
    if name is not None:
        return name
    covered = index.coverage()
    if len(covered) == 1:
        return covered[0].namesrv
    raise BadRequest(f"parameter 'namesrv' is required: this warehouse covers {len(covered)} NameServers ({', '.join(c.namesrv for c in covered)})")


def _text(value: str, what: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadRequest(f"{what} is not valid UTF-8") from exc
    return value


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Map every failure to a JSON answer: 400 bad parameter, 404 not covered/unknown, 405 method,
    aiohttp's own 4xx as they are, 503 when published files cannot be read (logged); anything
    unexpected is logged and answered 500 (a bug)."""
    try:
        return await handler(request)
    except BadRequest as exc:
        return _error(400, str(exc))
    except (OutsideCoverageError, UnknownTableError) as exc:
        return _error(404, str(exc))
    except web.HTTPMethodNotAllowed as exc:
        return _error(405, f"method {request.method} not allowed: the API is read-only (GET, HEAD)", {"Allow": ", ".join(sorted(exc.allowed_methods))})
    except web.HTTPNotFound:
        return _error(404, f"no such endpoint: {request.path[:200]} (see /openapi.json)")
    except web.HTTPException as exc:
        if exc.status >= 500:
            raise
        return _error(exc.status, exc.reason or "bad request")
    except StoredReadError as exc:  # an operational fault (a vacuum, storage), not the request's
        log.warning("answering %s: %s", request.path, exc)
        return _error(503, str(exc))
    except (UnicodeError, ValueError) as exc:  # undecodable query strings and the like
        return _error(400, f"bad request: {exc}"[:300])
    except Exception:  # noqa: BLE001 - the last resort; a bug, never the client's fault
        log.exception("internal error answering %s", request.path)
        return _error(500, "internal error (logged by the server)")


def make_app(get_index: IndexGetter) -> web.Application:
    """The aiohttp application answering from ``get_index()`` (called once per request)."""
    documents: dict[str, bytes] = {}

    def document(index: RouteIndex) -> bytes:
        """The OpenAPI document with examples from the run served (built once per run)."""
        if index.run_id not in documents:
            covered = index.coverage()
            instants = [format_ms(c.from_ts + (c.to_ts - c.from_ts) // 3) for c in covered[:1]] + [str(c.to_ts) for c in covered[:1]]
            topics = sorted({t for c in covered for t in index.topic_names(c.namesrv)})[:3]
            documents.clear()
            documents[index.run_id] = orjson.dumps(openapi_document(namesrvs=[c.namesrv for c in covered], instants=instants, topics=topics))
        return documents[index.run_id]

    async def namesrvs(request: web.Request) -> web.Response:
        index = get_index()
        _query(request, ())
        body = [
            {"namesrv": c.namesrv, "from": c.from_ts, "to": c.to_ts, "from_iso": format_ms(c.from_ts), "to_iso": format_ms(c.to_ts),
             "profile": c.profile, "run_id": index.run_id}
            for c in index.coverage()
        ]
        return _ok(orjson.dumps(body), index)

    async def route(request: web.Request) -> web.Response:
        index = get_index()
        params = _query(request, ROUTE_PARAMS)
        namesrv = _namesrv(index, params)
        t = index.check(namesrv, _time(params, "at"))
        topic = _text(request.match_info["topic"], "topic")
        answer = index.route(namesrv, topic, t, request_version=_STANDARD, shape="standard")
        if answer.code == ResponseCode.SUCCESS and answer.body is not None:
            return _ok(answer.body, index, t)
        return _ok(orjson.dumps({"code": answer.code, "remark": answer.remark}), index, t, status=404)

    async def cluster(request: web.Request) -> web.Response:
        index = get_index()
        params = _query(request, ROUTE_PARAMS)
        namesrv = _namesrv(index, params)
        t = index.check(namesrv, _time(params, "at"))
        answer = index.cluster(namesrv, t, request_version=_STANDARD, shape="standard")
        return _ok(answer.body or b"{}", index, t)

    async def topics(request: web.Request) -> web.Response:
        index = get_index()
        params = _query(request, ROUTE_PARAMS)
        namesrv = _namesrv(index, params)
        t = index.check(namesrv, _time(params, "at"))
        answer = index.topics(namesrv, t, request_version=_STANDARD, shape="standard")
        return _ok(answer.body or b'{"topicList":[]}', index, t)

    async def tables(request: web.Request) -> web.Response:
        index = get_index()
        params = _query(request, ROUTE_PARAMS)
        namesrv = _namesrv(index, params)
        table = _text(request.match_info["table"], "table")
        # off the event loop: the broker-live table is read from storage (tens of ms), and the route
        # lookups of other clients must not wait for it
        t, tick, rows = await asyncio.to_thread(index.table_rows, namesrv, table, _time(params, "at"))
        body = {"namesrv": namesrv, "table": table, "at": t, "tick": tick, "run_id": index.run_id, "rows": rows}
        return _ok(orjson.dumps(body), index, t)

    async def history(request: web.Request) -> web.Response:
        index = get_index()
        params = _query(request, HISTORY_PARAMS)
        namesrv = _namesrv(index, params)
        topic = _text(request.match_info["topic"], "topic")
        t_from, t_to = _time(params, "from"), _time(params, "to")
        if t_from is not None and t_to is not None and t_from > t_to:
            raise BadRequest(f"from ({t_from}) is after to ({t_to})")
        changes = await asyncio.to_thread(index.route_history, namesrv, topic, t_from, t_to)  # a long range renders many answers
        body = [
            {"ts": c.ts, "time": format_ms(c.ts), "tick_ts": c.tick_ts, "code": c.answer.code,
             "route": orjson.Fragment(c.answer.body) if c.answer.code == ResponseCode.SUCCESS and c.answer.body else None,
             "changes": list(c.changes)}
            for c in changes
        ]
        return _ok(orjson.dumps(body), index)

    async def openapi_json(request: web.Request) -> web.Response:
        index = get_index()
        _query(request, ())
        return web.Response(body=document(index), content_type=_JSON)

    app = web.Application(middlewares=[_guard])
    app.router.add_get("/v1/namesrvs", namesrvs)
    app.router.add_get("/v1/route/{topic}", route)
    app.router.add_get("/v1/cluster", cluster)
    app.router.add_get("/v1/topics", topics)
    app.router.add_get("/v1/tables/{table}", tables)
    app.router.add_get("/v1/history/route/{topic}", history)
    app.router.add_get("/openapi.json", openapi_json)
    return app
