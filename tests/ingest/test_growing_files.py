"""A capture file still being written (an audit log the NameServer appends to), ingested as it grows.

Each ingest reads the file again from where the part read before ends (its last newline), while the
file still starts with those bytes: the new lines only, numbered on. Its last line, cut short when
the file was read (no newline yet), is quarantined as ``incomplete_line`` by that run; the next run
starts with that line, and accepts it once written. A file written anew (its first bytes changed) is
read again whole: its records count once (duplicates), and so do its bad lines, each quarantined by
the first run that reads it. After the last step, ``silver.events`` equals one ingest of the whole
file, and ``silver.quarantine`` equals that ingest's quarantine plus the cut lines.

A log that rolls over (renamed, logrotate style) is read on after the part read under its old
name, and a renamed file that is that part whole is not read: each line is read once, under the
name it had when first read.
"""

from __future__ import annotations

import codecs
import gzip
import hashlib
import io
import dataclasses
import json
import os
from collections.abc import Sequence
from pathlib import Path
from unittest import mock

import pytest
from chispa import assert_df_equality
from hypothesis import example, given, settings
from hypothesis import strategies as st
from line_parsers import LIMITS, parser
from published import plain
from pyspark.sql import functions as F

from nsreplay.config import load_settings
from nsreplay.generator import apply_overrides, generate, preset
from nsreplay.runtime import local_frame
from nsreplay.storage import Warehouse
from pipelines.ingest import capture_reader
from pipelines.ingest.capture_reader import HEAD_BYTES, CompletePart, RawLine, ReadOutcome, read_capture_raw, read_raw_stream
from pipelines.ingest.capture_files import CaptureFile
from pipelines.ingest.parts_read_before import MAX_PARTS, parts_to_try
from pipelines.ingest.run import run_ingest
from pipelines.ingest.transforms import QUARANTINE_LINE_KEY, QUARANTINED_BEFORE, ParseOptions, PartReadBefore, mark_quarantined_before, read_line_row
from pipelines.quality.rules import event_rules
from schemas.bronze import CAPTURES_RAW, INGEST_FILES
from schemas.silver import EVENTS, QUARANTINE, READ_LINE

OPTIONS = ParseOptions(LIMITS, event_rules(min_ts=0, max_ts=2**62), max_queue_nums=1024, max_perm=15, keep_bytes=1 << 20)
BAD_JSON = b'{"namesrv":"10.0.0.10:9876","ts":'  # a line no writer finished: invalid JSON, with its newline
UNKNOWN_KIND = b'{"namesrv":"10.0.0.10:9876","ts":1732147200123,"kind":"gossip"}'


# ------------------------------------------------------------------------------------- reading lines


def test_only_a_last_line_without_a_newline_is_unterminated() -> None:
    def lines(data: bytes) -> list[RawLine]:
        return list(read_raw_stream(io.BytesIO(data), max_line_bytes=100, keep_bytes=100))

    assert lines(b"a\nb\n") == [RawLine(1, b"a", 1), RawLine(2, b"b", 1)]
    assert lines(b"a\nb") == [RawLine(1, b"a", 1), RawLine(2, b"b", 1, unterminated=True)]
    assert lines(b"a\nb\r") == [RawLine(1, b"a", 1), RawLine(2, b"b", 1, unterminated=True)]
    assert lines(gzip.compress(b"a\nb", mtime=0)) == [RawLine(1, b"a", 1), RawLine(2, b"b", 1, unterminated=True)]
    # a flagged last line keeps its flag alone: a gzip stream cut short
    cut = gzip.compress(b"a\nbcd", mtime=0)[:-8]
    assert lines(cut)[-1].read_error == "truncated_gzip" and not lines(cut)[-1].unterminated


class _Trickle(io.BytesIO):
    """A file that gives at most ``step`` bytes per read: chunk boundaries anywhere."""

    def __init__(self, data: bytes, step: int) -> None:
        super().__init__(data)
        self.step = step

    def read(self, size: int | None = -1) -> bytes:
        return super().read(self.step if size is None or size < 0 else min(size, self.step))


def read_file(data: bytes, *, resume: Sequence[CompletePart] = (), step: int = 1 << 20) -> tuple[list[RawLine], ReadOutcome]:
    """The lines of a file holding ``data`` and how it was read (max_line_bytes 12, keep_bytes 5)."""
    outcome = ReadOutcome()
    lines = list(read_capture_raw("f.jsonl", lambda _: _Trickle(data, step), max_line_bytes=12, keep_bytes=5, resume=resume, outcome=outcome))
    return lines, outcome


#: A head of a few bytes, for the generated files below: their parts then have heads, and files
#: that share one.
SMALL_HEAD = 6
#: A head longer than most of their parts, which are then fingerprinted by their first 20, 10, 5, …
#: bytes (``capture_reader.head_length``).
MID_HEAD = 40


#: Pieces of a file's bytes: text, newlines, carriage returns, holes, bytes that are not UTF-8, a
#: byte-order mark, a record's start in UTF-16, gzip's magic, and a line too long (over 12 bytes).
PIECES = st.sampled_from([b"{", b"ab", b"\n", b"\r\n", b"\r", b"\0", b"\0\0", b"\xff", "订".encode(), codecs.BOM_UTF8, codecs.BOM_UTF16_LE,
                          b"{\0", b"\x1f\x8b\x08", b"x" * 13])
FILE_BYTES = st.lists(PIECES, max_size=30).map(b"".join)


