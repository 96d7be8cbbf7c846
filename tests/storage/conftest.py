"""Fixtures of the storage tests.

``NSREPLAY_DELTA=spark`` (on a machine that can fetch Maven artifacts) puts the delta-spark jars and the
Delta session extension on the test SparkSession, so the native backend's tests run instead of skipping.
It must act before the session-scoped ``spark`` fixture starts the JVM, hence at import time.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DELTA_SPARK_PACKAGE = "io.delta:delta-spark_2.13:4.0.0"

if os.environ.get("NSREPLAY_DELTA") == "spark" and "PYSPARK_SUBMIT_ARGS" not in os.environ:
    os.environ["PYSPARK_SUBMIT_ARGS"] = (
        f"--packages {DELTA_SPARK_PACKAGE} "
        "--conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension "
        "--conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog "
        "pyspark-shell"
    )


@pytest.fixture
def warehouse_root(tmp_path: Path) -> str:
    """A fresh, empty warehouse directory."""
    return str(tmp_path / "warehouse")
