"""How bronze keeps a capture line: exactly, but each repeated body text only once.

Brokers resend their whole topic table (~40 KB of JSON) every 30 s to every NameServer, so almost
all of a capture's bytes are copies of a few thousand body texts. Bronze keeps every line exactly,
in one of two forms:

* whole: ``bronze.captures_raw.line`` is the line and ``body_ref`` is null;
* split: the line is ``PREFIX + ',"body":' + BODY + '}'`` where BODY is a JSON object of at least
  :data:`STORED_BODY_MIN_BYTES` bytes that the parser has read as the record's ``body``, or
  ``PREFIX + ',"body_b64":' + BODY + '}'`` where BODY is such a JSON string (quotes included), the
  record's ``body_b64``. Then ``line`` holds ``PREFIX + '}'`` (the record without that member,
  still a JSON object), ``body_ref`` is :func:`body_ref` of BODY, and BODY is stored once in
  ``bronze.capture_bodies``. The stored text tells the two apart: a ``body_b64`` text starts with
  ``"``, a ``body`` text never does.

:func:`exact_line` rebuilds the line from either form; ``nsreplay.sql`` offers the same as the SQL
view ``capture_lines``. A line is never split unless it rebuilds byte for byte.
"""

from __future__ import annotations

import hashlib

BODY_MARK = b',"body":'
BODY_B64_MARK = b',"body_b64":'
STORED_BODY_MIN_BYTES = 1024
_MEMBER_START = b',"body'  # what both marks start with: the line is searched once for both


def split_body(data: bytes) -> tuple[bytes, bytes, str] | None:
    """``(PREFIX, BODY, member)`` of a line ``PREFIX + ',"body":' + BODY + '}'`` (member ``body``) or
    ``PREFIX + ',"body_b64":' + BODY + '}'`` with BODY starting with ``"`` (member ``body_b64``),
    cut at the first such mark, or None. The cut is only a candidate: the caller keeps it when
    PREFIX + '}' parses as an object and BODY as one JSON value. (The first mark, not the last: the
    record's prefix is short, so it is found without scanning the ~40 KB body, and a body that
    itself holds a member ``"body"`` — a topic of that name — is still cut at the top level.)"""
    if not data.endswith(b"}"):
        return None
    at = data.find(_MEMBER_START)
    while at > 0:
        end = at + len(_MEMBER_START)
        if data.startswith(b'":', end):
            return data[:at], data[end + 2 : -1], "body"
        if data.startswith(b'_b64":"', end):
            return data[:at], data[end + 6 : -1], "body_b64"
        at = data.find(_MEMBER_START, end)  # another member, such as extFields' "bodyCrc32"
    return None


def body_ref(body_text: bytes) -> str:
    """Content id of a stored body text (128-bit BLAKE2b, hex)."""
    return hashlib.blake2b(body_text, digest_size=16, person=b"nsreplay-body").hexdigest()


def split_line(prefix: str) -> str:
    """The ``line`` column of a split line whose text before the body's mark is ``prefix``."""
    return prefix + "}"


def body_mark(body_text: str) -> str:
    """The member mark a stored body text goes back after: ``,"body_b64":`` for a JSON string."""
    return (BODY_B64_MARK if body_text.startswith('"') else BODY_MARK).decode("ascii")


def exact_line(line: str, body_text: str | None) -> str:
    """The capture line as read, from bronze's ``line`` and the stored body text (None when whole)."""
    if body_text is None:
        return line
    return line[:-1] + body_mark(body_text) + body_text + "}"
