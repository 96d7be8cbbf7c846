"""The analysts' SQL views answer like the Python API (same published history)."""

from __future__ import annotations

from chispa import assert_df_equality

from nsreplay.history import PublishedHistory
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
