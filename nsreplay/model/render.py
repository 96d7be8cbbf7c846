"""Answers to the read-only requests, serialized like the NameServer's fastjson (semantics spec §7).

* :func:`route_info` - GET_ROUTEINFO_BY_TOPIC (105): TopicRouteData, or TOPIC_NOT_EXIST (17).
* :func:`cluster_info` - GET_BROKER_CLUSTER_INFO (106): ClusterInfo.
* :func:`topic_list` - GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206): TopicList.

Each takes the state to answer from: a :class:`~nsreplay.model.tables.Snapshot` or anything with a
``snapshot()`` method (a :class:`~nsreplay.model.namesrv.NameServer`).

Serialization (:func:`to_fastjson`): compact, object fields and map keys in ascending order, ``null``
values in objects omitted. Two shapes:

* **standard** JSON (map keys quoted): what 105 returns when the request's ``version`` >= 401;
* **legacy**: integer map keys unquoted (``"brokerAddrs":{0:"10.0.0.1:10911"}``), not valid JSON; what
  105 returns to older clients. 106 is always encoded this way by the NameServer (it does not look at
  the version), so ``shape="auto"`` gives legacy for 106; pass ``shape="standard"`` to force JSON.

The real NameServer writes list elements and legacy-shape map entries in Java hash order; clients do
not depend on it and answers are compared with lists as sets (:func:`canonical`, :func:`same_answer`),
so the model writes them sorted. Non-ASCII characters are written as UTF-8 (fastjson's
``BrowserCompatible`` \\u-escaping in the standard shape is not reproduced; it parses the same).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any, Literal, Mapping

from nsreplay.model.tables import PROFILE_49, PROFILE_5, BrokerData, QueueData, ResponseCode, Snapshot
from nsreplay.protocol.java_strings import java_string

__all__ = [
    "Answer",
    "Shape",
    "STANDARD_JSON_MIN_VERSION",
    "APPLY_TOPIC_URL",
    "topic_not_exist_remark",
    "ROUTE_TABLES",
    "route_data",
    "route_info",
    "cluster_info",
    "topic_list",
    "to_fastjson",
    "parse_fastjson",
    "canonical",
    "same_answer",
]

# What a GET_ROUTEINFO_BY_TOPIC answer is made of (route_data), besides the profile and the config:
# never the live table (it changes every heartbeat) nor the cluster table.
ROUTE_TABLES = ("topicQueueTable", "brokerAddrTable", "filterServerTable", "orderTopicConf")
STANDARD_JSON_MIN_VERSION = 401  # MQVersion.Version.V4_9_4.ordinal()
APPLY_TOPIC_URL = "http://rocketmq.apache.org/docs/faq/"  # FAQUrl.APPLY_TOPIC_URL of 4.9.4 (through 4.9.8)
APPLY_TOPIC_URL_5 = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"  # 5.x: FAQUrl.DEFAULT_FAQ_URL
PERM_WRITE = 2
MASTER_ID = 0

Shape = Literal["auto", "standard", "legacy"]


@dataclass(frozen=True)
class Answer:
    """A NameServer response: code, body bytes (``None`` when there is none) and remark."""

    code: int
    body: bytes | None
    remark: str | None

    def parsed(self) -> object:
        """The body parsed back to Python (either shape); ``None`` without a body."""
        return None if self.body is None else parse_fastjson(self.body)


def topic_not_exist_remark(topic: str | None, profile: str = PROFILE_49) -> str:
    """The remark of TOPIC_NOT_EXIST: the message plus ``FAQUrl.suggestTodo(APPLY_TOPIC_URL)``, whose
    link differs between the profiles. A ``None`` topic (a request without extFields) reads "null",
    as Java's string concatenation writes a null reference."""
    url = APPLY_TOPIC_URL_5 if profile == PROFILE_5 else APPLY_TOPIC_URL
    return f"No topic route info in name server for the topic: {'null' if topic is None else topic}\nSee {url} for further details."


def _snapshot_of(state: object) -> Snapshot:
    if isinstance(state, Snapshot):
        return state
    return state.snapshot()  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------ answers


