"""RegisterBrokerBody: the body of REGISTER_BROKER (code 103), in its JSON and compressed forms.

Contract (semantics spec §2 and §8):

* JSON form: ``{"filterServerList": [...], "topicConfigSerializeWrapper": {"dataVersion": {...},
  "topicConfigTable": {name: TopicConfig}}}``. Requests with ``version < 37`` carry a bare
  TopicConfigSerializeWrapper (``{"dataVersion": ..., "topicConfigTable": ...}``) and no filter list;
  such a body leaves the filter-server table untouched (``legacy_wrapper``).
* A TopicConfig field that is missing takes Java's default: 16 read queues, 16 write queues, perm 6,
  topicSysFlag 0. The QueueData goes to the config's own ``topicName``; the map key is used only when
  the config lacks one. The keys themselves matter to 5.x, which removes the topics *not among the
  keys* (step 7a) and counts them (step 5): ``topic_keys`` keeps them, one per config, when any of them
  differs from its config's ``topicName`` (``None`` when every key is its config's name).
* A body without a ``dataVersion`` decodes to ``data_version=None``: the NameServer then uses Java's
  default (counter 0, stateVersion 0, timestamp = the moment it processed the request).
* Compressed form (only decoded as such when the header says ``compressed=true``): a zlib stream of
  int32 length + DataVersion JSON; int32 n then n x (int32 length + ``"topicName read write perm
  filterType"`` optionally followed by ``" " + attributesJSON``); int32 length + filter-list JSON;
  optionally (5.x, version >= 413) int32 m then m x (int32 length + mapping JSON).
  topicSysFlag and order are not carried (0 / false). The NameServer puts the entries in a map by
  topic name, so a name listed twice counts once, with its last entry (``topic_configs`` keeps the
  first position). A topic entry is read as Java reads it (``_decode_compressed_topic``): its numbers
  by ``Integer.parseInt`` (not Python's ``int()``), its filter type by ``TopicFilterType.valueOf``.
* Bytes are read as Java makes a ``String`` of them (:mod:`nsreplay.protocol.java_strings`): what is
  not UTF-8 becomes U+FFFD and does not fail the body.
* Static-topic mappings (``topicQueueMappingInfoMap`` of the wrapper, or the compressed form's mapping
  section) are out of scope except for one bit: whether the body has any (``static_mappings``), which
  decides the 5.x NameServer's step 7a (semantics spec §2). Their content is not kept; the encoders
  write one placeholder entry for a body that has them. A 5.x NameServer reads the compressed form's
  mapping section whenever the request's version is 413 or more, and fails on a section that is
  missing, cut short or whose entry is not a JSON object; 4.9 never reads it. Such a body decodes
  (for 4.9) with ``mapping_error`` set to the reason, and the 5.x NameServer answers SYSTEM_ERROR.
* ``body_crc32`` is the value the broker puts in the ``bodyCrc32`` header: CRC32 & 0x7FFFFFFF.

Everything that cannot be decoded raises :class:`BodyDecodeError` with a short reason; the NameServer
answers SYSTEM_ERROR to such a request and changes nothing. One limit is nsreplay's own: a compressed
body that inflates to more than :data:`MAX_INFLATED_BODY_BYTES` is not decoded (the NameServer reads
the stream as far as the lengths in it say; inflating it whole, a few MB of zeros would take GBs).
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from typing import Any, Mapping

from nsreplay.protocol.java_numbers import fits_java, is_java_integer_text, parse_java_integer
from nsreplay.protocol.java_strings import java_string

__all__ = [
    "BodyDecodeError",
    "DataVersion",
    "TopicConfig",
    "RegisterBody",
    "body_crc32",
    "MAX_INFLATED_BODY_BYTES",
    "LEGACY_WRAPPER_MAX_VERSION",
    "STATIC_MAPPING_VERSION",
    "decode_register_body",
    "decode_json_register_body",
    "decode_data_version",
    "encode_json_register_body",
    "encode_register_body_bytes",
    "encode_compressed_register_body",
]

LEGACY_WRAPPER_MAX_VERSION = 37  # requests with version < 37 carry a bare TopicConfigSerializeWrapper
STATIC_MAPPING_VERSION = 413  # compressed bodies from this version on may end with a mapping section
MAPPING_MAP = "topicQueueMappingInfoMap"  # the wrapper's static-topic mappings (JSON form)
TOPIC_FILTER_TYPES = frozenset({"SINGLE_TAG", "MULTI_TAG"})  # Java's TopicFilterType
#: The most a compressed body may inflate to (256 MiB). A frame is at most 16 MiB, and the compact
#: form (about 50 bytes a topic) of millions of topics fits; a body beyond it is crafted or broken.
MAX_INFLATED_BODY_BYTES = 256 << 20


class BodyDecodeError(ValueError):
    """The body is not a RegisterBrokerBody the NameServer could decode."""


@dataclass(frozen=True)
class DataVersion:
    """A broker's DataVersion. ``state_version`` is 0 for 4.9 brokers."""

    state_version: int
    timestamp: int
    counter: int

    def to_json(self) -> dict[str, int]:
        return {"counter": self.counter, "stateVersion": self.state_version, "timestamp": self.timestamp}