@settings(max_examples=400, deadline=None)
@given(before=FILE_BYTES, added=FILE_BYTES, step=st.integers(1, 9), head=st.sampled_from([SMALL_HEAD, MID_HEAD, HEAD_BYTES]))
@example(before=codecs.BOM_UTF16_LE + b"\n", added=b"\0{\0\n\0", step=4, head=HEAD_BYTES)  # the bytes after make it UTF-16
@example(before=b'{"a":1}\n{"b":22}\n{"c":333}\n{', added=b'"d":4}\n', step=5, head=MID_HEAD)  # a part of 30 bytes: its head, its first 20
@example(before=b"{a}\n{b}\n{c", added=b"}\n\0\0", step=3, head=HEAD_BYTES)
@example(before=b"{a}\n{b}\n{c", added=b"}\n\0\0", step=3, head=SMALL_HEAD)
def test_a_read_resumed_after_the_complete_part_yields_the_lines_a_whole_read_yields_after_it(before: bytes, added: bytes, step: int,
                                                                                              head: int) -> None:
    """A file read when it held ``before`` and read again once ``added`` came after (the same file
    grown, or renamed since: the reader sees bytes only): resumed after the complete part the first
    read reported, the second read yields exactly the whole read's lines after that part, and
    reports the same complete part, whose head is its first ``head`` bytes' SHA-256 when it holds
    them (else of its first half, quarter, … of them), one of the grown file's head fingerprints; the first read's lines up to the part are the whole read's too. Given other parts as
    well, it resumes after the largest one it starts with. Resumed after a part the file no longer
    starts with, it is read whole."""
    with mock.patch.object(capture_reader, "HEAD_BYTES", head):
        first, found = read_file(before, step=step)
        whole, again = read_file(before + added, step=step)
        assert found.read_from == 0 and again.read_from == 0 and found.resumed is None
        part = found.complete
        if part is None:
            return
        if before.startswith(b"\x1f\x8b"):  # gzip: the whole file, as read; never read on after it
            assert (part.size, part.lines, part.sha256) == (len(before), first[-1].line_no if first else 0, hashlib.sha256(before).hexdigest())
            assert read_file(before + added, resume=[part], step=step) == (whole, again)
            return
        assert before[: part.size].endswith(b"\n") and b"\n" not in before[part.size :]
        assert part.sha256 == hashlib.sha256(before[: part.size]).hexdigest()
        assert part.head_sha256 == hashlib.sha256(before[: capture_reader.head_length(part.size)]).hexdigest()
        if part.size >= min(capture_reader.head_lengths()) or part.lines <= capture_reader.SHORT_PART_LINES:  # how the grown file is found
            assert part.head_sha256 in capture_reader.head_sha256s(io.BytesIO(before + added))[0]
        assert first[: part.lines] == whole[: part.lines] and all(not line.unterminated for line in first[: part.lines])
        resumed, outcome = read_file(before + added, resume=[part], step=step)
        assert resumed == whole[part.lines :]
        assert (outcome.read_from, outcome.complete, outcome.resumed) == (part.size, again.complete, part)
        # parts of other files: one longer, one as long whose bytes differ (same head), one shorter
        longer = dataclasses.replace(part, size=len(before + added) + 1, sha256=hashlib.sha256(before + added + b"\n").hexdigest())
        differs = dataclasses.replace(part, sha256=hashlib.sha256(b"x" + before[1 : part.size]).hexdigest())
        shorter = CompletePart(1, 0, hashlib.sha256(before[:1]).hexdigest())
        assert read_file(before + added, resume=[shorter, longer, differs, part], step=step) == (resumed, outcome)
        changed = bytes([before[0] ^ 0x01]) + before[1:] + added  # written anew: its first byte differs
        assert read_file(changed, resume=[part], step=step) == read_file(changed, step=step)
        assert read_file(before[: part.size - 1], resume=[part], step=step) == read_file(before[: part.size - 1], step=step)  # cut


def read_inflated(data: bytes, resume: Sequence[CompletePart], step: int) -> tuple[list[RawLine], ReadOutcome]:
    """:func:`read_file`, given ``resume`` as plain files' parts the (gzip) file may continue in its text."""
    outcome = ReadOutcome()
    lines = list(read_capture_raw("f.jsonl.gz", lambda _: _Trickle(data, step), max_line_bytes=12, keep_bytes=5, resume_inflated=resume,
                                  outcome=outcome))
    return lines, outcome


@settings(max_examples=300, deadline=None)
@given(before=FILE_BYTES, added=FILE_BYTES, step=st.integers(1, 9), head=st.sampled_from([SMALL_HEAD, HEAD_BYTES]),
       members=st.integers(0, 40), flip=st.integers(0, 200))
@example(before=b"\0\0{{ab\r\n", added=b"", step=1, head=SMALL_HEAD, members=1, flip=0)  # a hole split by the members, in the part
def test_a_gzip_file_whose_text_starts_with_a_plain_part_is_read_on_after_it_in_its_text(before: bytes, added: bytes, step: int, head: int,
                                                                                         members: int, flip: int) -> None:
    """A plain file read when it held ``before``, then compressed (as one gzip member, or two split
    at ``members``) once ``added`` came after (a log compressed as it rolls over): resumed after the
    first read's complete part in its inflated text, the read yields the whole read's lines after
    that part, ``read_from`` the part's size, and reports the whole read's complete part (the whole
    compressed file). Its text that is the part exactly inflates to it (``inflates_to``), and one
    with more bytes does not. A byte of the compressed file changed: the read resumes only if the
    part's bytes still inflate cleanly, and yields the whole read's lines after it then, none of the
    part's lines being suspect; else it is read whole."""
    with mock.patch.object(capture_reader, "HEAD_BYTES", head):
        first, found = read_file(before, step=step)
        part = found.complete
        if part is None or before.startswith(b"\x1f\x8b"):
            return
        text = before + added
        cut = min(members, len(text))
        gz = gzip.compress(text, mtime=0) if not members else gzip.compress(text[:cut], mtime=0) + gzip.compress(text[cut:], mtime=0)
        whole, again = read_file(gz, step=step)
        resumed, outcome = read_inflated(gz, [part], step)
        if whole[: part.lines] != first[: part.lines]:
            # a hole that a member boundary splits within the part is two lines to a read of the
            # compressed file, one to the plain file's: read on, the lines are numbered on from the
            # part as the plain file's read numbered it, and are the compressed file's after it
            assert [line.line_no for line in resumed] == list(range(part.lines + 1, part.lines + 1 + len(resumed)))
            assert [dataclasses.replace(line, line_no=0) for line in resumed] == [
                dataclasses.replace(line, line_no=0) for line in whole[len(whole) - len(resumed) :]]
            assert len(whole) - len(resumed) > part.lines and outcome.read_from == part.size
            assert outcome.complete == dataclasses.replace(again.complete, lines=part.lines + len(resumed))  # the whole file, numbered so
            return
        assert resumed == whole[part.lines :]
        assert (outcome.read_from, outcome.resumed, outcome.complete) == (part.size, part, again.complete)
        exact = gzip.compress(before[: part.size], mtime=0)
        opener = lambda data: lambda _: _Trickle(data, step)  # noqa: E731
        assert capture_reader.inflates_to("f", opener(exact), [part]) == (0, read_file(exact, step=step)[1].complete)
        other = dataclasses.replace(part, sha256=hashlib.sha256(b"x").hexdigest())
        assert capture_reader.inflates_to("f", opener(gz), [other, part]) == ((1, again.complete) if text == before[: part.size] else None)
        damaged = bytearray(gz)
        damaged[flip % len(gz)] ^= 0x10
        damaged_whole = read_file(bytes(damaged), step=step)
        read_on, how = read_inflated(bytes(damaged), [part], step)
        if how.resumed is None:
            assert (read_on, how) == damaged_whole
        else:
            within = lambda line: line if line.damaged_from is None else dataclasses.replace(line, damaged_from=max(line.damaged_from, part.lines + 1))  # noqa: E731
            assert damaged_whole[0][: part.lines] == whole[: part.lines]
            assert read_on == [within(line) for line in damaged_whole[0][part.lines :]]
            assert how.complete == damaged_whole[1].complete


