"""SQL access to the published route history for analysts (Spark SQL).

    from nsreplay.sql import register_views
    register_views(spark, "warehouse")
    spark.sql("SELECT * FROM topic_queue WHERE alive(valid_from, valid_to, ms('2024-11-21T00:30:00Z'))")  # see below

``register_views`` registers a temporary view for each published gold table below (not
``replay_state``, ``replay_runs`` or ``stale_windows``), read at the version named by the latest publish
row (never a half-written run; ``publish_log`` and ``capture_lines`` are read at their latest version),
plus convenience views:

* ``topic_routes``   – topicQueueTable intervals joined with the BrokerData valid at the same time;
* ``route_changes``  – the change log;
* ``coverage``       – per NameServer, the covered range ``[covered_from, covered_to]`` (epoch ms,
  inclusive) and profile, as the Python API and the shim know it;
* ``scan_ticks``, ``namesrv_epochs``, ``keyframes``, ``route_fidelity``, ``publish_log``;
* ``topic_queue``, ``broker_addr``, ``cluster_addr``, ``broker_live``, ``filter_server``,
  ``order_topic`` – the interval tables;
* ``capture_lines`` – every ingested capture line exactly as read (bronze keeps a repeated body
  text once; this view puts it back).

The state at instant ``t`` (epoch ms) is every interval row with
``valid_from <= t AND (valid_to IS NULL OR t < valid_to)``; the SQL function ``alive(valid_from,
valid_to, t)`` says exactly that, and ``ms('2024-11-21T03:12:05Z')`` turns ISO-8601 into epoch ms
(as every nsreplay command reads a time: without an offset it is UTC, whatever the session's
``spark.sql.session.timeZone``)::

    SELECT namesrv, broker_name, perm, read_queue_nums, write_queue_nums
    FROM topic_queue
    WHERE topic = 'order-paid-0008' AND alive(valid_from, valid_to, ms('2024-11-21T00:30:00Z'))

For one instant over a long history, the table functions ``topic_queue_at(t)``, ``broker_addr_at(t)``,
``cluster_addr_at(t)``, ``broker_live_at(t)``, ``filter_server_at(t)``, ``order_topic_at(t)`` and
``topic_routes_at(t)`` give the same rows as the view filtered by ``alive``, but the instant's
predicate reaches the scan (row groups whose statistics exclude it are skipped), and
``topic_routes_at`` joins the two sides at that instant only, where ``topic_routes`` joins every
pair of overlapping intervals first. ``LATERAL`` takes one instant per row. Spark 4.0 refuses a SQL
function (``ms``) in a table function's argument; a built-in expression is fine (keep the ``Z``: a
``TIMESTAMP`` literal without an offset is in the session's time zone)::

    SELECT * FROM topic_routes_at(unix_millis(TIMESTAMP '2024-11-21T00:30:00Z')) WHERE topic = 'order-paid-0008'
    SELECT i.t, r.* FROM instants i, LATERAL broker_live_at(i.t) r

Outside a NameServer's covered range its state is unknown (the Python API raises
``OutsideCoverageError``, the shim answers 404). So that a query cannot show a state there, the
interval views end every interval still open at the end of the range at ``covered_to + 1`` (the gold
tables keep ``valid_to`` NULL) and flag it ``open_at_end``: the rows with ``open_at_end`` are what
the NameServer held when its covered range ends.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from nsreplay.history import PublishedHistory
from nsreplay.storage import Warehouse
from pipelines.ingest.transforms import whole_lines
from schemas.bronze import CAPTURE_BODIES, CAPTURES_RAW
from schemas.gold import (
    BROKER_ADDR_INTERVALS,
    BROKER_LIVE_INTERVALS,
    CLUSTER_ADDR_INTERVALS,
    FILTER_SERVER_INTERVALS,
    INTERVAL_TABLES,
    KEYFRAMES,
    NAMESRV_EPOCHS,
    ORDER_TOPIC_INTERVALS,
    PUBLISH_LOG,
    ROUTE_CHANGES,
    ROUTE_FIDELITY,
    SCAN_TICKS,
    TOPIC_QUEUE_INTERVALS,
)

VIEWS = {
    "topic_queue": TOPIC_QUEUE_INTERVALS,
    "broker_addr": BROKER_ADDR_INTERVALS,
    "cluster_addr": CLUSTER_ADDR_INTERVALS,
    "broker_live": BROKER_LIVE_INTERVALS,
    "filter_server": FILTER_SERVER_INTERVALS,
    "order_topic": ORDER_TOPIC_INTERVALS,
    "route_changes": ROUTE_CHANGES,
    "scan_ticks": SCAN_TICKS,
    "namesrv_epochs": NAMESRV_EPOCHS,
    "keyframes": KEYFRAMES,
    "route_fidelity": ROUTE_FIDELITY,
}


def capture_lines(warehouse: Warehouse) -> DataFrame:
    """Every captured line whole, in ``bronze.captures_raw``'s columns: the lines stored split are
    made whole with ``bronze.capture_bodies`` (:func:`~pipelines.ingest.transforms.whole_lines`).
    A bronze written by an nsreplay from before bodies were split off (2026-11-21: neither that
    table nor the ``body_ref`` column) stores every line whole: its lines as they are, ``body_ref``
    null. ``bronze.captures_raw`` must exist."""
    lines = warehouse.read(CAPTURES_RAW)
    if "body_ref" not in lines.columns:
        lines = lines.withColumn("body_ref", F.lit(None).cast(StringType()))
    if not warehouse.exists(CAPTURE_BODIES):
        return lines.select(*CAPTURES_RAW.schema.fieldNames())
    return whole_lines(lines, warehouse.read(CAPTURE_BODIES))


def register_views(spark: SparkSession, root: str) -> dict[str, str]:
    """Register the published gold tables as temporary views; returns {view: table@version}."""
    history = PublishedHistory(root)
    warehouse = Warehouse(root, spark)
    registered = {}
    coverage = spark.createDataFrame(
        [(c.namesrv, c.from_ts, c.to_ts, c.profile) for c in history.coverage()],
        "namesrv STRING, covered_from BIGINT, covered_to BIGINT, profile STRING",
    )
    coverage.createOrReplaceTempView("coverage")
    registered["coverage"] = "the covered range of each NameServer (latest publish)"
    intervals = set(INTERVAL_TABLES.values())
    for view, spec in VIEWS.items():
        version = history.versions[spec.name]
        table = warehouse.read(spec, version=version)
        (within_coverage(table, coverage) if spec in intervals else table).createOrReplaceTempView(view)
        registered[view] = f"{spec.name}@{version}"
        if spec in intervals:
            table.createOrReplaceTempView(_raw(view))
    warehouse.read(PUBLISH_LOG).createOrReplaceTempView("publish_log")
    if warehouse.exists(CAPTURES_RAW):
        capture_lines(warehouse).createOrReplaceTempView("capture_lines")
        registered["capture_lines"] = "view over bronze.captures_raw and bronze.capture_bodies"
    spark.sql("CREATE OR REPLACE TEMPORARY FUNCTION alive(valid_from BIGINT, valid_to BIGINT, t BIGINT) RETURNS BOOLEAN "
              "RETURN valid_from <= t AND (valid_to IS NULL OR t < valid_to)")
    spark.sql(MS_FUNCTION)
    spark.sql(
        """CREATE OR REPLACE TEMPORARY VIEW topic_routes AS
           SELECT q.namesrv, q.topic, q.broker_name, q.perm, q.read_queue_nums, q.write_queue_nums,
                  b.cluster, b.broker_addrs,
                  greatest(q.valid_from, b.valid_from) AS valid_from,
                  CASE WHEN q.valid_to IS NULL THEN b.valid_to WHEN b.valid_to IS NULL THEN q.valid_to
                       ELSE least(q.valid_to, b.valid_to) END AS valid_to
           FROM topic_queue q JOIN broker_addr b
             ON q.namesrv = b.namesrv AND q.broker_name = b.broker_name
            AND b.valid_from < coalesce(q.valid_to, 9223372036854775807)
            AND q.valid_from < coalesce(b.valid_to, 9223372036854775807)"""
    )
    registered["topic_routes"] = "view over topic_queue and broker_addr"
    for view, spec in VIEWS.items():
        if spec in intervals:
            columns = ", ".join("coalesce(v.valid_to, c.covered_to + 1) AS valid_to" if name == "valid_to" else f"v.`{name}`"
                                for name in spec.schema.fieldNames())
            spark.sql(f"""CREATE OR REPLACE TEMPORARY FUNCTION {view}_at(t BIGINT) RETURNS TABLE RETURN
                          SELECT {columns}, v.valid_to IS NULL AS open_at_end
                          FROM {_raw(view)} v JOIN coverage c ON v.namesrv = c.namesrv AND t BETWEEN c.covered_from AND c.covered_to
                          WHERE v.valid_from <= t AND (v.valid_to IS NULL OR v.valid_to > t)""")
            registered[f"{view}_at(t)"] = f"{view} at instant t, read by a predicate the scan applies"
    spark.sql(
        """CREATE OR REPLACE TEMPORARY FUNCTION topic_routes_at(t BIGINT) RETURNS TABLE RETURN
           SELECT q.namesrv, q.topic, q.broker_name, q.perm, q.read_queue_nums, q.write_queue_nums,
                  b.cluster, b.broker_addrs,
                  greatest(q.valid_from, b.valid_from) AS valid_from, least(q.valid_to, b.valid_to) AS valid_to
           FROM topic_queue_at(t) q JOIN broker_addr_at(t) b ON q.namesrv = b.namesrv AND q.broker_name = b.broker_name"""
    )
    registered["topic_routes_at(t)"] = "topic_routes at instant t, each side read at t before the join"
    return registered


#: A time that ``ms()`` is given without an offset or zone: a date (``YYYY``, ``YYYY-MM``,
#: ``YYYY-MM-DD``), then optionally ``T`` or a space and a time of day, with surrounding white space
#: trimmed; Spark reads every such text without a zone. Anything else goes to ``to_timestamp`` as it is.
_NAIVE_TIME = "^[+-]?[0-9]{4,}(-[0-9]{1,2}(-[0-9]{1,2}([T ][0-9]{1,2}(:[0-9]{1,2}(:[0-9]{1,2}([.][0-9]*)?)?)?)?)?)?$"


def _utc_ms(ntz: str) -> str:
    """SQL: the epoch milliseconds of the TIMESTAMP_NTZ expression ``ntz`` read as UTC, floored to the
    millisecond, by arithmetic on its calendar fields, none of which reads the session's time zone
    (a cast to TIMESTAMP, ``unix_millis`` of it or ``timestampdiff`` does: they move a time in a DST
    gap of the session's zone)."""
    return (f"CAST(unix_date(CAST({ntz} AS DATE)) AS BIGINT) * 86400000 + hour({ntz}) * 3600000 + minute({ntz}) * 60000"
            f" + CAST(floor(date_part('SECOND', {ntz}) * 1000) AS BIGINT)")


#: What turns ISO-8601's other spellings, which :func:`nsreplay.runtime.parse_time` reads too, into the
#: extended form Spark reads, in order: a basic date (``20241121``) and time (``003000``, ``0030``), a
#: lowercase ``t``, a decimal comma and a lowercase ``z`` (RFC 3339 allows both letters lowercase).
_TO_EXTENDED = (
    ("^([0-9]{4})([0-9]{2})([0-9]{2})(?=$|[Tt ])", "$1-$2-$3"),
    ("^([0-9]{4}-[0-9]{2}-[0-9]{2})t", "$1T"),
    ("([T ][0-9]{2})([0-9]{2})([0-9]{2})(?![0-9])", "$1:$2:$3"),
    ("([T ][0-9]{2})([0-9]{2})(?![0-9:])", "$1:$2"),
    ("(:[0-9]{2}),([0-9]+)", "$1.$2"),
    ("z$", "Z"),
)


def _extended(text: str) -> str:
    """SQL: the string expression ``text`` in ISO-8601's extended form (:data:`_TO_EXTENDED`)."""
    for pattern, replacement in _TO_EXTENDED:
        text = f"regexp_replace({text}, '{pattern}', '{replacement}')"
    return text


#: ``ms(iso)``: ISO-8601 text (extended or basic form) or epoch milliseconds (digits) as epoch
#: milliseconds (floored), as :func:`nsreplay.runtime.parse_time` reads it for every command and the
#: shim: with ``Z`` or an offset, that instant; without one, UTC (not the session's time zone, which
#: ``to_timestamp`` of such a text would use, and which Spark fixes in a SQL function when it is
#: created). The same answer in every session and on every machine. (A literal argument is folded to
#: a constant, so a predicate on ``ms(...)`` still reaches the scan.)
_ISO = _extended("trim(iso)")
MS_FUNCTION = (
    "CREATE OR REPLACE TEMPORARY FUNCTION ms(iso STRING) RETURNS BIGINT RETURN "
    "CASE WHEN trim(iso) RLIKE '^-?[0-9]+$' THEN CAST(trim(iso) AS BIGINT) "
    f"WHEN {_ISO} RLIKE '{_NAIVE_TIME}' THEN {_utc_ms(f'to_timestamp_ntz({_ISO})')} "
    f"ELSE unix_millis(to_timestamp({_ISO})) END"
)


def _raw(view: str) -> str:
    """The temporary view of an interval table as stored (``valid_to`` NULL while open), which the
    ``*_at`` functions read so that their instant's predicate reaches the scan."""
    return f"_nsreplay_{view}_stored"


def within_coverage(intervals: DataFrame, coverage: DataFrame) -> DataFrame:
    """``intervals`` (an interval table: namesrv, valid_from, valid_to, ...) with every interval still
    open at the end of its NameServer's covered range ending at ``covered_to + 1``, and a boolean
    ``open_at_end`` that is true for exactly those rows. Rows of a NameServer with no coverage are
    dropped (nothing published covers them)."""
    ends = F.broadcast(coverage.select("namesrv", "covered_to"))
    return (
        intervals.join(ends, "namesrv")
        .withColumn("open_at_end", F.col("valid_to").isNull())
        .withColumn("valid_to", F.coalesce(F.col("valid_to"), F.col("covered_to") + F.lit(1)))
        .select(*intervals.columns, "open_at_end")
    )