@dataclass(frozen=True)
class TopicConfig:
    """One entry of a broker's topicConfigTable, with Java's defaults for missing fields."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_sys_flag: int = 0
    order: bool = False
    topic_filter_type: str = "SINGLE_TAG"


@dataclass(frozen=True)
class RegisterBody:
    """A decoded RegisterBrokerBody (see module docstring for the meaning of each field)."""

    data_version: DataVersion | None
    topic_configs: tuple[TopicConfig, ...]
    filter_server_list: tuple[str, ...] = ()
    legacy_wrapper: bool = False
    static_mappings: bool = False
    topic_keys: tuple[str, ...] | None = None
    mapping_error: str | None = None

    def __post_init__(self) -> None:
        if self.topic_keys is not None and len(self.topic_keys) != len(self.topic_configs):
            raise ValueError("topic_keys must hold one key per topic config")

    @property
    def table_keys(self) -> frozenset[str]:
        """The keys of the body's topicConfigTable (5.x steps 5 and 7a)."""
        if self.topic_keys is not None:
            return frozenset(self.topic_keys)
        return frozenset(c.topic_name for c in self.topic_configs)


def body_crc32(raw: bytes) -> int:
    """The ``bodyCrc32`` header value for these body bytes."""
    return zlib.crc32(raw) & 0x7FFFFFFF


# ----------------------------------------------------------------------------------------- decoding


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_field(obj: Mapping[str, Any], key: str, default: int, bits: int = 32) -> int:
    """``obj[key]`` as the Java field reads it: an int (``bits=32``) or a long (``bits=64``); ``default``
    when missing or null. A value that is not an integer, or does not fit the Java type (the
    NameServer's JSON decoder fails on the overflow), raises :class:`BodyDecodeError`."""
    value = obj.get(key)
    if value is None:
        return default
    if not _is_int(value):
        raise BodyDecodeError(f"{key} is not an integer")
    if not fits_java(value, bits):
        raise BodyDecodeError(f"{key} is out of range of a Java {'int' if bits == 32 else 'long'}")
    return int(value)


def decode_data_version(obj: object) -> DataVersion:
    """Decode a DataVersion JSON object; missing fields are 0 (Java's defaults for a parsed object).
    Its fields are Java longs: a value beyond a long's range raises :class:`BodyDecodeError`."""
    if not isinstance(obj, Mapping):
        raise BodyDecodeError("dataVersion is not an object")
    return DataVersion(
        state_version=_int_field(obj, "stateVersion", 0, bits=64),
        timestamp=_int_field(obj, "timestamp", 0, bits=64),
        counter=_int_field(obj, "counter", 0, bits=64),
    )


