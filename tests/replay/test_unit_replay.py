"""The per-unit replay without Spark: resuming from a pickled state equals one replay."""

from __future__ import annotations

import json
import pickle

import pytest

from nsreplay.model.records import broker_heartbeat, channel, conn_of, namesrv_start, register_broker, request
from pipelines.ingest.records import Accepted, LineParser, ParserLimits
from pipelines.replay.unit_replay import ROW_COLUMNS, UnitReplay, diff_snapshots, register_body, replay_unit

S = 1732147200000
LIMITS = ParserLimits(frozenset({100, 103, 104, 205, 216, 322, 327, 904}), frozenset({"CONNECT", "CLOSE", "IDLE", "EXCEPTION"}))


def rows() -> list[dict]:
    """Silver-shaped rows (the parser's events) of a 5.x unit: registrations, a heartbeat, a stale
    and a live CLOSE, admin requests, a restart and a body change."""
    records = [namesrv_start(S, "5.3.3", {"scanNotActiveBrokerInterval": 5000})]
    for k in range(12):
        records.append(register_broker(S + 100 + k * 30000, cluster="c", name="b", addr="10.0.0.1:10911", topics=["t", "u"] + (["v"] if k > 6 else []), dv=(0, 1, 1 + (k > 6)), conn=conn_of("10.0.0.1:10911", k // 4)))
    records += [
        broker_heartbeat(S + 40000, cluster="c", name="b", addr="10.0.0.1:10911"),
        channel(S + 130000, "CLOSE", conn_of("10.0.0.1:10911", 0)),
        request(S + 150000, 205, {"brokerName": "b"}),
        namesrv_start(S + 200000, "5.3.3", {"scanNotActiveBrokerInterval": 3000}),
        channel(S + 340000, "CLOSE", conn_of("10.0.0.1:10911", 2)),
    ]
    records.sort(key=lambda r: r["ts"])
    parser = LineParser(LIMITS)
    out = []
    for rank, record in enumerate(records):
        verdict = parser.parse(json.dumps(record))
        assert isinstance(verdict, Accepted)
        row = dict(verdict.event, record_rank=rank)
        if verdict.new_body is not None:  # the body columns a row may carry (the Spark replay passes bodies apart: units_input)
            b = verdict.new_body.body
            row.update(has_data_version=b.data_version is not None, dv_state_version=b.data_version.state_version,
                       dv_timestamp=b.data_version.timestamp, dv_counter=b.data_version.counter, legacy_wrapper=b.legacy_wrapper,
                       filter_server_list=list(b.filter_server_list),
                       topic_configs=[dict(topic_name=c.topic_name, read_queue_nums=c.read_queue_nums, write_queue_nums=c.write_queue_nums, perm=c.perm,
                                           topic_sys_flag=c.topic_sys_flag, order=c.order, topic_filter_type=c.topic_filter_type) for c in b.topic_configs])
        out.append(row)
    return out


BODY_FIELDS = ("has_data_version", "dv_state_version", "dv_timestamp", "dv_counter", "legacy_wrapper", "filter_server_list", "topic_configs")


def with_window_bodies(window: list[dict], data: list[dict]) -> list[dict]:
    """``window`` with each body attached to its first row in the window, as every window's replay
    gets them (the body cache is not part of the pickled state)."""
    decoded = {r["body_id"]: {k: r[k] for k in BODY_FIELDS} for r in data if r.get("topic_configs") is not None}
    seen: set[str] = set()
    out = []
    for row in window:
        row = {k: v for k, v in row.items() if k not in BODY_FIELDS}
        body_id = row.get("body_id")
        if body_id is not None and body_id not in seen:
            seen.add(body_id)
            row.update(decoded[body_id])
        out.append(row)
    return out


@pytest.mark.parametrize("cut", [S + 5, S + 40000, S + 130000, S + 130001, S + 200000, S + 250003])
def test_resuming_from_a_pickled_state_equals_one_replay(cut: int) -> None:
    data = rows()
    end = S + 400000
    whole = list(replay_unit(data, origin=S, until=end, default_profile="rocketmq-5"))
    first = UnitReplay(origin=S, default_profile="rocketmq-5")
    before = list(first.feed([r for r in data if r["ts"] <= cut], cut))
    resumed = pickle.loads(pickle.dumps(first))
    after = list(resumed.feed(with_window_bodies([r for r in data if r["ts"] > cut], data), end))
    assert before + after == whole
    assert len(whole) > 20


def test_resumed_replay_re_emits_the_intervals_it_carries() -> None:
    """The carried rows are the puts that opened every interval open at the cut, unchanged."""
    data = rows()
    cut = S + 130000
    whole = list(replay_unit(data, origin=S, until=cut, default_profile="rocketmq-5"))
    unit = UnitReplay(origin=S, default_profile="rocketmq-5")
    list(unit.feed([r for r in data if r["ts"] <= cut], cut))
    last_put: dict[tuple[str, str], dict] = {}
    for change in whole:
        if change["op"] == "put":
            last_put[(change["table"], change["key"])] = change
        else:
            last_put.pop((change["table"], change["key"]), None)
    carried = list(pickle.loads(pickle.dumps(unit)).carried())
    assert {(c["table"], c["key"]): (c["ts"], c["after"], c["cause"]) for c in carried} == {
        k: (c["ts"], c["after"], c["cause"]) for k, c in last_put.items()
    }
    assert all(c["carried"] and c["op"] == "put" for c in carried) and len(carried) >= 5


def test_a_record_inside_the_replayed_window_is_refused() -> None:
    unit = UnitReplay(origin=S, default_profile="rocketmq-5")
    list(unit.feed(rows()[:3], S + 50000))
    with pytest.raises(ValueError):
        list(unit.feed(rows()[1:2], S + 60000))


def test_each_change_names_the_value_it_replaced_as_serialized_afresh() -> None:
    """``before`` of every change is the ``after`` its key last got (``None`` for a new key), and equals
    a fresh serialization of the replaced value: the texts kept between diffs are only a cache."""
    data = rows()
    unit = UnitReplay(origin=S, default_profile="rocketmq-5")
    fresh_before: list[str | None] = []
    previous = unit.previous
    changes = []
    for change in unit.feed(data, S + 400000):
        changes.append(change)
        if unit.previous is not previous:  # the rows of the last snapshot are all out: diff it again, without the cache
            fresh_before += [b for _, _, _, b, _ in diff_snapshots(previous, unit.previous, None)]
            previous = unit.previous
    fresh_before += [b for _, _, _, b, _ in diff_snapshots(previous, unit.previous, None)]
    last: dict[tuple[str, str], str] = {}
    for change in changes:
        assert change["before"] == last.get((change["table"], change["key"])), change
        if change["op"] == "put":
            last[(change["table"], change["key"])] = change["after"]
        else:
            last.pop((change["table"], change["key"]))
    assert sorted(map(str, fresh_before)) == sorted(str(c["before"]) for c in changes)
    assert sum(c["before"] is not None for c in changes) > 10


def test_bodies_given_apart_replay_like_bodies_in_their_first_rows() -> None:
    """The Spark replay hands the bodies over apart and only ROW_COLUMNS of each row."""
    data = rows()
    end = S + 400000
    whole = list(replay_unit(data, origin=S, until=end, default_profile="rocketmq-5"))
    bodies = {r["body_id"]: register_body(r) for r in data if r.get("topic_configs") is not None}
    assert len(bodies) == 2
    bare = [{k: r.get(k) for k in ROW_COLUMNS} for r in data]
    apart = list(UnitReplay(origin=S, default_profile="rocketmq-5").feed(bare, end, bodies))
    assert apart == whole