def test_utf16_files_and_a_hole_after_the_last_newline_report_no_complete_part_and_a_gzip_file_the_whole_file() -> None:
    text = b'{"a":1}\n{"b":2}\n'
    sha = lambda data: hashlib.sha256(data).hexdigest()  # noqa: E731 - also the head of a part shorter than HEAD_BYTES
    assert read_file(text)[1].complete == CompletePart(len(text), 2, sha(text), sha(text))
    assert read_file(text + b"{")[1].complete == CompletePart(len(text), 2, sha(text), sha(text))
    gz = gzip.compress(text, mtime=0)
    assert read_file(gz)[1].complete == CompletePart(len(gz), 2, sha(gz), sha(gz))  # the whole file
    cut_short = gzip.compress(text + b"{", mtime=0)[:-3]
    assert read_file(cut_short)[1].complete == CompletePart(len(cut_short), 3, sha(cut_short), sha(cut_short))  # as read
    grown = gz + gzip.compress(b'{"c":3}\n', mtime=0)
    assert read_file(grown, resume=[read_file(gz)[1].complete]) == read_file(grown)  # never read on: read whole
    assert read_file(codecs.BOM_UTF16_LE + text.decode().encode("utf-16-le"))[1].complete is None
    assert read_file(text + b"{\0")[1].complete is None
    assert read_file(text + b"\0\0")[1].complete is None
    assert read_file(b"{}\n")[1].complete is None  # within the first bytes, which tell a UTF-16/32 text
    assert read_file(b"")[1] == ReadOutcome()


def verdict(data: bytes, *, unterminated: bool) -> tuple[str, str | None, str | None]:
    row = read_line_row(parser(), "f.jsonl", RawLine(1, data, len(data), unterminated=unterminated), OPTIONS, set())
    return row["status"], row.get("reason"), row.get("detail")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        pytest.param(BAD_JSON, "invalid_json", id="json-cut-short"),
        pytest.param('{"namesrv":"10.0.0.10:9876","kind":"request","extFields":{"topic":"订'.encode()[:-2], "invalid_utf8", id="utf8-cut-short"),
    ],
)
def test_a_last_line_cut_short_is_an_incomplete_line_and_says_why(data: bytes, reason: str) -> None:
    status, got, detail = verdict(data, unterminated=True)
    assert (status, got) == ("quarantined", "incomplete_line")
    assert detail.startswith(f"the file's last line has no newline and does not parse ({reason}: ")
    assert "the next ingest reads it again from this line" in detail
    assert verdict(data, unterminated=False)[:2] == ("quarantined", reason)  # a line a newline ended is what it is


def test_a_last_line_without_a_newline_is_otherwise_judged_as_any_line() -> None:
    record = json.dumps({"namesrv": "10.0.0.10:9876", "ts": 1732147200123, "kind": "channel", "event": "CLOSE", "conn": "c1",
                         "remote": "10.0.1.5:53422"}).encode()
    assert verdict(record, unterminated=True)[:2] == ("accepted", None)
    # whole JSON that is not a record: no writer cut it short
    assert verdict(UNKNOWN_KIND, unterminated=True)[:2] == ("quarantined", "unknown_kind")


# ------------------------------------------------------------------------- lines quarantined before


def test_a_quarantined_line_is_marked_as_quarantined_before_only_when_equal_in_every_key_column(spark) -> None:
    """The quarantine holds line 2 of f.jsonl; the batch reads that line again, and lines that differ
    from it in one key column each: only the equal one (nulls equal) is marked."""
    base = {"source_file": "f.jsonl", "line_no": 2, "line_bytes": 5, "reason": "invalid_json", "raw_text": "{bad}", "raw_bytes": None}
    variants = [
        ("same", {}),
        ("other file", {"source_file": "g.jsonl"}),
        ("other line", {"line_no": 3}),
        ("other length", {"line_bytes": 6}),
        ("other reason", {"reason": "incomplete_line"}),
        ("other text", {"raw_text": "{bax}"}),
        ("other bytes", {"raw_bytes": b"\xff"}),
    ]
    names = [f.name for f in READ_LINE.fields]

    def read_line(status: str, **values) -> tuple:
        row = {"status": status, "line": values.get("raw_text") or "", **values}
        return tuple(row.get(n) for n in names)

    batch = [read_line("quarantined", **{**base, **change, "detail": label}) for label, change in variants]
    batch.append(read_line("accepted", source_file="f.jsonl", line_no=2, line_bytes=5, detail="accepted"))
    parsed = local_frame(spark, batch, READ_LINE)
    held = local_frame(spark, [tuple({**base, "run_id": "r0"}.get(f.name) for f in QUARANTINE.schema.fields)], QUARANTINE.schema)
    expected = parsed.withColumn("status", F.when(F.col("detail") == "same", F.lit(QUARANTINED_BEFORE)).otherwise(F.col("status")))
    marked = mark_quarantined_before(parsed, held)
    assert marked.schema.fieldNames() == parsed.schema.fieldNames()
    assert_df_equality(plain(marked).drop("new_body"), plain(expected).drop("new_body"), ignore_row_order=True, ignore_nullable=True)
    assert set(QUARANTINE_LINE_KEY) <= set(QUARANTINE.schema.fieldNames())


# ----------------------------------------------------------------------------- a file as it grows


