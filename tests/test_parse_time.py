"""``parse_time``: the one reader of TIME for the CLI (--from/--to, --as-of), the HTTP API and the
remoting ``asOf`` extField."""

from __future__ import annotations

import calendar
from datetime import datetime, timedelta, timezone

import pytest

from nsreplay.runtime import UsageError, _isoformat_form, format_ms, parse_time


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
        ("2024-11-21T03:32:05.12Z", 1732159925120),  # a fraction of any length
        ("2024-11-21T03:32:05,1Z", 1732159925100),  # ISO-8601's decimal comma
        ("2024-11-21T09:02:05.123+0530", 1732159925123),  # offsets: ±HHMM, ±HH
        ("2024-11-21T05:32:05.123+02", 1732159925123),
        ("2024-11-20T22:32:05.123-05:00", 1732159925123),
        ("20241121T033205.123Z", 1732159925123),  # the basic form
        ("20241121T0332Z", 1732159920000),
        ("2024-11-21 03:32:05.123Z", 1732159925123),
        ("2024-11-21", 1732147200000),  # a date: its midnight, UTC
        ("9223372036854775807", 2**63 - 1),
        ("9" * 5000, 2**63),  # beyond a long: just outside one (int() refuses 4,300 digits)
        ("-" + "9" * 20, -(2**63) - 1),
    ],
)
def test_parse_time(text, ms):
    assert parse_time(text) == ms


@pytest.mark.parametrize(
    "text",
    ["", "yesterday", "2024-13-01T00:00:00Z", "2024-11-21T03:32:05 05:30", "--5", "²", "١٢٣٤", "2024-11-21T03:32:61Z",
     "2024-11-21T03:32:05+25:00", "2024-1121T0332Z", "2024-11-21T03:3205Z", "٢٠٢٤-١١-٢١",
     # an offset's minutes or seconds of 60 or more (Python would carry them into the hours: +0560 as +06:00)
     "2024-11-21T03:32:05+0560", "2024-11-21T03:32:05+00:99", "2024-11-21T03:32:05-05:30:60", "20241121T033205+0599"],
)
def test_parse_time_refuses(text):
    with pytest.raises(UsageError, match="not a time"):
        parse_time(text)


# Each input with the instant it names, written by hand: the UTC wall-clock fields (the local time
# minus the offset) and the epoch milliseconds, floored. 2024-11-21T00:00:00Z is 20048 days after the
# epoch (54 years 1970..2023 with 13 leap days = 19723 days, + 325 days of 2024 up to Nov 21) =
# 1732147200 s; 03:32:05 adds 12725 s, 03:32:00 adds 12720 s.
ISOFORMAT_FORMS = [
    # text, (UTC year, month, day, hour, minute, second, millisecond floored), ms
    ("2024-11-21T03:32:05.12Z", (2024, 11, 21, 3, 32, 5, 120), 1732159925120),
    # 03:32:05.1234567 at +05:30 is 22:02:05.123456(7) UTC the day before: 1732159925 - 19800 s
    ("2024-11-21T03:32:05,1234567+0530", (2024, 11, 20, 22, 2, 5, 123), 1732140125123),
    # 03:32 at -01:00 is 04:32 UTC: 1732159920 + 3600 s
    ("20241121T0332-01", (2024, 11, 21, 4, 32, 0, 0), 1732163520000),
    ("2024-11-21 03:32", (2024, 11, 21, 3, 32, 0, 0), 1732159920000),  # naive: UTC
    ("2024-11-21", (2024, 11, 21, 0, 0, 0, 0), 1732147200000),
    ("2024-11-21T03:32:05.123456", (2024, 11, 21, 3, 32, 5, 123), 1732159925123),
]


@pytest.mark.parametrize(("text", "utc_fields", "ms"), ISOFORMAT_FORMS)
def test_times_reach_fromisoformat_in_the_form_isoformat_writes(text, utc_fields, ms):
    """Python 3.10's ``fromisoformat`` reads only what ``isoformat()`` writes; the forms 3.11 added
    (any fraction length, ±HHMM, the basic form) must reach it rewritten into that form, naming the
    same instant (a rewrite that drops or changes the offset, the fraction or a field is still a
    canonical form: the round trip alone would not see it)."""
    *fields, millisecond = utc_fields  # the hand-written value, cross-checked by an independent method
    assert calendar.timegm((*fields, 0, 0, 0)) * 1000 + millisecond == ms
    form = _isoformat_form(text)
    assert datetime.fromisoformat(form).isoformat() == form
    moment = datetime.fromisoformat(form)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    assert (moment - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(milliseconds=1) == ms
    assert parse_time(text) == ms



@pytest.mark.parametrize(("ms", "text"), [
    (0, "1970-01-01T00:00:00.000Z"),
    (-1, "1969-12-31T23:59:59.999Z"),
    (1732147200123, "2024-11-21T00:00:00.123Z"),
    (253402300799999, "9999-12-31T23:59:59.999Z"),  # through a float (ms / 1000) this said .998
    (-62135596800000, "0001-01-01T00:00:00.000Z"),
    (253402300800000, "253402300800000 ms"),  # no calendar year holds it: the number itself
    (-62135596800001, "-62135596800001 ms"),
    (2**63, "9223372036854775808 ms"),
    (None, "-"),
])
def test_format_ms_is_exact_and_never_fails(ms, text):
    assert format_ms(ms) == text
    if not text.endswith(" ms") and ms is not None:
        assert parse_time(text) == ms



def _option_help(parser, path: tuple[str, ...], option: str) -> str:
    """The help text of ``option`` of ``parser``'s subcommand at ``path``."""
    for name in path:
        parser = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices[name]
    return next(a.help for a in parser._actions if option in a.option_strings)


@pytest.mark.parametrize(
    ("command", "option"),
    [(("generate",), "--start"), (("serve",), "--as-of"), (("backfill",), "--from"), (("backfill",), "--to"), (("bench", "incremental"), "--split")],
)
def test_every_time_option_says_a_time_without_an_offset_is_utc(command, option) -> None:
    """A user in +05:30 typing ``--from 2024-11-21T09:00`` gets 09:00 UTC: the help says so."""
    from nsreplay.cli import build_parser

    assert "UTC when without an offset" in _option_help(build_parser(), command, option)


@pytest.mark.parametrize("option", ["--from", "--to"])
def test_the_jobs_time_options_say_a_time_without_an_offset_is_utc(capsys, option) -> None:
    from jobs.rebuild_routes import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--help"])
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith(f"{option} "))
    described = " ".join(" ".join(lines[at:at + 3]).split())  # argparse wraps a help over lines
    assert "UTC when without an offset" in described, described
