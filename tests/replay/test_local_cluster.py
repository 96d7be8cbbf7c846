"""The same rebuild on local-cluster[2,1,1024] (two executor JVMs, code shipped as a zip by
spark-submit.sh) gives tables identical to local[2]."""

from __future__ import annotations

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
    run_id = "same-run"
    cluster_root, local_root = tmp_path / "wh-cluster", tmp_path / "wh-local"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    proc = subprocess.run(
        [str(PROJECT_ROOT / "spark-submit.sh"), "--master", "local-cluster[2,1,1024]", "--conf", "spark.driver.memory=1g",
         "jobs/rebuild_routes.py", "--captures", str(capture), "--warehouse", str(cluster_root), "--run-id", run_id],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "published run same-run" in proc.stdout

    local = Warehouse(str(local_root), spark, "delta-rs")
    run_ingest(spark, local, load_settings(), str(capture), run_id)
    run_replay(spark, local, load_settings(), run_id)
    cluster = Warehouse(str(cluster_root), spark, "delta-rs")
    for spec in (EVENTS, TOPIC_CONFIGS, ROUTE_CHANGES, SCAN_TICKS, *INTERVAL_TABLES.values()):
        assert_df_equality(sortable(cluster.read(spec)), sortable(local.read(spec)), ignore_row_order=True, ignore_nullable=True)


def sortable(df: DataFrame) -> DataFrame:
    """Map columns as sorted entry arrays (rows holding maps cannot be ordered for comparison)."""
    return df.select(*[F.array_sort(F.map_entries(f.name)).alias(f.name) if isinstance(f.dataType, MapType) else F.col(f.name) for f in df.schema.fields])
