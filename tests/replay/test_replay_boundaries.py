"""Boundary cases through the whole pipeline (ingest → Spark replay units → gold → published read),
each on a NameServer of its own in one capture, checked against the model at every tick and against
the spec's facts at the instants that matter."""

from __future__ import annotations

import json

from boundary_scenarios import (
    NS_ACTING,
    NS_DELETE_49,
    NS_DELETE_5,
    NS_EPOCH_SPLIT,
    NS_MALFORMED_5,
    NS_MALFORMED_49,
    NS_REGISTER_TOPIC,
    NS_TWO_STARTS,
    NS_RESTART,
    NS_SHARED_LIVE,
    NS_STALE_CLOSE,
    NS_STATIC_MAPPINGS,
    NS_TICK_ORDER,
    NS_TIMEOUT,
    END,
    S,
)
from differential import compare_every_tick
from nsreplay.history import PublishedHistory
from nsreplay.storage import Warehouse
from schemas.gold import NAMESRV_EPOCHS, ROUTE_FIDELITY


def test_every_tick_matches_the_model(published) -> None:
    compared, mismatches, notes = compare_every_tick(*published)
    assert compared > 400
    assert mismatches == 0, "\n".join(notes)


def live_addrs(history: PublishedHistory, ns: str, t: int) -> set[str]:
    return {k if isinstance(k, str) else k[1] for k in history.snapshot_at(ns, t).brokerLiveTable}


def test_records_at_a_tick_come_before_its_scan_and_the_rule_is_strict(published) -> None:
    h = PublishedHistory(published[1])
    assert live_addrs(h, NS_TICK_ORDER, S + 124999) == {"10.1.0.1:10911", "10.1.0.2:10911", "10.1.0.3:10911"}
    assert live_addrs(h, NS_TICK_ORDER, S + 125000) == {"10.1.0.1:10911", "10.1.0.2:10911"}
    assert live_addrs(h, NS_TICK_ORDER, S + 135000) == {"10.1.0.1:10911"}


def test_per_broker_timeout_and_heartbeat_on_a_tick(published) -> None:
    h = PublishedHistory(published[1])
    assert "10.2.0.1:10911" in live_addrs(h, NS_TIMEOUT, S + 20005)
    assert "10.2.0.1:10911" not in live_addrs(h, NS_TIMEOUT, S + 25005)
    assert "10.2.0.2:10911" in live_addrs(h, NS_TIMEOUT, S + 25005)
    # A timeout whose long sum with the timestamp wraps: gone at the first tick after registering.
    assert "10.2.0.3:10911" in live_addrs(h, NS_TIMEOUT, S + 5004)
    assert "10.2.0.3:10911" not in live_addrs(h, NS_TIMEOUT, S + 5005)
    assert h.route_at(NS_TIMEOUT, "never", S + 5005).code == 17
    assert "10.2.0.4:10911" in live_addrs(h, NS_TIMEOUT, END)


def test_only_the_stored_connection_destroys(published) -> None:
    h = PublishedHistory(published[1])
    assert live_addrs(h, NS_STALE_CLOSE, S + 40000) == {"10.4.0.1:10911"}
    assert live_addrs(h, NS_STALE_CLOSE, S + 70000) == set()
    assert h.route_at(NS_STALE_CLOSE, "t", S + 70000).code == 17


def test_restart_empties_routes_keeps_the_kv_and_restarts_the_grid(published) -> None:
    h = PublishedHistory(published[1])
    before, after = h.snapshot_at(NS_RESTART, S + 60000), h.snapshot_at(NS_RESTART, S + 60001)
    assert before.brokerAddrTable and not after.brokerAddrTable and not after.topicQueueTable
    assert dict(after.orderTopicConf) == {"t": "b-r:4"}
    epochs = sorted((e["start_ts"], e["first_tick"], e["tick_interval"]) for e in h.rows(NAMESRV_EPOCHS, NS_RESTART))
    assert epochs == [(S, S + 5, 5000), (S + 60001, S + 60006, 7000)]


