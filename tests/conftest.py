"""Shared fixtures: one SparkSession for the whole test run, configured from conf/base, and the demo
capture built once through the real pipeline (ingest → replay → publish) for every suite that reads
published history (replay differential tests, serving shim)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def spark() -> Iterator["SparkSession"]:  # noqa: F821 - imported lazily: pure-Python tests never start Spark
    """The session-scoped SparkSession (local[2], the project's own Spark defaults)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master("local[2]").appName("nsreplay-tests")
    from nsreplay.runtime import read_spark_defaults

    for key, value in read_spark_defaults([ROOT / "conf" / "base" / "spark-defaults.conf"]).items():
        if key not in ("spark.master", "spark.driver.memory"):
            builder = builder.config(key, value)
    builder = builder.config("spark.sql.shuffle.partitions", "4").config("spark.driver.memory", "2g")
    from nsreplay import jvm_archive, jvm_logging, local_fs

    jvm_logging.configure()
    started = local_fs.session_conf("local[2]", {})  # as every local job gets it
    started.update(jvm_archive.session_conf("local[2]", started))
    for key, value in started.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def demo_published(spark, tmp_path_factory) -> tuple[Path, str]:
    """(capture dir, warehouse root) of the clean demo preset, published once per test run (one build
    for all xdist workers: ``published.built_once``).

    Read-only for tests: anything that re-runs a job on it must build its own warehouse."""
    return _published_once(spark, tmp_path_factory, "demo")


@pytest.fixture(scope="session")
def tiny_published(spark, tmp_path_factory) -> tuple[Path, str]:
    """(capture dir, warehouse root) of the clean tiny preset, published once per test run.

    Read-only for tests: a test that writes to it works on ``published.own_copy``."""
    return _published_once(spark, tmp_path_factory, "tiny")


def _published_once(spark, tmp_path_factory, preset_name: str) -> tuple[Path, str]:
    """(capture dir, warehouse root) of the clean ``preset_name`` preset published through the real
    pipeline, built once per test run (``published.built_once``)."""
    from published import build_published, built_once, clean_preset

    def build(directory: Path) -> list[str]:
        return [str(p) for p in build_published(spark, tmp_path_factory, clean_preset(preset_name), preset_name, directory)]

    capture, root = built_once(tmp_path_factory, f"{preset_name}-published", build)
    return Path(capture), root


@pytest.fixture(scope="session")
def windowed(spark, tmp_path_factory) -> tuple[str, list[int]]:
    """A tiny capture replayed and published in three windows, its last part left for a fourth:
    (warehouse root, the four window ends), built once per test run. Read-only for tests: copy it to
    change it."""
    from published import built_once

    root, ends = built_once(tmp_path_factory, "windowed", lambda d: _build_windowed(spark, d))
    return root, ends


def _build_windowed(spark, directory: Path) -> list:
    from nsreplay.config import load_settings
    from nsreplay.generator import generate
    from nsreplay.storage import Warehouse
    from pipelines.ingest.run import run_ingest
    from pipelines.replay.run import run_replay
    from published import clean_preset
    from schemas.silver import EVENTS

    capture, root = directory / "capture", directory / "wh"
    capture.mkdir()
    root.mkdir()
    generate(clean_preset("tiny"), capture, workers=1)
    warehouse = Warehouse(str(root), spark, "delta-rs")
    run_ingest(spark, warehouse, load_settings(), str(capture), "windowed-ingest")
    low, high = warehouse.column_bounds(EVENTS, "ts")[None]
    ends = [low + (high - low) * k // 4 for k in (1, 2, 3)] + [high]
    after = None
    for i, end in enumerate(ends[:3]):
        run_replay(spark, warehouse, load_settings(), f"w{i}", window_from=after, window_to=end)
        after = end
    return [str(root), ends]
