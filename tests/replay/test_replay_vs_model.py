"""The Spark rebuild against the reference model: whole tables at every scan tick and at every
instant between them where a table can change, the change log, the intervals' causes and the keyframes.

Two independent paths over the same capture files:

* oracle: the capture lines parsed with ``json`` and replayed by ``nsreplay.model.replay`` over each
  whole NameServer (its own ordering, dedup, body decoding, CRC checks and tick grid);
* pipeline: ingest (bronze/silver) → replay units in Spark → gold intervals → publish, read back
  Spark-free through ``PublishedHistory``.

Every tick of every NameServer must give equal snapshots (all five tables and orderTopicConf), and so
must every instant between ticks at which either side changes (after each distinct record ts, one
millisecond before it, each interval boundary): a broker that closes and registers again between two
ticks is compared too. ``gold.route_changes`` and the interval tables (with their causes) must equal,
whole, the rows the model's records and scans imply, and each keyframe the model's snapshot at its tick
(the boundary scenarios and the demo capture get the same in test_changes_vs_model).
"""

from __future__ import annotations

from typing import get_args

import pytest

from published import own_copy
from differential import INTERVAL_SPECS, compare_changes, compare_every_tick, compare_keyframes, gold_snapshots
from nsreplay.config import load_settings
from nsreplay.history import OutsideCoverageError, PublishedHistory
from nsreplay.model import Cause
from nsreplay.storage import Warehouse
from pipelines.replay.run import run_replay
from schemas.gold import BROKER_ADDR_INTERVALS, ROUTE_CHANGES


@pytest.fixture(scope="module")
def tiny(tiny_published, tmp_path_factory):
    return own_copy(tiny_published, tmp_path_factory.mktemp("tiny"))  # a test below publishes again


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


def test_tiny_change_log_and_intervals_match_the_model(spark, tiny) -> None:
    compared = compare_changes(spark, *tiny)
    # every cause a change can have ("none" changes nothing), and intervals begun by each kind of removal
    assert set(compared[ROUTE_CHANGES.name]) == set(get_args(Cause)) - {"none"}
    assert set(compared[BROKER_ADDR_INTERVALS.name]) >= {"registered", "unregistered", "expired", "channel_closed"}


def test_tiny_keyframes_match_the_model(tiny) -> None:
    compared, mismatches, notes = compare_keyframes(*tiny)
    assert compared >= 3  # each NameServer's first tick, and the first after the 4.9 restart
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
