"""The analysts' SQL views answer like the Python API (same published history)."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality

from boundary_scenarios import NS_DELETE_5, NS_TICK_ORDER, S
from differential import capture_records
from nsreplay.config import load_settings
from nsreplay.history import OutsideCoverageError, PublishedHistory
from nsreplay.model import Snapshot, state_at
from nsreplay.sql import register_views

# Each interval view's columns as the analysts' examples read them (the key, then the values).
VIEW_COLUMNS = {
    "topic_queue": "topic, broker_name, read_queue_nums, write_queue_nums, perm, topic_sys_flag",
    "broker_addr": "broker_name, cluster, broker_addrs, enable_acting_master, zone_name",
    "cluster_addr": "cluster, broker_name",
    "broker_live": "cluster, broker_addr, last_update_ts, heartbeat_timeout_ms, dv_state_version, dv_timestamp, dv_counter, conn, ha_server_addr",
    "filter_server": "cluster, broker_addr, filter_servers",
    "order_topic": "topic, order_conf",
    "topic_routes": "topic, broker_name, perm, read_queue_nums, write_queue_nums, cluster, broker_addrs",
}


def _live_key(key) -> tuple:
    return (None, key) if isinstance(key, str) else tuple(key)  # 4.9 keys by address, 5.x by (cluster, address)


def view_rows(s: Snapshot) -> dict[str, list[tuple]]:
    """The rows each view holds at an instant, written from the model's state at it."""
    groups = s.brokerAddrTable
    return {
        "topic_queue": [(t, n, q.readQueueNums, q.writeQueueNums, q.perm, q.topicSysFlag) for t, qs in s.topicQueueTable.items() for n, q in qs.items()],
        "broker_addr": [(n, b.cluster, sorted(b.brokerAddrs.items()), b.enableActingMaster, b.zoneName) for n, b in groups.items()],
        "cluster_addr": [(c, n) for c, names in s.clusterAddrTable.items() for n in names],
        "broker_live": [_live_key(k) + (i.lastUpdateTimestamp, i.heartbeatTimeoutMillis, i.dataVersion.stateVersion, i.dataVersion.timestamp,
                                         i.dataVersion.counter, i.conn, i.haServerAddr) for k, i in s.brokerLiveTable.items()],
        "filter_server": [_live_key(k) + (list(v),) for k, v in s.filterServerTable.items()],
        "order_topic": list(s.orderTopicConf.items()),
        # a route row needs its group's BrokerData at the same instant
        "topic_routes": [(t, n, q.perm, q.readQueueNums, q.writeQueueNums, groups[n].cluster, sorted(groups[n].brokerAddrs.items()))
                         for t, qs in s.topicQueueTable.items() for n, q in qs.items() if n in groups],
    }


