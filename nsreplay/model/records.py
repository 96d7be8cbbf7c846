"""Builders of capture-format records (capture-format.md), for tests and examples.

Each function returns one plain ``dict`` record exactly as a capture file line would hold it. Defaults
follow what real brokers send: a REGISTER_BROKER carries a JSON body (``body``) with a DataVersion,
``compressed=false``, ``bodyCrc32=0``; 5.x brokers also send ``enableActingMaster``. A broker's
connection id defaults to ``conn_of(addr)``, so that the same broker keeps its connection.
"""

from __future__ import annotations

import base64
import zlib
from typing import Any, Iterable, Literal, Mapping

from nsreplay.protocol.register_body import (
    DataVersion,
    RegisterBody,
    TopicConfig,
    body_crc32,
    encode_compressed_register_body,
    encode_json_register_body,
    encode_register_body_bytes,
)

__all__ = [
    "NAMESRV",
    "conn_of",
    "topic",
    "register_broker",
    "unregister_broker",
    "broker_heartbeat",
    "query_data_version",
    "request",
    "channel",
    "namesrv_start",
]

NAMESRV = "10.0.0.10:9876"
BodyForm = Literal["json", "raw", "compressed", "none"]

TopicSpec = TopicConfig | str | tuple


def conn_of(addr: str, generation: int = 0) -> str:
    """The default connection id of a broker (a new ``generation`` is a new TCP connection)."""
    return f"{addr}#conn{generation}"


def topic(name: str, read: int = 8, write: int = 8, perm: int = 6, sys_flag: int = 0) -> TopicConfig:
    """A TopicConfig with the spec fixture's defaults (8/8 queues, perm 6)."""
    return TopicConfig(name, read, write, perm, sys_flag)


def _topic_config(spec: TopicSpec) -> TopicConfig:
    if isinstance(spec, TopicConfig):
        return spec
    if isinstance(spec, str):
        return topic(spec)
    return topic(*spec)


def _base(kind: str, ts: int, namesrv: str, seq: int | None) -> dict[str, Any]:
    record: dict[str, Any] = {"namesrv": namesrv, "ts": ts, "kind": kind}
    if seq is not None:
        record["seq"] = seq
    return record


def request(
    ts: int,
    code: int,
    ext: Mapping[str, str],
    *,
    body: object | None = None,
    body_b64: str | None = None,
    conn: str = "admin#conn0",
    version: int = 479,
    opaque: int = 1,
    namesrv: str = NAMESRV,
    seq: int | None = None,
) -> dict[str, Any]:
    """Any request record."""
    record = _base("request", ts, namesrv, seq)
    record.update(code=code, version=version, opaque=opaque, conn=conn, extFields=dict(ext))
    if body is not None:
        record["body"] = body
    if body_b64 is not None:
        record["body_b64"] = body_b64
    return record


