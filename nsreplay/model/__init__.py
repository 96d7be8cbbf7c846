"""The executable reference model: a small, sequential implementation of nameserver-semantics.md.

It is the oracle every Spark result is tested against. Modules:

* :mod:`~nsreplay.model.tables` - immutable value types and the canonical :class:`Snapshot`;
* :mod:`~nsreplay.model.javamap` - Java HashMap / ConcurrentHashMap iteration order ("the first ...");
* :mod:`~nsreplay.model.requests` - reading a captured request: header fields, CRC, register bodies;
* :mod:`~nsreplay.model.namesrv` - :class:`NameServer`: the five tables and every request's effect;
* :mod:`~nsreplay.model.render` - answers to 105 / 106 / 206 serialized like fastjson;
* :mod:`~nsreplay.model.replay` - records in, per-NameServer state at every scan tick out;
* :mod:`~nsreplay.model.records` - builders of capture-format records (tests, examples).
"""

from nsreplay.model.javamap import JavaMap, java_string_hash, spread
from nsreplay.model.namesrv import (
    BROKER_CHANNEL_EXPIRED_TIME,
    MASTER_ID,
    ORDER_TOPIC_CONFIG,
    NameServer,
    RequestCode,
    check_profile,
    profile_for_version,
)
from nsreplay.model.render import (
    ROUTE_TABLES,
    Answer,
    canonical,
    cluster_info,
    parse_fastjson,
    route_data,
    route_info,
    same_answer,
    to_fastjson,
    topic_list,
    topic_not_exist_remark,
)
from nsreplay.model.replay import AppliedRecord, NamesrvReplay, TickState, order_records, replay, state_at
from nsreplay.model.tables import (
    PROFILE_5,
    PROFILE_49,
    PROFILES,
    BrokerData,
    BrokerLiveInfo,
    Cause,
    DataVersion,
    FrozenDict,
    LiveKey,
    NamesrvConfig,
    Outcome,
    Profile,
    QueueData,
    Removal,
    ResponseCode,
    Snapshot,
)

__all__ = [
    "PROFILE_49",
    "PROFILE_5",
    "PROFILES",
    "Profile",
    "LiveKey",
    "Cause",
    "ResponseCode",
    "FrozenDict",
    "DataVersion",
    "QueueData",
    "BrokerData",
    "BrokerLiveInfo",
    "NamesrvConfig",
    "Removal",
    "Outcome",
    "Snapshot",
    "JavaMap",
    "java_string_hash",
    "spread",
    "NameServer",
    "RequestCode",
    "MASTER_ID",
    "BROKER_CHANNEL_EXPIRED_TIME",
    "ORDER_TOPIC_CONFIG",
    "check_profile",
    "profile_for_version",
    "Answer",
    "route_data",
    "route_info",
    "ROUTE_TABLES",
    "cluster_info",
    "topic_list",
    "topic_not_exist_remark",
    "to_fastjson",
    "parse_fastjson",
    "canonical",
    "same_answer",
    "AppliedRecord",
    "TickState",
    "NamesrvReplay",
    "order_records",
    "replay",
    "state_at",
]
