"""The same rebuild on local-cluster[2,1,1024] (two executor JVMs, code shipped as a zip by
spark-submit.sh), run as two incremental windows (the second resuming from the state the first
persisted), gives tables identical to one run on local[2]."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import MapType

from nsreplay.config import PROJECT_ROOT, load_settings
from nsreplay.generator import apply_overrides, generate, preset
from nsreplay.storage import Warehouse
from pipelines.ingest.run import run_ingest
from pipelines.replay.run import run_replay
from schemas.gold import INTERVAL_TABLES, ROUTE_CHANGES, SCAN_TICKS
from schemas.silver import EVENTS, TOPIC_CONFIGS


@pytest.mark.slow
def test_local_cluster_rebuild_equals_local(spark, tmp_path: Path) -> None:
    capture = tmp_path / "capture"
    generate(apply_overrides(preset("tiny"), {"timing.hours": 0.15}), capture, workers=1)
    window = json.loads((capture / "_manifest.json").read_text())["window"]
    middle = (window["first_ts"] + window["last_ts"]) // 2
    cluster_root, local_root = tmp_path / "wh-cluster", tmp_path / "wh-local"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_", "NSREPLAY_"))}
    env["NSREPLAY_ENV"] = "test"  # conf/test: short-lived JVMs on a tiny capture (see its spark-defaults.conf)
    for run_id, window_args in (("cluster-1", ["--to", str(middle)]), ("cluster-2", ["--from", str(middle)])):
        proc = subprocess.run(
            [str(PROJECT_ROOT / "spark-submit.sh"), "--master", "local-cluster[2,1,1024]", "--conf", "spark.driver.memory=1g",
             "jobs/rebuild_routes.py", "--captures", str(capture), "--warehouse", str(cluster_root), "--run-id", run_id, *window_args],
            cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=900,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert f"published run {run_id}" in proc.stdout

    local = Warehouse(str(local_root), spark, "delta-rs")
    run_ingest(spark, local, load_settings(), str(capture), "local-ingest")
    run_replay(spark, local, load_settings(), "local")
    cluster = Warehouse(str(cluster_root), spark, "delta-rs")
    for spec in (EVENTS, TOPIC_CONFIGS, ROUTE_CHANGES, SCAN_TICKS, *INTERVAL_TABLES.values()):
        assert_df_equality(sortable(cluster.read(spec)), sortable(local.read(spec)), ignore_row_order=True, ignore_nullable=True)
    assert "resuming from the state at" in proc.stdout


def sortable(df: DataFrame) -> DataFrame:
    """Without the run bookkeeping columns; map columns as sorted entry arrays (rows holding maps
    cannot be ordered for comparison)."""
    return df.select(
        *[F.array_sort(F.map_entries(f.name)).alias(f.name) if isinstance(f.dataType, MapType) else F.col(f.name)
          for f in df.schema.fields if f.name not in ("run_id", "ingest_run_id", "first_run_id")]
    )
