"""Java's integer types as the NameServer uses them: their ranges, and ``long`` arithmetic.

A number the Java side reads into an ``int`` or a ``long`` (a header parsed with ``Long.parseLong``,
a JSON field decoded into an ``int``) must fit that type, or the read fails. A sum of ``long``
values does not fail: it wraps around past the type's range.

Text is read as ``Integer.parseInt`` and ``Long.parseLong`` read it (:func:`parse_java_integer`), not
as Python's ``int()``, which also takes spaces around the digits and ``_`` between them.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["INT_MIN", "INT_MAX", "LONG_MIN", "LONG_MAX", "fits_java", "is_java_integer_text", "parse_java_integer", "wrap_long"]

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
_LONG_DIGITS = len(str(LONG_MAX))  # 19: no long has more significant digits


def fits_java(value: int, bits: int) -> bool:
    """Whether ``value`` fits a Java ``int`` (``bits`` 32) or ``long`` (64)."""
    return -(1 << (bits - 1)) <= value < 1 << (bits - 1)


# An optional sign, then decimal digits: ``\d`` of a str pattern is any Unicode decimal digit (category
# Nd), as ``Character.digit(c, 10)``; ``\Z``, not ``$``, which would let a final newline through.
_JAVA_INTEGER_TEXT = re.compile(r"[+-]?\d+\Z")


def is_java_integer_text(text: str) -> bool:
    """Whether ``Integer.parseInt`` / ``Long.parseLong`` read ``text`` as a number at all (whatever its
    range): one optional ``+`` or ``-``, then at least one decimal digit of any script (``"١٢"`` is
    12), and nothing else: no space, tab or newline around them, no ``_`` between them. Java reads
    UTF-16 units, so a digit outside the Basic Multilingual Plane (a surrogate pair, e.g. U+1D7CE) is
    not a digit to it."""
    return _JAVA_INTEGER_TEXT.match(text) is not None and (text.isascii() or all(ord(c) < 0x10000 for c in text))


def parse_java_integer(text: str, bits: int) -> int | None:
    """``Integer.parseInt(text)`` (``bits`` 32) or ``Long.parseLong(text)`` (64): the value, or None
    where Java throws ``NumberFormatException``: text that :func:`is_java_integer_text` refuses, or
    a value beyond the type's range."""
    if not is_java_integer_text(text):
        return None
    if len(text) > _LONG_DIGITS:  # Java reads any number of leading zeros; int() refuses 4,300 digits
        sign = text[0] if text[0] in "+-" else ""
        digits = text[len(sign):]
        first = next((i for i, c in enumerate(digits) if unicodedata.decimal(c) != 0), len(digits) - 1)
        if len(digits) - first > _LONG_DIGITS:  # more significant digits than any long has
            return None
        text = sign + digits[first:]
    value = int(text)  # int() reads every Nd digit by its decimal value, as Character.digit does
    return value if fits_java(value, bits) else None


def wrap_long(value: int) -> int:
    """``value`` as Java's ``long`` arithmetic leaves it: the same when it fits, otherwise wrapped
    around modulo 2^64 into the range (``LONG_MAX + 1`` is ``LONG_MIN``)."""
    if LONG_MIN <= value <= LONG_MAX:
        return value
    return (value - LONG_MIN) % (1 << 64) + LONG_MIN
