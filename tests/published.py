"""Building a published warehouse through the real pipeline (generate → ingest → replay → publish),
shared by the test suites that read published history."""

from __future__ import annotations

from pathlib import Path


def build_published(spark, tmp_path_factory, config, name: str) -> tuple[Path, str]:
    """Generate ``config`` into a fresh directory, ingest, replay and publish it into a fresh warehouse.

    Returns (capture dir, warehouse root)."""
    from nsreplay.config import load_settings
    from nsreplay.generator import generate
    from nsreplay.storage import Warehouse
    from pipelines.ingest.run import run_ingest
    from pipelines.replay.run import run_replay

    capture = tmp_path_factory.mktemp(f"{name}-capture")
    generate(config, capture, workers=1)
    root = str(tmp_path_factory.mktemp(f"{name}-wh"))
    warehouse = Warehouse(root, spark, "delta-rs")
    settings = load_settings()
    run_ingest(spark, warehouse, settings, str(capture), f"{name}-ingest")
    run_replay(spark, warehouse, settings, f"{name}-replay")
    return capture, root


def clean_preset(name: str):
    """A generator preset without junk lines (oracles read the files with plain json); duplicates stay."""
    from nsreplay.generator import apply_overrides, preset

    return apply_overrides(preset(name), {"junk.lines_per_reason": 0})


def plain(df):
    """``df`` without run_id, map columns as sorted JSON: two runs' rows compare whole, in any order."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import MapType

    for f in df.schema.fields:
        if isinstance(f.dataType, MapType):
            df = df.withColumn(f.name, F.to_json(F.array_sort(F.map_entries(f.name))))
    return df.drop("run_id")


def assert_same_history(expected, actual) -> None:
    """Every published history table of two warehouses (``Warehouse``), whole, run ids aside: the
    replay's own state (``gold.replay_state``) may differ in how it is cut, not what it gives."""
    from chispa import assert_df_equality

    from schemas.gold import REPLAY_STATE, REPLAY_TABLES

    for spec in REPLAY_TABLES:
        if spec is not REPLAY_STATE:
            assert_df_equality(plain(expected.read(spec)), plain(actual.read(spec)), ignore_row_order=True, ignore_nullable=True)