def route_data(state: object, topic: str | None) -> dict[str, Any] | None:
    """The TopicRouteData of ``topic`` as Python values (``brokerAddrs`` keyed by int), or ``None``
    when the topic is absent (always so for a ``None`` topic) or none of its brokerNames has a
    BrokerData (spec §7)."""
    snap = _snapshot_of(state)
    by_name = snap.topicQueueTable.get(topic)
    if not by_name:
        return None
    groups = [snap.brokerAddrTable[name] for name in sorted(by_name) if name in snap.brokerAddrTable]
    if not groups:
        return None
    five = snap.profile == PROFILE_5
    acting = five and snap.config.supportActingMaster
    broker_datas = [_broker_data_json(g, _acting_master_view(g, by_name) if acting else dict(g.brokerAddrs), five)
                    for g in groups]
    order_conf = snap.orderTopicConf.get(topic) if snap.config.orderMessageEnable else None
    return {
        "brokerDatas": broker_datas,
        "filterServerTable": _filter_server_table(snap, groups),
        "orderTopicConf": order_conf,
        "queueDatas": [asdict(by_name[name]) for name in sorted(by_name)],
    }


def route_info(state: object, topic: str | None, *, request_version: int, shape: Shape = "auto") -> Answer:
    """GET_ROUTEINFO_BY_TOPIC (105): SUCCESS with the TopicRouteData (standard JSON when
    ``request_version`` >= 401, legacy otherwise, unless ``shape`` says), or TOPIC_NOT_EXIST (for a
    ``None`` topic too: a request without extFields, whose header Java does not check)."""
    data = route_data(state, topic)
    if data is None:
        return Answer(ResponseCode.TOPIC_NOT_EXIST, None, topic_not_exist_remark(topic, _snapshot_of(state).profile))
    legacy = request_version < STANDARD_JSON_MIN_VERSION if shape == "auto" else shape == "legacy"
    return Answer(ResponseCode.SUCCESS, to_fastjson(data, legacy=legacy).encode("utf-8"), None)


def cluster_info(state: object, *, request_version: int = 0, shape: Shape = "auto") -> Answer:
    """GET_BROKER_CLUSTER_INFO (106): ``{"brokerAddrTable": {name: BrokerData}, "clusterAddrTable":
    {cluster: [names]}}``. The NameServer always uses the legacy shape here (``request_version`` is
    accepted for symmetry and ignored); ``shape="standard"`` forces valid JSON."""
    snap = _snapshot_of(state)
    five = snap.profile == PROFILE_5
    data = {
        "brokerAddrTable": {
            name: _broker_data_json(g, dict(g.brokerAddrs), five) for name, g in snap.brokerAddrTable.items()
        },
        "clusterAddrTable": {cluster: sorted(names) for cluster, names in snap.clusterAddrTable.items()},
    }
    return Answer(ResponseCode.SUCCESS, to_fastjson(data, legacy=shape != "standard").encode("utf-8"), None)


def topic_list(state: object, *, request_version: int = 0, shape: Shape = "auto") -> Answer:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206): ``{"topicList": [...]}`` (no integer keys, so both
    shapes are the same bytes)."""
    snap = _snapshot_of(state)
    data = {"topicList": sorted(snap.topicQueueTable)}
    return Answer(ResponseCode.SUCCESS, to_fastjson(data, legacy=shape == "legacy").encode("utf-8"), None)


def _broker_data_json(group: BrokerData, addrs: Mapping[int, str], five: bool) -> dict[str, Any]:
    """BrokerData's fields (4.9: cluster, brokerName, brokerAddrs; 5.x adds the acting-master flag
    and the zone, which is omitted when null)."""
    data: dict[str, Any] = {"brokerAddrs": dict(addrs), "brokerName": group.brokerName, "cluster": group.cluster}
    if five:
        data["enableActingMaster"] = group.enableActingMaster
        data["zoneName"] = group.zoneName
    return data


def _acting_master_view(group: BrokerData, by_name: Mapping[str, QueueData]) -> dict[int, str]:
    """5.x with supportActingMaster: a group with enableActingMaster, addresses but no master, whose
    QueueData for the topic is not writable, shows its smallest-id address as id 0."""
    addrs = dict(group.brokerAddrs)
    qd = by_name.get(group.brokerName)
    if addrs and MASTER_ID not in addrs and group.enableActingMaster and qd is not None:
        if not qd.perm & PERM_WRITE:
            addrs[MASTER_ID] = addrs.pop(min(addrs))
    return addrs


def _filter_server_table(snap: Snapshot, groups: list[BrokerData]) -> dict[str, list[str]]:
    """Filter servers of the groups' addresses, only when the global table is non-empty; addresses
    without a list are omitted (an address listed by several groups keeps the first list found)."""
    if not snap.filterServerTable:
        return {}
    five = snap.profile == PROFILE_5
    table: dict[str, list[str]] = {}
    for group in groups:
        for addr in group.brokerAddrs.values():
            servers = snap.filterServerTable.get((group.cluster, addr) if five else addr)
            if servers is not None and addr not in table:
                table[addr] = list(servers)
    return table


# ------------------------------------------------------------------------------------ fastjson


def _sort_key(key: object) -> tuple[int, Any]:
    return (0, key) if isinstance(key, int) else (1, str(key))


def to_fastjson(value: object, *, legacy: bool) -> str:
    """Serialize like fastjson: compact, keys ascending, ``None`` object values omitted; in the
    ``legacy`` shape integer map keys are written bare (``{0:"a"}``), otherwise quoted."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        items = sorted(((k, v) for k, v in value.items() if v is not None), key=lambda kv: _sort_key(kv[0]))
        fields = (f"{_fastjson_key(k, legacy)}:{to_fastjson(v, legacy=legacy)}" for k, v in items)
        return "{" + ",".join(fields) + "}"
    if isinstance(value, (set, frozenset)):
        value = sorted(value, key=_sort_key)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(to_fastjson(v, legacy=legacy) for v in value) + "]"
    raise TypeError(f"cannot serialize {type(value).__name__}")


