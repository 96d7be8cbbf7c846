"""Java's integer types as the NameServer uses them: their ranges, and ``long`` arithmetic.

A number the Java side reads into an ``int`` or a ``long`` (a header parsed with ``Long.parseLong``,
a JSON field decoded into an ``int``) must fit that type, or the read fails. A sum of ``long``
values does not fail: it wraps around past the type's range.
"""

from __future__ import annotations

__all__ = ["INT_MIN", "INT_MAX", "LONG_MIN", "LONG_MAX", "fits_java", "wrap_long"]

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1


def fits_java(value: int, bits: int) -> bool:
    """Whether ``value`` fits a Java ``int`` (``bits`` 32) or ``long`` (64)."""
    return -(1 << (bits - 1)) <= value < 1 << (bits - 1)


def wrap_long(value: int) -> int:
    """``value`` as Java's ``long`` arithmetic leaves it: the same when it fits, otherwise wrapped
    around modulo 2^64 into the range (``LONG_MAX + 1`` is ``LONG_MIN``)."""
    if LONG_MIN <= value <= LONG_MAX:
        return value
    return (value - LONG_MIN) % (1 << 64) + LONG_MIN
