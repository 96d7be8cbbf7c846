"""Damaged gzip captures against the model. The ingest keeps every complete line a damaged gzip file
inflates to, except the lines a member that failed its integrity check may have garbled, and
quarantines a cut line (``truncated_gzip``, ``corrupt_gzip``; pipelines/ingest/capture_reader.py). A
member whose deflate data or CRC fails may have garbled any of its lines, so every line it gave a byte
to is quarantined as ``corrupt_gzip``, and so is the line its damage ends in, where the reading goes on
at the next member found (``pipelines.ingest.transforms.quarantine_damaged_members``). The oracle
inflates the same files its own way (``differential._inflated``, a byte at a time, noting where each
failed member's output began and stopped), so the published history must equal the model's over
exactly the lines left: a reader that lost a salvageable line, or kept one it should not, fails.

One NameServer's records are spread over five files: a plain one, a gzip file cut short in its
deflate data, a gzip file of three members whose second has one byte of its deflate data changed,
one of three members whose second has a CRC that does not match (a line spans each pair of members,
and a register body first met in the failed member comes again in the third), and one of two intact
members with a hole of zero bytes between them, as a crash leaves (a line spans the hole), and a
plain file with two such holes in its text, one cutting a line short and one between lines, and a
gzip file of two members with plain text after each, as when text is appended to a gzipped file (a
line spans the first member and the text after it; the reader passes such text on as it is, and
quarantines every line holding a byte of it as ``not_gzipped``), each holding
registrations, heartbeats and unregistrations of several brokers at shared instants (no ``seq``: file
order decides ties, so a lost or extra line also moves ranks).
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from differential import _inflated, canonical_json, capture_records, compare_changes, damaged_lines, plain_lines, text_lines
from nsreplay.config import load_settings
from nsreplay.model.records import broker_heartbeat, namesrv_start, register_broker, unregister_broker
from nsreplay.storage import Warehouse
from pipelines.ingest.run import IngestResult, run_ingest
from pipelines.replay.run import run_replay
from schemas.silver import EVENTS, QUARANTINE, TOPIC_CONFIGS

S = 1732147200000
NS = "10.9.3.1:9876"  # 4.9
BROKERS = [f"broker-{i}" for i in range(12)]


def addr(name: str) -> str:
    return f"10.0.{BROKERS.index(name)}.1:10911"


def records_of_file(rnd: random.Random, n: int) -> list[dict[str, Any]]:
    """``n`` records at instants a second apart, several per instant."""
    out = []
    for i in range(n):
        ts, name = S + 1000 * (1 + i // 3), rnd.choice(BROKERS)
        kind = rnd.random()
        if kind < 0.5:
            topics = [f"t-{rnd.randrange(40)}" for _ in range(rnd.randint(2, 6))]
            out.append(register_broker(ts, cluster="c1", name=name, addr=addr(name), topics=sorted(set(topics)) or ["t-0", "t-1"], five=False, namesrv=NS))
        elif kind < 0.8:
            out.append(broker_heartbeat(ts, cluster="c1", name=name, addr=addr(name), namesrv=NS))
        else:
            out.append(unregister_broker(ts, cluster="c1", name=name, addr=addr(name), namesrv=NS))
    return out


def jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def damaged(data: bytes, how: str) -> bytes:
    """``data`` gzipped, then cut at 60 % of its length, with the byte there inverted, or with a
    CRC trailer that does not match."""
    packed = bytearray(gzip.compress(data, mtime=0))
    at = len(packed) * 6 // 10
    if how == "cut":
        return bytes(packed[:at])
    if how == "crc":
        at = len(packed) - 8
    packed[at] ^= 0xFF
    return bytes(packed)


def three_members(data: bytes, cuts: tuple[int, int], how: str) -> bytes:
    """``data`` as three gzip members split at bytes ``cuts``, the second damaged (:func:`damaged`)."""
    first, second = cuts
    return gzip.compress(data[:first], mtime=0) + damaged(data[first:second], how) + gzip.compress(data[second:], mtime=0)


FILES = {"c-flipped.jsonl.gz": "flip", "d-crc.jsonl.gz": "crc"}
HOLE = "e-hole.jsonl.gz"
PLAIN_HOLES = "f-holes.jsonl"
APPENDED = "g-appended.jsonl.gz"


def with_hole(data: bytes) -> bytes:
    """``data`` as two intact gzip members with 4 KiB of zero bytes between them, split inside the
    line after the middle."""
    cut = line_cut(data, 0.5, -5)
    return gzip.compress(data[:cut], mtime=0) + b"\0" * 4096 + gzip.compress(data[cut:], mtime=0)


def with_text_holes(data: bytes) -> bytes:
    """``data`` with the end of the line after 30 % replaced by 3,000 zero bytes, and 100 zero bytes
    put before the line after 70 %, as a crash leaves a plain file the writer goes on with."""
    cut, resumed, between = line_cut(data, 0.3, -9), line_cut(data, 0.3), line_cut(data, 0.7)
    return data[:cut] + bytes(3000) + data[resumed:between] + bytes(100) + data[between:]


def with_appended_text(data: bytes) -> bytes:
    """``data`` as a gzip member up to inside the line after 40 %, its text as it is up to the line
    after 60 %, a member up to inside the line after 80 %, and the rest as text: plain text written
    after each member of a gzip file."""
    first, resumed, second = line_cut(data, 0.4, -6), line_cut(data, 0.6), line_cut(data, 0.8, -4)
    return gzip.compress(data[:first], mtime=0) + data[first:resumed] + gzip.compress(data[resumed:second], mtime=0) + data[second:]


def records_by_file() -> dict[str, list[dict[str, Any]]]:
    """The records of each file of the capture, before any damage (the same at every call)."""
    rnd = random.Random(20261127)
    plain = [namesrv_start(S, "4.9.4", namesrv=NS)] + records_of_file(rnd, 60)
    files = {"a-plain.jsonl": plain, **{name: records_of_file(rnd, 400) for name in ("b-cut.jsonl.gz", "c-flipped.jsonl.gz", "d-crc.jsonl.gz", HOLE)}, PLAIN_HOLES: records_of_file(rnd, 100), APPENDED: records_of_file(rnd, 200)}
    crc = files["d-crc.jsonl.gz"]
    for i in (200, 380):  # the body, found nowhere else, first in the failed member, then in the third
        crc[i] = register_broker(crc[i]["ts"], cluster="c1", name="broker-0", addr=addr("broker-0"), topics=UNIQUE_TOPICS, five=False, namesrv=NS)
    return files


UNIQUE_TOPICS = ["only-in-d-1", "only-in-d-2"]


def line_cut(data: bytes, fraction: float, shift: int = 0) -> int:
    """A byte offset ``shift`` from the start of the first line after ``fraction`` of ``data``."""
    return data.index(b"\n", int(len(data) * fraction)) + 1 + shift


def member_cuts(name: str, data: bytes) -> tuple[int, int]:
    """Where the file's text is split into its three members: at line starts in the flipped file;
    inside lines in the other, so that a line spans each pair of members (and the third member starts
    after the record at 85 %)."""
    if name == "c-flipped.jsonl.gz":
        return line_cut(data, 1 / 3), line_cut(data, 2 / 3)
    return line_cut(data, 1 / 3, -5), line_cut(data, 0.85, -7)


@pytest.fixture(scope="module")
def damaged_published(spark, tmp_path_factory) -> tuple[Path, str, IngestResult]:
    records = records_by_file()
    capture = tmp_path_factory.mktemp("damaged-gzip")
    (capture / "a-plain.jsonl").write_bytes(jsonl(records["a-plain.jsonl"]))
    (capture / "b-cut.jsonl.gz").write_bytes(damaged(jsonl(records["b-cut.jsonl.gz"]), "cut"))
    for name, how in FILES.items():
        data = jsonl(records[name])
        (capture / name).write_bytes(three_members(data, member_cuts(name, data), how))
    (capture / HOLE).write_bytes(with_hole(jsonl(records[HOLE])))
    (capture / PLAIN_HOLES).write_bytes(with_text_holes(jsonl(records[PLAIN_HOLES])))
    (capture / APPENDED).write_bytes(with_appended_text(jsonl(records[APPENDED])))
    root = str(tmp_path_factory.mktemp("damaged-gzip-wh"))
    warehouse = Warehouse(root, spark, "delta-rs")
    ingested = run_ingest(spark, warehouse, load_settings(), str(capture), "gz-ingest")
    run_replay(spark, warehouse, load_settings(), "gz-replay")
    return capture, root, ingested


def expected_damaged_rows(capture: Path) -> list[tuple[str, int, str, str]]:
    """(file, line, reason, raw_text) of every line a failed member may have garbled, as the oracle
    inflates them (``corrupt_gzip``), of every line holding text after a gzip member (``not_gzipped``),
    of the cut file's last line (``truncated_gzip``), and of the holes in the plain file's text
    (``zero_bytes``) and the line one cut short (``invalid_json``)."""
    keep = load_settings().ingest.quarantine_keep_bytes
    rows = []
    for name in ("b-cut.jsonl.gz", *FILES, HOLE, APPENDED):
        data, failures, plain = _inflated((capture / name).read_bytes())
        assert bool(failures) == (name not in ("b-cut.jsonl.gz", APPENDED))
        assert any(stop > began for began, stop in plain) == (name == APPENDED)  # a hole right before a member: no text
        lines, damaged, appended = data.split(b"\n"), damaged_lines(data, failures), plain_lines(data, plain)
        for line_no, raw in enumerate(lines, start=1):
            if line_no in damaged:
                rows.append((name, line_no, "corrupt_gzip", raw.decode("utf-8", "replace")[:keep]))
            elif line_no in appended:
                rows.append((name, line_no, "not_gzipped", raw.decode("utf-8", "replace")[:keep]))
            elif name == "b-cut.jsonl.gz" and line_no == len(lines):
                rows.append((name, line_no, "truncated_gzip", raw.decode("utf-8", "replace")[:keep]))
    for line_no, raw in enumerate(text_lines((capture / PLAIN_HOLES).read_bytes()), start=1):
        if raw is None:
            rows.append((PLAIN_HOLES, line_no, "zero_bytes", ""))
            continue
        try:
            json.loads(raw)
        except ValueError:  # the line a hole cut short
            rows.append((PLAIN_HOLES, line_no, "invalid_json", raw.decode("utf-8", "replace")[:keep]))
    return rows


def test_a_failed_member_is_quarantined_whole_and_a_cut_loses_only_its_last_line(spark, damaged_published) -> None:
    capture, root, ingested = damaged_published
    quarantine = Warehouse(root, spark, "delta-rs").read(QUARANTINE)
    got = quarantine.select(F.element_at(F.split("source_file", "/"), -1).alias("file"), "line_no", "reason", "raw_text")
    want = spark.createDataFrame(expected_damaged_rows(capture), got.schema)
    assert_df_equality(got, want, ignore_row_order=True, ignore_nullable=True)
    # a garbled line of the flipped member is no valid record, and the detail says so; the CRC
    # member's lines all parse, and still are quarantined
    details = {(r.file, r.detail.rsplit("; as read it is ", 1)[1]) for r in
               quarantine.where(F.col("detail").startswith("a byte of this line")).select(F.element_at(F.split("source_file", "/"), -1).alias("file"), "detail").collect()}
    assert ("d-crc.jsonl.gz", "a valid record") in details and ("c-flipped.jsonl.gz", "a valid record") in details
    assert {file for file, verdict in details if verdict != "a valid record"} == {"c-flipped.jsonl.gz"}
    records = capture_records(capture)
    kept = Counter(Path(r["_file"]).name for r in records)
    assert kept["a-plain.jsonl"] == 61
    # each damaged file keeps some of its lines, and fewer than it held; the files of three members
    # keep the lines of the first member and of the third, which follows the damaged one, less the
    # lines that span two members
    assert 0 < kept["b-cut.jsonl.gz"] < 400
    for name in FILES:
        data = jsonl(records_by_file()[name])
        first, second = member_cuts(name, data)
        # the third member's first line holds the gap: it is quarantined with the damaged member
        assert kept[name] == data.count(b"\n", 0, first) + data.count(b"\n", second) - 1
    assert kept[HOLE] == 400 - 1  # every line of the two members but the one the hole splits
    assert kept[PLAIN_HOLES] == 100 - 1  # every record but the one a hole cut short
    # the lines of the two members, less the line that each member's last bytes and the text after it share
    data = jsonl(records_by_file()[APPENDED])
    assert kept[APPENDED] == data.count(b"\n", 0, line_cut(data, 0.4)) - 1 + data.count(b"\n", line_cut(data, 0.6), line_cut(data, 0.8)) - 1
    # the last record of each file of several members comes from a member after the damage, or the hole
    kept_records = {(Path(r["_file"]).name, canonical_json({k: v for k, v in r.items() if not k.startswith("_")})) for r in records}
    assert all((name, canonical_json(records_by_file()[name][-1])) in kept_records for name in (*FILES, HOLE, PLAIN_HOLES))
    assert (ingested.accepted + ingested.duplicates, ingested.quarantined) == (sum(kept.values()), quarantine.count())
    assert ingested.quarantined_by_reason == dict(Counter(reason for _, _, reason, _ in expected_damaged_rows(capture)))


def test_no_register_body_comes_from_a_quarantined_line(spark, damaged_published) -> None:
    """A body first decoded by a line of a failed member is not stored from it: silver.topic_configs
    holds the bodies of the accepted registrations, and only those, the one the failed member met
    first included (an accepted line of the third member brings it)."""
    _, root, _ = damaged_published
    warehouse = Warehouse(root, spark, "delta-rs")
    used = warehouse.read(EVENTS).where(F.col("body_id").isNotNull()).select("body_id").distinct()
    stored = warehouse.read(TOPIC_CONFIGS)
    assert_df_equality(stored.select("body_id"), used, ignore_row_order=True, ignore_nullable=True)
    unique = stored.where(F.array_contains(F.col("topic_configs.topic_name"), UNIQUE_TOPICS[0]))
    assert [r.topic_names for r in unique.select(F.col("topic_configs.topic_name").alias("topic_names")).collect()] == [UNIQUE_TOPICS]
    quarantined = warehouse.read(QUARANTINE).where(F.col("raw_text").contains(UNIQUE_TOPICS[0]))
    assert [(r.reason, r.detail.endswith("a valid record")) for r in quarantined.collect()] == [("corrupt_gzip", True)]


def test_an_intact_copy_shipped_later_brings_the_quarantined_lines_as_late_data(spark, damaged_published, tmp_path) -> None:
    """The runbook (docs/operations.md, "A damaged gzip capture"): an intact copy of the file, shipped
    under another path here, is read whole by the next ingest; the lines kept before are duplicates,
    the damaged member's lines are accepted, and the published window they fall in is named stale."""
    capture, root, _ = damaged_published
    root_copy, resent = str(tmp_path / "wh"), tmp_path / "resent" / "d-crc.jsonl.gz"
    shutil.copytree(root, root_copy)  # the other tests keep the fixture's warehouse as it was
    records = records_by_file()["d-crc.jsonl.gz"]
    resent.parent.mkdir()
    resent.write_bytes(gzip.compress(jsonl(records), mtime=0))
    # a record of the file is a duplicate when silver holds it already (from any file) or the file repeats it
    seen = {canonical_json({k: v for k, v in r.items() if not k.startswith("_")}) for r in capture_records(capture)}
    duplicates = 0
    for record in records:
        text = canonical_json(record)
        duplicates += text in seen
        seen.add(text)
    again = run_ingest(spark, Warehouse(root_copy, spark, "delta-rs"), load_settings(), str(resent), "gz-ingest-again")
    assert (again.files_read, again.lines_read, again.duplicates, again.accepted, again.quarantined) == (1, 400, duplicates, 400 - duplicates, 0)
    assert duplicates >= len([r for r in capture_records(capture) if r["_file"].endswith("d-crc.jsonl.gz")])  # kept before
    assert again.stale and "nsreplay backfill" in again.late_data()


