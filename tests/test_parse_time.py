"""``parse_time``: the one reader of TIME for the CLI (--from/--to, --as-of), the HTTP API and the
remoting ``asOf`` extField."""

from __future__ import annotations

import pytest

from nsreplay.runtime import UsageError, parse_time


@pytest.mark.parametrize(
    "text, ms",
    [
        ("1732159925123", 1732159925123),
        ("-5", -5),
        ("2024-11-21T03:32:05.123Z", 1732159925123),
        ("2024-11-21T03:32:05.123z", 1732159925123),  # RFC 3339 allows a lowercase z
        ("2024-11-21T09:02:05.123+05:30", 1732159925123),
        ("2024-11-21T03:32:05.123", 1732159925123),  # no offset: UTC
        ("2024-11-21T03:32:05.1239Z", 1732159925123),  # a fraction of a millisecond belongs to its millisecond
        ("1969-12-31T23:59:59.9995Z", -1),  # floored, not truncated toward zero
        ("1970-01-01T00:00:00.000001Z", 0),
        ("2262-04-11T23:47:16.854775Z", 9223372036854),  # exact at large values (no float rounding)
        ("9223372036854775807", 2**63 - 1),
        ("9" * 5000, 2**63),  # beyond a long: just outside one (int() refuses 4,300 digits)
        ("-" + "9" * 20, -(2**63) - 1),
    ],
)
def test_parse_time(text, ms):
    assert parse_time(text) == ms


@pytest.mark.parametrize("text", ["", "yesterday", "2024-13-01T00:00:00Z", "2024-11-21T03:32:05 05:30", "--5", "²", "١٢٣٤"])
def test_parse_time_refuses(text):
    with pytest.raises(UsageError, match="not a time"):
        parse_time(text)