@pytest.fixture(scope="module")
def log_lines(tmp_path_factory) -> list[bytes]:
    """The lines of one file of a short tiny capture, with two bad lines put in its first part and
    one in its second (lines 11, 31 and 81)."""
    generated = tmp_path_factory.mktemp("growing-generated")
    generate(apply_overrides(preset("tiny"), {"timing.hours": 0.1}), generated, workers=1)
    first = sorted(p for p in generated.iterdir() if p.name.endswith((".jsonl", ".jsonl.gz")))[0]
    data = gzip.decompress(first.read_bytes()) if first.name.endswith(".gz") else first.read_bytes()
    lines = data.rstrip(b"\n").split(b"\n")
    assert len(lines) > 150, len(lines)
    for at, bad in ((10, BAD_JSON), (30, UNKNOWN_KIND), (80, BAD_JSON)):
        lines.insert(at, bad)
    return lines


def test_a_growing_file_ingested_at_each_step_equals_one_ingest_of_the_whole(spark, tmp_path: Path, log_lines: list[bytes]) -> None:
    settings = load_settings()
    log = tmp_path / "captures" / "namesrv-audit.jsonl"
    log.parent.mkdir()
    upto = lambda n: b"\n".join(log_lines[:n]) + b"\n"  # noqa: E731 - the first n lines, each with its newline
    last = len(log_lines)
    # the generator's own bad lines are in the file too: count the reasons from a whole ingest below
    steps = [
        upto(40) + log_lines[40][:30],  # line 41 half written
        upto(120) + log_lines[120][:1],  # line 121: its first byte only
        upto(last - 1),
        b"\r\n".join(log_lines) + b"\r\n",  # written anew (a copy with Windows line ends), one more line
    ]
    growing = Warehouse(str(tmp_path / "wh-growing"), spark, "delta-rs")
    results = []
    for i, text in enumerate(steps):
        log.write_bytes(text)  # a new size at each step: the file is read again
        results.append(run_ingest(spark, growing, settings, str(log.parent), f"grow-{i}"))
    once = Warehouse(str(tmp_path / "wh-once"), spark, "delta-rs")
    whole = run_ingest(spark, once, settings, str(log.parent), "once")

    assert_df_equality(plain(growing.read(EVENTS)), plain(once.read(EVENTS)), ignore_row_order=True, ignore_nullable=True)
    kept = growing.read(QUARANTINE)
    assert_df_equality(kept.where(F.col("reason") != "incomplete_line").drop("run_id"), once.read(QUARANTINE).drop("run_id"), ignore_row_order=True)
    cut = [(r.run_id, r.line_no, r.raw_text) for r in kept.where(F.col("reason") == "incomplete_line").orderBy("line_no").collect()]
    assert cut == [("grow-0", 41, log_lines[40][:30].decode()), ("grow-1", 121, log_lines[120][:1].decode())]

    # how each run read the file: after the complete part the run before recorded, until it was written anew
    sha = lambda data: hashlib.sha256(data).hexdigest()  # noqa: E731
    files = {r.run_id: r for r in growing.read(INGEST_FILES).collect()}
    assert [(files[f"grow-{i}"].read_from, files[f"grow-{i}"].lines) for i in range(4)] == [
        (0, 41), (len(upto(40)), 81), (len(upto(120)), last - 121), (0, last)]
    assert [(files[f"grow-{i}"].complete_bytes, files[f"grow-{i}"].complete_lines, files[f"grow-{i}"].complete_sha256) for i in range(4)] == [
        (len(upto(40)), 40, sha(upto(40))), (len(upto(120)), 120, sha(upto(120))), (len(steps[2]), last - 1, sha(steps[2])),
        (len(steps[3]), last, sha(steps[3]))]
    # bronze keeps each line once per read: the resumed runs read from the line cut before
    raw = {r.run_id: (r.first, r.last, r.n) for r in growing.read(CAPTURES_RAW).groupBy("run_id").agg(
        F.min("line_no").alias("first"), F.max("line_no").alias("last"), F.count(F.lit(1)).alias("n")).collect()}
    assert raw == {"grow-0": (1, 41, 41), "grow-1": (41, 121, 81), "grow-2": (121, last - 1, last - 121), "grow-3": (1, last, last)}

    # each run's counts: a bad line is quarantined by the first run that reads it only
    bad_lines = {n: r for n, r in ((r.line_no, r.reason) for r in once.read(QUARANTINE).select("line_no", "reason").collect())}
    quarantined_in = lambda lo, hi: sum(1 for n in bad_lines if lo < n <= hi)  # noqa: E731
    assert [r.lines_read for r in results] == [41, 81, last - 121, last]
    assert [r.files_resumed for r in results] == [0, 1, 1, 0]
    assert [r.quarantined for r in results] == [quarantined_in(0, 40) + 1, quarantined_in(40, 120) + 1, quarantined_in(120, last - 1),
                                                quarantined_in(last - 1, last)]
    assert [r.quarantined_before for r in results] == [0, 0, 0, quarantined_in(0, last - 1)]
    assert [r.quarantined_by_reason.get("incomplete_line", 0) for r in results] == [1, 1, 0, 0]
    assert {10 + 1, 30 + 1, 80 + 1} <= set(bad_lines), bad_lines  # the bad lines put in are where they were put
    assert not {41, 121} & set(bad_lines), bad_lines  # the lines cut short are records, once whole
    for r in results:
        assert r.lines_read == r.accepted + r.duplicates + r.quarantined, r
    assert sum(r.accepted for r in results) == whole.accepted
    assert "files 1 read (1 of them after the part read before), 0 already ingested" in results[1].summary()
    assert f"duplicates {results[3].duplicates} ({quarantined_in(0, last - 1)} of them lines quarantined before)" in results[3].summary()


# ------------------------------------------------------------------------------ a log that rolls over


@pytest.fixture(scope="module")
def rolled_lines(tmp_path_factory) -> list[bytes]:
    """The lines of one file of a tiny capture long enough for three parts of over HEAD_BYTES, with
    bad lines put in at lines 11 and 31 (first part) and 181 (second)."""
    generated = tmp_path_factory.mktemp("rolled-generated")
    generate(apply_overrides(preset("tiny"), {"timing.hours": 0.3}), generated, workers=1)
    first = sorted(p for p in generated.iterdir() if p.name.endswith((".jsonl", ".jsonl.gz")))[0]
    data = gzip.decompress(first.read_bytes()) if first.name.endswith(".gz") else first.read_bytes()
    lines = data.rstrip(b"\n").split(b"\n")
    for at, bad in ((10, BAD_JSON), (30, UNKNOWN_KIND), (180, BAD_JSON)):
        lines.insert(at, bad)
    return lines


