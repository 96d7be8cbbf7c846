"""Ingest of a generated capture reconciles with what the generator says it wrote (two independent
code paths: the generator's manifest and the ingest's parser/dedup/quarantine)."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from nsreplay.config import load_settings
from nsreplay.generator import generate, preset
from nsreplay.storage import Warehouse
from pipelines.ingest.run import run_ingest
from schemas.silver import EVENTS, QUARANTINE, TOPIC_CONFIGS


@pytest.fixture(scope="module")
def tiny(spark, tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny-capture")
    generate(preset("tiny"), out, workers=1)
    manifest = json.loads((out / "_manifest.json").read_text())
    warehouse = Warehouse(str(tmp_path_factory.mktemp("tiny-wh")), spark, "delta-rs")
    result = run_ingest(spark, warehouse, load_settings(), str(out), "tiny-1")
    return manifest, warehouse, result


def test_counts_match_the_generator_manifest(tiny) -> None:
    manifest, _, result = tiny
    assert result.lines_read == manifest["lines_total"]
    assert result.accepted == manifest["records"]["total"]
    assert result.duplicates == manifest["duplicates"]["lines"]
    assert result.quarantined_by_reason == manifest["junk"]["by_reason"]


def test_records_by_kind_and_code_match(tiny) -> None:
    manifest, warehouse, _ = tiny
    events = warehouse.read(EVENTS)
    by_kind = {r.kind: r["count"] for r in events.groupBy("kind").count().collect()}
    assert by_kind == manifest["records"]["by_kind"]
    by_code = {str(r.code): r["count"] for r in events.where(F.col("kind") == "request").groupBy("code").count().collect()}
    assert by_code == manifest["records"]["by_code"]


def test_distinct_bodies_match(tiny) -> None:
    manifest, warehouse, _ = tiny
    assert warehouse.read(TOPIC_CONFIGS).count() == manifest["register_bodies"]["distinct"]
    assert warehouse.read(QUARANTINE).count() == manifest["junk"]["total"]
