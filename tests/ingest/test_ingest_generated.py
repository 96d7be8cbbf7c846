"""Ingest of a generated capture reconciles with what the generator says it wrote (two independent
code paths: the generator's manifest and the ingest's parser/dedup/quarantine)."""

from __future__ import annotations

import base64
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from nsreplay.config import load_settings
from nsreplay.generator import generate, preset
from nsreplay.protocol.register_body import decode_json_register_body, decode_register_body
from nsreplay.storage import Warehouse
from pipelines.ingest.capture_files import list_capture_files, open_capture
from pipelines.ingest.capture_reader import read_capture_file
from pipelines.ingest.run import run_ingest
from pipelines.ingest.transforms import whole_lines
from schemas.bronze import CAPTURE_BODIES, CAPTURES_RAW
from schemas.silver import EVENTS, QUARANTINE, TOPIC_CONFIGS


def _capture_checks():
    """tests/generator/capture_checks.py: the generator tests' own capture-format v1 line checker,
    which classifies each line without the ingest's code (loaded by path: it is not a package)."""
    name = "capture_checks"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "generator" / "capture_checks.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # before running it: its dataclass looks its module up
        spec.loader.exec_module(module)
    return sys.modules[name]


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


@pytest.fixture(scope="module")
def lines(tiny):
    """Every line of the tiny capture, classified by the independent checker (file name, line number,
    raw bytes, quarantine reason or parsed record)."""
    return _capture_checks().read_lines(tiny[3])


def basename(col: str = "source_file"):
    return F.regexp_extract(F.col(col), r"([^/]+)$", 1)


def test_records_by_kind_and_code_match(spark, tiny, lines) -> None:
    """silver.events holds, of each set of equal valid records, the first by file path then line."""
    manifest, warehouse, _, _ = tiny
    kept: dict[str, object] = {}
    for line in sorted((l for l in lines if l.reason is None), key=lambda l: (l.file, l.number)):
        kept.setdefault(json.dumps(line.record, sort_keys=True), line)
    want = [(l.file, l.number, l.record["kind"], l.record["code"] if l.record["kind"] in ("request", "response") else None) for l in kept.values()]
    events = warehouse.read(EVENTS)
    got = events.select(basename().alias("file"), "line_no", "kind", "code")
    assert_df_equality(got, spark.createDataFrame(want, got.schema), ignore_row_order=True, ignore_nullable=True)
    by_kind = {r.kind: r["count"] for r in events.groupBy("kind").count().collect()}
    assert by_kind == manifest["records"]["by_kind"]
    by_code = {str(r.code): r["count"] for r in events.where(F.col("kind") == "request").groupBy("code").count().collect()}
    assert by_code == manifest["records"]["by_code"]


def test_quarantine_holds_each_rejected_line_with_its_reason(spark, tiny, lines) -> None:
    manifest, warehouse, _, _ = tiny
    got = warehouse.read(QUARANTINE).select(basename().alias("file"), "line_no", "reason")
    want = [(l.file, l.number, l.reason) for l in lines if l.reason is not None]
    assert len(want) == manifest["junk"]["total"] > 0
    assert_df_equality(got, spark.createDataFrame(want, got.schema), ignore_row_order=True, ignore_nullable=True)


def expected_bodies(lines) -> dict[tuple, tuple]:
    """The silver.topic_configs rows (without body_id) of the valid REGISTER_BROKER lines, one per
    distinct body as the capture contract and ``silver.topic_configs`` define it: raw bytes (``body_b64``,
    authoritative) with the header's compressed flag and, for compressed bytes, whether the request's
    version is 413 or more; or the compact JSON of a ``body`` object. Version < 37: a bare wrapper."""
    rows: dict[tuple, tuple] = {}
    for line in lines:
        record = line.record
        if line.reason is not None or record["kind"] != "request" or record["code"] != 103:
            continue
        version = record["version"]
        legacy = version < 37
        if record.get("body_b64") is not None:
            raw = base64.b64decode(record["body_b64"])
            if not raw:
                continue  # zero bytes are no body
            compressed = record["extFields"].get("compressed", "").lower() == "true"
            encoding = "compressed" if compressed else ("legacy_wrapper" if legacy else "json")
            key = ("raw", encoding, compressed and version >= 413, raw)
            body, size = decode_register_body(raw, compressed=compressed, version=version), len(raw)
        elif record.get("body") is not None:
            encoding = "legacy_wrapper" if legacy else "json"
            text = json.dumps(record["body"], sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
            key = ("json", encoding, text)
            body, size = decode_json_register_body(record["body"], version=version), len(text)
        else:
            continue
        dv = body.data_version
        configs = [(c.topic_name, c.read_queue_nums, c.write_queue_nums, c.perm, c.topic_sys_flag, c.order, c.topic_filter_type)
                   for c in body.topic_configs]
        rows.setdefault(key, (encoding, dv is not None, dv and dv.state_version, dv and dv.timestamp, dv and dv.counter, configs,
                              len(configs), list(body.filter_server_list), body.legacy_wrapper, size, body.static_mappings,
                              None if body.topic_keys is None else list(body.topic_keys), body.mapping_error, "tiny-1"))
    return rows


def test_distinct_bodies_match(spark, tiny, lines) -> None:
    manifest, warehouse, _, _ = tiny
    got = warehouse.read(TOPIC_CONFIGS).drop("body_id")
    want = expected_bodies(lines)
    assert len(want) == manifest["register_bodies"]["distinct"]
    assert {w[0] for w in want.values()} == {"json", "compressed"}  # both encodings are among them
    assert_df_equality(got, spark.createDataFrame(list(want.values()), got.schema), ignore_row_order=True, ignore_nullable=True)


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
