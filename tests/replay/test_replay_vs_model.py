"""The Spark rebuild against the reference model, whole tables at every scan tick.

Two independent paths over the same capture files:

* oracle: the capture lines parsed with ``json`` and replayed by ``nsreplay.model.replay`` over each
  whole NameServer (its own ordering, dedup, body decoding, CRC checks and tick grid);
* pipeline: ingest (bronze/silver) → replay units in Spark → gold intervals → publish, read back
  Spark-free through ``PublishedHistory``.

Every tick of every NameServer must give equal snapshots (all five tables and orderTopicConf).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from published import build_published, clean_preset
from differential import INTERVAL_SPECS, compare_every_tick, gold_snapshots
from nsreplay.config import load_settings
from nsreplay.history import OutsideCoverageError, PublishedHistory
from nsreplay.storage import Warehouse
from pipelines.replay.run import run_replay


@pytest.fixture(scope="module")
def tiny(spark, tmp_path_factory):
    return build_published(spark, tmp_path_factory, clean_preset("tiny"), "tiny")


@pytest.fixture(scope="module")
def demo(demo_published):
    return demo_published


def test_tiny_capture_matches_the_model_at_every_tick(tiny) -> None:
    compared, mismatches, notes = compare_every_tick(*tiny)
    assert compared > 300
    assert mismatches == 0, "\n".join(notes)


def test_demo_capture_matches_the_model_at_every_tick(demo) -> None:
    compared, mismatches, notes = compare_every_tick(*demo)
    assert compared > 3000
    assert mismatches == 0, "\n".join(notes)


def test_rerunning_the_same_window_publishes_the_same_contents(spark, tiny) -> None:
    capture, root = tiny
    before = PublishedHistory(root)
    rows_before = {spec.name: sorted(map(repr, before.rows(spec, c.namesrv))) for spec in INTERVAL_SPECS for c in before.coverage()}
    run_replay(spark, Warehouse(root, spark, "delta-rs"), load_settings(), "tiny-replay-again")
    after = PublishedHistory(root)
    assert after.run_id == "tiny-replay-again"
    strip = lambda rows: sorted(r.replace("tiny-replay-again", "tiny-replay") for r in rows)  # noqa: E731
    rows_after = {spec.name: strip(map(repr, after.rows(spec, c.namesrv))) for spec in INTERVAL_SPECS for c in after.coverage()}
    assert rows_after == rows_before


def test_snapshots_at_many_instants_are_the_snapshots_at_each(tiny) -> None:
    """``snapshots_at`` (one read, alive rows picked in memory) against the sweep over the interval
    boundaries at every second of the coverage, and against ``snapshot_at`` at a few instants."""
    _, root = tiny
    history = PublishedHistory(root)
    for cov in history.coverage():
        instants = list(range(cov.from_ts, cov.to_ts + 1, 1000))
        many = list(history.snapshots_at(cov.namesrv, instants))
        assert [t for t, _ in many] == instants
        swept = [snapshot for _, snapshot, _ in gold_snapshots(history, cov.namesrv, instants)]
        assert [snapshot for _, snapshot in many] == swept
        assert any(a != b for a, b in zip(swept, swept[1:]))  # the tables do change over the coverage
        for t, snapshot in many[:: len(many) // 5]:
            assert snapshot == history.snapshot_at(cov.namesrv, t)
        with pytest.raises(OutsideCoverageError):
            next(history.snapshots_at(cov.namesrv, [cov.from_ts, cov.to_ts + 1]))