def _decode_topic_config(key: str, obj: object) -> TopicConfig:
    if not isinstance(obj, Mapping):
        raise BodyDecodeError(f"topic config {key!r} is not an object")
    name = obj.get("topicName")
    if name is None:
        name = key
    if not isinstance(name, str):
        raise BodyDecodeError(f"topicName of {key!r} is not a string")
    order = obj.get("order", False)
    if not isinstance(order, bool):
        raise BodyDecodeError(f"order of {key!r} is not a boolean")
    filter_type = obj.get("topicFilterType", "SINGLE_TAG")
    if not isinstance(filter_type, str):
        raise BodyDecodeError(f"topicFilterType of {key!r} is not a string")
    return TopicConfig(
        topic_name=name,
        read_queue_nums=_int_field(obj, "readQueueNums", 16),
        write_queue_nums=_int_field(obj, "writeQueueNums", 16),
        perm=_int_field(obj, "perm", 6),
        topic_sys_flag=_int_field(obj, "topicSysFlag", 0),
        order=order,
        topic_filter_type=filter_type,
    )


def _decode_wrapper(obj: object, filters: tuple[str, ...], legacy: bool) -> RegisterBody:
    """The body of a TopicConfigSerializeWrapper (with the body's filter list); a mapping map that is
    present and not empty counts as static-topic mappings."""
    if obj is None:
        return RegisterBody(None, (), filters, legacy_wrapper=legacy)
    if not isinstance(obj, Mapping):
        raise BodyDecodeError("topicConfigSerializeWrapper is not an object")
    dv_obj = obj.get("dataVersion")
    data_version = None if dv_obj is None else decode_data_version(dv_obj)
    mappings = bool(obj.get(MAPPING_MAP))
    table = obj.get("topicConfigTable")
    if table is None:
        table = {}
    if not isinstance(table, Mapping):
        raise BodyDecodeError("topicConfigTable is not an object")
    keys = tuple(str(k) for k in table)
    configs = tuple(_decode_topic_config(k, v) for k, v in zip(keys, table.values()))
    renamed = any(k != c.topic_name for k, c in zip(keys, configs))
    return RegisterBody(data_version, configs, filters, legacy, mappings, keys if renamed else None)


def _decode_filter_list(obj: object) -> tuple[str, ...]:
    if obj is None:
        return ()
    if not isinstance(obj, list) or not all(isinstance(a, str) for a in obj):
        raise BodyDecodeError("filterServerList is not a list of strings")
    return tuple(obj)


def decode_json_register_body(obj: object, *, version: int) -> RegisterBody:
    """Decode an already-parsed JSON body of a REGISTER_BROKER request sent with ``version``."""
    if not isinstance(obj, Mapping):
        raise BodyDecodeError("body is not a JSON object")
    if version < LEGACY_WRAPPER_MAX_VERSION:
        return _decode_wrapper(obj, (), legacy=True)
    return _decode_wrapper(obj.get("topicConfigSerializeWrapper"), _decode_filter_list(obj.get("filterServerList")), legacy=False)


class _Reader:
    """Big-endian reader over the inflated compressed body."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def remaining(self) -> int:
        return len(self._data) - self._pos

    def int32(self) -> int:
        if self.remaining() < 4:
            raise BodyDecodeError("compressed body is truncated")
        (value,) = struct.unpack_from(">i", self._data, self._pos)
        self._pos += 4
        return value

    def chunk(self) -> bytes:
        length = self.int32()
        if length < 0 or length > self.remaining():
            raise BodyDecodeError("compressed body has a bad length prefix")
        start = self._pos
        self._pos += length
        return self._data[start : self._pos]


def _json_text(raw: bytes, what: str) -> object:
    """``raw`` as JSON, its bytes read as Java reads them (:func:`~nsreplay.protocol.java_strings.java_string`:
    bytes that are not UTF-8 become U+FFFD, they do not fail the body). JSON nested deeper than
    Python's stack allows fails the body too."""
    try:
        return json.loads(java_string(raw))
    except ValueError as exc:
        raise BodyDecodeError(f"{what} is not valid JSON") from exc
    except RecursionError as exc:
        raise BodyDecodeError(f"{what} is JSON nested too deeply to be read") from exc


