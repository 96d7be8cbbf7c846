"""Reading a captured request the way the NameServer reads it: header fields, CRC and body.

* Header fields are Java's ``@CFNotNull`` / nullable request-header fields: a missing required field
  or a number Java cannot parse makes the NameServer answer SYSTEM_ERROR before touching any table
  (:class:`Rejected`).
* A REGISTER_BROKER body comes from ``body_b64`` (raw bytes, authoritative, CRC-checked when the
  ``bodyCrc32`` header is non-zero) or else from the already-parsed JSON ``body`` (taken as having
  passed the CRC check); decoding is done by :mod:`nsreplay.protocol.register_body`. A caller that
  decoded the body itself with that module (the Spark replay, from ``silver.topic_configs``) hands it
  over as ``decoded_body`` with its content id, and the record then needs no body at all.
* :class:`BodyCache` keeps the last decoded body of each broker: brokers resend the same body every
  30 s and decoding is a pure function of the bytes, so equal bodies are decoded once.
"""

from __future__ import annotations

import base64
import binascii
import pickle
from typing import Any, Mapping, NamedTuple

from nsreplay.model.render import parse_fastjson
from nsreplay.model.tables import PROFILE_49, PROFILE_5, DataVersion, Profile, QueueData
from nsreplay.protocol.java_numbers import fits_java, is_java_integer_text, parse_java_integer
from nsreplay.protocol.register_body import (
    BodyDecodeError,
    RegisterBody,
    TopicConfig,
    body_crc32,
    decode_json_register_body,
    decode_register_body,
)

__all__ = [
    "Rejected",
    "Request",
    "RegisterHeader",
    "Registration",
    "BodyCache",
    "header",
    "long_header",
    "registration",
    "queue_data_from_json",
]

LEGACY_REGISTER_VERSION = 37  # requests below it carry a bare TopicConfigSerializeWrapper


class Rejected(Exception):
    """The NameServer refuses the request before changing anything (SYSTEM_ERROR + remark)."""


