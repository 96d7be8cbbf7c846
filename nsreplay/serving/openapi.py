"""The OpenAPI 3 document of the shim's HTTP API (served at ``GET /openapi.json``).

:func:`openapi_document` is the single description of every endpoint, parameter, answer and error;
the handlers in :mod:`nsreplay.serving.http_api` implement exactly this (the schemathesis suite
checks that they conform to it and never answer 5xx).
"""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["openapi_document", "ROUTE_PARAMS", "HISTORY_PARAMS", "TABLE_NAMES"]

TABLE_NAMES = ("topicQueueTable", "brokerAddrTable", "clusterAddrTable", "brokerLiveTable", "filterServerTable", "orderTopicConf")
ROUTE_PARAMS = ("namesrv", "at")
HISTORY_PARAMS = ("namesrv", "from", "to", "limit", "run")

_TIME = (
    "ISO-8601 with an offset or `Z` (e.g. `2024-11-21T03:12:05.250Z`; without an offset it means UTC) "
    "or epoch milliseconds (`1732158725250`)."
)


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_NAMESRV = {
    "name": "namesrv",
    "in": "query",
    "required": False,
    "description": "The NameServer (`host:port`, as listed by `/v1/namesrvs`). May be omitted only when the warehouse covers exactly one NameServer.",
    "schema": {"type": "string"},
}


# what the time parameters look like (a value that matches may still be no real instant: 400)
_TIME_PATTERN = r"^(-?[0-9]{1,19}|[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}(:[0-9]{2}(:[0-9]{2}([.,][0-9]{1,6})?)?)?)?(Z|[+-][0-9]{2}(:?[0-9]{2})?)?)$"


def _time_param(name: str, what: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": f"{what} {_TIME}",
            "schema": {"type": "string", "pattern": _TIME_PATTERN}}


_AT = _time_param("at", "The instant: the state after every record with `ts <= at` and every scan tick `<= at`. Omitted: the end of the NameServer's covered range (the latest published state).")
_ERRORS = {
    "400": _json(_ref("Error"), "A bad parameter (unknown or repeated parameter, empty value, unparseable time, `from` after `to`, `namesrv` omitted while several NameServers are covered)."),
    "404": _json(_ref("Error"), "Unknown NameServer, or the instant is outside its covered range (the message names the range), or unknown path/table."),
    "405": _json(_ref("Error"), "Only GET and HEAD are served: the API is read-only."),
}


def _get(summary: str, description: str, parameters: list[dict[str, Any]], ok: dict[str, Any], not_found: dict[str, Any] | None = None,
         unavailable: dict[str, Any] | None = None, others: dict[str, Any] | None = None) -> dict[str, Any]:
    """A GET operation: 200 ``ok``, the common errors, ``not_found``/``unavailable`` as 404/503, and
    ``others`` (status → response) replacing or adding answers."""
    responses = {"200": ok, **_ERRORS}
    if not_found is not None:
        responses["404"] = not_found
    if unavailable is not None:
        responses["503"] = unavailable
    responses.update(others or {})
    return {"get": {"summary": summary, "description": description, "parameters": parameters, "responses": responses}}


def _path_param(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "description": description, "schema": schema}