def _decode_compressed_topic(line: bytes) -> TopicConfig:
    """One topic entry of the compressed form, read as ``TopicConfig.decode`` reads it (semantics spec
    §8): the bytes as a Java ``String`` (:func:`~nsreplay.protocol.java_strings.java_string`: a
    malformed sequence becomes U+FFFD); split at every space, Java's way (trailing
    empty fields dropped); at least five fields: the name, three numbers that must parse as Java ints
    (``Integer.parseInt``: no ``_``, no spaces, any script's digits) and a filter type that must be a
    ``TopicFilterType`` name (``valueOf``: ``SINGLE_TAG`` or ``MULTI_TAG``, exactly). A sixth field
    (5.x's attributes) is not kept. Any other entry fails the whole body, as in Java."""
    parts = java_string(line).split(" ")
    while parts and parts[-1] == "":  # String.split drops trailing empty fields
        parts.pop()
    if len(parts) < 5:
        raise BodyDecodeError("compressed topic entry has too few fields")
    name, read, write, perm, filter_type = parts[:5]
    if not all(is_java_integer_text(t) for t in (read, write, perm)):
        raise BodyDecodeError("compressed topic entry has a non-integer field")
    numbers = tuple(parse_java_integer(t, 32) for t in (read, write, perm))
    if None in numbers:  # Integer.parseInt fails beyond an int
        raise BodyDecodeError("compressed topic entry has a field out of range of a Java int")
    if filter_type not in TOPIC_FILTER_TYPES:
        raise BodyDecodeError("compressed topic entry has a filter type that is not SINGLE_TAG or MULTI_TAG")
    return TopicConfig(name, *numbers, 0, False, filter_type)


def _inflate(raw: bytes) -> bytes:
    """The whole zlib stream ``raw`` inflated (bytes after its end are ignored), at most
    :data:`MAX_INFLATED_BODY_BYTES` of it: memory stays bounded whatever the ratio."""
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(raw, MAX_INFLATED_BODY_BYTES)
        beyond = not inflater.eof and len(data) == MAX_INFLATED_BODY_BYTES and inflater.decompress(inflater.unconsumed_tail, 1)
    except zlib.error as exc:
        raise BodyDecodeError("compressed body is not a zlib stream") from exc
    if beyond:
        raise BodyDecodeError(f"compressed body inflates to more than {MAX_INFLATED_BODY_BYTES:,} bytes (nsreplay's limit)")
    if not inflater.eof:
        raise BodyDecodeError("compressed body is not a zlib stream (it is cut short)")
    return data


def _decode_compressed(raw: bytes, version: int) -> RegisterBody:
    reader = _Reader(_inflate(raw))
    data_version = decode_data_version(_json_text(reader.chunk(), "compressed dataVersion"))
    count = reader.int32()
    if count < 0:
        raise BodyDecodeError("compressed body has a negative topic count")
    by_name: dict[str, TopicConfig] = {}
    for _ in range(count):  # a map by topic name: a repeated name keeps its first place, its last entry
        config = _decode_compressed_topic(reader.chunk())
        by_name[config.topic_name] = config
    filters = _decode_filter_list(_json_text(reader.chunk(), "compressed filter list"))
    if version < STATIC_MAPPING_VERSION:
        return RegisterBody(data_version, tuple(by_name.values()), filters)
    mappings, error = _mapping_section(reader)
    return RegisterBody(data_version, tuple(by_name.values()), filters, static_mappings=mappings, mapping_error=error)


def _mapping_section(reader: _Reader) -> tuple[bool, str | None]:
    """(whether it has entries, why 5.x cannot read it or None) of the static-topic mapping section
    that ends a compressed body from version 413 on: int32 m, then m x (int32 length + JSON object).
    A count of 0 or less means no mappings; bytes after the section are not read (as in Java)."""
    try:
        count = reader.int32()
        for _ in range(max(count, 0)):
            entry = _json_text(reader.chunk(), "static-topic mapping entry")
            if not isinstance(entry, dict):
                raise BodyDecodeError("static-topic mapping entry is not a JSON object")
    except BodyDecodeError as exc:
        return False, f"static-topic mapping section: {exc}"
    return count > 0, None


