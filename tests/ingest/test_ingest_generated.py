"""Ingest of a generated capture reconciles with what the generator says it wrote (two independent
code paths: the generator's manifest and the ingest's parser/dedup/quarantine)."""

from __future__ import annotations

import json

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from nsreplay.config import load_settings
from nsreplay.generator import generate, preset
from nsreplay.storage import Warehouse
from pipelines.ingest.capture_files import list_capture_files, open_capture
from pipelines.ingest.capture_reader import read_capture_file
from pipelines.ingest.run import run_ingest
from pipelines.ingest.transforms import whole_lines
from schemas.bronze import CAPTURE_BODIES, CAPTURES_RAW
from schemas.silver import EVENTS, QUARANTINE, TOPIC_CONFIGS


@pytest.fixture(scope="module")
def tiny(spark, tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny-capture")
    generate(preset("tiny"), out, workers=1)
    manifest = json.loads((out / "_manifest.json").read_text())
    warehouse = Warehouse(str(tmp_path_factory.mktemp("tiny-wh")), spark, "delta-rs")
    result = run_ingest(spark, warehouse, load_settings(), str(out), "tiny-1")
    return manifest, warehouse, result, out


def test_counts_match_the_generator_manifest(tiny) -> None:
    manifest, _, result, _ = tiny
    assert result.lines_read == manifest["lines_total"]
    assert result.accepted == manifest["records"]["total"]
    assert result.duplicates == manifest["duplicates"]["lines"]
    assert result.quarantined_by_reason == manifest["junk"]["by_reason"]


def test_records_by_kind_and_code_match(tiny) -> None:
    manifest, warehouse, _, _ = tiny
    events = warehouse.read(EVENTS)
    by_kind = {r.kind: r["count"] for r in events.groupBy("kind").count().collect()}
    assert by_kind == manifest["records"]["by_kind"]
    by_code = {str(r.code): r["count"] for r in events.where(F.col("kind") == "request").groupBy("code").count().collect()}
    assert by_code == manifest["records"]["by_code"]


def test_distinct_bodies_match(tiny) -> None:
    manifest, warehouse, _, _ = tiny
    assert warehouse.read(TOPIC_CONFIGS).count() == manifest["register_bodies"]["distinct"]
    assert warehouse.read(QUARANTINE).count() == manifest["junk"]["total"]


def test_bronze_keeps_every_line_exactly_and_each_repeated_body_text_once(spark, tiny) -> None:
    manifest, warehouse, _, out = tiny
    settings = load_settings().ingest
    lines = warehouse.read(CAPTURES_RAW)
    got = whole_lines(lines, warehouse.read(CAPTURE_BODIES)).select("source_file", "line_no", "line", "line_bytes", "raw_bytes", "read_error")
    read = [
        (f.path, line.line_no, line.text, line.line_bytes, line.raw_bytes, line.read_error)
        for f in list_capture_files(str(out))
        for line in read_capture_file(f.path, open_capture, max_line_bytes=settings.max_line_bytes, keep_bytes=settings.quarantine_keep_bytes)
    ]
    assert_df_equality(got, spark.createDataFrame(read, got.schema), ignore_row_order=True, ignore_nullable=True)
    # split: exactly the lines whose last member is a "body" object or "body_b64" string of 1 KiB or more
    split = lines.where(F.col("body_ref").isNotNull())
    want_split = [(path, no) for path, no, text, _, raw, error in read if raw is None and error is None and _has_big_body(text)]
    assert_df_equality(split.select("source_file", "line_no"), spark.createDataFrame(want_split, "source_file string, line_no long"),
                       ignore_row_order=True, ignore_nullable=True)
    # and each body text they refer to is stored once
    stored = warehouse.read(CAPTURE_BODIES)
    assert stored.count() == stored.select("body_ref").distinct().count() == split.select("body_ref").distinct().count() > 0


def _has_big_body(text: str) -> bool:
    """The line ends with a member "body" (a JSON object) or "body_b64" (a string) whose text is
    1 KiB or more, found at the first such mark (pipelines.ingest.bronze_form.split_body)."""
    try:
        record = json.loads(text)
    except ValueError:
        return False
    if not isinstance(record, dict) or not record:
        return False
    found = [(text.find(mark), member, mark) for member, mark in (("body", ',"body":'), ("body_b64", ',"body_b64":"')) if mark in text]
    if not found:
        return False
    at, member, mark = min(found)
    if list(record)[-1] != member or not isinstance(record[member], dict if member == "body" else str):
        return False
    tail = text[at + len(mark) - (member == "body_b64") : -1]  # a body_b64 text keeps its opening quote
    return len(tail.encode()) >= 1024
