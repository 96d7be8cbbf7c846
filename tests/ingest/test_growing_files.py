"""A capture file still being written (an audit log the NameServer appends to), ingested as it grows.

Each ingest reads the changed file again whole. Its records count once (duplicates), and so do its bad
lines: each is quarantined by the first run that reads it, and counted as a duplicate by the later
ones. Its last line, cut short when the file was read (no newline yet), is quarantined as
``incomplete_line`` by that run; the next run, reading the file again once the line is written,
accepts it. After the last step, ``silver.events`` equals one ingest of the whole file, and
``silver.quarantine`` equals that ingest's quarantine plus the cut lines.
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest
from chispa import assert_df_equality
from line_parsers import LIMITS, parser
from published import plain
from pyspark.sql import functions as F

from nsreplay.config import load_settings
from nsreplay.generator import apply_overrides, generate, preset
from nsreplay.runtime import local_frame
from nsreplay.storage import Warehouse
from pipelines.ingest.capture_reader import RawLine, read_raw_stream
from pipelines.ingest.run import run_ingest
from pipelines.ingest.transforms import QUARANTINE_LINE_KEY, QUARANTINED_BEFORE, ParseOptions, mark_quarantined_before, read_line_row
from pipelines.quality.rules import event_rules
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
    assert "the next ingest reads it again whole" in detail
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
    # the generator's own bad lines are in the file too: count the reasons from a whole ingest below
    steps = [
        b"\n".join(log_lines[:40]) + b"\n" + log_lines[40][:30],  # line 41 half written
        b"\n".join(log_lines[:120]) + b"\n" + log_lines[120][:1],  # line 121: its first byte only
        b"\n".join(log_lines) + b"\n",
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

    # each run's counts: a bad line is quarantined by the first run that reads it only
    bad_lines = {n: r for n, r in ((r.line_no, r.reason) for r in once.read(QUARANTINE).select("line_no", "reason").collect())}
    quarantined_in = lambda lo, hi: sum(1 for n in bad_lines if lo < n <= hi)  # noqa: E731
    assert [r.lines_read for r in results] == [41, 121, len(log_lines)]
    assert [r.quarantined for r in results] == [quarantined_in(0, 40) + 1, quarantined_in(40, 120) + 1, quarantined_in(120, len(log_lines))]
    assert [r.quarantined_before for r in results] == [0, quarantined_in(0, 40), quarantined_in(0, 120)]
    assert [r.quarantined_by_reason.get("incomplete_line", 0) for r in results] == [1, 1, 0]
    assert {10 + 1, 30 + 1, 80 + 1} <= set(bad_lines), bad_lines  # the bad lines put in are where they were put
    assert not {41, 121} & set(bad_lines), bad_lines  # the lines cut short are records, once whole
    for r in results:
        assert r.lines_read == r.accepted + r.duplicates + r.quarantined, r
    assert sum(r.accepted for r in results) == whole.accepted
    assert f"duplicates {results[2].duplicates} ({quarantined_in(0, 120)} of them lines quarantined before)" in results[2].summary()
