"""The gold suites that gate a publish: sound rows pass every expectation, and each kind of broken
row fails exactly the expectation written for it (whole set of failures compared)."""

from __future__ import annotations

from typing import Any

from pipelines.quality.gold_suites import validate_replay
from schemas.gold import BROKER_LIVE_INTERVALS, REPLAY_STATE, REPLAY_TABLES, ROUTE_CHANGES, SCAN_TICKS

RUN = "run-1"
NS = "10.0.0.1:9876"


def _live(cluster: str | None, addr: str, valid_from: int, valid_to: int | None, start: str = "registered", end: str | None = None) -> dict[str, Any]:
    return {
        "namesrv": NS, "cluster": cluster, "broker_addr": addr, "last_update_ts": valid_from, "heartbeat_timeout_ms": 120000,
        "dv_state_version": 0, "dv_timestamp": 1, "dv_counter": 1, "conn": "c1", "ha_server_addr": None,
        "valid_from": valid_from, "valid_to": valid_to, "start_cause": start, "end_cause": end, "run_id": RUN,
    }


def _change(ts: int, tick_ts: int | None, op: str = "put", phase: int = 0, cause: str = "registered") -> dict[str, Any]:
    return {"namesrv": NS, "ts": ts, "tick_ts": tick_ts, "phase": phase, "record_rank": 1, "table": "brokerLiveTable", "key": "[null,\"a:1\"]",
            "op": op, "before": None, "after": "{}", "cause": cause, "run_id": RUN}


def _tick(tick_ts: int) -> dict[str, Any]:
    return {"namesrv": NS, "tick_ts": tick_ts, "epoch_start_ts": 0, "profile": "rocketmq-4.9", "removals": 0, "run_id": RUN}


SOUND = {
    BROKER_LIVE_INTERVALS.name: [
        _live(None, "a:1", 0, 30, end="heartbeat"),
        _live(None, "a:1", 30, None, start="heartbeat"),
        # the same address with a cluster (a 5.x key) and with cluster '': keys of their own
        _live("C1", "a:1", 10, None),
        _live("", "a:1", 10, None),
        _live(None, "b:1", 0, 5, end="expired"),
    ],
    ROUTE_CHANGES.name: [_change(0, 0), _change(30, 40, cause="heartbeat"), _change(10, None), _change(40, 40, op="remove", phase=1, cause="expired")],
    SCAN_TICKS.name: [_tick(0), _tick(10), _tick(20)],
    REPLAY_STATE.name: [{"namesrv": NS, "window_to": 40, "unit": "u1", "state": b"x", "run_id": RUN}],
}


def _failures(spark, rows: dict[str, list[dict[str, Any]]]) -> set[tuple[str, str, str | None]]:
    tables = {spec.name: spark.createDataFrame(rows.get(spec.name, []), spec.schema) for spec in REPLAY_TABLES}
    report = validate_replay(spark, run_id=RUN, tables=tables)
    assert report.passed == (not report.failures())
    return {(r["suite"], r["expectation"], r["column"]) for r in report.failures()}


def test_sound_gold_rows_pass_every_expectation(spark) -> None:
    assert _failures(spark, SOUND) == set()


def test_each_broken_row_fails_its_own_expectation(spark) -> None:
    broken = {
        **SOUND,
        BROKER_LIVE_INTERVALS.name: SOUND[BROKER_LIVE_INTERVALS.name] + [
            _live(None, "b:1", 3, 8),  # overlaps the interval [0, 5) of the same key
            _live(None, "c:1", 9, 9),  # ends where it starts
            _live(None, "d:1", 0, None, start="gremlins"),  # a cause nobody knows
        ],
        ROUTE_CHANGES.name: SOUND[ROUTE_CHANGES.name] + [_change(50, 40)],  # shown by a tick before it happened
        SCAN_TICKS.name: SOUND[SCAN_TICKS.name] + [_tick(20)],  # the same tick twice
        REPLAY_STATE.name: [],  # changes of a NameServer without its state
    }
    assert _failures(spark, broken) == {
        ("gold.intervals", "expect_column_values_to_be_in_set", "overlaps_next"),
        ("gold.intervals", "expect_column_pair_values_a_to_be_greater_than_b", None),
        ("gold.intervals", "expect_column_values_to_be_in_set", "start_cause"),
        ("gold.route_changes", "expect_column_pair_values_a_to_be_greater_than_b", None),
        ("gold.run", "expect_column_values_to_be_between", "duplicate_ticks"),
        ("gold.run", "expect_column_values_to_be_between", "namesrvs_without_state"),
    }


def test_a_namesrv_without_its_state_is_found_even_beside_one_with_a_state_and_no_changes(spark) -> None:
    """The check compares the NameServers themselves: a count of them would find as many with
    changes as with states here, and pass."""
    other = "10.0.0.2:9876"
    rows = {**SOUND, REPLAY_STATE.name: [{**SOUND[REPLAY_STATE.name][0], "namesrv": other}]}
    assert _failures(spark, rows) == {("gold.run", "expect_column_values_to_be_between", "namesrvs_without_state")}


def test_rows_of_another_run_are_not_judged(spark) -> None:
    other = {name: [{**row, "run_id": "run-0"} for row in rows] for name, rows in SOUND.items()}
    other[BROKER_LIVE_INTERVALS.name] += [{**_live(None, "b:1", 3, 8), "run_id": "run-0"}]
    rows = {name: SOUND[name] + other[name] for name in SOUND}
    assert _failures(spark, rows) == set()
