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
* ``/v1/history/route/{topic}`` is bounded by :class:`~nsreplay.serving.config.ServeConfig`: a
  window whose answer would hold more than ``history_max_changes`` changes (or need more than
  ``history_max_examined`` instants examined) is refused 400 with the setting, its value and the
  URL of the first page, before any file is read; with ``limit=N`` the request pages: 200 with the
  changes of ``[from, X-Nsreplay-To]`` (every one of them: a page is the whole answer of that
  window) and ``Link: <next>; rel="next"`` while the window goes on. Every history answer says the
  window it answers whole (``X-Nsreplay-From``, ``X-Nsreplay-To``). A ``run`` other than the run
  served (a page of a run since replaced by a newer publish) → 409, never a page of another run.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
from typing import Any, Awaitable, Callable, Iterable, Mapping

import orjson
from aiohttp import web

from nsreplay.history import OutsideCoverageError
from nsreplay.model import ResponseCode
from nsreplay.runtime import UsageError, format_ms, parse_time
from nsreplay.serving.config import ServeConfig, load_serve_config
from nsreplay.serving.index import STOPPED_BY_CHANGES, STOPPED_BY_EXAMINED, HistoryPage, HistoryTooLongError, RouteIndex, UnknownTableError
from nsreplay.serving.openapi import HISTORY_PARAMS, ROUTE_PARAMS, openapi_document
from nsreplay.storage.stored_table import StoredReadError

__all__ = ["BadRequest", "RunChanged", "example_topics", "make_app"]

log = logging.getLogger(__name__)

_JSON = "application/json"
_STANDARD = 401  # answer as to a client of version >= 401: standard JSON
#: The topic of ``/v1/route/{topic}`` and ``/v1/history/route/{topic}``: one non-empty path segment,
#: percent-decoded, any character but an unencoded "/" ("%2F" is part of the segment), as the
#: OpenAPI document says (``^[^/]+$``). aiohttp's default for ``{topic}`` (``[^{}/]+``) would also
#: refuse "{" and "}", and a topic may hold any character.
_TOPIC_SEGMENT = "{topic:[^/]+}"
#: The longest topic (UTF-8 bytes) the OpenAPI document offers as an example: percent-encoded, its
#: path stays far below aiohttp's request-line limit (8190 bytes).
_EXAMPLE_TOPIC_MAX_BYTES = 200


def example_topics(topics: Iterable[str], count: int = 3) -> list[str]:
    """The first ``count`` of ``topics`` in sorted order that the path parameter ``{topic}`` can
    carry as the OpenAPI document describes it (``minLength: 1``, ``^[^/]+$``) and a request line
    can hold (:data:`_EXAMPLE_TOPIC_MAX_BYTES`): the examples the document gives. Any topic may be
    asked for; an empty one, one with "/" or a very long one only makes a poor example."""
    usable = (t for t in sorted(set(topics)) if t and "/" not in t and len(t.encode("utf-8")) <= _EXAMPLE_TOPIC_MAX_BYTES)
    return list(itertools.islice(usable, count))
IndexGetter = Callable[[], RouteIndex]