def test_every_view_at_many_instants_holds_the_models_state(spark, published) -> None:
    """Every interval view (and ``topic_routes``) at instants across each NameServer's covered range,
    whole rows against the reference model's state at the same instant (not the Python API)."""
    capture, root = published
    register_views(spark, root)
    settings = load_settings()
    records = capture_records(capture)
    instants = []
    for cov in PublishedHistory(root).coverage():
        span = cov.to_ts - cov.from_ts
        # spread over the range, and on both sides of some records' ts (where intervals start and end)
        stamps = sorted({r["ts"] for r in records if r["namesrv"] == cov.namesrv})
        at_records = {t - d for t in stamps[:: max(1, len(stamps) // 8)] for d in (0, 1)}
        spread = {cov.from_ts, cov.to_ts, *(cov.from_ts + span * k // 11 + k for k in range(1, 11))}
        instants += [(cov.namesrv, t) for t in sorted(spread | at_records) if cov.from_ts <= t <= cov.to_ts]
    want: dict[str, list[tuple]] = {view: [] for view in VIEW_COLUMNS}
    for ns, t in instants:
        snap = state_at(records, ns, t, default_profile=settings.replay.default_profile, default_config=settings.replay.default_config)
        for view, rows in view_rows(snap).items():
            want[view] += [(ns, t) + row for row in rows]
    spark.createDataFrame(instants, "namesrv string, t long").createOrReplaceTempView("instants")
    for view, columns in VIEW_COLUMNS.items():
        # a map cannot be sorted (ignore_row_order): its entries, sorted by brokerId, can
        selected = [f"array_sort(map_entries(v.{c})) AS {c}" if c == "broker_addrs" else f"v.{c}" for c in (c.strip() for c in columns.split(","))]
        got = spark.sql(f"SELECT i.namesrv, i.t, {', '.join(selected)} "
                        f"FROM {view} v JOIN instants i ON v.namesrv = i.namesrv AND alive(v.valid_from, v.valid_to, i.t)")
        assert want[view], view  # every view has rows at some instant here
        assert_df_equality(got, spark.createDataFrame(want[view], got.schema), ignore_row_order=True, ignore_nullable=True)


def test_state_at_an_instant_in_sql_equals_the_python_api(spark, published) -> None:
    root = published[1]
    register_views(spark, root)
    t = S + 125000
    rows = spark.sql(f"SELECT broker_addr FROM broker_live WHERE namesrv = '{NS_TICK_ORDER}' AND alive(valid_from, valid_to, {t})").collect()
    snapshot = PublishedHistory(root).snapshot_at(NS_TICK_ORDER, t)
    assert sorted(r.broker_addr for r in rows) == sorted(snapshot.brokerLiveTable)
    routes = spark.sql(
        f"SELECT broker_name, perm FROM topic_routes WHERE namesrv = '{NS_DELETE_5}' AND topic = 'shared' AND alive(valid_from, valid_to, {S + 200000})"
    ).collect()
    expected = PublishedHistory(root).snapshot_at(NS_DELETE_5, S + 200000).topicQueueTable["shared"]
    assert {(r.broker_name, r.perm) for r in routes} == {(name, q.perm) for name, q in expected.items()}
    assert spark.sql("SELECT ms('2024-11-21T00:00:00Z') AS v").first().v == S


def test_capture_lines_view_gives_every_line_exactly_as_read(spark, published) -> None:
    capture, root = published
    register_views(spark, root)
    got = spark.sql("SELECT source_file, line_no, line FROM capture_lines")
    want = [(str(path), no, text) for path in sorted(capture.glob("*.jsonl")) for no, text in enumerate(path.read_text().splitlines(), start=1)]
    assert_df_equality(got, spark.createDataFrame(want, got.schema), ignore_row_order=True, ignore_nullable=True)


def test_sql_shows_no_state_outside_the_covered_range(spark, published) -> None:
    """Inside a NameServer's covered range the interval views give the Python API's state; just after
    it they give no row, where the API refuses to answer (the state there is unknown)."""
    root = published[1]
    register_views(spark, root)
    history = PublishedHistory(root)
    covered = history.coverage()
    got_coverage = spark.sql("SELECT namesrv, covered_from, covered_to, profile FROM coverage")
    want_coverage = spark.createDataFrame([(c.namesrv, c.from_ts, c.to_ts, c.profile) for c in covered], got_coverage.schema)
    assert_df_equality(got_coverage, want_coverage, ignore_row_order=True)

    at_end = spark.sql(
        "SELECT b.namesrv, b.cluster, b.broker_addr, b.open_at_end FROM broker_live b JOIN coverage c USING (namesrv) "
        "WHERE alive(b.valid_from, b.valid_to, c.covered_to)"
    )
    want = []
    for cov in covered:
        for key in history.snapshot_at(cov.namesrv, cov.to_ts).brokerLiveTable:  # addr (4.9) or (cluster, addr) (5.x)
            want.append((cov.namesrv,) + ((None, key) if isinstance(key, str) else tuple(key)) + (True,))
        with pytest.raises(OutsideCoverageError):
            history.snapshot_at(cov.namesrv, cov.to_ts + 1)
    assert_df_equality(at_end, spark.createDataFrame(want, at_end.schema), ignore_row_order=True, ignore_nullable=True)

    for view in ("topic_queue", "broker_addr", "cluster_addr", "broker_live", "filter_server", "order_topic", "topic_routes"):
        after = spark.sql(f"SELECT v.namesrv FROM {view} v JOIN coverage c USING (namesrv) WHERE alive(v.valid_from, v.valid_to, c.covered_to + 1)")
        assert after.isEmpty(), f"{view} shows a state after the covered range: {after.distinct().collect()}"