_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {"type": "string", "description": "What is wrong, in one line."}},
    },
    "HistoryTooLong": {
        "type": "object",
        "description": "A route history window whose answer would exceed a limit of the shim (nothing was read).",
        "required": ["error", "setting", "value", "first_page", "fits_to"],
        "properties": {
            "error": {"type": "string", "description": "What is wrong and how to proceed, in one line."},
            "setting": {"type": "string", "enum": ["history_max_changes", "history_max_examined"],
                        "description": "The `[serve]` setting of the shim's configuration (`conf/base/nsreplay.toml`) that the window exceeds."},
            "value": {"type": "integer", "description": "Its value."},
            "first_page": {"type": "string", "description": "The URL (relative to the server) of the first page of the same window: the same request with `limit` = `history_max_changes`, explicit `from`/`to` and `run`."},
            "fits_to": {"type": "integer", "description": "The greatest `to` (epoch ms) for which the window from the same `from` is answered in one answer."},
        },
    },
    "RunChanged": {
        "type": "object",
        "required": ["error", "run"],
        "properties": {
            "error": {"type": "string"},
            "run": {"type": "string", "description": "The run served now."},
        },
    },
    "TopicNotExist": {
        "type": "object",
        "required": ["code", "remark"],
        "properties": {
            "code": {"type": "integer", "enum": [17], "description": "TOPIC_NOT_EXIST, as the NameServer answered."},
            "remark": {"type": "string", "description": "The NameServer's exact remark: `No topic route info in name server for the topic: <topic>` + newline + FAQ link."},
        },
    },
    "QueueData": {
        "type": "object",
        "required": ["brokerName", "perm", "readQueueNums", "topicSysFlag", "writeQueueNums"],
        "properties": {
            "brokerName": {"type": "string"},
            "perm": {"type": "integer"},
            "readQueueNums": {"type": "integer"},
            "topicSysFlag": {"type": "integer"},
            "writeQueueNums": {"type": "integer"},
        },
    },
    "BrokerData": {
        "type": "object",
        "required": ["brokerAddrs", "brokerName", "cluster"],
        "properties": {
            "brokerAddrs": {"type": "object", "additionalProperties": {"type": "string"}, "description": "broker id (0 = master) → address"},
            "brokerName": {"type": "string"},
            "cluster": {"type": "string"},
            "enableActingMaster": {"type": "boolean", "description": "RocketMQ 5.x NameServers only."},
            "zoneName": {"type": "string", "description": "RocketMQ 5.x only; omitted when null."},
        },
    },
    "TopicRouteData": {
        "type": "object",
        "description": "What GET_ROUTEINFO_BY_TOPIC (105) returned, in the standard JSON shape (fastjson field order, nulls omitted; lists in sorted order — the NameServer's own order is Java hash order).",
        "required": ["brokerDatas", "filterServerTable", "queueDatas"],
        "properties": {
            "brokerDatas": {"type": "array", "items": _ref("BrokerData")},
            "filterServerTable": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
            "orderTopicConf": {"type": "string", "description": "Only when the NameServer has orderMessageEnable."},
            "queueDatas": {"type": "array", "items": _ref("QueueData")},
        },
    },
    "ClusterInfo": {
        "type": "object",
        "description": "What GET_BROKER_CLUSTER_INFO (106) returned, in standard JSON (the NameServer itself writes integer keys bare).",
        "required": ["brokerAddrTable", "clusterAddrTable"],
        "properties": {
            "brokerAddrTable": {"type": "object", "additionalProperties": _ref("BrokerData")},
            "clusterAddrTable": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
        },
    },
    "TopicList": {
        "type": "object",
        "required": ["topicList"],
        "properties": {"topicList": {"type": "array", "items": {"type": "string"}}},
    },
    "Namesrv": {
        "type": "object",
        "required": ["namesrv", "from", "to", "profile", "run_id"],
        "properties": {
            "namesrv": {"type": "string"},
            "from": {"type": "integer", "description": "Start of its covered range (epoch ms): its first record in the warehouse."},
            "to": {"type": "integer", "description": "End of its covered range (epoch ms, inclusive)."},
            "from_iso": {"type": "string"},
            "to_iso": {"type": "string"},
            "profile": {"type": "string", "description": "`rocketmq-4.9` or `rocketmq-5` (at the end of the range)."},
            "run_id": {"type": "string", "description": "The published run served."},
        },
    },
    "TableRows": {
        "type": "object",
        "required": ["namesrv", "table", "at", "tick", "run_id", "rows"],
        "properties": {
            "namesrv": {"type": "string"},
            "table": {"type": "string", "enum": list(TABLE_NAMES)},
            "at": {"type": "integer", "description": "The instant answered (epoch ms)."},
            "tick": {
                "type": ["integer", "null"],
                "description": "The scan tick the state reflects: the last tick <= `at` of the NameServer's current tick grid; null when no scan has run since it (re)started.",
            },
            "run_id": {"type": "string"},
            "rows": {
                "type": "array",
                "description": "The rows valid at `at`, in key order: the gold interval table's columns except `namesrv`/`run_id` (snake_case, e.g. `topic`, `broker_name`, `perm`; `broker_addrs` maps id → address), with `valid_from`, `valid_to` (null: still valid at the end of the covered range), `start_cause` and `end_cause`.",
                "items": {"type": "object"},
            },
        },
    },
    "RouteChange": {
        "type": "object",
        "required": ["ts", "tick_ts", "code", "route", "changes"],
        "properties": {
            "ts": {"type": "integer", "description": "The instant (epoch ms) from which the new answer holds."},
            "time": {"type": "string", "description": "`ts` as ISO-8601."},
            "tick_ts": {"type": ["integer", "null"], "description": "The last scan tick <= ts (null: none since the NameServer (re)started)."},
            "code": {"type": "integer", "description": "0 (a route) or 17 (TOPIC_NOT_EXIST) from `ts` on."},
            "route": {"oneOf": [_ref("TopicRouteData"), {"type": "null"}], "description": "The TopicRouteData from `ts` on; null with code 17."},
            "changes": {
                "type": "array",
                "description": "The `gold.route_changes` rows at `ts` that touch this topic's route (its QueueDatas and order conf, the BrokerData of its brokerNames, filter servers), in the NameServer's order (its records in the order it processed them, then its scan tick; the rows one record changed by table and key). Key/before/after are JSON values.",
                "items": {
                    "type": "object",
                    "properties": {
                        "table": {"type": "string"},
                        "key": {"type": "array"},
                        "op": {"type": "string", "enum": ["put", "remove"]},
                        "before": {},
                        "after": {},
                        "cause": {"type": "string"},
                        "phase": {"type": "string", "enum": ["record", "tick"]},
                        "tick_ts": {"type": ["integer", "null"]},
                    },
                },
            },
        },
    },
}