def test_delete_topic_reappearance_differs_by_profile(published) -> None:
    h = PublishedHistory(published[1])
    assert h.route_at(NS_DELETE_49, "t", S + 200000).code == 17
    assert h.route_at(NS_DELETE_5, "t", S + 200000).code == 0
    for ns in (NS_DELETE_49, NS_DELETE_5):
        shared = h.snapshot_at(ns, S + 46000).topicQueueTable["shared"]
        assert set(shared) == {"b-2"}


def test_master_leaving_an_acting_master_group(published) -> None:
    h = PublishedHistory(published[1])
    answer = json.loads(h.route_at(NS_ACTING, "t", S + 100001).body)
    assert answer["brokerDatas"][0]["brokerAddrs"] == {"0": "10.9.0.2:10911"}
    assert answer["queueDatas"][0]["perm"] == 4


def test_captured_route_answers_are_checked_against_the_rebuild(spark, published) -> None:
    warehouse = Warehouse(published[1], spark, "delta-rs")
    rows = warehouse.read(ROUTE_FIDELITY).select("namesrv", "ts", "topic", "request_version", "captured_code", "rebuilt_code", "match").collect()
    got = sorted((r.namesrv, r.ts - S, r.topic, r.request_version, r.captured_code, r.rebuilt_code, r.match) for r in rows)
    assert got == [(NS_DELETE_5, 250_000, "t", 121, 0, 0, True), (NS_DELETE_5, 250_010, "t", 401, 17, 0, False)]


def test_an_address_shared_by_two_groups_lives_as_long_as_either_refreshes_it(published) -> None:
    h = PublishedHistory(published[1])
    groups = h.snapshot_at(NS_SHARED_LIVE, S + 200000).brokerAddrTable
    assert dict(groups["broker-p"].brokerAddrs) == {0: "10.10.0.1:10911"}
    assert dict(groups["broker-o"].brokerAddrs) == {0: "10.10.0.1:10911"}


def test_a_body_with_static_topic_mappings_keeps_the_topics_it_no_longer_lists(published) -> None:
    h = PublishedHistory(published[1])
    for t in (S + 30200, S + 60200):  # registered without "u", with mappings: "u" stays
        assert set(h.snapshot_at(NS_STATIC_MAPPINGS, t).topicQueueTable["u"]) == {"b-k", "b-j"}
    assert "u" not in h.snapshot_at(NS_STATIC_MAPPINGS, S + 90200).topicQueueTable  # without: removed


def test_malformed_bodies_keys_and_mapping_section(published) -> None:
    """5.x removes the topics not among the topicConfigTable's *keys* and rejects a compressed body
    whose mapping section is missing (version 479); 4.9 reads neither (silver.topic_configs keeps
    both facts for the replay: topic_keys, mapping_error)."""
    h = PublishedHistory(published[1])
    five, four = h.snapshot_at(NS_MALFORMED_5, S + 30300), h.snapshot_at(NS_MALFORMED_49, S + 30300)
    assert set(five.topicQueueTable) == {"K", "T", "TBW102", "n"}  # "gone" removed; K kept as a key
    assert set(four.topicQueueTable) == {"K", "T", "gone", "TBW102", "n"}  # 4.9 never removes
    assert "n" not in h.snapshot_at(NS_MALFORMED_5, S + 30000).topicQueueTable  # the broken body changed nothing
    assert "10.12.0.2:10911" not in live_addrs(h, NS_MALFORMED_5, S + 30000)
    assert "10.12.0.2:10911" in live_addrs(h, NS_MALFORMED_49, S + 300)