def test_a_log_that_rolls_over_is_read_once_under_all_its_names(spark, tmp_path: Path, rolled_lines: list[bytes]) -> None:
    """A NameServer's audit log ``audit.jsonl``, rolled over as logrotate does (numbered: at each roll
    the older files are renamed up, ``audit.1.jsonl`` to ``audit.2.jsonl`` and so on), its writer
    still appending to the file it holds open after a roll, ingested between rolls. Part 1 (lines
    1-150) is read up to the middle of line 101, rolled, read again, completed, rolled; part 2 is read
    up to line 80, completed, rolled; part 3 is read whole; then all three roll once more, unchanged,
    and the oldest is touched.
    Each line is read once, under the name it had when first read: a renamed file is read after the
    part read under its old name (the line cut short then, read again, counts as quarantined
    before), and a file that is such a part whole (or its own part, touched) is not read at all. After the last run,
    ``silver.events`` and ``silver.quarantine`` equal one ingest of the files as they are at the end,
    but for the name each line was read under."""
    settings = load_settings()
    logs = tmp_path / "captures"
    logs.mkdir()
    text = lambda lines: b"\n".join(lines) + b"\n"  # noqa: E731
    one, two, three = rolled_lines[:150], rolled_lines[150:300], rolled_lines[300:]
    assert len(three) > 20 and min(len(text(one[:100])), len(text(two[:80])), len(text(three))) > HEAD_BYTES  # the parts have heads

    def roll(last: int) -> None:  # audit.{last-1}.jsonl -> audit.{last}.jsonl, ..., audit.jsonl -> audit.1.jsonl
        names = ["audit.jsonl", *(f"audit.{i}.jsonl" for i in range(1, last + 1))]
        for newer, older in reversed(list(zip(names, names[1:]))):
            (logs / newer).rename(logs / older)

    rolled = Warehouse(str(tmp_path / "wh-rolled"), spark, "delta-rs")
    results = []
    ingest = lambda: results.append(run_ingest(spark, rolled, settings, str(logs), f"roll-{len(results)}"))  # noqa: E731
    (logs / "audit.jsonl").write_bytes(text(one[:100]) + one[100][:25])  # line 101 half written
    ingest()
    roll(1)
    (logs / "audit.jsonl").write_bytes(text(two[:80]))
    ingest()
    (logs / "audit.1.jsonl").write_bytes(text(one))  # the writer finishes part 1 before it reopens
    (logs / "audit.jsonl").write_bytes(text(two))
    roll(2)
    (logs / "audit.jsonl").write_bytes(text(three))
    ingest()
    roll(3)
    (logs / "audit.jsonl").write_bytes(b"")
    ingest()
    touched = logs / "audit.3.jsonl"
    os.utime(touched, ns=(touched.stat().st_atime_ns, touched.stat().st_mtime_ns + 10**9))  # same bytes, a new time
    ingest()
    once = Warehouse(str(tmp_path / "wh-once"), spark, "delta-rs")
    whole = run_ingest(spark, once, settings, str(logs), "once")

    # how each file was read, and each run's counts
    files = {(r.run_id, r.source_file.rsplit("/", 1)[-1]): r for r in rolled.read(INGEST_FILES).collect()}
    how = {key: (r.status, r.read_from, r.lines, r.resumed_file and r.resumed_file.rsplit("/", 1)[-1]) for key, r in files.items()}
    assert how == {
        ("roll-0", "audit.jsonl"): ("read", 0, 101, None),
        ("roll-1", "audit.1.jsonl"): ("read", len(text(one[:100])), 1, "audit.jsonl"),  # line 101 again, as it was
        ("roll-1", "audit.jsonl"): ("read", 0, 80, None),
        ("roll-2", "audit.2.jsonl"): ("read", len(text(one[:100])), 50, "audit.1.jsonl"),  # lines 101-150
        ("roll-2", "audit.1.jsonl"): ("read", len(text(two[:80])), 70, "audit.jsonl"),
        ("roll-2", "audit.jsonl"): ("read", 0, len(three), None),
        ("roll-3", "audit.3.jsonl"): ("read", len(text(one)), 0, "audit.2.jsonl"),  # each a part read before, whole: not read
        ("roll-3", "audit.2.jsonl"): ("read", len(text(two)), 0, "audit.1.jsonl"),
        ("roll-3", "audit.1.jsonl"): ("read", len(text(three)), 0, "audit.jsonl"),
        ("roll-3", "audit.jsonl"): ("empty", None, 0, None),
        ("roll-4", "audit.3.jsonl"): ("read", len(text(one)), 0, "audit.3.jsonl"),  # its own part, whole: not read
    }
    sha = lambda data: hashlib.sha256(data).hexdigest()  # noqa: E731
    assert {(key[1], r.complete_bytes, r.complete_sha256, r.complete_head_sha256) for key, r in files.items() if key[0] == "roll-3" and r.lines == 0
            and r.status == "read"} == {(f"audit.{i}.jsonl", len(text(part)), sha(text(part)), sha(text(part)[:HEAD_BYTES]))
                                        for i, part in ((3, one), (2, two), (1, three))}
    assert [(r.files_read, r.files_resumed, r.files_renamed) for r in results] == [(1, 0, 0), (2, 1, 1), (3, 2, 2), (4, 3, 3), (1, 1, 0)]
    for r in results:
        assert r.lines_read == r.accepted + r.duplicates + r.quarantined, r
    assert [r.lines_read for r in results] == [101, 81, 120 + len(three), 0, 0]
    assert [r.quarantined_before for r in results] == [0, 1, 0, 0, 0]
    assert sum(r.accepted for r in results) == whole.accepted
    assert "files 4 read (3 of them after the part read before, 3 of those under a new name), 0 already ingested" in results[3].summary()

    # where each line was read: part 1 (now audit.3) up to line 100 and part 2 (now audit.2) up to line 80 as audit.jsonl
    name = F.regexp_extract("source_file", r"[^/]*$", 0)
    first_read_as = lambda df: df.withColumn("source_file", F.regexp_replace("source_file", r"[^/]+$", (  # noqa: E731
        F.when((name == "audit.3.jsonl") & (F.col("line_no") > 100), F.lit("audit.2.jsonl"))
        .when((name == "audit.2.jsonl") & (F.col("line_no") > 80), F.lit("audit.1.jsonl"))
        .otherwise(F.lit("audit.jsonl")))))
    assert_df_equality(plain(rolled.read(EVENTS)), plain(first_read_as(once.read(EVENTS))), ignore_row_order=True, ignore_nullable=True)
    kept = rolled.read(QUARANTINE).where(F.col("reason") != "incomplete_line").drop("run_id")
    assert_df_equality(kept, first_read_as(once.read(QUARANTINE)).drop("run_id"), ignore_row_order=True)
    assert [(r.run_id, r.line_no) for r in rolled.read(QUARANTINE).where(F.col("reason") == "incomplete_line").collect()] == [("roll-0", 101)]
    assert {(r.line_no, r.reason) for r in once.read(QUARANTINE).where(name != "audit.1.jsonl").collect()} >= {
        (11, "invalid_json"), (31, "unknown_kind"), (31, "invalid_json")}  # the bad lines put in are among them