def register_broker(
    ts: int,
    *,
    cluster: str,
    name: str,
    addr: str,
    broker_id: int = 0,
    topics: Iterable[TopicSpec] = (),
    dv: tuple[int, int, int] | None = (0, 1, 1),
    filter_servers: Iterable[str] = (),
    five: bool = True,
    enable_acting_master: bool | None = False,
    heartbeat_timeout: int | None = None,
    zone: str | None = None,
    form: BodyForm = "json",
    compressed_flag: bool | None = None,
    crc: int | None = None,
    conn: str | None = None,
    ha_addr: str | None = None,
    version: int = 479,
    static_mappings: bool = False,
    topic_keys: Iterable[str] | None = None,
    mapping_section: bytes | None = None,
    namesrv: str = NAMESRV,
    seq: int | None = None,
) -> dict[str, Any]:
    """A REGISTER_BROKER (103) record. ``dv`` is (stateVersion, timestamp, counter) or ``None`` for a
    body without dataVersion. ``form``: "json" (``body``), "raw" (JSON bytes in ``body_b64``),
    "compressed" (zlib form in ``body_b64``, header compressed=true unless ``compressed_flag``
    says otherwise) or "none" (no body). ``crc`` defaults to the real CRC for raw forms, else 0.
    ``five`` adds the 5.x headers (``enableActingMaster`` unless it is ``None``). ``static_mappings``
    gives the body one (placeholder) static-topic mapping; the compressed form needs version >= 413.
    For malformed bodies: ``topic_keys`` are the JSON topicConfigTable's keys (one per topic, in
    order; by default each topic's name), and ``mapping_section`` replaces the bytes that follow the
    compressed form's filter list (the static-topic mapping section)."""
    body = RegisterBody(
        None if dv is None else DataVersion(*dv),
        tuple(_topic_config(t) for t in topics),
        tuple(filter_servers),
        legacy_wrapper=version < 37,
        static_mappings=static_mappings,
        topic_keys=None if topic_keys is None else tuple(topic_keys),
    )
    ext = {
        "brokerName": name,
        "brokerAddr": addr,
        "clusterName": cluster,
        "haServerAddr": ha_addr or addr.rsplit(":", 1)[0] + ":10912",
        "brokerId": str(broker_id),
        "compressed": str(form == "compressed" if compressed_flag is None else compressed_flag).lower(),
        "bodyCrc32": "0",
    }
    if five and enable_acting_master is not None:
        ext["enableActingMaster"] = str(enable_acting_master).lower()
    if five and heartbeat_timeout is not None:
        ext["heartbeatTimeoutMillis"] = str(heartbeat_timeout)
    if zone is not None:
        ext["__ZONE_NAME"] = zone
    json_body: object | None = None
    raw: bytes | None = None
    if form == "json":
        json_body = encode_json_register_body(body)
    elif form == "raw":
        raw = encode_register_body_bytes(body)
    elif form == "compressed":
        if mapping_section is None:
            raw = encode_compressed_register_body(body, with_mappings=version >= 413)
        else:
            raw = zlib.compress(zlib.decompress(encode_compressed_register_body(body)) + mapping_section)
    if raw is not None:
        ext["bodyCrc32"] = str(body_crc32(raw) if crc is None else crc)
    elif crc is not None:
        ext["bodyCrc32"] = str(crc)
    return request(
        ts, 103, ext, body=json_body, body_b64=None if raw is None else base64.b64encode(raw).decode("ascii"),
        conn=conn or conn_of(addr), version=version, namesrv=namesrv, seq=seq,
    )


def unregister_broker(
    ts: int, *, cluster: str, name: str, addr: str, broker_id: int = 0, conn: str | None = None,
    namesrv: str = NAMESRV, seq: int | None = None,
) -> dict[str, Any]:
    """An UNREGISTER_BROKER (104) record."""
    ext = {"clusterName": cluster, "brokerAddr": addr, "brokerName": name, "brokerId": str(broker_id)}
    return request(ts, 104, ext, conn=conn or conn_of(addr), namesrv=namesrv, seq=seq)


def broker_heartbeat(
    ts: int, *, cluster: str, name: str, addr: str, broker_id: int = 0, conn: str | None = None,
    namesrv: str = NAMESRV, seq: int | None = None,
) -> dict[str, Any]:
    """A BROKER_HEARTBEAT (904, 5.x) record."""
    ext = {"clusterName": cluster, "brokerAddr": addr, "brokerName": name, "brokerId": str(broker_id)}
    return request(ts, 904, ext, conn=conn or conn_of(addr), namesrv=namesrv, seq=seq)


def query_data_version(
    ts: int, *, cluster: str, name: str, addr: str, dv: tuple[int, int, int], broker_id: int = 0,
    conn: str | None = None, namesrv: str = NAMESRV, seq: int | None = None,
) -> dict[str, Any]:
    """A QUERY_DATA_VERSION (322) record; ``dv`` is (stateVersion, timestamp, counter)."""
    ext = {"clusterName": cluster, "brokerAddr": addr, "brokerName": name, "brokerId": str(broker_id)}
    body = DataVersion(*dv).to_json()
    return request(ts, 322, ext, body=body, conn=conn or conn_of(addr), namesrv=namesrv, seq=seq)


def channel(
    ts: int, event: str, conn: str, *, remote: str = "10.9.9.9:50000", namesrv: str = NAMESRV,
    seq: int | None = None,
) -> dict[str, Any]:
    """A channel event record (CONNECT, CLOSE, IDLE, EXCEPTION)."""
    record = _base("channel", ts, namesrv, seq)
    record.update(event=event, conn=conn, remote=remote)
    return record


def namesrv_start(
    ts: int, rocketmq_version: str = "5.3.3", config: Mapping[str, object] | None = None, *,
    namesrv: str = NAMESRV, seq: int | None = None,
) -> dict[str, Any]:
    """A namesrv_start record."""
    record = _base("namesrv_start", ts, namesrv, seq)
    record.update(rocketmq_version=rocketmq_version, config=dict(config or {}))
    return record
