"""The analysts' SQL views answer like the Python API (same published history)."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality

from nsreplay.history import OutsideCoverageError, PublishedHistory
from nsreplay.sql import register_views
from boundary_scenarios import NS_DELETE_5, NS_TICK_ORDER, S


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