def decode_register_body(raw: bytes, *, compressed: bool, version: int) -> RegisterBody:
    """Decode raw body bytes as the NameServer would: compressed only when the header says so, and
    never below version 37, whose bodies the NameServer reads as a bare wrapper in JSON whatever the
    header says (its pre-3.0.11 path, in 4.9 and 5.x alike)."""
    if compressed and version >= LEGACY_WRAPPER_MAX_VERSION:
        return _decode_compressed(raw, version)
    return decode_json_register_body(_json_text(raw, "body"), version=version)


# ----------------------------------------------------------------------------------------- encoding


def _topic_config_json(config: TopicConfig) -> dict[str, Any]:
    return {
        "order": config.order,
        "perm": config.perm,
        "readQueueNums": config.read_queue_nums,
        "topicFilterType": config.topic_filter_type,
        "topicName": config.topic_name,
        "topicSysFlag": config.topic_sys_flag,
        "writeQueueNums": config.write_queue_nums,
    }


def encode_json_register_body(body: RegisterBody) -> dict[str, Any]:
    """The JSON object a broker sends for ``body`` (a bare wrapper when ``legacy_wrapper``)."""
    wrapper: dict[str, Any] = {}
    if body.data_version is not None:
        wrapper["dataVersion"] = body.data_version.to_json()
    keys = body.topic_keys if body.topic_keys is not None else [c.topic_name for c in body.topic_configs]
    wrapper["topicConfigTable"] = {k: _topic_config_json(c) for k, c in zip(keys, body.topic_configs)}
    if body.static_mappings:
        wrapper[MAPPING_MAP] = {_placeholder_mapping_topic(body): _placeholder_mapping(body)}
    if body.legacy_wrapper:
        return wrapper
    return {"filterServerList": list(body.filter_server_list), "topicConfigSerializeWrapper": wrapper}


def encode_register_body_bytes(body: RegisterBody) -> bytes:
    """The compact UTF-8 JSON bytes of ``body`` (what goes on the wire uncompressed)."""
    return json.dumps(encode_json_register_body(body), separators=(",", ":")).encode("utf-8")


def _chunk(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _placeholder_mapping_topic(body: RegisterBody) -> str:
    return body.topic_configs[0].topic_name if body.topic_configs else "TBW102"


def _placeholder_mapping(body: RegisterBody) -> dict[str, Any]:
    """A stand-in TopicQueueMappingInfo for a body with ``static_mappings`` (its content is not kept)."""
    return {"bname": "", "currIdMap": {}, "dirty": False, "epoch": 0, "topic": _placeholder_mapping_topic(body), "totalQueues": 0}


def encode_compressed_register_body(body: RegisterBody, *, with_mappings: bool = False) -> bytes:
    """The compressed (zlib) form of ``body``. ``with_mappings`` appends the mapping section (5.x,
    version >= 413): empty, or one placeholder entry when ``body.static_mappings``, which needs it."""
    if body.static_mappings and not with_mappings:
        raise ValueError("a body with static_mappings needs the mapping section (with_mappings=True)")
    if body.topic_keys is not None:
        raise ValueError("the compressed form keys its topics by name: it cannot carry topic_keys")
    dv = body.data_version or DataVersion(0, 0, 0)
    parts = [_chunk(json.dumps(dv.to_json(), separators=(",", ":")).encode("utf-8"))]
    parts.append(struct.pack(">i", len(body.topic_configs)))
    for c in body.topic_configs:
        line = f"{c.topic_name} {c.read_queue_nums} {c.write_queue_nums} {c.perm} {c.topic_filter_type}"
        parts.append(_chunk(line.encode("utf-8")))
    parts.append(_chunk(json.dumps(list(body.filter_server_list)).encode("utf-8")))
    if with_mappings:
        entries = [json.dumps(_placeholder_mapping(body), separators=(",", ":")).encode("utf-8")] if body.static_mappings else []
        parts.append(struct.pack(">i", len(entries)))
        parts += [_chunk(e) for e in entries]
    return zlib.compress(b"".join(parts))
