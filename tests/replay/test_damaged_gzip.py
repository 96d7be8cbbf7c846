"""Damaged gzip captures against the model. The ingest keeps every complete line a damaged gzip file
inflates to before its damage, except the lines of a member that failed its integrity check, and
quarantines the cut line after them (``truncated_gzip``, ``corrupt_gzip``;
pipelines/ingest/capture_reader.py). A member whose deflate data or CRC fails may have garbled any of
its lines, so every line it gave a byte to is quarantined as ``corrupt_gzip`` too
(``pipelines.ingest.transforms.quarantine_damaged_members``). The oracle inflates the same files its
own way (``differential._inflated``, a byte at a time, noting where a failed member began), so the
published history must equal the model's over exactly the lines left: a reader that lost a salvageable
line, or kept one it should not, fails.

One NameServer's records are spread over four files: a plain one, a gzip file cut short in its
deflate data, a gzip file of two members whose second has one byte of its deflate data changed, and
one of two members whose second has a CRC that does not match (a line spans the two members), each
file holding registrations, heartbeats and unregistrations of several brokers at shared instants (no
``seq``: file order decides ties, so a lost or extra line also moves ranks).
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

from differential import _inflated, canonical_json, capture_records, compare_changes, first_damaged_line
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


def two_members(data: bytes, at: int, how: str) -> bytes:
    """``data`` as two gzip members split at byte ``at``, the second damaged (:func:`damaged`)."""
    return gzip.compress(data[:at], mtime=0) + damaged(data[at:], how)


FILES = {"c-flipped.jsonl.gz": "flip", "d-crc.jsonl.gz": "crc"}


def records_by_file() -> dict[str, list[dict[str, Any]]]:
    """The records of each file of the capture, before any damage (the same at every call)."""
    rnd = random.Random(20261127)
    plain = [namesrv_start(S, "4.9.4", namesrv=NS)] + records_of_file(rnd, 60)
    return {"a-plain.jsonl": plain, **{name: records_of_file(rnd, 400) for name in ("b-cut.jsonl.gz", "c-flipped.jsonl.gz", "d-crc.jsonl.gz")}}


@pytest.fixture(scope="module")
def damaged_published(spark, tmp_path_factory) -> tuple[Path, str, IngestResult]:
    records = records_by_file()
    capture = tmp_path_factory.mktemp("damaged-gzip")
    (capture / "a-plain.jsonl").write_bytes(jsonl(records["a-plain.jsonl"]))
    (capture / "b-cut.jsonl.gz").write_bytes(damaged(jsonl(records["b-cut.jsonl.gz"]), "cut"))
    flipped = jsonl(records["c-flipped.jsonl.gz"])
    (capture / "c-flipped.jsonl.gz").write_bytes(two_members(flipped, flipped.index(b"\n", len(flipped) // 2) + 1, "flip"))
    crc = jsonl(records["d-crc.jsonl.gz"])
    (capture / "d-crc.jsonl.gz").write_bytes(two_members(crc, crc.index(b"\n", len(crc) // 2) - 5, "crc"))  # a line spans both
    root = str(tmp_path_factory.mktemp("damaged-gzip-wh"))
    warehouse = Warehouse(root, spark, "delta-rs")
    ingested = run_ingest(spark, warehouse, load_settings(), str(capture), "gz-ingest")
    run_replay(spark, warehouse, load_settings(), "gz-replay")
    return capture, root, ingested


def expected_damaged_rows(capture: Path) -> list[tuple[str, int, str, str]]:
    """(file, line, reason, raw_text) of every line of a failed member, and of each file's flagged last
    line, as the oracle inflates them: all ``corrupt_gzip`` but the cut file's ``truncated_gzip``."""
    keep = load_settings().ingest.quarantine_keep_bytes
    rows = []
    for name in ("b-cut.jsonl.gz", *FILES):
        data, damaged_at = _inflated((capture / name).read_bytes())
        assert (damaged_at is None) == (name == "b-cut.jsonl.gz")
        lines, damaged_from = data.split(b"\n"), first_damaged_line(data, damaged_at)
        for line_no, raw in enumerate(lines, start=1):  # the last piece is the flagged line
            if line_no == len(lines) or (damaged_from is not None and line_no >= damaged_from):
                reason = "truncated_gzip" if name == "b-cut.jsonl.gz" else "corrupt_gzip"
                rows.append((name, line_no, reason, raw.decode("utf-8", "replace")[:keep]))
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
    kept = Counter(Path(r["_file"]).name for r in capture_records(capture))
    assert kept["a-plain.jsonl"] == 61
    # each damaged file keeps some of its lines, and fewer than it held; each failed member starts
    # after 190 to 210 lines (half the file's records, for the split)
    assert 0 < kept["b-cut.jsonl.gz"] < 400 and all(190 <= kept[name] <= 210 for name in FILES)
    assert (ingested.accepted + ingested.duplicates, ingested.quarantined) == (sum(kept.values()), quarantine.count())
    assert ingested.quarantined_by_reason == dict(Counter(reason for _, _, reason, _ in expected_damaged_rows(capture)))


def test_no_register_body_comes_from_a_quarantined_line(spark, damaged_published) -> None:
    """A body first decoded by a line of a failed member is not stored: silver.topic_configs holds the
    bodies of the accepted registrations, and only those."""
    _, root, _ = damaged_published
    warehouse = Warehouse(root, spark, "delta-rs")
    used = warehouse.read(EVENTS).where(F.col("body_id").isNotNull()).select("body_id").distinct()
    assert_df_equality(warehouse.read(TOPIC_CONFIGS).select("body_id"), used, ignore_row_order=True, ignore_nullable=True)


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
    assert 150 < duplicates < 250  # about half: the lines of the file's first member, kept before
    assert again.stale and "nsreplay backfill" in again.late_data()


def test_gold_equals_the_model_over_the_salvaged_lines(spark, damaged_published) -> None:
    capture, root, _ = damaged_published
    compared = compare_changes(spark, capture, root)
    assert compared["gold.route_changes"]["registered"] > 0


def test_the_oracle_inflates_members_and_padding_and_stops_at_damage() -> None:
    one, two = b'{"a": 1}\n', b'{"b": 2}\n'
    assert _inflated(gzip.compress(one) + gzip.compress(two) + b"\0" * 7) == (one + two, None)
    assert _inflated(gzip.compress(one) + gzip.compress(two)[:-8]) == (one + two, None)  # only the trailer is cut
    assert _inflated(gzip.compress(one) + b"\x1f\x8b" + b"\xff" * 20) == (one, len(one))
    assert _inflated(gzip.compress(one) + damaged(two, "crc")) == (one + two, len(one))
    assert _inflated(damaged(one, "crc") + gzip.compress(two)) == (one, 0)
