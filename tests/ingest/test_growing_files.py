"""A capture file still being written (an audit log the NameServer appends to), ingested as it grows.

Each ingest reads the file again from where the part read before ends (its last newline), while the
file still starts with those bytes: the new lines only, numbered on. Its last line, cut short when
the file was read (no newline yet), is quarantined as ``incomplete_line`` by that run; the next run
starts with that line, and accepts it once written. A file written anew (its first bytes changed) is
read again whole: its records count once (duplicates), and so do its bad lines, each quarantined by
the first run that reads it. After the last step, ``silver.events`` equals one ingest of the whole
file, and ``silver.quarantine`` equals that ingest's quarantine plus the cut lines.
"""

from __future__ import annotations

import codecs
import gzip
import hashlib
import io
import json
from pathlib import Path

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
from pipelines.ingest.capture_reader import CompletePart, RawLine, ReadOutcome, read_capture_raw, read_raw_stream
from pipelines.ingest.run import run_ingest
from pipelines.ingest.transforms import QUARANTINE_LINE_KEY, QUARANTINED_BEFORE, ParseOptions, mark_quarantined_before, read_line_row
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


def read_file(data: bytes, *, resume: CompletePart | None = None, step: int = 1 << 20) -> tuple[list[RawLine], ReadOutcome]:
    """The lines of a file holding ``data`` and how it was read (max_line_bytes 12, keep_bytes 5)."""
    outcome = ReadOutcome()
    lines = list(read_capture_raw("f.jsonl", lambda _: _Trickle(data, step), max_line_bytes=12, keep_bytes=5, resume=resume, outcome=outcome))
    return lines, outcome


#: Pieces of a file's bytes: text, newlines, carriage returns, holes, bytes that are not UTF-8, a
#: byte-order mark, a record's start in UTF-16, gzip's magic, and a line too long (over 12 bytes).
PIECES = st.sampled_from([b"{", b"ab", b"\n", b"\r\n", b"\r", b"\0", b"\0\0", b"\xff", "订".encode(), codecs.BOM_UTF8, codecs.BOM_UTF16_LE,
                          b"{\0", b"\x1f\x8b\x08", b"x" * 13])
FILE_BYTES = st.lists(PIECES, max_size=30).map(b"".join)


@settings(max_examples=400, deadline=None)
@given(before=FILE_BYTES, added=FILE_BYTES, step=st.integers(1, 9))
@example(before=codecs.BOM_UTF16_LE + b"\n", added=b"\0{\0\n\0", step=4)  # the bytes after make it UTF-16
@example(before=b"{a}\n{b}\n{c", added=b"}\n\0\0", step=3)
def test_a_read_resumed_after_the_complete_part_yields_the_lines_a_whole_read_yields_after_it(before: bytes, added: bytes, step: int) -> None:
    """A file read when it held ``before`` and read again once ``added`` came after: resumed after the
    complete part the first read reported, the second read yields exactly the whole read's lines
    after that part, and reports the same complete part; the first read's lines up to the part are
    the whole read's too. Resumed after a part the file no longer starts with, it is read whole."""
    first, found = read_file(before, step=step)
    whole, again = read_file(before + added, step=step)
    assert found.read_from == 0 and again.read_from == 0
    part = found.complete
    if part is None:
        return
    assert before[: part.size].endswith(b"\n") and b"\n" not in before[part.size :]
    assert part.sha256 == hashlib.sha256(before[: part.size]).hexdigest()
    assert first[: part.lines] == whole[: part.lines] and all(not line.unterminated for line in first[: part.lines])
    resumed, outcome = read_file(before + added, resume=part, step=step)
    assert resumed == whole[part.lines :]
    assert (outcome.read_from, outcome.complete) == (part.size, again.complete)
    changed = bytes([before[0] ^ 0x01]) + before[1:] + added  # written anew: its first byte differs
    assert read_file(changed, resume=part, step=step) == read_file(changed, step=step)
    assert read_file(before[: part.size - 1], resume=part, step=step) == read_file(before[: part.size - 1], step=step)  # cut


def test_gzip_and_utf16_files_and_a_hole_after_the_last_newline_report_no_complete_part() -> None:
    text = b'{"a":1}\n{"b":2}\n'
    assert read_file(text)[1].complete == CompletePart(len(text), 2, hashlib.sha256(text).hexdigest())
    assert read_file(text + b"{")[1].complete == CompletePart(len(text), 2, hashlib.sha256(text).hexdigest())
    assert read_file(gzip.compress(text, mtime=0))[1].complete is None
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