def _fastjson_key(key: object, legacy: bool) -> str:
    if isinstance(key, int) and not isinstance(key, bool) and legacy:
        return str(key)
    return json.dumps(str(key), ensure_ascii=False)


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BARE_INT_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")


def parse_fastjson(text: bytes | str) -> object:
    """Parse either shape back to Python: bare integer map keys are quoted first (so they come back
    as strings, as in the standard shape). Raises ValueError when it is not JSON in either shape, or
    is nested deeper than Python's stack allows. Bytes are read as the NameServer reads a body
    (:func:`~nsreplay.protocol.java_strings.java_string`: what is not UTF-8 becomes U+FFFD)."""
    if isinstance(text, bytes):
        text = java_string(text)
    pieces = []
    pos = 0
    for match in _JSON_STRING.finditer(text):
        pieces.append(_BARE_INT_KEY.sub(r'\1"\2"\3', text[pos:match.start()]))
        pieces.append(match.group())
        pos = match.end()
    pieces.append(_BARE_INT_KEY.sub(r'\1"\2"\3', text[pos:]))
    try:
        return json.loads("".join(pieces))
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply to be read") from exc


# ------------------------------------------------------------------------------------ comparison


def canonical(value: object) -> str:
    """A canonical text of an answer for comparisons: bytes are parsed (either shape), map keys
    become strings, ``null`` object values are dropped, and every list is compared as a multiset."""
    if isinstance(value, bytes):
        value = parse_fastjson(value)
    return _canonical(value)


def _canonical(value: object) -> str:
    if isinstance(value, Mapping):
        fields = sorted(f"{json.dumps(str(k))}:{_canonical(v)}" for k, v in value.items() if v is not None)
        return "{" + ",".join(fields) + "}"
    if isinstance(value, (list, tuple, set, frozenset)):
        return "[" + ",".join(sorted(_canonical(v) for v in value)) + "]"
    return json.dumps(value)


def same_answer(a: Answer | bytes | object, b: Answer | bytes | object) -> bool:
    """Whether two answers are the same: for :class:`Answer` s the code, the remark and the bodies;
    for bodies (bytes in either shape, or parsed values) the content with lists as sets. A body that
    is not JSON in either shape (a captured answer can hold anything) is the same only as the same
    bytes."""
    if isinstance(a, Answer) and isinstance(b, Answer):
        if (a.code, a.remark) != (b.code, b.remark) or (a.body is None) != (b.body is None):
            return False
        return a.body is None or _comparable(a.body) == _comparable(b.body)
    return _comparable(a) == _comparable(b)


def _comparable(x: object) -> tuple[str, object]:
    if isinstance(x, Answer):
        x = x.body
    if isinstance(x, str):
        x = x.encode("utf-8", "surrogatepass")
    if isinstance(x, bytes):
        try:
            return ("parsed", canonical(parse_fastjson(x)))
        except (ValueError, RecursionError):  # not JSON, or nested deeper than Python's stack
            return ("unparsed", x)
    return ("parsed", canonical(x))
