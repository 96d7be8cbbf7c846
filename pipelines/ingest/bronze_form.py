"""How bronze keeps a capture line: exactly, but each repeated body text only once.

Brokers resend their whole topic table (~40 KB of JSON) every 30 s to every NameServer, so almost
all of a capture's bytes are copies of a few thousand body texts. Bronze keeps every line exactly,
in one of two forms:

* whole: ``bronze.captures_raw.line`` is the line and ``body_ref`` is null;
* split: the line is ``PREFIX + ',"body":' + BODY + '}'`` where BODY is a JSON object of at least
  :data:`STORED_BODY_MIN_BYTES` bytes that the parser has read as the record's ``body``. Then
  ``line`` holds ``PREFIX + '}'`` (the record without its body, still a JSON object), ``body_ref``
  is :func:`body_ref` of BODY, and BODY is stored once in ``bronze.capture_bodies``.

:func:`exact_line` rebuilds the line from either form; ``nsreplay.sql`` offers the same as the SQL
view ``capture_lines``. A line is never split unless it rebuilds byte for byte.
"""

from __future__ import annotations

import hashlib

BODY_MARK = b',"body":'
STORED_BODY_MIN_BYTES = 1024


def split_body(data: bytes) -> tuple[bytes, bytes] | None:
    """``(PREFIX, BODY)`` of a line ``PREFIX + ',"body":' + BODY + '}'`` cut at the first
    ``,"body":``, or None. The cut is only a candidate: the caller keeps it when PREFIX + '}' parses
    as an object and BODY as one JSON value. (The first mark, not the last: the record's prefix is
    short, so it is found without scanning the ~40 KB body, and a body that itself holds a member
    ``"body"`` — a topic of that name — is still cut at the top level.)"""
    if not data.endswith(b"}"):
        return None
    at = data.find(BODY_MARK)
    if at <= 0:
        return None
    return data[:at], data[at + len(BODY_MARK) : -1]


def body_ref(body_text: bytes) -> str:
    """Content id of a stored body text (128-bit BLAKE2b, hex)."""
    return hashlib.blake2b(body_text, digest_size=16, person=b"nsreplay-body").hexdigest()


def split_line(prefix: str) -> str:
    """The ``line`` column of a split line whose text before ``,"body":`` is ``prefix``."""
    return prefix + "}"


def exact_line(line: str, body_text: str | None) -> str:
    """The capture line as read, from bronze's ``line`` and the stored body text (None when whole)."""
    if body_text is None:
        return line
    return line[:-1] + BODY_MARK.decode("ascii") + body_text + "}"