def test_the_parts_a_file_may_continue_are_its_own_and_those_with_its_head_largest_first_each_once() -> None:
    part = lambda size, sha="s", head="h": CompletePart(size, size // 10, sha, head)  # noqa: E731
    file = CaptureFile("/logs/audit.2.jsonl", 500, 0)
    by_head = {"h": [PartReadBefore("/logs/audit.1.jsonl", part(300)), PartReadBefore("/logs/audit.jsonl", part(300)),  # latest read first
                     PartReadBefore("/logs/other.jsonl", part(600)), PartReadBefore("/logs/audit.2.jsonl", part(100)),
                     PartReadBefore("/logs/copy.jsonl", part(500, "t"))],
               "g": [PartReadBefore("/logs/g.jsonl", part(200, head="g"))]}
    assert parts_to_try(file, ("h",), part(400, "o", "x"), by_head) == (
        PartReadBefore("/logs/copy.jsonl", part(500, "t")),  # as long as the file: it may be that part whole
        PartReadBefore("/logs/audit.2.jsonl", part(400, "o", "x")),  # its own, whatever its head
        PartReadBefore("/logs/audit.1.jsonl", part(300)),  # the same part read as audit.jsonl before: once, as read last
    )  # not: a longer part, another head, its own path's part recorded under the head (the own part is its latest)
    assert parts_to_try(file, (), None, by_head) == ()
    assert parts_to_try(file, ("g",), part(300), by_head) == (PartReadBefore("/logs/audit.2.jsonl", part(300)), PartReadBefore("/logs/g.jsonl", part(200, head="g")))
    many = {"h": [PartReadBefore(f"/logs/a{i}.jsonl", part(100 + i)) for i in range(10)]}
    assert [p.source_file for p in parts_to_try(file, ("h",), None, many)] == [f"/logs/a{i}.jsonl" for i in (9, 8, 7, 6)][:MAX_PARTS]
    # a gzip file: then the parts recorded with its inflated text's head, whatever their size (its
    # text is longer than its bytes), largest first, each once
    assert parts_to_try(file, ("g",), None, by_head, text_heads=("h",)) == (
        PartReadBefore("/logs/g.jsonl", part(200, head="g")),
        PartReadBefore("/logs/other.jsonl", part(600), inflated=True),
        PartReadBefore("/logs/copy.jsonl", part(500, "t"), inflated=True),
        PartReadBefore("/logs/audit.1.jsonl", part(300), inflated=True),
        PartReadBefore("/logs/audit.2.jsonl", part(100), inflated=True),
    )
    assert len(parts_to_try(file, (), None, many, text_heads=("h",))) == MAX_PARTS
    # a file's fingerprints at several lengths (its first 64 KiB, 32 KiB, ...): the parts recorded
    # with any of them, largest first, each once
    assert parts_to_try(file, ("x", "g", "h"), None, by_head) == (
        PartReadBefore("/logs/copy.jsonl", part(500, "t")), PartReadBefore("/logs/audit.1.jsonl", part(300)),
        PartReadBefore("/logs/g.jsonl", part(200, head="g")))


@pytest.mark.parametrize("compress", [False, True], ids=["copytruncate", "copytruncate-compress"])
def test_a_log_rolled_over_by_copy_and_truncate_is_read_once(spark, tmp_path: Path, rolled_lines: list[bytes], compress: bool) -> None:
    """logrotate's ``copytruncate``: ``audit.jsonl`` (read up to line 120, 150 lines since) is copied
    to ``audit.jsonl.1`` (or compressed to ``audit.jsonl.1.gz``) and cut to nothing, and its writer
    goes on writing it. The copy is read on after the part read as ``audit.jsonl``; ``audit.jsonl``,
    which no longer starts with that part, is read whole, then on as it grows. Each line is read once:
    ``silver.events`` and ``silver.quarantine`` equal one ingest of the files as they are at the end,
    but for the name each line was first read under."""
    settings = load_settings()
    logs = tmp_path / "captures"
    logs.mkdir()
    text = lambda lines: b"\n".join(lines) + b"\n"  # noqa: E731
    two, three = rolled_lines[150:300], rolled_lines[300:]
    copy = logs / ("audit.jsonl.1.gz" if compress else "audit.jsonl.1")  # logrotate's names
    (logs / "audit.jsonl").write_bytes(text(two[:120]))
    rolled = Warehouse(str(tmp_path / "wh-rolled"), spark, "delta-rs")
    runs = [run_ingest(spark, rolled, settings, str(logs), "ct-0")]
    copy.write_bytes(gzip.compress(text(two), mtime=0) if compress else text(two))
    (logs / "audit.jsonl").write_bytes(text(three[:40]))  # cut, and written on
    runs.append(run_ingest(spark, rolled, settings, str(logs), "ct-1"))
    (logs / "audit.jsonl").write_bytes(text(three))
    runs.append(run_ingest(spark, rolled, settings, str(logs), "ct-2"))
    once = Warehouse(str(tmp_path / "wh-once"), spark, "delta-rs")
    whole = run_ingest(spark, once, settings, str(logs), "once")

    how = {(r.run_id, r.source_file.rsplit("/", 1)[-1]): (r.status, r.read_from, r.lines, r.resumed_file and r.resumed_file.rsplit("/", 1)[-1])
           for r in rolled.read(INGEST_FILES).collect()}
    assert how == {
        ("ct-0", "audit.jsonl"): ("read", 0, 120, None),
        ("ct-1", copy.name): ("read", len(text(two[:120])), 30, "audit.jsonl"),
        ("ct-1", "audit.jsonl"): ("read", 0, 40, None),
        ("ct-2", "audit.jsonl"): ("read", len(text(three[:40])), len(three) - 40, "audit.jsonl"),
    }
    for r in runs:
        assert r.lines_read == r.accepted + r.duplicates + r.quarantined, r
        assert (r.duplicates, r.quarantined_before) == (0, 0), r
    assert sum(r.accepted for r in runs) == whole.accepted and sum(r.quarantined for r in runs) == whole.quarantined > 0
    name = F.regexp_extract("source_file", r"[^/]*$", 0)
    first_name = F.when((name == copy.name) & (F.col("line_no") > 120), copy.name).otherwise("audit.jsonl")
    first_read_as = lambda df: df.withColumn("source_file", F.regexp_replace("source_file", r"[^/]+$", first_name))  # noqa: E731
    assert_df_equality(plain(rolled.read(EVENTS)), plain(first_read_as(once.read(EVENTS))), ignore_row_order=True, ignore_nullable=True)
    assert_df_equality(rolled.read(QUARANTINE).drop("run_id"), first_read_as(once.read(QUARANTINE)).drop("run_id"), ignore_row_order=True)


def test_a_log_compressed_as_it_rolls_over_is_read_once_under_all_its_names(spark, tmp_path: Path, rolled_lines: list[bytes]) -> None:
    """logrotate's ``compress``: at each roll ``audit.jsonl`` is compressed to ``audit.1.jsonl.gz``
    and every older ``.gz`` renamed up. Part 1 is read compressed; part 2 is read as ``audit.jsonl``
    up to line 120, grows to 150 lines and is compressed at the roll; part 3 is read whole as
    ``audit.jsonl`` and compressed at the next roll unchanged; then all three roll once more.
    A renamed ``.gz`` is the file read before, byte for byte: not read. The one compressed at the roll
    is read on after what was read as ``audit.jsonl``, in its inflated text (lines 121-150, its
    own compressed bytes recorded as its part), or, when its text is just that, not read at all.
    Each line is read once, under the name it had when first read: ``silver.events`` and
    ``silver.quarantine`` equal one ingest of the files as they are at the end, but for those names."""
    settings = load_settings()
    logs = tmp_path / "captures"
    logs.mkdir()
    text = lambda lines: b"\n".join(lines) + b"\n"  # noqa: E731
    one, two, three = rolled_lines[:150], rolled_lines[150:300], rolled_lines[300:]
    gz = lambda lines: gzip.compress(text(lines), mtime=0)  # noqa: E731
    assert len(text(two[:120])) > HEAD_BYTES  # a shorter part is continued only by a file that is it (docs/operations.md)

    def roll(compress: bytes | None, new: bytes | None) -> None:
        for n in (3, 2, 1):
            if (logs / f"audit.{n}.jsonl.gz").exists():
                (logs / f"audit.{n}.jsonl.gz").rename(logs / f"audit.{n + 1}.jsonl.gz")
        if compress is not None:
            (logs / "audit.1.jsonl.gz").write_bytes(compress)
        (logs / "audit.jsonl").unlink(missing_ok=True)
        if new is not None:
            (logs / "audit.jsonl").write_bytes(new)

    (logs / "audit.1.jsonl.gz").write_bytes(gz(one))
    (logs / "audit.jsonl").write_bytes(text(two[:120]))
    rolled = Warehouse(str(tmp_path / "wh-rolled"), spark, "delta-rs")
    runs = [run_ingest(spark, rolled, settings, str(logs), "gz-0")]
    roll(gz(two), text(three))  # audit.jsonl grew by 30 lines before it rolled
    runs.append(run_ingest(spark, rolled, settings, str(logs), "gz-1"))
    roll(gz(three), None)  # read whole before it rolled
    runs.append(run_ingest(spark, rolled, settings, str(logs), "gz-2"))
    roll(None, None)
    runs.append(run_ingest(spark, rolled, settings, str(logs), "gz-3"))
    once = Warehouse(str(tmp_path / "wh-once"), spark, "delta-rs")
    whole = run_ingest(spark, once, settings, str(logs), "once")

    files = {(r.run_id, r.source_file.rsplit("/", 1)[-1]): r for r in rolled.read(INGEST_FILES).collect()}
    how = {key: (r.status, r.read_from, r.lines, r.resumed_file and r.resumed_file.rsplit("/", 1)[-1]) for key, r in files.items()}
    assert how == {
        ("gz-0", "audit.1.jsonl.gz"): ("read", 0, 150, None),
        ("gz-0", "audit.jsonl"): ("read", 0, 120, None),
        ("gz-1", "audit.2.jsonl.gz"): ("read", len(gz(one)), 0, "audit.1.jsonl.gz"),  # the same bytes: not read
        ("gz-1", "audit.1.jsonl.gz"): ("read", len(text(two[:120])), 30, "audit.jsonl"),  # read on in its text
        ("gz-1", "audit.jsonl"): ("read", 0, len(three), None),
        ("gz-2", "audit.3.jsonl.gz"): ("read", len(gz(one)), 0, "audit.2.jsonl.gz"),
        ("gz-2", "audit.2.jsonl.gz"): ("read", len(gz(two)), 0, "audit.1.jsonl.gz"),
        ("gz-2", "audit.1.jsonl.gz"): ("read", len(text(three)), 0, "audit.jsonl"),  # its text is the part read: not read
        ("gz-3", "audit.4.jsonl.gz"): ("read", len(gz(one)), 0, "audit.3.jsonl.gz"),
        ("gz-3", "audit.3.jsonl.gz"): ("read", len(gz(two)), 0, "audit.2.jsonl.gz"),
        ("gz-3", "audit.2.jsonl.gz"): ("read", len(gz(three)), 0, "audit.1.jsonl.gz"),  # its part: its own bytes, recorded at gz-2
    }
    parts = {key: (r.complete_bytes, r.complete_lines, r.complete_sha256) for key, r in files.items() if key[0] in ("gz-1", "gz-2")}
    assert parts[("gz-1", "audit.1.jsonl.gz")] == (len(gz(two)), 150, hashlib.sha256(gz(two)).hexdigest())
    assert parts[("gz-2", "audit.1.jsonl.gz")] == (len(gz(three)), len(three), hashlib.sha256(gz(three)).hexdigest())
    assert [(r.files_read, r.files_resumed, r.files_renamed) for r in runs] == [(2, 0, 0), (3, 2, 2), (3, 3, 3), (3, 3, 3)]
    for r in runs:
        assert r.lines_read == r.accepted + r.duplicates + r.quarantined, r
        assert (r.duplicates, r.quarantined_before) == (0, 0), r
    assert sum(r.accepted for r in runs) == whole.accepted and sum(r.quarantined for r in runs) == whole.quarantined > 0
    # each line under the name it was first read as: part 1 audit.1.jsonl.gz; part 2 audit.jsonl to
    # line 120, then audit.1.jsonl.gz; part 3 audit.jsonl
    name = F.regexp_extract("source_file", r"[^/]*$", 0)
    first_name = (F.when(name == "audit.4.jsonl.gz", "audit.1.jsonl.gz")
                  .when((name == "audit.3.jsonl.gz") & (F.col("line_no") > 120), "audit.1.jsonl.gz").otherwise("audit.jsonl"))
    first_read_as = lambda df: df.withColumn("source_file", F.regexp_replace("source_file", r"[^/]+$", first_name))  # noqa: E731
    assert_df_equality(plain(rolled.read(EVENTS)), plain(first_read_as(once.read(EVENTS))), ignore_row_order=True, ignore_nullable=True)
    assert_df_equality(rolled.read(QUARANTINE).drop("run_id"), first_read_as(once.read(QUARANTINE)).drop("run_id"), ignore_row_order=True)


@pytest.mark.parametrize("compress", [False, True], ids=["renamed", "compressed"])
@pytest.mark.parametrize("shorter_than", ["32 KiB", "512 bytes"])
def test_a_log_shorter_than_the_head_grown_and_rolled_is_read_on_after_the_part_read(spark, tmp_path: Path, rolled_lines: list[bytes],
                                                                                     compress: bool, shorter_than: str) -> None:
    """A quiet NameServer's ``audit.jsonl``, read while shorter than HEAD_BYTES (its part fingerprinted
    by its first 32 KiB, 16 KiB, …: ``capture_reader.head_length``; a part under 512 bytes by all its
    bytes, which a file that starts with them shows among the fingerprints of its first lines), grows
    by ten lines and rolls over: renamed ``audit.jsonl.1``, or compressed to ``audit.jsonl.1.gz``.
    The rolled file is read on after the part read as ``audit.jsonl``, not read whole: no line is a
    duplicate and no bad line is quarantined again, and ``silver.events`` and ``silver.quarantine``
    equal one ingest of the files as they are at the end, but for the name each line was first read
    under. (A part under 512 bytes was found only by a file that is it: the rolled file was read
    whole, its bad line quarantined again under the new name.)"""
    settings = load_settings()
    logs = tmp_path / "captures"
    logs.mkdir()
    text = lambda lines: b"\n".join(lines) + b"\n"  # noqa: E731
    short = shorter_than == "512 bytes"
    if short:
        rolled_lines = [BAD_JSON, *rolled_lines]
    limit = min(capture_reader.head_lengths()) if short else HEAD_BYTES // 2
    n = max(k for k in range(1, len(rolled_lines)) if len(text(rolled_lines[:k])) < limit)
    grown, new = rolled_lines[: n + 10], rolled_lines[n + 10 : n + 15]
    bad_in_part = 1 if short else 2
    assert n > (1 if short else 31) and len(text(grown)) < HEAD_BYTES  # the bad lines (1; or 11, 31) are in the part read; every file is short
    rolled_name = "audit.jsonl.1.gz" if compress else "audit.jsonl.1"

    rolled = Warehouse(str(tmp_path / "wh-rolled"), spark, "delta-rs")
    (logs / "audit.jsonl").write_bytes(text(rolled_lines[:n]))
    first = run_ingest(spark, rolled, settings, str(logs), "small-0")
    (logs / "audit.jsonl").unlink()
    (logs / rolled_name).write_bytes(gzip.compress(text(grown), mtime=0) if compress else text(grown))  # grown, then rolled
    (logs / "audit.jsonl").write_bytes(text(new))
    second = run_ingest(spark, rolled, settings, str(logs), "small-1")
    once = Warehouse(str(tmp_path / "wh-once"), spark, "delta-rs")
    run_ingest(spark, once, settings, str(logs), "once")

    files = {(r.run_id, r.source_file.rsplit("/", 1)[-1]): r for r in rolled.read(INGEST_FILES).collect()}
    how = {key: (r.read_from, r.lines, r.resumed_file and r.resumed_file.rsplit("/", 1)[-1]) for key, r in files.items()}
    assert how == {
        ("small-0", "audit.jsonl"): (0, n, None),
        ("small-1", rolled_name): (len(text(rolled_lines[:n])), 10, "audit.jsonl"),  # read on: lines n+1 to n+10
        ("small-1", "audit.jsonl"): (0, 5, None),
    }
    assert (first.quarantined, second.duplicates, second.quarantined_before) == (bad_in_part, 0, 0)
    assert [(r.files_read, r.files_resumed, r.files_renamed) for r in (first, second)] == [(1, 0, 0), (2, 1, 1)]

    name = F.regexp_extract("source_file", r"[^/]*$", 0)
    first_read_as = lambda df: df.withColumn("source_file", F.when(  # noqa: E731
        (name == rolled_name) & (F.col("line_no") <= n), F.regexp_replace("source_file", r"[^/]+$", "audit.jsonl")).otherwise(F.col("source_file")))
    assert_df_equality(plain(rolled.read(EVENTS)), plain(first_read_as(once.read(EVENTS))), ignore_row_order=True, ignore_nullable=True)
    assert_df_equality(rolled.read(QUARANTINE).drop("run_id"), first_read_as(once.read(QUARANTINE)).drop("run_id"), ignore_row_order=True)