def test_register_topic_with_an_unknown_broker_depends_on_the_topic_held_by_another_group(published) -> None:
    h = PublishedHistory(published[1])
    snap = h.snapshot_at(NS_REGISTER_TOPIC, S + 2500)
    assert {name: (qd.readQueueNums, qd.writeQueueNums) for name, qd in snap.topicQueueTable["held"].items()} == {"b-h": (8, 8), "b-r": (4, 4)}
    assert "fresh" not in snap.topicQueueTable
    # a 217 at S+3000 whose readQueueNums is beyond a Java int changed nothing (the model agrees at every tick)
    assert h.snapshot_at(NS_REGISTER_TOPIC, S + 3000).topicQueueTable["held"] == snap.topicQueueTable["held"]


def test_of_two_starts_at_one_ts_the_later_runs_on_for_every_reader(published) -> None:
    """The first of two starts at one ts is an epoch that ends where it starts: no tick, no keyframe
    (compared with the model in test_changes_vs_model), and never the current epoch for the shim."""
    from nsreplay.serving.index import RouteIndex

    h = PublishedHistory(published[1])
    epochs = sorted((r["start_ts"], r["end_ts"], r["profile"]) for r in h.rows(NAMESRV_EPOCHS, NS_TWO_STARTS))
    assert epochs[1:3] == [(S + 3000, S + 3000, "rocketmq-4.9"), (S + 3000, epochs[2][1], "rocketmq-5")]
    index = RouteIndex.load(published[1])
    for t in (S + 3000, S + 3004, S + 3005, S + 9000):
        assert index.snapshot(NS_TWO_STARTS, t).profile == h.snapshot_at(NS_TWO_STARTS, t).profile == "rocketmq-5"
        assert index.tick_at(NS_TWO_STARTS, t) == (None if t < S + 3005 else S + 3005 + (t - S - 3005) // 5000 * 5000)


def test_windows_around_a_register_topic_equal_one_run(spark, published, tmp_path, monkeypatch) -> None:
    """Whether a REGISTER_TOPIC's topic exists depends on the groups holding it when its window
    starts, which the window's records need not show: here b-h registers "held" at S+100 only, and
    the window (S+500, S+1500] holds the 217 naming b-r and an unknown brokerName but no b-h
    registration. Cut there, the history is the one run's. The holders come from the published
    topicQueueTable at the window's start; the unit the 217 forms (b-ghost, b-h, b-r) joins two units
    of before, so it alone is replayed again, from the NameServer's last start (S).

    A restart at S+1000 drops the address that linked b-x and b-y: the last window replays them as
    two units, both from that restart (their state of before interleaves them). No window reads the
    records before its start but those two."""
    from nsreplay.config import load_settings
    from nsreplay.runtime import format_ms
    from pipelines.ingest.run import run_ingest
    from pipelines.replay.run import run_replay
    from published import assert_same_history
    from schemas.silver import EVENTS

    capture, root = published
    warehouse = Warehouse(str(tmp_path / "wh"), spark, "delta-rs")
    run_ingest(spark, warehouse, load_settings(), str(capture), "w-ingest")
    read = Warehouse.read
    reads: list[tuple[int | None, object]] = []

    def spy(self, spec, **kwargs):
        if spec is EVENTS:
            reads.append((after, kwargs.get("where")))
        return read(self, spec, **kwargs)

    monkeypatch.setattr(Warehouse, "read", spy)
    after = None
    results = []
    for i, until in enumerate([S + 500, S + 1500, None]):
        results.append(run_replay(spark, warehouse, load_settings(), f"w-{i}", window_from=after, window_to=until))
        after = until
    monkeypatch.undo()
    assert [r.replayed_again for r in results] == [
        (),
        (f"{NS_REGISTER_TOPIC} units b-ghost from its start at {format_ms(S)}",),
        (f"{NS_EPOCH_SPLIT} units b-x, b-y from its start at {format_ms(S + 1000)}",),
    ]
    later = sorted({(start, where.above) for start, where in reads if start is not None and where is not None and where.above != start})
    assert later == [(S + 500, S - 1), (S + 1500, S + 999)], later  # the reads before a window's start
    assert all(where is not None for start, where in reads if start is not None)
    assert_same_history(Warehouse(root, spark, "delta-rs"), warehouse)
