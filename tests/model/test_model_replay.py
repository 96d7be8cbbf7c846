"""The replay driver: ordering, de-duplication, tick grid, restarts, state at an instant (spec §4)."""

from __future__ import annotations

import pytest

from nsreplay.model import NamesrvReplay, order_records, replay, state_at
from nsreplay.model import records as R

S = 1_700_000_000_000
TBW = ("TBW102", 8, 8, 7)
A = "10.0.0.1:10911"
NS1, NS2 = "10.0.0.10:9876", "10.0.0.11:9876"


def reg(ts: int, **kw: object) -> dict[str, object]:
    kw.setdefault("cluster", "c")
    kw.setdefault("name", "b")
    kw.setdefault("addr", A)
    kw.setdefault("topics", ["t", TBW])
    return R.register_broker(ts, **kw)  # type: ignore[arg-type]


def ticks(records: list[dict[str, object]], **kw: object) -> list[int]:
    kw.setdefault("default_profile", "rocketmq-5")
    return [state.tick for state in replay(records, **kw)]  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------- the tick grid


def test_49_grid_starts_5s_after_start_every_10s() -> None:
    records = [R.namesrv_start(S, "4.9.4"), reg(S + 30_000, five=False)]
    assert ticks(records) == [S + 5_000, S + 15_000, S + 25_000]


def test_5x_grid_starts_5ms_after_start_every_scan_interval() -> None:
    records = [R.namesrv_start(S, "5.3.3", {"scanNotActiveBrokerInterval": "2000"}), reg(S + 6_000)]
    assert ticks(records) == [S + 5, S + 2_005, S + 4_005]
    assert ticks(records[:1], until=S + 5_005) == [S + 5, S + 2_005, S + 4_005]


def test_without_a_start_record_the_defaults_give_profile_and_origin() -> None:
    records = [reg(S + 1_000, five=False), reg(S + 12_000, five=False)]
    states = list(replay(records, default_profile="rocketmq-4.9"))
    assert [s.tick for s in states] == [S + 6_000]  # origin = first record
    assert states[0].profile == "rocketmq-4.9"
    assert ticks(records, default_profile="rocketmq-4.9", default_start_ts=S) == [S + 5_000]


def test_ticks_go_on_until_the_end_of_the_range_without_records() -> None:
    states = list(replay([R.namesrv_start(S, "5.3.3"), reg(S + 1)], default_profile="rocketmq-5", until=S + 200_000))
    assert states[-1].tick == S + 195_005
    expired = [s for s in states if s.removals]
    assert [s.tick for s in expired] == [S + 120_005]  # first tick T with S + 1 + 120000 < T
    assert expired[0].changed and expired[0].snapshot.brokerLiveTable == {}
    assert not states[-1].changed


def test_a_record_at_a_tick_is_applied_before_that_ticks_scan() -> None:
    start = R.namesrv_start(S, "5.3.3")
    first = reg(S + 5)  # exactly 120000 ms before the tick at S + 120005: not expired there
    refresh = R.broker_heartbeat(S + 125_005, cluster="c", name="b", addr=A)  # at the tick S + 125005
    states = {s.tick: s for s in replay([start, first, refresh], default_profile="rocketmq-5", until=S + 130_005)}
    assert states[S + 120_005].removals == ()
    assert states[S + 125_005].removals == ()
    assert [a.code for a in states[S + 125_005].applied] == [904]
    assert states[S + 125_005].snapshot.brokerLiveTable[("c", A)].lastUpdateTimestamp == S + 125_005


def test_a_restart_restarts_the_grid_and_empties_the_tables() -> None:
    records = [R.namesrv_start(S, "4.9.4"), reg(S + 1, five=False),
               R.namesrv_start(S + 25_000, "5.3.3"), reg(S + 25_001)]
    states = list(replay(records, default_profile="rocketmq-4.9", until=S + 30_010))
    # the old grid's tick at S + 25000 does not happen; the new one starts at S + 25005
    assert [s.tick for s in states] == [S + 5_000, S + 15_000, S + 25_005, S + 30_005]
    assert states[1].profile == "rocketmq-4.9" and states[2].profile == "rocketmq-5"
    assert [a.outcome.cause for a in states[2].applied] == ["namesrv_restart", "registered"]
    assert set(states[2].snapshot.brokerLiveTable) == {("c", A)}


