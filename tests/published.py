"""Building a published warehouse through the real pipeline (generate → ingest → replay → publish),
shared by the test suites that read published history."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Iterable


def built_once(tmp_path_factory, name: str, build: Callable[[Path], Any]) -> Any:
    """``build(directory)``'s result, built once per test run, for session fixtures that tests only read.

    Under pytest-xdist each worker process has its own session, so a session fixture would be built
    once per worker. Here the first worker to ask builds it in the run's directory common to the
    workers, holding a lock; the others wait for the lock and take the result it left (JSON). A build
    that fails leaves no result: the next worker to ask builds it again (and fails on its own).
    Without xdist, ``build`` runs in a fresh directory of this session."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return build(tmp_path_factory.mktemp(name))
    common = tmp_path_factory.getbasetemp().parent  # this run's directory, parent of each worker's own
    with open(common / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        done = common / f"{name}.json"
        if done.exists():
            return json.loads(done.read_text())
        directory = common / name
        if directory.exists():  # a failed build's leftovers
            shutil.rmtree(directory)
        directory.mkdir()
        result = build(directory)
        done.write_text(json.dumps(result))
        return json.loads(done.read_text())  # the same form whichever worker built it


def build_published(spark, tmp_path_factory, config, name: str, directory: Path | None = None) -> tuple[Path, str]:
    """Generate ``config`` into a fresh directory, ingest, replay and publish it into a fresh warehouse
    (both under ``directory`` when given, else fresh directories of ``tmp_path_factory``).

    Returns (capture dir, warehouse root)."""
    from nsreplay.config import load_settings
    from nsreplay.generator import generate
    from nsreplay.storage import Warehouse
    from pipelines.ingest.run import run_ingest
    from pipelines.replay.run import run_replay

    if directory is None:
        capture, root = tmp_path_factory.mktemp(f"{name}-capture"), str(tmp_path_factory.mktemp(f"{name}-wh"))
    else:
        capture, root = directory / "capture", str(directory / "wh")
        capture.mkdir()
        Path(root).mkdir()
    generate(config, capture, workers=1)
    warehouse = Warehouse(root, spark, "delta-rs")
    settings = load_settings()
    run_ingest(spark, warehouse, settings, str(capture), f"{name}-ingest")
    run_replay(spark, warehouse, settings, f"{name}-replay")
    return capture, root


def published_lines(spark, tmp_path_factory, name: str, file_name: str, lines: Iterable[str]) -> tuple[Path, str, Any]:
    """Write ``lines`` (without their newlines) as the capture file ``file_name`` of a fresh
    directory, then ingest, replay and publish it into a fresh warehouse.

    Returns (capture dir, warehouse root, the ingest's result)."""
    from nsreplay.config import load_settings
    from nsreplay.storage import Warehouse
    from pipelines.ingest.run import run_ingest
    from pipelines.replay.run import run_replay

    capture = tmp_path_factory.mktemp(name)
    (capture / file_name).write_text("".join(line + "\n" for line in lines))
    root = str(tmp_path_factory.mktemp(f"{name}-wh"))
    warehouse = Warehouse(root, spark, "delta-rs")
    ingested = run_ingest(spark, warehouse, load_settings(), str(capture), f"{name}-ingest")
    run_replay(spark, warehouse, load_settings(), f"{name}-replay")
    return capture, root, ingested


def own_copy(published: tuple[Path, str], directory: Path) -> tuple[Path, str]:
    """(capture dir, a copy of the warehouse in ``directory``/wh) of a shared published warehouse, for
    tests that write to it. Delta tables keep relative paths: the copy is the same warehouse."""
    capture, root = published
    copy = directory / "wh"
    shutil.copytree(root, copy)
    return capture, str(copy)


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