class BadRequest(ValueError):
    """A request parameter is wrong (400); the message says which and why, ``details`` are further
    fields of the JSON answer (e.g. how to ask instead)."""

    def __init__(self, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details: Mapping[str, Any] = details or {}


class RunChanged(LookupError):
    """The request names a run (``run``) other than the run served (409): the page it continues
    belongs to a history since replaced by a newer publish. ``details``: ``{"run": served run}``."""

    def __init__(self, message: str, details: Mapping[str, Any]) -> None:
        super().__init__(message)
        self.details = details


def _error(status: int, message: str, headers: Mapping[str, str] | None = None, details: Mapping[str, Any] | None = None) -> web.Response:
    return web.Response(status=status, body=orjson.dumps({"error": message, **(details or {})}), content_type=_JSON, headers=headers)


def _ok(body: bytes, index: RouteIndex, at: int | None = None, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    out = {"X-Nsreplay-Run": index.run_id, **(headers or {})}
    if at is not None:
        out["X-Nsreplay-At"] = str(at)
    return web.Response(status=status, body=body, content_type=_JSON, charset="utf-8", headers=out)


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


def _limit(params: Mapping[str, str], most: int) -> int | None:
    """The ``limit`` parameter (None when absent): a whole number from 1 to ``most``, else 400."""
    text = params.get("limit")
    if text is None:
        return None
    digits = text.strip()
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 12 and 1 <= int(digits) <= most):
        raise BadRequest(f"limit: {text[:40]!r} is not a whole number from 1 to {most} "
                         f"(the most changes one answer holds: [serve] history_max_changes = {most})")
    return int(digits)


def _check_run(index: RouteIndex, params: Mapping[str, str]) -> None:
    """Raise RunChanged when the request names a run (``run``) other than the one served."""
    run = params.get("run")
    if run is not None and _text(run, "run") != index.run_id:
        raise RunChanged(
            f"run {run[:100]!r} is not the run served ({index.run_id!r}: a newer publish replaces the run served, and its history "
            "may differ), so pages of the two runs may not join: ask the window again from its start (run omitted, or this one)",
            {"run": index.run_id},
        )


#: The ``[serve]`` setting that bounds each reason a route history stops (HistoryTooLongError.stopped_by).
_SETTING_OF = {STOPPED_BY_CHANGES: "history_max_changes", STOPPED_BY_EXAMINED: "history_max_examined"}


def _too_long(exc: HistoryTooLongError, first_page: str) -> BadRequest:
    """The 400 for a window that cannot be answered in one answer: the setting met and its value,
    the URL of the first page (``first_page``) and the end of the longest head of the window that
    one answer holds (``fits_to``)."""
    setting = _SETTING_OF[exc.stopped_by]
    what = "route changes" if exc.stopped_by == STOPPED_BY_CHANGES else "instants at which the route may change (to examine)"
    message = (
        f"the window {format_ms(exc.start)} .. {format_ms(exc.end)} holds more {what} than one answer may "
        f"([serve] {setting} = {exc.limit}): page through it with limit (first_page; each page's Link header "
        f"rel=\"next\" names the next), or ask a narrower window (to={exc.through} fits)"
    )
    return BadRequest(message, {"setting": setting, "value": exc.limit, "first_page": first_page, "fits_to": exc.through})


def _history_url(request: web.Request, namesrv: str, start: int, end: int, limit: int | None, run: str) -> str:
    """This request's path asking the window ``[start, end]`` (epoch ms) of ``namesrv`` from ``run``,
    ``limit`` changes a page (None: the whole window), as a URL relative to the server."""
    query = [("namesrv", namesrv), ("from", str(start)), ("to", str(end))]
    if limit is not None:
        query.append(("limit", str(limit)))
    query.append(("run", run))
    return str(request.rel_url.with_query(query))


def _history_body(page: HistoryPage) -> bytes:
    return orjson.dumps([
        {"ts": c.ts, "time": format_ms(c.ts), "tick_ts": c.tick_ts, "code": c.answer.code,
         "route": orjson.Fragment(c.answer.body) if c.answer.code == ResponseCode.SUCCESS and c.answer.body else None,
         "changes": list(c.changes)}
        for c in page.changes
    ])


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Map every failure to a JSON answer: 400 bad parameter (or a window beyond the limits), 404 not
    covered/unknown, 405 method, 409 a run no longer served, aiohttp's own 4xx as they are, 503 when
    published files cannot be read (logged); anything unexpected is logged and answered 500 (a bug)."""
    try:
        return await handler(request)
    except BadRequest as exc:
        return _error(400, str(exc), details=exc.details)
    except RunChanged as exc:
        return _error(409, str(exc), details=exc.details)
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


def make_app(get_index: IndexGetter, config: ServeConfig | None = None) -> web.Application:
    """The aiohttp application answering from ``get_index()`` (called once per request), within the
    limits of ``config`` (default: :func:`~nsreplay.serving.config.load_serve_config`)."""
    limits = config or load_serve_config()
    documents: dict[str, bytes] = {}

    def document(index: RouteIndex) -> bytes:
        """The OpenAPI document with examples from the run served (built once per run)."""
        if index.run_id not in documents:
            covered = index.coverage()
            instants = [format_ms(c.from_ts + (c.to_ts - c.from_ts) // 3) for c in covered[:1]] + [str(c.to_ts) for c in covered[:1]]
            topics = example_topics(t for c in covered for t in index.topic_names(c.namesrv))
            documents.clear()
            documents[index.run_id] = orjson.dumps(openapi_document(namesrvs=[c.namesrv for c in covered], instants=instants, topics=topics,
                                                                    run_id=index.run_id, history_max_changes=limits.history_max_changes))
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
        limit = _limit(params, limits.history_max_changes)
        _check_run(index, params)
        try:  # a worker thread: a long window renders many answers and reads the change rows
            page = await asyncio.to_thread(
                index.route_history_page, namesrv, topic, t_from, t_to,
                max_changes=limit or limits.history_max_changes, max_examined=limits.history_max_examined, whole=limit is None,
            )
        except HistoryTooLongError as exc:
            first_page = _history_url(request, namesrv, exc.start, exc.end, limits.history_max_changes, index.run_id)
            raise _too_long(exc, first_page) from None
        headers = {"X-Nsreplay-From": str(page.start), "X-Nsreplay-To": str(page.through)}
        if not page.complete:
            headers["Link"] = f'<{_history_url(request, namesrv, page.through + 1, page.end, limit, index.run_id)}>; rel="next"'
        return _ok(_history_body(page), index, headers=headers)

    async def openapi_json(request: web.Request) -> web.Response:
        index = get_index()
        _query(request, ())
        return web.Response(body=document(index), content_type=_JSON)

    app = web.Application(middlewares=[_guard])
    app.router.add_get("/v1/namesrvs", namesrvs)
    app.router.add_get(f"/v1/route/{_TOPIC_SEGMENT}", route)
    app.router.add_get("/v1/cluster", cluster)
    app.router.add_get("/v1/topics", topics)
    app.router.add_get("/v1/tables/{table}", tables)
    app.router.add_get(f"/v1/history/route/{_TOPIC_SEGMENT}", history)
    app.router.add_get("/openapi.json", openapi_json)
    return app
