"""The change log, the intervals' causes and the keyframes against the reference model, and the
model's step-by-step view they are derived from.

* ``NamesrvReplay.steps`` (pure Python, no Spark): its scans are ``run``'s ticks, the records between
  two scans a tick's ``applied``, and each step flagged ``at_instant`` is ``state_at`` its ``ts``;
* ``gold.route_changes`` and every interval table, whole (values, ``valid_from``/``valid_to``,
  ``start_cause``/``end_cause``), against the rows the model's steps imply
  (``differential.compare_changes``), and every keyframe, decoded, against the model's snapshot at its
  tick (``differential.compare_keyframes``): on the boundary scenarios (restarts, expiries on a tick,
  channel closes, unregisters, admin requests, the KV store) and on the demo capture. The tiny capture
  gets the same checks in test_replay_vs_model, whose fixture its warehouse is.
"""

from __future__ import annotations

from typing import get_args

from boundary_scenarios import NS_RESTART, NS_TICK_ORDER, S, scenarios
from differential import compare_changes, compare_keyframes
from nsreplay.model import Cause
from nsreplay.model.replay import NamesrvReplay, group_by_namesrv, state_at
from schemas.gold import BROKER_ADDR_INTERVALS, ROUTE_CHANGES

# every cause a change can have (a record that changes nothing has cause "none" and no change row)
CAUSES = set(get_args(Cause)) - {"none"}


def test_steps_are_the_ticks_of_run_and_the_state_at_each_instant() -> None:
    for namesrv, own in group_by_namesrv(scenarios()).items():
        replay = NamesrvReplay(namesrv, own, default_profile="rocketmq-5")
        ticks, steps = list(replay.run()), list(replay.steps())
        scans = [s for s in steps if s.record is None]
        assert [(s.ts, s.snapshot, s.removals) for s in scans] == [(t.tick, t.snapshot, t.removals) for t in ticks]
        applied, tick_states = [], iter(ticks)
        for step in steps:
            if step.record is None:
                assert tuple(applied) == next(tick_states).applied
                applied = []
            else:
                applied.append(step.record)
        assert [s.at_instant for s in steps] == [a.ts != b.ts for a, b in zip(steps, steps[1:])] + [True]
        for step in steps:
            if step.at_instant:
                assert step.snapshot == state_at(own, namesrv, step.ts, default_profile="rocketmq-5"), (namesrv, step.ts)


def test_a_record_on_a_tick_comes_before_its_scan_and_a_restart_moves_the_next_scan() -> None:
    records = scenarios()
    on_tick = [s for s in NamesrvReplay(NS_TICK_ORDER, [r for r in records if r["namesrv"] == NS_TICK_ORDER],
                                        default_profile="rocketmq-5").steps() if s.ts == S + 125000]
    # b-a's registration at S+125000 first (not yet the state at that instant), then the scan
    assert [(s.record is None, s.at_instant, s.next_tick) for s in on_tick] == [(False, False, S + 125000), (True, True, S + 135000)]
    assert {k for k in on_tick[1].snapshot.brokerLiveTable} == {"10.1.0.1:10911", "10.1.0.2:10911"}
    steps = list(NamesrvReplay(NS_RESTART, [r for r in records if r["namesrv"] == NS_RESTART], default_profile="rocketmq-5").steps())
    restart = next(s for s in steps if s.record is not None and s.record.kind == "namesrv_start" and s.ts == S + 60001)
    assert restart.next_tick == S + 60006  # the old grid's S+60005 never runs; the new one ticks every 7 s
    assert [s.ts for s in steps if s.record is None and S + 50000 < s.ts < S + 70000] == [S + 50005, S + 55005, S + 60006, S + 67006]


def test_boundary_changes_and_intervals_match_the_model(spark, published) -> None:
    compared = compare_changes(spark, *published)
    assert set(compared[ROUTE_CHANGES.name]) == CAUSES
    assert set(compared[BROKER_ADDR_INTERVALS.name]) >= {"registered", "unregistered"}


def test_boundary_keyframes_match_the_model(published) -> None:
    compared, mismatches, notes = compare_keyframes(*published)
    assert compared >= 14  # each NameServer's first tick, and the first tick after the restart
    assert mismatches == 0, "\n".join(notes)


def test_demo_changes_and_intervals_match_the_model(spark, demo_published) -> None:
    compared = compare_changes(spark, *demo_published)
    assert set(compared[ROUTE_CHANGES.name]) == CAUSES
    assert set(compared[BROKER_ADDR_INTERVALS.name]) >= {"registered", "unregistered", "expired", "channel_closed"}


def test_demo_keyframes_match_the_model(demo_published) -> None:
    compared, mismatches, notes = compare_keyframes(*demo_published)
    assert compared >= 4
    assert mismatches == 0, "\n".join(notes)
