"""The RocketMQ remoting wire format: RemotingCommand frames in and out (semantics spec §8). Pure.

A frame on the wire::

    int32 total length            (= 4 + headerLength + bodyLength; the prefix itself is not counted)
    int32 (serializeType << 24) | headerLength
    header bytes                  (serializeType 0: JSON; 1: ROCKETMQ binary)
    body bytes

* **JSON header** (serializeType 0): an object with ``code``, ``language``, ``version``, ``opaque``,
  ``flag``, ``remark``, ``extFields`` (string → string) and ``serializeTypeCurrentRPC``. Missing fields
  take Java's defaults (language ``JAVA``, numbers 0, no remark, no extFields). A number field may be
  written as a string of ASCII digits with an optional ``-`` (``"code":"105"``), which fastjson reads
  into the ``int`` as it reads the number (other strings fastjson may also coerce, such as ``"+105"``
  or ``"1,05"``, are refused). Scalar extField values that are not strings (numbers, booleans) are
  taken as their JSON text, as fastjson would; ``null`` values are dropped. The header bytes must be
  UTF-8: the NameServer (4.9.4 to 5.3.3, fastjson 1.x) parses them with ``JSON.parseObject(byte[],
  RemotingCommand.class)``, whose UTF-8 decoder gives up on a malformed sequence (the result is null
  and the decoder closes the connection). Encoded like fastjson: compact, keys ascending, nulls omitted.
* **ROCKETMQ binary header** (serializeType 1, big-endian): code int16; language byte; version int16;
  opaque int32; flag int32; remark as int32 length + UTF-8 (length 0 = no remark); extFields as int32
  total length, then repeated (int16 key length, key, int32 value length, value). Every declared length
  must fit in what is left; the header must end exactly where its last field ends. Length 0 means
  "none", so an empty remark or an empty extFields map decodes as ``None`` (JSON keeps the difference).
  Text is decoded as Java's ``new String(bytes, UTF_8)`` (4.9.4) and Netty's ``readCharSequence(len,
  UTF_8)`` (5.x) do: bytes that are not UTF-8 do not fail the frame, each malformed sequence becomes
  one U+FFFD (:func:`~nsreplay.protocol.java_strings.java_string`).
* flag bit 0 = response, bit 1 = oneway. A response (:func:`response_to`) echoes the request's opaque,
  sets bit 0 and uses the request's serialize type.
* A whole frame, length prefix included, is at most :data:`MAX_FRAME_BYTES` (16 MiB).

Everything that cannot be decoded raises a subclass of :class:`FrameError` naming the problem; a
server closes the connection on it (the byte stream cannot be re-synchronized).

    >>> cmd = RemotingCommand(code=105, opaque=7, ext_fields={"topic": "orders"})
    >>> decode_frame(encode_frame(cmd)) == cmd
    True
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass, replace
from typing import Any, Mapping

from nsreplay.protocol.java_numbers import fits_java, parse_java_integer
from nsreplay.protocol.java_strings import java_string

__all__ = [
    "MAX_FRAME_BYTES",
    "JSON",
    "ROCKETMQ",
    "FLAG_RESPONSE",
    "FLAG_ONEWAY",
    "LANGUAGES",
    "RemotingCommand",
    "FrameError",
    "BadFrameLength",
    "FrameLengthMismatch",
    "HeaderTooLong",
    "UnknownSerializeType",
    "BadJsonHeader",
    "TruncatedBinaryHeader",
    "NotUtf8",
    "EncodeError",
    "frame_length",
    "decode_payload",
    "decode_frame",
    "encode_frame",
    "response_to",
]

MAX_FRAME_BYTES = 16 * 1024 * 1024  # the whole frame, the 4-byte length prefix included
JSON = 0
ROCKETMQ = 1
SERIALIZE_TYPES = {JSON: "JSON", ROCKETMQ: "ROCKETMQ"}
FLAG_RESPONSE = 1 << 0
FLAG_ONEWAY = 1 << 1

# LanguageCode: the byte of the binary header is the index (14 and up are unnamed).
LANGUAGES = (
    "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS",
    "RUST", "NODE_JS",
)
_LANGUAGE_BYTE = {name: i for i, name in enumerate(LANGUAGES)}

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag


# ------------------------------------------------------------------------------------ errors


class FrameError(ValueError):
    """A frame that cannot be decoded (the subclass says why)."""


class BadFrameLength(FrameError):
    """The total length is negative, too small to hold the header length, or over 16 MiB."""


class FrameLengthMismatch(FrameError):
    """The bytes given are not exactly the frame the length prefix declares."""


class HeaderTooLong(FrameError):
    """The header length is longer than what the frame holds after it."""


class UnknownSerializeType(FrameError):
    """The serialize type (top byte of the header-length word) is neither 0 (JSON) nor 1 (ROCKETMQ)."""


class BadJsonHeader(FrameError):
    """A JSON header that is not a JSON object of the RemotingCommand fields with the right types."""


class TruncatedBinaryHeader(FrameError):
    """A ROCKETMQ binary header whose fields (or declared lengths) do not fit, or bytes left over."""


class NotUtf8(FrameError):
    """A JSON header that is not UTF-8 (binary header text never is an error: see the module docstring)."""


class EncodeError(ValueError):
    """A command that cannot be written in the requested serialize type (a field out of range)."""


# ------------------------------------------------------------------------------------ command


@dataclass(frozen=True)
class RemotingCommand:
    """One request or response. ``language`` is the LanguageCode name (a binary header's unnamed byte
    comes back as its decimal text); ``ext_fields`` is ``None`` when the header has none;
    ``serialize_type`` is how the header was (or is to be) written."""

    code: int
    language: str = "JAVA"
    version: int = 0
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: Mapping[str, str] | None = None
    body: bytes | None = None
    serialize_type: int = JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def ext(self, key: str) -> str | None:
        """The extField ``key``, or ``None``."""
        return None if self.ext_fields is None else self.ext_fields.get(key)


def response_to(request: RemotingCommand, code: int, *, body: bytes | None = None, remark: str | None = None,
                version: int = 0, language: str = "JAVA") -> RemotingCommand:
    """The response to ``request``: same opaque and serialize type, flag bit 0 set."""
    return RemotingCommand(code=code, language=language, version=version, opaque=request.opaque, flag=FLAG_RESPONSE,
                           remark=remark, ext_fields=None, body=body, serialize_type=request.serialize_type)


# ------------------------------------------------------------------------------------ decoding


def frame_length(prefix: bytes) -> int:
    """The total length declared by a frame's first 4 bytes (bytes that follow the prefix).

    Raises :class:`BadFrameLength` when it is below 4 (no room for the header-length word) or makes
    the frame longer than :data:`MAX_FRAME_BYTES`."""
    if len(prefix) != 4:
        raise BadFrameLength(f"a length prefix is 4 bytes, got {len(prefix)}")
    (total,) = _I32.unpack(prefix)
    if total < 4:
        raise BadFrameLength(f"frame length {total} is below 4 (it must hold the header length)")
    if total + 4 > MAX_FRAME_BYTES:
        raise BadFrameLength(f"frame length {total} exceeds the 16 MiB limit ({MAX_FRAME_BYTES - 4})")
    return total


def decode_frame(frame: bytes) -> RemotingCommand:
    """One whole frame (length prefix included) → :class:`RemotingCommand`."""
    if len(frame) < 4:
        raise FrameLengthMismatch(f"{len(frame)} bytes cannot hold a length prefix")
    total = frame_length(frame[:4])
    if len(frame) - 4 != total:
        raise FrameLengthMismatch(f"the prefix declares {total} bytes but {len(frame) - 4} follow it")
    return decode_payload(frame[4:])


def decode_payload(payload: bytes) -> RemotingCommand:
    """The bytes after the length prefix (header-length word, header, body) → command."""
    if len(payload) < 4:
        raise FrameLengthMismatch(f"{len(payload)} bytes cannot hold the header length")
    word = int.from_bytes(payload[:4], "big")
    serialize_type = word >> 24
    header_length = word & 0xFFFFFF
    if header_length > len(payload) - 4:
        raise HeaderTooLong(f"header length {header_length} but only {len(payload) - 4} bytes follow")
    header = bytes(payload[4:4 + header_length])
    body = bytes(payload[4 + header_length:]) or None
    if serialize_type == JSON:
        cmd = _decode_json_header(header)
    elif serialize_type == ROCKETMQ:
        cmd = _decode_binary_header(header)
    else:
        raise UnknownSerializeType(f"serialize type {serialize_type} (known: 0 JSON, 1 ROCKETMQ)")
    return replace(cmd, body=body)


_DECIMAL_TEXT = re.compile(r"-?[0-9]+")


def _int_field(obj: Mapping[str, Any], key: str) -> int:
    """The ``int`` field ``key`` of a JSON header: 0 when absent or null; a JSON integer, or a string of
    ASCII digits with an optional ``-`` (fastjson reads ``"105"`` into an ``int`` field as 105), that
    fits 32 bits. Anything else (a fraction, a boolean, other text, out of range) fails the header."""
    raw = obj.get(key, 0)
    if raw is None:
        return 0
    value = raw
    if isinstance(raw, str) and _DECIMAL_TEXT.fullmatch(raw):
        value = parse_java_integer(raw, 32)  # leading zeros as Java reads them; None beyond the range
    if isinstance(value, bool) or not isinstance(value, int) or not fits_java(value, 32):
        raise BadJsonHeader(f"header field {key!r} must be a 32-bit integer, got {_shown(raw)}")
    return value


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"


def _ext_value(key: str, value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float)):
        return json.dumps(value)
    raise BadJsonHeader(f"extField {key!r} must be a string, got {type(value).__name__}")


def _decode_json_header(header: bytes) -> RemotingCommand:
    try:
        text = header.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotUtf8(f"JSON header is not UTF-8: {exc.reason} at byte {exc.start}") from None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise BadJsonHeader(f"JSON header does not parse: {exc}") from None
    if not isinstance(obj, dict):
        raise BadJsonHeader(f"JSON header must be an object, got {type(obj).__name__}")
    language = obj.get("language", "JAVA")
    if language is None:
        language = "JAVA"
    if not isinstance(language, str):
        raise BadJsonHeader(f"header field 'language' must be a string, got {language!r}")
    remark = obj.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise BadJsonHeader(f"header field 'remark' must be a string, got {type(remark).__name__}")
    raw_ext = obj.get("extFields")
    ext: dict[str, str] | None = None
    if raw_ext is not None:
        if not isinstance(raw_ext, dict):
            raise BadJsonHeader(f"header field 'extFields' must be an object, got {type(raw_ext).__name__}")
        ext = {k: _ext_value(k, v) for k, v in raw_ext.items() if v is not None}
    return RemotingCommand(
        code=_int_field(obj, "code"), language=language, version=_int_field(obj, "version"),
        opaque=_int_field(obj, "opaque"), flag=_int_field(obj, "flag"), remark=remark, ext_fields=ext,
        serialize_type=JSON,
    )


class _Cursor:
    """Reads big-endian fields from a binary header; running short raises TruncatedBinaryHeader."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0:
            raise TruncatedBinaryHeader(f"{what}: negative length {n}")
        if self.pos + n > len(self.data):
            raise TruncatedBinaryHeader(f"{what}: needs {n} bytes at offset {self.pos}, header has {len(self.data)}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def i16(self, what: str) -> int:
        return _I16.unpack(self.take(2, what))[0]

    def i32(self, what: str) -> int:
        return _I32.unpack(self.take(4, what))[0]

    def text(self, n: int, what: str) -> str:
        """The next ``n`` bytes as the NameServer reads them into a String (malformed UTF-8: U+FFFD)."""
        return java_string(self.take(n, what))


def _decode_binary_header(header: bytes) -> RemotingCommand:
    cur = _Cursor(header)
    code, lang, version, opaque, flag = _FIXED.unpack(cur.take(_FIXED.size, "fixed fields"))
    language = LANGUAGES[lang] if 0 <= lang < len(LANGUAGES) else str(lang)
    remark_length = cur.i32("remark length")
    remark = cur.text(remark_length, "remark") if remark_length else None
    ext_length = cur.i32("extFields length")
    ext: dict[str, str] | None = None
    if ext_length:
        fields = _Cursor(cur.take(ext_length, "extFields"))
        ext = {}
        while fields.pos < len(fields.data):
            key = fields.text(fields.i16("extField key length"), "extField key")
            ext[key] = fields.text(fields.i32("extField value length"), f"extField {key!r} value")
    if cur.pos != len(header):
        raise TruncatedBinaryHeader(f"{len(header) - cur.pos} bytes left after the last header field")
    return RemotingCommand(code=code, language=language, version=version, opaque=opaque, flag=flag, remark=remark,
                           ext_fields=ext, serialize_type=ROCKETMQ)


# ------------------------------------------------------------------------------------ encoding


def encode_frame(cmd: RemotingCommand) -> bytes:
    """``cmd`` → one whole frame, header written in ``cmd.serialize_type``.

    Raises :class:`EncodeError` when a field does not fit that type or the frame exceeds 16 MiB."""
    if cmd.serialize_type == JSON:
        header = _encode_json_header(cmd)
    elif cmd.serialize_type == ROCKETMQ:
        header = _encode_binary_header(cmd)
    else:
        raise EncodeError(f"unknown serialize type {cmd.serialize_type}")
    body = cmd.body or b""
    if len(header) > 0xFFFFFF:
        raise EncodeError(f"header of {len(header)} bytes does not fit 24 bits")
    total = 4 + len(header) + len(body)
    if total + 4 > MAX_FRAME_BYTES:
        raise EncodeError(f"frame of {total + 4} bytes exceeds the 16 MiB limit")
    return b"".join((_I32.pack(total), _I32.pack((cmd.serialize_type << 24) | len(header)), header, body))


def _encode_json_header(cmd: RemotingCommand) -> bytes:
    obj: dict[str, Any] = {
        "code": cmd.code,
        "extFields": None if cmd.ext_fields is None else dict(sorted(cmd.ext_fields.items())),
        "flag": cmd.flag,
        "language": cmd.language,
        "opaque": cmd.opaque,
        "remark": cmd.remark,
        "serializeTypeCurrentRPC": SERIALIZE_TYPES[JSON],
        "version": cmd.version,
    }
    for key in ("code", "flag", "opaque", "version"):
        if not fits_java(obj[key], 32):
            raise EncodeError(f"{key} {obj[key]} does not fit 32 bits")
    return json.dumps({k: v for k, v in obj.items() if v is not None}, ensure_ascii=False,
                      separators=(",", ":")).encode("utf-8", "replace")  # like Java: a lone surrogate -> '?'


def _language_byte(language: str) -> int:
    if language in _LANGUAGE_BYTE:
        return _LANGUAGE_BYTE[language]
    if language.isdigit() and int(language) < 128:
        return int(language)
    raise EncodeError(f"language {language!r} has no byte code")


def _encode_binary_header(cmd: RemotingCommand) -> bytes:
    try:
        fixed = _FIXED.pack(cmd.code, _language_byte(cmd.language), cmd.version, cmd.opaque, cmd.flag)
    except struct.error as exc:
        raise EncodeError(f"binary header fields out of range: {exc}") from None
    parts = [fixed]
    remark = (cmd.remark or "").encode("utf-8", "replace")
    parts += [_I32.pack(len(remark)), remark]
    ext = bytearray()
    for key, value in (cmd.ext_fields or {}).items():
        k, v = key.encode("utf-8", "replace"), value.encode("utf-8", "replace")
        if len(k) > 0x7FFF:
            raise EncodeError(f"extField key of {len(k)} bytes does not fit int16")
        ext += _I16.pack(len(k)) + k + _I32.pack(len(v)) + v
    parts += [_I32.pack(len(ext)), bytes(ext)]
    return b"".join(parts)
