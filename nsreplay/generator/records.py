"""Compact planned records, before they are rendered to text.

A planned record is a tuple ``(ts, order, rtype, args)`` in one NameServer's list while simulating;
after sequencing it becomes ``(ns, ts, seq, rtype, args)`` (:data:`Record`). ``order`` is the
simulation's creation counter: it breaks ties between records of one NameServer with equal ``ts`` and so
defines the processing order that ``seq`` numbers.

``args`` by record type:

* START: ``()``
* CHANNEL: ``(event, conn, remote)``
* REGISTER (103): ``(opaque, conn, group, member, broker_id, version_index, incremental)``
* UNREGISTER (104): ``(opaque, conn, group, member, broker_id)``
* QUERY_DV (322): ``(opaque, conn, group, member, broker_id, version_index)``
* HEARTBEAT (904): ``(opaque, conn, group, member, broker_id)``
* REQUEST (any other code): ``(code, version, opaque, conn, ext_json, body_json_or_None)``
* JUNK: ``(reason, variant, group)``
* RESPONSE: ``(opaque, conn, code, tail)`` -- the answer to the GET_ROUTEINFO_BY_TOPIC request just before
  it in its NameServer's order; ``tail`` is the pre-rendered ``"remark":...,"body..."}`` + newline (bytes).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "START", "CHANNEL", "REGISTER", "UNREGISTER", "QUERY_DV", "HEARTBEAT", "REQUEST", "JUNK", "RESPONSE",
    "Record", "PlannedRecord", "record_code", "record_kind",
]

START = 0
CHANNEL = 1
REGISTER = 2
UNREGISTER = 3
QUERY_DV = 4
HEARTBEAT = 5
REQUEST = 6
JUNK = 7
RESPONSE = 8

PlannedRecord = tuple[int, int, int, tuple[Any, ...]]
Record = tuple[int, int, int, int, tuple[Any, ...]]

_CODES = {REGISTER: 103, UNREGISTER: 104, QUERY_DV: 322, HEARTBEAT: 904}


def record_kind(rtype: int) -> str:
    """The capture ``kind`` of a (non-junk) record type."""
    if rtype == START:
        return "namesrv_start"
    if rtype == CHANNEL:
        return "channel"
    if rtype == RESPONSE:
        return "response"
    if rtype == JUNK:
        raise ValueError("junk has no kind")
    return "request"


def record_code(rtype: int, args: tuple[Any, ...]) -> int | None:
    """The request code of a request record, None for other kinds (responses included)."""
    if rtype in _CODES:
        return _CODES[rtype]
    if rtype == REQUEST:
        return int(args[0])
    return None
