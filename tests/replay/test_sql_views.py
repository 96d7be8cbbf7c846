"""The analysts' SQL views answer like the Python API (same published history)."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from boundary_scenarios import NS_DELETE_5, NS_TICK_ORDER, S
from differential import capture_records, interval_columns, snapshot_entries
from nsreplay.config import load_settings
from nsreplay.history import OutsideCoverageError, PublishedHistory
from nsreplay.model import Snapshot, state_at
from nsreplay.runtime import parse_time
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


#: The interval table each interval view shows (topic_routes joins topic_queue with broker_addr).
VIEW_TABLES = {"topic_queue": "topicQueueTable", "broker_addr": "brokerAddrTable", "cluster_addr": "clusterAddrTable",
               "broker_live": "brokerLiveTable", "filter_server": "filterServerTable", "order_topic": "orderTopicConf"}


def view_rows(s: Snapshot) -> dict[str, list[tuple]]:
    """The rows each view holds at an instant, from the model's state at it (each entry's gold
    columns as the change-log oracle writes them; a map as its entries sorted by brokerId)."""
    by_table: dict[str, list[dict]] = {}
    for (table, key), value in snapshot_entries(s).items():
        columns = interval_columns(table, key, value)
        if "broker_addrs" in columns:
            columns["broker_addrs"] = sorted(columns["broker_addrs"].items())
        by_table.setdefault(table, []).append(columns)
    rows = {view: [tuple(c[name.strip()] for name in VIEW_COLUMNS[view].split(",")) for c in by_table.get(table, [])] for view, table in VIEW_TABLES.items()}
    # a route row needs its group's BrokerData at the same instant
    groups = {c["broker_name"]: c for c in by_table.get("brokerAddrTable", [])}
    rows["topic_routes"] = [(q["topic"], q["broker_name"], q["perm"], q["read_queue_nums"], q["write_queue_nums"], groups[q["broker_name"]]["cluster"],
                             groups[q["broker_name"]]["broker_addrs"]) for q in by_table.get("topicQueueTable", []) if q["broker_name"] in groups]
    return rows


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
        profile, config = settings.replay.defaults_for(ns)
        snap = state_at(records, ns, t, default_profile=profile, default_config=config)
        for view, rows in view_rows(snap).items():
            want[view] += [(ns, t) + row for row in rows]
    spark.createDataFrame(instants, "namesrv string, t long").createOrReplaceTempView("instants")
    for view, columns in VIEW_COLUMNS.items():
        # a map cannot be sorted (ignore_row_order): its entries, sorted by brokerId, can
        selected = [f"array_sort(map_entries(v.{c})) AS {c}" if c == "broker_addrs" else f"v.{c}" for c in (c.strip() for c in columns.split(","))]
        assert want[view], view  # every view has rows at some instant here
        # the view filtered by alive(), and its table function at each instant
        for source in (f"{view} v JOIN instants i ON v.namesrv = i.namesrv AND alive(v.valid_from, v.valid_to, i.t)",
                       f"instants i, LATERAL {view}_at(i.t) v WHERE v.namesrv = i.namesrv"):
            got = spark.sql(f"SELECT i.namesrv, i.t, {', '.join(selected)} FROM {source}")
            assert_df_equality(got, spark.createDataFrame(want[view], got.schema), ignore_row_order=True, ignore_nullable=True)


def test_the_table_functions_give_the_views_rows_at_their_instant(spark, published) -> None:
    """``<view>_at(t)``: every column (interval bounds and ``open_at_end`` included) of the view's
    rows alive at ``t``, at the start, inside and at the end of each covered range."""
    root = published[1]
    register_views(spark, root)
    instants = [(c.namesrv, t) for c in PublishedHistory(root).coverage() for t in (c.from_ts, (c.from_ts + c.to_ts) // 2, c.to_ts)]
    spark.createDataFrame(instants, "namesrv string, t long").createOrReplaceTempView("instants")
    for view in VIEW_COLUMNS:
        got = spark.sql(f"SELECT i.t, v.* FROM instants i, LATERAL {view}_at(i.t) v WHERE v.namesrv = i.namesrv")
        want = spark.sql(f"SELECT i.t, v.* FROM {view} v JOIN instants i ON v.namesrv = i.namesrv AND alive(v.valid_from, v.valid_to, i.t)")
        assert not want.isEmpty(), view
        assert_df_equality(plain_maps(got), plain_maps(want), ignore_row_order=True, ignore_nullable=True)


def plain_maps(df):
    """Map columns as their entries sorted by key (a map cannot be compared in any row order)."""
    from pyspark.sql.types import MapType

    for f in df.schema.fields:
        if isinstance(f.dataType, MapType):
            df = df.withColumn(f.name, F.array_sort(F.map_entries(f.name)))
    return df


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


#: What ``ms()`` is given, the way analysts write instants: with Z or an offset (+05:30, +0530, +05,
#: -00:00), naive (no offset: UTC, as every command reads it), a date alone, fractions, the basic
#: form, a decimal comma, lowercase t and z, epoch milliseconds (digits alone), and instants
#: that are a DST gap (02:30 on 2024-03-10) or overlap (01:30 on 2024-11-03) in America/New_York's
#: local time, a leap day, before the epoch (floored) and the ends of the years 1-9999.
MS_FORMS = [
    "2024-11-21T00:30:00Z", "2024-11-21T06:00:00+05:30", "2024-11-21T06:00:00+0530", "2024-11-21T05:30:00+05",
    "2024-11-21T00:30:00-00:00", "2024-11-21T00:30:00.1239Z",
    "2024-11-21T00:30:00", "2024-11-21 00:30", "2024-11-21T00:30", "2024-11-21", "2024-11-21T00:30:00.123456",
    "2024-03-10T02:30:00", "2024-11-03T01:30:00", "2024-02-29T12:00:00", "1969-12-31T23:59:59.9995", "1969-12-31T23:59:59.9995Z",
    "0001-01-01T00:00:00", "9999-12-31T23:59:59.999",
    # ISO-8601's basic form, a decimal comma, lowercase letters (RFC 3339), epoch milliseconds
    "20241121T003000Z", "20241121T0030", "20241121T00", "20241121T003000,25+0530", "20241121 003000.5-0800",
    "2024-11-21T00:30:00,5Z", "2024-11-21T00:30:00z", "2024-11-21t00:30:00Z", "2024-11-21t00:30", " 2024-11-21T00:30:00Z ",
    "1732149000000", "-1", "20241121",
]


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "America/St_Johns", "Pacific/Chatham", "Asia/Kathmandu"])
def test_ms_reads_an_instant_as_every_command_does_in_any_session_time_zone(spark, published, zone) -> None:
    """``ms(iso)`` gives the epoch milliseconds :func:`nsreplay.runtime.parse_time` gives (the CLI's,
    the shim's ``at``), whatever ``spark.sql.session.timeZone`` an analyst's session has: a time
    without an offset is UTC, not the session's local time."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)  # Spark keeps a SQL function's zone from its creation
    try:
        register_views(spark, published[1])
        row = spark.sql("SELECT " + ", ".join(f"ms('{text}') AS v{i}" for i, text in enumerate(MS_FORMS))).first()
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
    assert dict(zip(MS_FORMS, row)) == {text: parse_time(text) for text in MS_FORMS}


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
        for edge in ("covered_to + 1", "covered_from - 1"):
            outside = spark.sql(f"SELECT v.namesrv FROM coverage c, LATERAL {view}_at(c.{edge}) v WHERE v.namesrv = c.namesrv")
            assert outside.isEmpty(), f"{view}_at shows a state outside the covered range ({edge}): {outside.distinct().collect()}"
        inside = spark.sql(f"SELECT v.namesrv FROM coverage c, LATERAL {view}_at(c.covered_to) v WHERE v.namesrv = c.namesrv")
        assert not inside.isEmpty(), view


def test_every_example_of_the_notebook_guide_runs(spark, published, monkeypatch) -> None:
    """notebooks/README.md: its Python blocks run in order (on this warehouse, in this session), then
    every statement of its SQL blocks parses and runs against the views they set up."""
    import re
    from pathlib import Path

    import nsreplay.runtime

    guide = (Path(__file__).resolve().parents[2] / "notebooks" / "README.md").read_text()
    root = published[1]
    monkeypatch.setattr(nsreplay.runtime, "build_spark", lambda *args, **kwargs: spark)
    scope: dict = {}
    blocks = re.findall(r"```python\n(.*?)```", guide, re.S)
    assert len(blocks) >= 3
    for block in blocks:
        exec(compile(block.replace('"warehouse"', repr(root)), "notebooks/README.md", "exec"), scope)
    statements = [s.strip() for block in re.findall(r"```sql\n(.*?)```", guide, re.S) for s in block.split(";") if s.strip()]
    assert len(statements) >= 9
    for statement in statements:
        spark.sql(statement).collect()  # an unknown view, column or function fails here


def test_capture_lines_view_reads_a_bronze_written_before_bodies_were_split(spark, published, tmp_path) -> None:
    """A warehouse ingested by nsreplay before ``bronze.capture_bodies`` (2026-11-21: no such table,
    no ``body_ref`` column, every line stored whole) still has the ``capture_lines`` view."""
    import shutil

    from deltalake import write_deltalake

    capture, root = published
    old = tmp_path / "old-wh"
    shutil.copytree(root, old)
    register_views(spark, root)
    whole = spark.sql("SELECT * FROM capture_lines").drop("body_ref").toPandas()
    shutil.rmtree(old / "bronze" / "capture_bodies")
    shutil.rmtree(old / "bronze" / "captures_raw")
    write_deltalake(str(old / "bronze" / "captures_raw"), whole, partition_by=["ingest_date"])
    registered = register_views(spark, str(old))
    assert "capture_lines" in registered
    got = spark.sql("SELECT source_file, line_no, line, body_ref FROM capture_lines")
    want = [(str(path), no, text, None) for path in sorted(capture.glob("*.jsonl")) for no, text in enumerate(path.read_text().splitlines(), start=1)]
    assert_df_equality(got, spark.createDataFrame(want, got.schema), ignore_row_order=True, ignore_nullable=True)
