"""Bytes as the NameServer makes a ``String`` of them: ``new String(bytes, UTF_8)``.

A body's JSON (``RemotingSerializable.decode``) and a compressed body's topic entries
(``TopicConfig.decode``) are read that way. Java does not fail on bytes that are not UTF-8: each
malformed sequence becomes one U+FFFD. Python's ``errors="replace"`` does the same for most of them,
but cuts some differently, where Java's decoder (the same in JDK 8 and 17) takes more bytes into one
U+FFFD:

* a UTF-16 surrogate written as three bytes (``ED A0 80``): one U+FFFD for the three, where Python
  puts three;
* a sequence cut short by the end of the bytes: one U+FFFD for what is left (``ED A0`` gives one,
  Python two);
* a four-byte sequence whose third byte is not a continuation: one U+FFFD for the first two.

:func:`java_string` decodes with Python's UTF-8 decoder and, at each malformed sequence, replaces
and skips as many bytes as Java does (an error handler). Valid UTF-8 decodes the same either way.
``tests/protocol/test_java_text.py`` checks it against the JDK on this machine.
"""

from __future__ import annotations

import codecs

__all__ = ["java_string"]

_HANDLER = "nsreplay-java-utf8"
_REPLACEMENT = "\ufffd"


def _continuation(b: int) -> bool:
    return b & 0xC0 == 0x80


def _bad_three_byte_start(b1: int, b2: int) -> bool:
    """The first two bytes cannot begin a three-byte sequence (an overlong ``E0``, or no continuation)."""
    return (b1 == 0xE0 and b2 & 0xE0 == 0x80) or not _continuation(b2)


def _bad_four_byte_start(b1: int, b2: int) -> bool:
    """The first two bytes cannot begin a four-byte sequence (overlong ``F0``, beyond U+10FFFF, no continuation)."""
    return b1 > 0xF4 or (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF) or (b1 == 0xF4 and b2 & 0xF0 != 0x80) or not _continuation(b2)


def malformed_length(data: bytes, at: int) -> int:
    """How many bytes Java's UTF-8 decoder turns into one U+FFFD at ``at``, where a malformed
    sequence starts (Python's decoder stopped there)."""
    b1, rest = data[at], len(data) - at
    if 0xE0 <= b1 <= 0xEF:
        if rest >= 3:
            b2, b3 = data[at + 1], data[at + 2]
            if _bad_three_byte_start(b1, b2):
                return 1
            return 2 if not _continuation(b3) else 3  # else: well formed, a surrogate
        if rest == 2 and _bad_three_byte_start(b1, data[at + 1]):
            return 1
        return rest  # cut short by the end
    if 0xF0 <= b1 <= 0xF7:
        if rest >= 4:
            if _bad_four_byte_start(b1, data[at + 1]):
                return 1
            if not _continuation(data[at + 2]):
                return 2
            return 3  # the fourth byte is not a continuation
        if rest >= 2 and _bad_four_byte_start(b1, data[at + 1]) or b1 > 0xF4:
            return 1
        if rest >= 3 and not _continuation(data[at + 2]):
            return 2
        return rest  # cut short by the end
    return 1  # a continuation or an invalid byte where a sequence should start, or C2-DF without its continuation


def _java_replace(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeDecodeError):
        raise error
    return _REPLACEMENT, error.start + malformed_length(error.object, error.start)


codecs.register_error(_HANDLER, _java_replace)


def java_string(data: bytes) -> str:
    """``new String(data, StandardCharsets.UTF_8)``: never fails; each malformed sequence is one U+FFFD."""
    return data.decode("utf-8", _HANDLER)