def _with_examples(param: dict[str, Any], values: Sequence[str]) -> dict[str, Any]:
    if not values:
        return param
    return {**param, "examples": {f"e{i}": {"value": v} for i, v in enumerate(values)}}


def _history(topic: dict[str, Any], namesrv: dict[str, Any], instants: Sequence[str], run_id: str | None, max_changes: int) -> dict[str, Any]:
    """The operation ``/v1/history/route/{topic}``: a window's changes, refused beyond the shim's
    limits unless paged with ``limit`` (see :mod:`nsreplay.serving.http_api`)."""
    window_headers = {
        "X-Nsreplay-From": {"description": "The start of the window this answer holds every change of (epoch ms): `from`.", "schema": {"type": "integer"}},
        "X-Nsreplay-To": {"description": "Its end (epoch ms): `to`, or, for a page that is not the last, the instant before the next page.", "schema": {"type": "integer"}},
        "Link": {"description": "With `limit`, while the window goes on: `<URL>; rel=\"next\"`, the next page (a URL relative to the server, "
                 "with explicit `from`/`to`/`limit` and `run`). Absent on the last page.", "schema": {"type": "string"}},
    }
    ok = _json({"type": "array", "items": _ref("RouteChange")},
               "The changes of the window `[X-Nsreplay-From, X-Nsreplay-To]`, oldest first (empty when none): without `limit` the whole "
               "window asked; with `limit` a page, the whole answer for its part of the window.")
    ok["headers"] = window_headers
    parameters = [
        topic, namesrv,
        _with_examples(_time_param("from", "Start of the window (inclusive). Omitted: the start of the covered range."), instants[:1]),
        _with_examples(_time_param("to", "End of the window (inclusive). Omitted: the end of the covered range."), instants[1:2]),
        {"name": "limit", "in": "query", "required": False,
         "description": f"Page through the window: at most this many changes per answer (1 to {max_changes}, the shim's `[serve] history_max_changes`). "
                        "A page holds every change of its part of the window (`X-Nsreplay-From` .. `X-Nsreplay-To`); it may hold fewer "
                        "than `limit` changes (the shim examined `[serve] history_max_examined` instants) and still name a next page. "
                        "Follow `Link: rel=\"next\"` until there is none: the pages join into exactly the window's answer, no change "
                        "repeated or left out (changes at one instant are one entry, never split).",
         "schema": {"type": "integer", "minimum": 1, "maximum": max_changes}},
        _with_examples({"name": "run", "in": "query", "required": False,
                        "description": "Answer only from this published run (the `X-Nsreplay-Run` of the first page; next links carry it): "
                                       "another run served since (a newer publish) answers 409 instead of a page that may not join the others.",
                        "schema": {"type": "string"}}, [run_id] if run_id else []),
    ]
    return _get(
        "How a topic's route changed over a window",
        "Every instant `ts` with `from <= ts <= to` at which the route answer (the body of `/v1/route/{topic}`, or "
        "TOPIC_NOT_EXIST) differs from the answer at `ts - 1`, oldest first, each with the answer from then on and "
        "the gold change rows that caused it. Before a NameServer's first record its tables are empty (the topic "
        "does not exist), so a route present at the start of the covered range is reported at `from`. Changes that "
        "leave the answer identical (e.g. heartbeats) are not listed. "
        f"One answer holds at most {max_changes} changes (`[serve] history_max_changes`) and examines at most "
        "`[serve] history_max_examined` instants at which the route may change: a window beyond either is refused (400, "
        "`HistoryTooLong`, before anything is read) unless the request pages through it with `limit`.",
        parameters,
        ok,
        unavailable=_json(_ref("Error"), "The shim reads the change rows (gold.route_changes) from the published files per "
                          "request, and they cannot be read (removed by a vacuum, storage unreachable; the message says "
                          "which). Point lookups still answer."),
        others={
            "400": _json({"anyOf": [_ref("Error"), _ref("HistoryTooLong")]},
                         "A bad parameter (as for every endpoint, and `limit` not a whole number from 1 to "
                         f"{max_changes}), or, without `limit`, a window beyond a limit of the shim (`HistoryTooLong`: the setting, "
                         "its value, the URL of the first page and the greatest `to` that fits)."),
            "409": _json(_ref("RunChanged"), "`run` is not the run served (a newer publish replaced it): ask the window again from its start."),
        },
    )