def test_gold_equals_the_model_over_the_salvaged_lines(spark, damaged_published) -> None:
    capture, root, _ = damaged_published
    compared = compare_changes(spark, capture, root)
    assert compared["gold.route_changes"]["registered"] > 0


def test_the_oracle_inflates_members_and_padding_and_goes_on_after_damage() -> None:
    one, two = b'{"a": 1}\n', b'{"b": 2}\n'
    assert _inflated(gzip.compress(one) + gzip.compress(two) + b"\0" * 7) == (one + two, (), ())
    assert _inflated(gzip.compress(one) + gzip.compress(two)[:-8]) == (one + two, (), ())  # only the trailer is cut
    assert _inflated(gzip.compress(one) + b"\x1f\x8b" + b"\xff" * 20) == (one, ((9, 9),), ())
    assert _inflated(gzip.compress(one) + damaged(two, "crc")) == (one + two, ((9, 18),), ())
    assert _inflated(damaged(one, "crc") + gzip.compress(two)) == (one + two, ((0, 9),), ())
    assert _inflated(damaged(one, "crc") + gzip.compress(two)[:-8]) == (one + two, ((0, 9), (9, 18)), ())  # found after damage, never checked
    assert _inflated(gzip.compress(one) + b"\0" + gzip.compress(two)) == (one + two, ((9, 9),), ((9, 9),))  # a hole, read past
    assert _inflated(gzip.compress(one) + b"\0" * 3 + b"x") == (one + b"x", ((9, 9),), ((9, 10),))  # a hole, then text
    assert _inflated(gzip.compress(one) + b"x") == (one + b"x", (), ((9, 10),))  # one stray byte: text, no cut member
    assert _inflated(gzip.compress(one) + b"\x1f") == (one, (), ())  # a cut header: a cut member
    # text after a member, up to the next member's header (a false one, method 9, is text)
    assert _inflated(gzip.compress(one) + b"ab\x1f\x8b\x09\n" + gzip.compress(two)) == (one + b"ab\x1f\x8b\x09\n" + two, (), ((9, 15),))
    assert plain_lines(one + b"ab\n" + two, ((9, 12),)) == {2} and plain_lines(one + two, ((9, 9),)) == set()
    assert plain_lines(b"a" + b"bc\nd", ((1, 5),)) == {1, 2}
    assert damaged_lines(one + two, ((0, 9),)) == {1, 2} and damaged_lines(one + two, ((9, 9),)) == {2}