class Request(NamedTuple):
    """The fields of a ``kind=request`` record the NameServer looks at."""

    ts: int
    code: int
    version: int
    conn: str | None
    ext: Mapping[str, Any]
    body: object | None
    body_b64: str | None
    body_id: str | None = None  # a content id of the body given by the caller (see NameServer.apply)
    decoded_body: RegisterBody | None = None  # the body decoded by the caller (see NameServer.apply)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Request:
        return cls(
            ts=int(record["ts"]),
            code=int(record["code"]),
            version=int(record.get("version", 0)),
            conn=record.get("conn"),
            ext=record.get("extFields") or {},
            body=record.get("body"),
            body_b64=record.get("body_b64"),
        )

    def raw_body(self) -> bytes | None:
        """The raw body bytes when the capture kept them (an empty body is no body, as in Java)."""
        if self.body_b64 is None:
            return None
        try:
            raw = base64.b64decode(self.body_b64, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise Rejected("body_b64 is not valid base64") from exc
        return raw or None

    def json_body(self) -> object | None:
        """The body as parsed JSON (raw bytes are authoritative); ``None`` without a body."""
        raw = self.raw_body()
        if raw is None:
            return None if self.body_b64 is not None else self.body
        try:
            return parse_fastjson(raw)
        except ValueError as exc:
            raise Rejected(f"undecodable body: {exc}") from exc


def header(ext: Mapping[str, Any], name: str) -> str:
    """A required (``@CFNotNull``) header field."""
    value = ext.get(name)
    if value is None:
        raise Rejected(f"the custom field <{name}> is null")
    return str(value)


def _parse_java_integer(name: str, text: str, bits: int) -> int:
    """``Long.parseLong`` / ``Integer.parseInt`` (:func:`~nsreplay.protocol.java_numbers.parse_java_integer`)."""
    if not is_java_integer_text(text):
        raise Rejected(f"header {name} is not an integer: {text!r}")
    value = parse_java_integer(text, bits)
    if value is None:
        raise Rejected(f"header {name} is out of range: {text!r}")
    return value


def long_header(ext: Mapping[str, Any], name: str) -> int:
    return _parse_java_integer(name, header(ext, name), 64)


def optional_integer_header(ext: Mapping[str, Any], name: str, bits: int = 64) -> int | None:
    value = ext.get(name)
    return None if value is None else _parse_java_integer(name, str(value), bits)


def optional_bool_header(ext: Mapping[str, Any], name: str) -> bool | None:
    """``Boolean.parseBoolean`` of a nullable header: only "true" (any case) is true."""
    value = ext.get(name)
    return None if value is None else str(value).lower() == "true"


class RegisterHeader(NamedTuple):
    """RegisterBrokerRequestHeader (5.x fields are ``None`` in 4.9, where Java does not read them)."""

    brokerName: str
    brokerAddr: str
    clusterName: str
    haServerAddr: str
    brokerId: int
    compressed: bool
    bodyCrc32: int
    heartbeatTimeoutMillis: int | None
    enableActingMaster: bool | None
    zoneName: str | None

    @classmethod
    def parse(cls, ext: Mapping[str, Any], profile: Profile) -> RegisterHeader:
        five = profile == PROFILE_5
        zone = ext.get("__ZONE_NAME") if five else None
        return cls(
            brokerName=header(ext, "brokerName"),
            brokerAddr=header(ext, "brokerAddr"),
            clusterName=header(ext, "clusterName"),
            haServerAddr=header(ext, "haServerAddr"),
            brokerId=long_header(ext, "brokerId"),
            compressed=bool(optional_bool_header(ext, "compressed")),
            bodyCrc32=optional_integer_header(ext, "bodyCrc32", bits=32) or 0,
            heartbeatTimeoutMillis=optional_integer_header(ext, "heartbeatTimeoutMillis") if five else None,
            enableActingMaster=optional_bool_header(ext, "enableActingMaster") if five else None,
            zoneName=None if zone is None else str(zone),
        )


class DecodedBody(NamedTuple):
    """The request-independent part of a REGISTER_BROKER body: CRC of the raw bytes (``None`` when the
    capture kept none), the decoded body (``None`` = no body) or the reason it cannot be decoded."""

    crc: int | None
    body: RegisterBody | None
    error: str | None
    topic_names: frozenset[str]
    table_keys: frozenset[str]  # the topicConfigTable's keys (5.x steps 5 and 7a)


def _decoded(crc: int | None, body: RegisterBody) -> DecodedBody:
    names = frozenset(c.topic_name for c in body.topic_configs)
    return DecodedBody(crc, body, None, names, names if body.topic_keys is None else body.table_keys)


def decode_body(req: Request, hdr: RegisterHeader) -> DecodedBody:
    """Decode a register body: raw bytes (``body_b64``) are authoritative, else the JSON ``body``;
    a body the caller decoded (``req.decoded_body``, see ``NameServer.apply``) is taken as it is."""
    if req.decoded_body is not None:
        return _decoded(None, req.decoded_body)
    try:
        raw = req.raw_body()
    except Rejected as exc:
        return DecodedBody(None, None, str(exc), frozenset(), frozenset())
    crc = None if req.body_b64 is None else body_crc32(raw or b"")
    try:
        if raw is not None:
            body: RegisterBody | None = decode_register_body(raw, compressed=hdr.compressed, version=req.version)
        elif req.body is not None and req.body_b64 is None:
            body = decode_json_register_body(req.body, version=req.version)
        else:
            body = None
    except BodyDecodeError as exc:
        return DecodedBody(crc, None, f"Failed to decode RegisterBrokerBody: {exc}", frozenset(), frozenset())
    if body is None:
        return DecodedBody(crc, None, None, frozenset(), frozenset())
    return _decoded(crc, body)


class BodyCache:
    """Remembers the last body each broker sent and its decoding, and (bounded) every body that came
    with a content id.

    Decoding is a pure function of (raw bytes or JSON, compressed flag, version), and a broker resends
    the same body every 30 s, so an equal body reuses the previous result. A JSON body is compared by
    its pickled bytes: a private copy (records changed by the caller after being applied cannot fool
    it) that tells ``true`` from ``1`` and ``1.0`` from ``1``, which Python's ``==`` does not, while
    the decoder accepts the one and rejects the other.
    """

    MAX_BY_ID = 1024  # bodies remembered by content id (see decode)

    def __init__(self) -> None:
        self._last: dict[tuple[str, str, int, str], tuple[tuple[object, ...], DecodedBody]] = {}
        self._by_id: dict[tuple[object, ...], DecodedBody] = {}

    def __reduce__(self) -> tuple[Any, ...]:
        """A cache is not state: it pickles empty. Decoding is pure, so a NameServer loaded from a
        pickle (a replay unit resumed at the start of a window) answers every request as the one
        pickled would, decoding each body once more. Kept, the decoded bodies were ~80 % of a
        unit's pickle (``gold.replay_state``; docs/performance.md, "Long histories")."""
        return (BodyCache, ())

    def decode(self, req: Request, hdr: RegisterHeader) -> DecodedBody:
        raw_form = req.body_b64 is not None
        source: object = req.body_b64 if raw_form else req.body
        if req.body_id is not None:  # equal ids promise equal bodies: no need to compare them
            source = ("body_id", req.body_id)
        elif source is not None and not raw_form:
            source = pickle.dumps(source, protocol=pickle.HIGHEST_PROTOCOL)
        key = (hdr.clusterName, hdr.brokerName, hdr.brokerId, hdr.brokerAddr)
        fingerprint = (raw_form, hdr.compressed, req.version, source)
        last = self._last.get(key)
        if last is not None and last[0] == fingerprint:
            return last[1]
        # With a content id, a body any broker sent before (a broker going back to an earlier body,
        # a master and its slave sending the same one) is not decoded again either.
        decoded = self._by_id.get(fingerprint) if req.body_id is not None else None
        if decoded is None:
            decoded = decode_body(req, hdr)
            if req.body_id is not None:
                if len(self._by_id) >= self.MAX_BY_ID:
                    self._by_id.clear()
                self._by_id[fingerprint] = decoded
        self._last[key] = (fingerprint, decoded)
        return decoded


class Registration(NamedTuple):
    """What a REGISTER_BROKER body contributes: dv, topic configs, filter list (None = untouched)."""

    dataVersion: DataVersion
    topics: tuple[TopicConfig, ...]
    topicNames: frozenset[str]
    topicKeys: frozenset[str]  # the keys of the body's topicConfigTable (usually the topic names)
    filterServers: tuple[str, ...] | None
    staticMappings: bool  # the body carries static-topic mappings (5.x step 7a is skipped then)


def registration(decoded: DecodedBody, req: Request, hdr: RegisterHeader, profile: Profile) -> Registration:
    """CRC check, decode errors and Java's defaults (spec §2 preamble, §8); raises Rejected."""
    if decoded.crc is not None and hdr.bodyCrc32 != 0 and hdr.bodyCrc32 != decoded.crc:
        raise Rejected("crc32 not match")
    if decoded.error is not None:
        raise Rejected(decoded.error)
    body = decoded.body
    if body is None:
        filters = None if req.version < LEGACY_REGISTER_VERSION else ()
        return Registration(DataVersion(0, 0, 0), (), frozenset(), frozenset(), filters, False)
    if body.mapping_error is not None and profile == PROFILE_5:  # only 5.x reads the mapping section
        raise Rejected(f"Failed to decode RegisterBrokerBody: {body.mapping_error}")
    if body.data_version is None:
        dv = DataVersion(0, req.ts, 0)
    else:
        state_version = 0 if profile == PROFILE_49 else body.data_version.state_version  # none in 4.9
        dv = DataVersion(state_version, body.data_version.timestamp, body.data_version.counter)
    filters = None if body.legacy_wrapper else tuple(body.filter_server_list)
    return Registration(dv, tuple(body.topic_configs), decoded.topic_names, decoded.table_keys, filters, body.static_mappings)


_QUEUE_DATA_FIELDS = ("readQueueNums", "writeQueueNums", "perm", "topicSysFlag")


def queue_data_from_json(obj: object) -> QueueData | None:
    """A QueueData of a REGISTER_TOPIC body; missing numbers are 0; ``None`` when it has no brokerName.
    Its numbers are Java ints: a value beyond an int's range is a body the NameServer's JSON decoder
    fails on, as one that is not an integer (:class:`Rejected`: SYSTEM_ERROR, nothing changes)."""
    if not isinstance(obj, Mapping):
        raise Rejected("queueDatas entry is not an object")
    numbers = []
    for name in _QUEUE_DATA_FIELDS:
        value = obj.get(name, 0)
        if value is None:
            value = 0
        if isinstance(value, bool) or not isinstance(value, int):
            raise Rejected(f"queueDatas.{name} is not an integer")
        if not fits_java(value, 32):
            raise Rejected(f"queueDatas.{name} is out of range of a Java int")
        numbers.append(value)
    broker_name = obj.get("brokerName")
    if broker_name is None:
        return None
    return QueueData(str(broker_name), *numbers)
