"""Fixtures of the replay tests: the boundary-scenario capture, ingested, replayed and published once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from boundary_scenarios import scenarios
from nsreplay.config import load_settings
from nsreplay.storage import Warehouse
from pipelines.ingest.run import run_ingest
from pipelines.replay.run import run_replay


@pytest.fixture(scope="session")
def published(spark, tmp_path_factory) -> tuple[Path, str]:
    """(capture dir, warehouse root) of the boundary scenarios after ingest, replay and publish."""
    capture = tmp_path_factory.mktemp("boundaries")
    records = scenarios()
    half = len(records) // 2  # two files, records of one NameServer split across them
    (capture / "b.jsonl").write_text("".join(json.dumps(x) + "\n" for x in records[:half]))
    (capture / "a.jsonl").write_text("".join(json.dumps(x) + "\n" for x in records[half:]))
    root = str(tmp_path_factory.mktemp("boundaries-wh"))
    warehouse = Warehouse(root, spark, "delta-rs")
    run_ingest(spark, warehouse, load_settings(), str(capture), "b-ingest")
    run_replay(spark, warehouse, load_settings(), "b-replay")
    return capture, root
