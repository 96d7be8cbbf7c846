"""Capture-format v1 records: one line of text in, a typed record or a quarantine reason out.

The contract is ``spec/capture-format.md``. :func:`parse_line` returns either an :class:`Accepted`
record (typed fields ready for ``silver.events`` plus, the first time a register body is seen by this
parser, its decoded form for ``silver.topic_configs``) or a :class:`Rejected` one with a reason code:

``invalid_utf8``, ``invalid_json``, ``not_an_object``, ``empty_line``, ``missing_field``,
``wrong_type``, ``unknown_kind``, ``unknown_code``, ``unknown_channel_event``, ``undecodable_body``,
``crc_mismatch``, ``too_deep`` (JSON nested deeper than the 254 levels orjson can write back),
``quality:<rule>`` (a row-level data-quality rule) and the reader's own
``line_too_long``, ``truncated_gzip``, ``corrupt_gzip``, ``not_gzipped``, ``zero_bytes``,
``unreadable_file``; the ingest's ``incomplete_line`` is a file's last line, without a newline,
that is ``invalid_json`` or ``invalid_utf8`` (:func:`pipelines.ingest.transforms.read_line_row`).

Whatever is accepted fits the columns it goes to (integers in their Arrow type's range, strings
encodable as UTF-8) and is something the reference model (:mod:`nsreplay.model`) can replay: a value
either of them cannot take is quarantined here, never left to fail the run later. Where the model
itself validates a value (integer headers, a start record's version and config), its own functions
decide and its own words are the detail: ``wrong_type`` for a header number out of Java's range or a
start record the model refuses, ``undecodable_body`` for a register body the NameServer could not
decode (numbers beyond Java's int/long) or whose text cannot be stored (a lone surrogate). A request's
empty ``body_b64`` is zero bytes on the wire, which Java reads as no body: it is taken as no body.

Each line is parsed once; each distinct register body is decoded once per :class:`ParserMemory`
(one per Python worker process and configuration, shared by the parsers of the Spark partitions it
runs) and reported as new once per parser (a parser lives for one partition). Identity:

* ``body_id`` — content hash of how the body is decoded (raw bytes + compressed/legacy flags, and for
  compressed bytes whether the version is 413 or more, or the canonical JSON of a ``body`` object).
  Equal ids mean equal decoded bodies.
* ``record_id`` — content hash of the whole record with the body replaced by its canonical hash, so
  two records equal in every field (key order aside) share it: that is the duplicate rule.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Hashable, Mapping, TypeVar

import orjson

from nsreplay.model.namesrv import profile_for_version
from nsreplay.model.render import parse_fastjson
from nsreplay.model.requests import Rejected as ModelRejected
from nsreplay.model.requests import optional_integer_header
from nsreplay.model.tables import NamesrvConfig
from nsreplay.protocol.java_numbers import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN, is_java_integer_text, parse_java_integer
from nsreplay.protocol.register_body import (
    LEGACY_WRAPPER_MAX_VERSION,
    STATIC_MAPPING_VERSION,
    BodyDecodeError,
    RegisterBody,
    body_crc32,
    decode_data_version,
    decode_json_register_body,
    decode_register_body,
)
from pipelines.ingest.bronze_form import STORED_BODY_MIN_BYTES, body_ref, split_body

KINDS = ("request", "response", "channel", "namesrv_start")
REGISTER_BROKER = 103
QUERY_DATA_VERSION = 322
REGISTER_TOPIC = 217

# Header fields a request cannot do without (the NameServer rejects the request otherwise).
REQUIRED_HEADER: Mapping[int, tuple[str, ...]] = {
    100: ("namespace", "key", "value"),
    102: ("namespace", "key"),
    103: ("brokerName", "brokerAddr", "clusterName", "brokerId"),
    104: ("brokerName", "brokerAddr", "clusterName", "brokerId"),
    205: ("brokerName",),
    216: ("topic",),
    217: ("topic",),
    322: ("brokerAddr", "clusterName"),
    327: ("brokerName",),
    904: ("brokerAddr", "clusterName"),
}
# Header fields that must parse as Java integers when present, with their width in bits (brokerId and
# heartbeatTimeoutMillis are longs, bodyCrc32 an int: the model's RegisterHeader reads them so).
INTEGER_HEADER: Mapping[str, int] = {"brokerId": 64, "bodyCrc32": 32, "heartbeatTimeoutMillis": 64}
_MAX_DETAIL = 200  # characters of a model's message kept in a quarantine detail
_MAX_VALID_HEADERS = 65536  # (code, header) pairs a parser remembers as valid
_JSON_WHITESPACE = " \t\r\n"  # the only whitespace JSON has (RFC 8259)
_DEPTH_LIMIT = "depth limit exceeded"  # how orjson's error begins for JSON nested over 1,024 levels
INT32 = (INT_MIN, INT_MAX)
INT64 = (LONG_MIN, LONG_MAX)
_T = TypeVar("_T")


@dataclass(frozen=True)
class Rejected:
    reason: str
    detail: str
    namesrv: str | None = None
    ts: int | None = None


@dataclass(frozen=True)
class DecodedBody:
    """A register body decoded for ``silver.topic_configs``."""

    body_id: str
    encoding: str
    body: RegisterBody
    body_bytes: int


@dataclass(frozen=True)
class Accepted:
    """A valid record: ``event`` has the ``silver.events`` columns (without run/partition columns)."""

    event: dict[str, Any]
    new_body: DecodedBody | None = None


class _Reject(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class ParserLimits:
    """Plain values the parser needs from configuration."""

    known_codes: frozenset[int]
    channel_events: frozenset[str]


def _is_int(value: object) -> bool:
    return type(value) is int


def _got(value: object) -> str:
    """What a rejected JSON value was, for the detail: a number itself (an integer beyond its column's
    range, or a float: orjson reads an integer literal beyond 64 bits as one), otherwise its type."""
    if type(value) in (int, float):
        return repr(value)[:40]
    return type(value).__name__


def _require(obj: Mapping[str, Any], key: str, check: Callable[[object], bool], what: str, prefix: str = "") -> Any:
    value = obj.get(key)
    if value is None:
        raise _Reject("missing_field", f"{prefix}{key} is missing")
    if not check(value):
        raise _Reject("wrong_type", f"{prefix}{key} must be {what}, got {_got(value)}")
    return value


def _optional(obj: Mapping[str, Any], key: str, check: Callable[[object], bool], what: str) -> Any:
    value = obj.get(key)
    if value is not None and not check(value):
        raise _Reject("wrong_type", f"{key} must be {what}, got {_got(value)}")
    return value


def _int_in(low: int, high: int) -> Callable[[object], bool]:
    return lambda v: _is_int(v) and low <= v <= high  # type: ignore[operator]


_IS_INT32 = _int_in(*INT32)
_IS_INT64 = _int_in(*INT64)


def _is_str(v: object) -> bool:
    return isinstance(v, str)


def _is_obj(v: object) -> bool:
    return isinstance(v, dict)


def _digest(*parts: bytes) -> str:
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()


def _canonical(value: object) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _config_text(value: object) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode("utf-8")


def _b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _Reject("undecodable_body", f"{what} is not valid base64") from exc


def _checked_integer(text: str, bits: int) -> int:
    """The value of a header integer that :meth:`LineParser._check_header` let through (a sign and
    decimal digits of any script, within the type): ``int()`` reads it, unless it is padded with more
    leading zeros than ``int()`` takes (4,300 digits), which :func:`parse_java_integer` drops."""
    return int(text) if len(text) <= 20 else parse_java_integer(text, bits)  # type: ignore[return-value]


def _check_integer_header(ext: Mapping[str, str], key: str, bits: int) -> None:
    """Reject a header number the model (as Java's ``Long.parseLong`` / ``Integer.parseInt``) refuses:
    ``wrong_type`` with the model's own words (syntax is checked before, with the ingest's message)."""
    try:
        optional_integer_header(ext, key, bits)
    except ModelRejected as exc:
        raise _Reject("wrong_type", str(exc)[:_MAX_DETAIL]) from exc


def start_record_problem(rocketmq_version: str, config: Mapping[str, str]) -> str | None:
    """Why the model cannot (re)start a NameServer from this start record (the ``rocketmq_version`` and
    the config as the ingest stores them, string values), or ``None`` when it can. The model's own
    checks decide (:func:`nsreplay.model.profile_for_version`, :meth:`NamesrvConfig.from_mapping`), so
    a start record the ingest accepts never stops the replay."""
    try:
        profile_for_version(rocketmq_version)
        NamesrvConfig.from_mapping(config)
    except ValueError as exc:
        return str(exc)[:_MAX_DETAIL]
    return None


def _unstorable_text(body: RegisterBody) -> str | None:
    """Why a decoded register body's text cannot be stored, or ``None``: every string of it that goes
    to a column (topic names and keys, filter types, filter servers) must encode as UTF-8, which a lone
    surrogate (a ``\\ud800`` escape in raw JSON, read by Python's json module) does not."""
    texts: list[tuple[str, str]] = [("topic name", c.topic_name) for c in body.topic_configs]
    texts += [("topic filter type", c.topic_filter_type) for c in body.topic_configs]
    texts += [("topic key", k) for k in body.topic_keys or ()]
    texts += [("filter server", f) for f in body.filter_server_list]
    for what, text in texts:
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                return f"{what} {ascii(text[:60])} holds a lone surrogate (not valid UTF-8 text)"
    return None


@dataclass(frozen=True)
class _KnownBody:
    """A body met before: its text exactly as in the line, its value (never mutated: shared between
    lines), the member it is the value of (``body`` or ``body_b64``), its canonical JSON (``body``
    only) and the ids computed from it so far (hashing 40 KB per line is not free)."""

    text: bytes
    value: object
    member: str
    canonical: bytes = b""
    ids: dict[str, str] = field(default_factory=dict)

    @property
    def ref(self) -> str:
        """The id bronze stores the text under (:func:`pipelines.ingest.bronze_form.body_ref`)."""
        ref = self.ids.get("text")
        if ref is None:
            ref = self.ids["text"] = body_ref(self.text)
        return ref


@dataclass(frozen=True)
class ParsedLine:
    """The verdict on a line given as bytes, and the body text bronze may store apart from it:
    ``stored`` is set when the line is ``line[:prefix_bytes] + MARK + stored.text + '}'``, MARK being
    ``,"body":`` or ``,"body_b64":`` (``stored.member``)."""

    verdict: Accepted | Rejected
    stored: _KnownBody | None = None
    prefix_bytes: int = 0


def _fingerprint(text: bytes | str) -> tuple[int, bytes | str, bytes | str]:
    """A cheap key for a body text; equal texts have equal keys (candidates are then compared whole)."""
    return len(text), text[:96], text[-96:]


class _TextCache(Generic[_T]):
    """Entries remembered by the text they were made from (looked up by :func:`_fingerprint`, then
    compared whole), bounded in entries and bytes: when either bound is reached it starts afresh."""

    MAX_ENTRIES = 4096
    MAX_BYTES = 64 * 1024 * 1024  # what one task may hold of texts met before

    def __init__(self, text_of: Callable[[_T], bytes | str]) -> None:
        self._text_of = text_of
        self._entries: dict[tuple[int, bytes | str, bytes | str], list[_T]] = {}
        self._count = 0
        self._bytes = 0

    def find(self, text: bytes | str) -> _T | None:
        for entry in self._entries.get(_fingerprint(text), ()):
            if self._text_of(entry) == text:
                return entry
        return None

    def add(self, entry: _T, nbytes: int) -> _T:
        if self._count >= self.MAX_ENTRIES or self._bytes >= self.MAX_BYTES:
            self._entries.clear()
            self._count = self._bytes = 0
        self._entries.setdefault(_fingerprint(self._text_of(entry)), []).append(entry)
        self._count += 1
        self._bytes += nbytes
        return entry


@dataclass(frozen=True)
class _KnownRaw:
    """A ``body_b64`` text met before: its decoded bytes, their CRC and the body ids computed from
    them so far (decoding, checksumming and hashing ~40 KB per line is not free)."""

    text: str
    raw: bytes
    crc: int
    ids: dict[str, str] = field(default_factory=dict)


class ParserMemory:
    """What parsers of one configuration may share: the register bodies decoded so far (or the
    reason each was rejected), the body texts and ``body_b64`` texts met before, and the (code,
    header) pairs that passed the checks. Everything in it is a function of the texts it was made
    from and of the configuration (limits and body rule), so a parser that starts with a warm memory
    gives the same verdicts as one that starts empty, only sooner. Bounded: the decoded bodies start
    afresh at ``MAX_BODIES`` entries or ``MAX_BODY_BYTES`` of encoded body, the text caches as
    :class:`_TextCache` says."""

    MAX_BODIES = 4096
    MAX_BODY_BYTES = 64 * 1024 * 1024  # of the decoded bodies' encoded sizes

    def __init__(self) -> None:
        self.bodies: dict[str, DecodedBody | _Reject] = {}
        self._body_bytes = 0
        self.body_texts: _TextCache[_KnownBody] = _TextCache(lambda known: known.text)
        self.raw_texts: _TextCache[_KnownRaw] = _TextCache(lambda known: known.text)
        self.valid_headers: set[tuple[object, ...]] = set()  # (code, *header items) that passed the checks

    def remember_body(self, body_id: str, decoded: DecodedBody | _Reject) -> None:
        if len(self.bodies) >= self.MAX_BODIES or self._body_bytes >= self.MAX_BODY_BYTES:
            self.bodies.clear()
            self._body_bytes = 0
        self.bodies[body_id] = decoded
        self._body_bytes += decoded.body_bytes if isinstance(decoded, DecodedBody) else 0


_WORKER_MEMORY: dict[Hashable, ParserMemory] = {}


def worker_memory(config: Hashable) -> ParserMemory:
    """The :class:`ParserMemory` of this process for parsers of ``config`` (a value that determines
    the parser's limits and body rule). A Spark Python worker runs many tasks one after the other; a
    capture file's task that starts with what earlier tasks decoded skips decoding the register bodies
    again (62-80 distinct ones per bench-day file). Only the latest configuration is kept."""
    memory = _WORKER_MEMORY.get(config)
    if memory is None:
        _WORKER_MEMORY.clear()
        memory = _WORKER_MEMORY[config] = ParserMemory()
    return memory


class LineParser:
    """Parses capture lines (one parser per Spark partition). It reports a register body as new
    (:attr:`Accepted.new_body`) the first time *this parser* meets it, whatever its ``memory`` (shared
    between parsers of the same configuration, see :func:`worker_memory`; a fresh one when omitted)
    already knows: each partition carries every body its lines refer to."""

    def __init__(
        self,
        limits: ParserLimits,
        body_rule: Callable[[RegisterBody], str | None] | None = None,
        memory: ParserMemory | None = None,
    ) -> None:
        self._limits = limits
        self._body_rule = body_rule
        memory = memory if memory is not None else ParserMemory()
        self._memory = memory
        self._body_texts = memory.body_texts
        self._raw_texts = memory.raw_texts
        self._valid_headers = memory.valid_headers
        self._reported: set[str] = set()  # body ids this parser has reported as new
        self._reporting: str | None = None  # the body id the line being parsed reports as new
        self._known: _KnownBody | None = None

    def report_again(self, body_id: str) -> None:
        """Report ``body_id`` as new once more, at the next line that carries it: the line it was
        reported with yields no event (a row rule rejected it), so that line's body is not stored."""
        self._reported.discard(body_id)

    # -- the repeated-body fast path ---------------------------------------------------------------
    #
    # Brokers resend the same body every 30 s, and it is most of the line. A line of the form
    # PREFIX + ',"body":' + TAIL + '}' (or ',"body_b64":') whose TAIL is byte-identical to a JSON value
    # already parsed is read by parsing only PREFIX + '}' and reusing that value. This is exact: the
    # quote after the comma is unescaped, so the mark cannot lie inside a string of a valid line; if
    # PREFIX + '}' is a valid object with at least one member (a bare '{' would let '{,"body":…'
    # through), the comma is at the top level, the line is that object plus a last member whose value
    # is the known TAIL (a later duplicate key wins, as in a full parse), and any line this does not
    # fit is parsed in full. Only bodies of STORED_BODY_MIN_BYTES or more are remembered: those are
    # the ones worth it, and the ones bronze stores apart (bronze_form).

    def _known_body_line(self, data: bytes) -> tuple[dict[str, Any], _KnownBody, int] | None:
        parts = split_body(data)
        if parts is None or len(parts[1]) < STORED_BODY_MIN_BYTES:
            return None
        known = self._body_texts.find(parts[1])
        if known is None or known.member != parts[2]:
            return None
        try:
            obj = orjson.loads(parts[0] + b"}")  # orjson checks the bytes are UTF-8
        except orjson.JSONDecodeError:
            return None
        if not isinstance(obj, dict) or not obj:  # "{" + ',"body":…': no member before the comma, not JSON
            return None
        obj[known.member] = known.value
        return obj, known, len(parts[0])

    def _learn_body_text(self, data: bytes, obj: dict[str, Any]) -> tuple[_KnownBody, int] | None:
        parts = split_body(data)
        if parts is None or len(parts[1]) < STORED_BODY_MIN_BYTES:
            return None
        prefix, tail, member = parts
        current = obj.get(member)
        if not isinstance(current, dict if member == "body" else str):
            return None
        try:
            value = orjson.loads(tail)
        except orjson.JSONDecodeError:
            return None
        if value != current:
            return None
        try:
            canonical = _canonical(current) if member == "body" else b""
        except orjson.JSONEncodeError:  # too deep to store: the line's verdict says so (_verdict)
            return None
        known = self._body_texts.add(_KnownBody(tail, current, member, canonical), len(tail))
        return known, len(prefix)

    def _known_raw(self, body_b64: str) -> _KnownRaw:
        """The decoded bytes of a ``body_b64`` text (and their CRC), from the cache when met before;
        :class:`_Reject` when it is not valid base64."""
        known = self._raw_texts.find(body_b64)
        if known is not None:
            return known
        raw = _b64(body_b64, "body_b64")
        return self._raw_texts.add(_KnownRaw(body_b64, raw, body_crc32(raw)), len(body_b64) + len(raw))

    def _canonical_body(self, body: object) -> bytes:
        """Canonical JSON of the line's body object, from the fast-path cache when it is that body."""
        known = self._known
        if known is not None and known.value is body:
            return known.canonical
        return _canonical(body)

    def _body_digest(self, body: object, purpose: str, parts: Callable[[bytes], tuple[bytes, ...]]) -> str:
        """``_digest(*parts(canonical JSON of body))``, computed once per known body and purpose."""
        known = self._known
        if known is None or known.value is not body:
            return _digest(*parts(_canonical(body)))
        digest = known.ids.get(purpose)
        if digest is None:
            digest = known.ids[purpose] = _digest(*parts(known.canonical))
        return digest

    # -- entry points ------------------------------------------------------------------------------

    def parse(self, text: str, *, exact: bool = True) -> Accepted | Rejected:
        """Parse one line. ``exact`` is False when the line's bytes were not valid UTF-8."""
        if not exact:
            return Rejected("invalid_utf8", "the line is not valid UTF-8")
        return self.parse_bytes(text.encode("utf-8", "surrogatepass")).verdict

    def parse_bytes(self, data: bytes) -> ParsedLine:
        """Parse one whole line given as its exact bytes (without the newline)."""
        self._known = None
        fast = self._known_body_line(data)
        if fast is not None:
            obj, known, prefix_bytes = fast
            self._known = known
            return ParsedLine(self._verdict(obj), known, prefix_bytes)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return ParsedLine(Rejected("invalid_utf8", "the line is not valid UTF-8"))
        if not text.strip(_JSON_WHITESPACE):  # Python's whitespace also takes \x1c-\x1f, \x0b and \x0c
            return ParsedLine(Rejected("empty_line", "the line is empty"))
        try:
            obj = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            if str(exc).startswith(_DEPTH_LIMIT):  # more than 1,024 levels: not read, whatever follows
                return ParsedLine(Rejected("too_deep", f"a value nested too deeply to be read ({str(exc)[:200]})"))
            return ParsedLine(Rejected("invalid_json", f"not valid JSON: {str(exc)[:200]}"))
        if not isinstance(obj, dict):
            return ParsedLine(Rejected("not_an_object", f"a JSON {type(obj).__name__}, not an object"))
        learned = self._learn_body_text(data, obj)
        if learned is None:
            return ParsedLine(self._verdict(obj))
        self._known = learned[0]
        return ParsedLine(self._verdict(obj), *learned)

    def _verdict(self, obj: dict[str, Any]) -> Accepted | Rejected:
        """The line's verdict. A line rejected after its body was reported new (a value too deep to
        store is found last) gives the report back, for the next line that carries the body."""
        self._reporting = None
        try:
            return self._record(obj)
        except orjson.JSONEncodeError as exc:  # orjson reads JSON 1,024 levels deep but writes only 254
            rejected = Rejected("too_deep", f"a value nested too deeply to be stored ({exc})", *self._where(obj))
        except _Reject as exc:
            rejected = Rejected(exc.reason, exc.detail, *self._where(obj))
        if self._reporting is not None:
            self.report_again(self._reporting)
        return rejected

    @staticmethod
    def _where(obj: dict[str, Any]) -> tuple[str | None, int | None]:
        """What of the line's namesrv and ts the quarantine columns can hold (ts is a long)."""
        namesrv = obj.get("namesrv") if isinstance(obj.get("namesrv"), str) else None
        ts = obj.get("ts") if _IS_INT64(obj.get("ts")) else None
        return namesrv, ts

    # -- records -----------------------------------------------------------------------------------

    def _record(self, obj: dict[str, Any]) -> Accepted:
        event: dict[str, Any] = {
            "namesrv": _require(obj, "namesrv", _is_str, "a string"),
            "ts": _require(obj, "ts", _IS_INT64, "a 64-bit integer"),
            "kind": _require(obj, "kind", _is_str, "a string"),
            "seq": _optional(obj, "seq", _IS_INT64, "a 64-bit integer"),
        }
        kind = event["kind"]
        if kind not in KINDS:
            raise _Reject("unknown_kind", f"kind {kind!r} is not one of {', '.join(KINDS)}")
        new_body: DecodedBody | None = None
        # a member given as null is absent (the checks above and below read it so): not part of identity
        identity = {key: value for key, value in obj.items() if value is not None}
        if kind == "request":
            new_body = self._request(obj, event, identity)
        elif kind == "response":
            self._response(obj, event, identity)
        elif kind == "channel":
            self._channel(obj, event)
        else:
            self._start(obj, event)
        event["record_id"] = _digest(_canonical(identity))
        return Accepted(event, new_body)

    def _request(self, obj: dict[str, Any], event: dict[str, Any], identity: dict[str, Any]) -> DecodedBody | None:
        code = _require(obj, "code", _IS_INT32, "a 32-bit integer")
        event["code"] = code
        event["version"] = _require(obj, "version", _IS_INT32, "a 32-bit integer")
        event["opaque"] = _require(obj, "opaque", _IS_INT32, "a 32-bit integer")
        event["conn"] = _require(obj, "conn", _is_str, "a string")
        ext = _require(obj, "extFields", _is_obj, "an object")
        self._check_header(code, ext)
        event["ext_fields"] = ext
        event["broker_name"] = ext.get("brokerName")
        event["broker_addr"] = ext.get("brokerAddr")
        event["cluster_name"] = ext.get("clusterName")
        event["broker_id"] = _checked_integer(ext["brokerId"], INTEGER_HEADER["brokerId"]) if "brokerId" in ext else None
        event["topic"] = ext.get("topic")
        body = _optional(obj, "body", _is_obj, "an object")
        body_b64 = _optional(obj, "body_b64", _is_str, "a string")
        if body is not None:
            identity["body"] = self._body_digest(body, "identity", lambda canonical: (canonical,))
        if code == REGISTER_BROKER:
            return self._register_body(event, ext, body, body_b64)
        if body_b64 == "":  # zero bytes are no body (Java reads them as null); being raw, they overrule `body`
            body = body_b64 = None
        self._small_body(event, code, body, body_b64)
        return None

    def _check_header(self, code: int, ext: dict[str, Any]) -> None:
        """The request code and header checks; a (code, header) pair that passed once passes again
        without them (a broker sends the same header every 30 s)."""
        try:
            seen = (code, *ext.items())
            if seen in self._valid_headers:
                return
        except TypeError:  # a value that is not a string (unhashable): the checks reject it
            seen = None
        for key, value in ext.items():
            if not isinstance(value, str):
                raise _Reject("wrong_type", f"extFields.{key} must be a string, got {type(value).__name__}")
        if code not in self._limits.known_codes:
            raise _Reject("unknown_code", f"request code {code} is not one nsreplay knows ([ingest] route_changing_codes and read_only_codes)")
        for key in REQUIRED_HEADER.get(code, ()):
            _require(ext, key, _is_str, "a string", "extFields.")
        for key, bits in INTEGER_HEADER.items():
            if key in ext:
                if not is_java_integer_text(ext[key]):
                    raise _Reject("wrong_type", f"extFields.{key} must be an integer string, got {ext[key][:40]!r}")
                _check_integer_header(ext, key, bits)
        if seen is not None:
            if len(self._valid_headers) >= _MAX_VALID_HEADERS:
                self._valid_headers.clear()
            self._valid_headers.add(seen)

    def _response(self, obj: dict[str, Any], event: dict[str, Any], identity: dict[str, Any]) -> None:
        event["code"] = _require(obj, "code", _IS_INT32, "a 32-bit integer")
        event["opaque"] = _require(obj, "opaque", _IS_INT32, "a 32-bit integer")
        event["conn"] = _require(obj, "conn", _is_str, "a string")
        event["version"] = _optional(obj, "version", _IS_INT32, "a 32-bit integer")
        event["remark"] = _optional(obj, "remark", _is_str, "a string")
        body = _optional(obj, "body", lambda v: isinstance(v, (dict, list)), "an object")
        body_b64 = _optional(obj, "body_b64", _is_str, "a string")
        if body_b64 is not None:
            _b64(body_b64, "body_b64")
            event["body_b64"] = body_b64
        if body is not None:
            event["body"] = _canonical(body).decode("utf-8")

    def _channel(self, obj: dict[str, Any], event: dict[str, Any]) -> None:
        name = _require(obj, "event", _is_str, "a string")
        if name not in self._limits.channel_events:
            raise _Reject("unknown_channel_event", f"channel event {name!r} is not one of {', '.join(sorted(self._limits.channel_events))}")
        event["event"] = name
        event["conn"] = _require(obj, "conn", _is_str, "a string")
        event["remote"] = _require(obj, "remote", _is_str, "a string")

    def _start(self, obj: dict[str, Any], event: dict[str, Any]) -> None:
        """A start record, kept only when the model can start from it as stored (see
        :func:`start_record_problem`): ``wrong_type`` otherwise."""
        version = event["rocketmq_version"] = _require(obj, "rocketmq_version", _is_str, "a string")
        config = _optional(obj, "config", _is_obj, "an object") or {}
        event["config"] = {str(k): _config_text(v) for k, v in config.items() if v is not None}
        problem = start_record_problem(version, event["config"])
        if problem is not None:
            raise _Reject("wrong_type", f"namesrv_start: {problem}")

    # -- bodies ------------------------------------------------------------------------------------

    def _small_body(self, event: dict[str, Any], code: int, body: object, body_b64: str | None) -> None:
        """Bodies other than RegisterBrokerBody: kept as compact JSON (or base64) after a shape check.
        Raw JSON bodies are read as the model reads them (either JSON shape: fastjson writes bare
        integer map keys). A REGISTER_TOPIC without a body, or whose ``queueDatas`` is null, changes
        nothing on the NameServer (it answers SUCCESS) and is accepted as such."""
        parsed: object = body
        if body_b64 is not None:
            raw = _b64(body_b64, "body_b64")
            event["body_b64"] = body_b64
            if code in (QUERY_DATA_VERSION, REGISTER_TOPIC):
                try:
                    parsed = parse_fastjson(raw)
                except ValueError as exc:
                    raise _Reject("undecodable_body", f"body_b64 is not JSON ({exc})") from exc
        if parsed is None:
            return
        if code == QUERY_DATA_VERSION:
            try:
                decode_data_version(parsed)
            except BodyDecodeError as exc:
                raise _Reject("undecodable_body", f"DataVersion: {exc}") from exc
        if code == REGISTER_TOPIC and not (isinstance(parsed, dict) and isinstance(parsed.get("queueDatas") or [], list)):
            raise _Reject("undecodable_body", "REGISTER_TOPIC body is not a TopicRouteData")
        try:
            event["body"] = _canonical(parsed).decode("utf-8")
        except orjson.JSONEncodeError as exc:  # a lone surrogate or an integer beyond 64 bits
            raise _Reject("undecodable_body", f"the body cannot be stored as JSON text: {exc}") from exc

    def _register_body(self, event: dict[str, Any], ext: Mapping[str, str], body: object, body_b64: str | None) -> DecodedBody | None:
        version = event["version"]
        if body_b64 is not None:
            known_raw = self._known_raw(body_b64)
            raw = known_raw.raw
            crc = _checked_integer(ext.get("bodyCrc32", "0"), INTEGER_HEADER["bodyCrc32"])
            if crc != 0 and crc != known_raw.crc:
                raise _Reject("crc_mismatch", f"bodyCrc32 {crc} does not match the body ({known_raw.crc})")
            if not raw:  # zero bytes are no body (Java reads them as null), checked against the CRC as above
                return None
            # Boolean.parseBoolean, as the NameServer reads it; a request below version 37 is read as a
            # bare wrapper in JSON whatever the header says (the NameServer's pre-3.0.11 path)
            compressed = ext.get("compressed", "").lower() == "true" and version >= LEGACY_WRAPPER_MAX_VERSION
            encoding = "compressed" if compressed else ("legacy_wrapper" if version < LEGACY_WRAPPER_MAX_VERSION else "json")
            # the same compressed bytes decode differently from version 413 on (the mapping section)
            form = "compressed@413" if compressed and version >= STATIC_MAPPING_VERSION else encoding
            body_id = known_raw.ids.get(form)
            if body_id is None:
                body_id = known_raw.ids[form] = _digest(b"raw", form.encode(), raw)
            return self._remember(event, body_id, lambda: DecodedBody(body_id, encoding, decode_register_body(raw, compressed=compressed, version=version), len(raw)))
        if body is None:
            return None
        encoding = "legacy_wrapper" if version < LEGACY_WRAPPER_MAX_VERSION else "json"
        canonical = self._canonical_body(body)
        body_id = self._body_digest(body, encoding, lambda c: (b"json", encoding.encode(), c))
        return self._remember(event, body_id, lambda: DecodedBody(body_id, encoding, decode_json_register_body(body, version=version), len(canonical)))

    def _remember(self, event: dict[str, Any], body_id: str, decode: Callable[[], DecodedBody]) -> DecodedBody | None:
        """Decode a body the first time this parser sees it; reject every line that carries a bad one."""
        known = self._memory.bodies.get(body_id)
        if known is None:
            try:
                known = decode()
                unstorable = _unstorable_text(known.body)
                problem = self._body_rule(known.body) if self._body_rule and unstorable is None else None
                if unstorable is not None:
                    known = _Reject("undecodable_body", unstorable)
                elif problem:
                    known = _Reject(f"quality:{problem}", f"register body breaks rule {problem}")
            except BodyDecodeError as exc:
                known = _Reject("undecodable_body", str(exc))
            self._memory.remember_body(body_id, known)
        if isinstance(known, _Reject):
            raise known
        event["body_id"] = body_id
        if body_id in self._reported:
            return None
        self._reported.add(body_id)
        self._reporting = body_id
        return known