# ----------------------------------------------------------------------------------- order and duplicates


def test_records_are_ordered_by_ts_then_seq() -> None:
    register = reg(S + 10, seq=2)
    unregister = R.unregister_broker(S + 10, cluster="c", name="b", addr=A, seq=1)
    snap = state_at([register, unregister], R.NAMESRV, S + 10, default_profile="rocketmq-5")
    assert set(snap.brokerAddrTable) == {"b"}  # unregister (seq 1) came first
    snap = state_at([reg(S + 10, seq=1), R.unregister_broker(S + 10, cluster="c", name="b", addr=A, seq=2)],
                    R.NAMESRV, S + 10, default_profile="rocketmq-5")
    assert snap.brokerAddrTable == {}


def test_without_seq_ties_are_broken_by_file_then_line_then_input_order() -> None:
    register = {**reg(S + 10), "_file": "b.jsonl", "_line": 1}
    unregister = {**R.unregister_broker(S + 10, cluster="c", name="b", addr=A), "_file": "a.jsonl", "_line": 9}
    assert order_records([register, unregister]) == [unregister, register]
    plain = [reg(S + 10), R.unregister_broker(S + 10, cluster="c", name="b", addr=A)]
    assert order_records(plain) == plain
    assert order_records(list(reversed(plain))) == list(reversed(plain))


def test_duplicates_count_once_even_from_different_files() -> None:
    register = reg(S + 10)
    copies = [{**register, "_file": f, "_line": n} for f, n in (("x", 3), ("y", 1), ("x", 3))]
    kept = order_records(copies + [reg(S + 10, conn="other")])
    assert len(kept) == 2
    assert [(k.get("_file"), k.get("_line"), k["conn"]) for k in kept] == [(None, None, "other"), ("x", 3, A + "#conn0")]
    assert len(order_records([register, dict(register), {**register, "ts": S + 11}])) == 2


def test_nameservers_are_replayed_independently() -> None:
    records = [R.namesrv_start(S, "4.9.4", namesrv=NS1), R.namesrv_start(S, "5.3.3", namesrv=NS2),
               reg(S + 1, namesrv=NS1, five=False), reg(S + 6_000, namesrv=NS2)]
    states = list(replay(records, default_profile="rocketmq-5"))
    assert [(s.namesrv, s.tick) for s in states] == [(NS1, S + 5_000), (NS2, S + 5), (NS2, S + 5_005)]
    assert set(states[0].snapshot.brokerLiveTable) == {A}
    assert states[1].snapshot.brokerLiveTable == {}


def test_state_at_includes_records_after_the_last_tick() -> None:
    records = [R.namesrv_start(S, "5.3.3"), reg(S + 5_006)]
    assert state_at(records, R.NAMESRV, S + 5_005, default_profile="rocketmq-5").brokerLiveTable == {}
    assert set(state_at(records, R.NAMESRV, S + 5_006, default_profile="rocketmq-5").brokerLiveTable) == {("c", A)}


def test_tick_state_reports_applied_records_and_changes() -> None:
    records = [R.namesrv_start(S, "5.3.3"), reg(S + 1), reg(S + 2), R.channel(S + 3_000, "CONNECT", "x")]
    run = NamesrvReplay(R.NAMESRV, records, default_profile="rocketmq-5")
    first, second = list(run.run(until=S + 5_005))
    assert [a.ts for a in first.applied] == [S, S + 1, S + 2] and first.changed
    assert [a.kind for a in second.applied] == ["channel"] and second.applied[0].outcome.cause == "none"
    assert second.snapshot == first.snapshot and not second.changed
    assert list(run.run(until=S + 5_005)) == [first, second]  # each run starts from scratch


@pytest.mark.parametrize("bad", [{"ts": 1}, {"namesrv": "x"}])
def test_records_without_namesrv_or_ts_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        list(replay([bad], default_profile="rocketmq-5"))