def openapi_document(*, history_max_changes: int, namesrvs: Sequence[str] = (), instants: Sequence[str] = (), topics: Sequence[str] = (),
                     run_id: str | None = None) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the HTTP API for a run covering ``namesrvs``: ``namesrv`` is
    required when there are several; the values also become parameter examples (the server passes
    the NameServers, some covered instants, topics and the id of the run it serves), and
    ``history_max_changes`` is the largest ``limit`` of a route history page (the server's
    ``[serve]`` setting)."""
    topic = _with_examples(
        _path_param("topic", "The topic name (any string; an unknown topic answers 404 code 17).", {"type": "string", "minLength": 1, "pattern": "^[^/]+$"}),
        topics,
    )
    namesrv = _with_examples({**_NAMESRV, "required": len(namesrvs) > 1}, namesrvs)
    at = _with_examples(_AT, instants)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "nsreplay serving shim",
            "version": "1",
            "description": (
                "Read-only, time-travelling answers of captured RocketMQ NameServers, from the latest published run of the "
                "warehouse (the versions named by the latest `gold.publish_log` row; a newer publish is picked up without a "
                "restart). Every time parameter is " + _TIME + " A NameServer's state is defined from its first record to the "
                "end of the covered range. Responses carry `X-Nsreplay-Run` (the run id served); point-in-time answers "
                "also `X-Nsreplay-At` (the instant answered, epoch ms). Unknown query parameters are rejected (400) rather "
                "than ignored, so a typo never silently answers the latest state."
            ),
        },
        "paths": {
            "/v1/namesrvs": _get(
                "What the warehouse covers",
                "One entry per NameServer of the published run, sorted by address.",
                [],
                _json({"type": "array", "items": _ref("Namesrv")}, "The covered NameServers and ranges."),
            ),
            "/v1/route/{topic}": _get(
                "GET_ROUTEINFO_BY_TOPIC as of an instant",
                "The TopicRouteData the NameServer would have returned to a client of version >= 401 (standard JSON).",
                [topic, namesrv, at],
                _json(_ref("TopicRouteData"), "The route."),
                {
                    "description": "The topic has no route at that instant (`{\"code\": 17, \"remark\": ...}`, exactly the NameServer's answer), or: unknown NameServer / instant outside the covered range / unknown path (`{\"error\": ...}`).",
                    "content": {"application/json": {"schema": {"oneOf": [_ref("TopicNotExist"), _ref("Error")]}}},
                },
            ),
            "/v1/cluster": _get(
                "GET_BROKER_CLUSTER_INFO as of an instant",
                "The ClusterInfo at that instant, in standard JSON.",
                [namesrv, at],
                _json(_ref("ClusterInfo"), "The cluster info."),
            ),
            "/v1/topics": _get(
                "GET_ALL_TOPIC_LIST_FROM_NAMESERVER as of an instant",
                "The topics of the topicQueueTable at that instant, sorted.",
                [namesrv, at],
                _json(_ref("TopicList"), "The topic list."),
            ),
            "/v1/tables/{table}": _get(
                "One route table's rows as of an instant",
                "The rows of the table valid at that instant and the scan tick the state reflects. Tables: "
                + ", ".join(f"`{t}`" for t in TABLE_NAMES) + " (orderTopicConf: the ORDER_TOPIC_CONFIG KV entries).",
                [_path_param("table", "The table name.", {"type": "string", "minLength": 1, "pattern": "^[^/]+$"}), namesrv, at],
                _json(_ref("TableRows"), "The rows."),
                unavailable=_json(_ref("Error"), "brokerLiveTable only: the shim reads it from the published files per request, and they "
                                  "cannot be read (removed by a vacuum, storage unreachable; the message says which). Other tables still answer."),
            ),
            "/v1/history/route/{topic}": _history(
                {**topic, "description": "The topic name (any string; a topic whose route never changed in the window answers an empty list)."},
                namesrv, instants, run_id, history_max_changes,
            ),
            "/openapi.json": _get("This document", "The OpenAPI document of this API.", [], _json({"type": "object"}, "The document.")),
        },
        "components": {"schemas": _SCHEMAS},
    }
