"""Gold: the route history of every NameServer, as validity intervals, a change log, keyframes and
the scan-tick grid, plus the publish log that says which versions readers may use.

Keys are split so that every row belongs to one broker group's replay unit: cluster membership is a
row per (cluster, brokerName), topic routes a row per (topic, brokerName). A value is valid for
``valid_from <= t < valid_to`` (``valid_to`` null: still valid at the end of the covered range), so the
state "at t" (after every record with ts <= t and every tick <= t) is the rows with
``valid_from <= t AND (valid_to IS NULL OR t < valid_to)``.
"""

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from nsreplay.storage import TableSpec

_str = StringType()
_long = LongType()


def _interval(fields: list[StructField]) -> list[StructField]:
    return (
        [StructField("namesrv", _str, False)]
        + fields
        + [
            StructField("valid_from", _long, False),
            StructField("valid_to", _long, True),
            StructField("start_cause", _str, False),
            StructField("end_cause", _str, True),
            StructField("run_id", _str, False),
        ]
    )


TOPIC_QUEUE_INTERVALS = TableSpec(
    name="gold.topic_queue_intervals",
    schema=StructType(
        _interval(
            [
                StructField("topic", _str, False),
                StructField("broker_name", _str, False),
                StructField("read_queue_nums", IntegerType(), False),
                StructField("write_queue_nums", IntegerType(), False),
                StructField("perm", IntegerType(), False),
                StructField("topic_sys_flag", IntegerType(), False),
            ]
        )
    ),
    partition_by=("namesrv",),
    description="topicQueueTable: one QueueData per (topic, brokerName) and validity interval.",
)

BROKER_ADDR_INTERVALS = TableSpec(
    name="gold.broker_addr_intervals",
    schema=StructType(
        _interval(
            [
                StructField("broker_name", _str, False),
                StructField("cluster", _str, False),
                StructField("broker_addrs", MapType(_long, _str), False),
                StructField("enable_acting_master", BooleanType(), True),
                StructField("zone_name", _str, True),
            ]
        )
    ),
    partition_by=("namesrv",),
    description="brokerAddrTable: one BrokerData per brokerName and validity interval.",
)

CLUSTER_ADDR_INTERVALS = TableSpec(
    name="gold.cluster_addr_intervals",
    schema=StructType(_interval([StructField("cluster", _str, False), StructField("broker_name", _str, False)])),
    partition_by=("namesrv",),
    description="clusterAddrTable: a row per (cluster, brokerName) membership and validity interval.",
)

_LIVE_KEY = [
    StructField("cluster", _str, True),  # null for 4.9, whose live table is keyed by address only
    StructField("broker_addr", _str, False),
]

BROKER_LIVE_INTERVALS = TableSpec(
    name="gold.broker_live_intervals",
    schema=StructType(
        _interval(
            _LIVE_KEY
            + [
                StructField("last_update_ts", _long, False),
                StructField("heartbeat_timeout_ms", _long, True),
                StructField("dv_state_version", _long, False),
                StructField("dv_timestamp", _long, False),
                StructField("dv_counter", _long, False),
                StructField("conn", _str, True),
                StructField("ha_server_addr", _str, True),
            ]
        )
    ),
    partition_by=("namesrv",),
    description="brokerLiveTable: one BrokerLiveInfo per live key and validity interval.",
    distinct_columns=("last_update_ts", "valid_from", "valid_to"),
)

FILTER_SERVER_INTERVALS = TableSpec(
    name="gold.filter_server_intervals",
    schema=StructType(_interval(_LIVE_KEY + [StructField("filter_servers", ArrayType(_str, False), False)])),
    partition_by=("namesrv",),
    description="filterServerTable: one filter-server list per live key and validity interval.",
)

ORDER_TOPIC_INTERVALS = TableSpec(
    name="gold.order_topic_intervals",
    schema=StructType(_interval([StructField("topic", _str, False), StructField("order_conf", _str, False)])),
    partition_by=("namesrv",),
    description="ORDER_TOPIC_CONFIG KV entries (survive restarts) by validity interval.",
)

INTERVAL_TABLES = {
    "topicQueueTable": TOPIC_QUEUE_INTERVALS,
    "brokerAddrTable": BROKER_ADDR_INTERVALS,
    "clusterAddrTable": CLUSTER_ADDR_INTERVALS,
    "brokerLiveTable": BROKER_LIVE_INTERVALS,
    "filterServerTable": FILTER_SERVER_INTERVALS,
    "orderTopicConf": ORDER_TOPIC_INTERVALS,
}

# Every change to every table, in the NameServer's order: (ts, phase, record_rank), phase 0 for a
# record (record_rank its place, from 1, among the NameServer's records of that ts that can change a
# route table: route requests, channel events, starts; read-only requests are not counted), 1 for a
# scan tick. `tick_ts` is the first scan tick whose state shows the change (the tick itself for
# expiries; null when a restart comes first). Keys and values are canonical JSON (see
# pipelines.replay.unit_replay).
ROUTE_CHANGES = TableSpec(
    name="gold.route_changes",
    schema=StructType(
        [
            StructField("namesrv", _str, False),
            StructField("ts", _long, False),
            StructField("tick_ts", _long, True),
            StructField("phase", IntegerType(), False),
            StructField("record_rank", _long, True),
            StructField("table", _str, False),
            StructField("key", _str, False),
            StructField("op", _str, False),
            StructField("before", _str, True),
            StructField("after", _str, True),
            StructField("cause", _str, False),
            StructField("run_id", _str, False),
        ]
    ),
    partition_by=("namesrv",),
    description="Per-change log of all route tables: (tick, table, key, op, before, after, cause).",
    distinct_columns=("ts", "before", "after"),
)

KEYFRAMES = TableSpec(
    name="gold.keyframes",
    schema=StructType(
        [
            StructField("namesrv", _str, False),
            StructField("keyframe_ts", _long, False),
            StructField("table", _str, False),
            StructField("key", _str, False),
            StructField("value", _str, False),
            StructField("run_id", _str, False),
        ]
    ),
    partition_by=("namesrv",),
    description="Full snapshots of every table at a fixed cadence of scan ticks (canonical JSON rows).",
)

SCAN_TICKS = TableSpec(
    name="gold.scan_ticks",
    schema=StructType(
        [
            StructField("namesrv", _str, False),
            StructField("tick_ts", _long, False),
            StructField("epoch_start_ts", _long, False),
            StructField("profile", _str, False),
            StructField("removals", IntegerType(), False),
            StructField("run_id", _str, False),
        ]
    ),
    partition_by=("namesrv",),
    description="Every scan tick of every NameServer in the covered range, with its epoch and expiries.",
)

NAMESRV_EPOCHS = TableSpec(
    name="gold.namesrv_epochs",
    schema=StructType(
        [
            StructField("namesrv", _str, False),
            StructField("start_ts", _long, False),
            StructField("end_ts", _long, False),
            StructField("profile", _str, False),
            StructField("config", MapType(_str, _str), False),
            StructField("first_tick", _long, False),
            StructField("tick_interval", _long, False),
            StructField("run_id", _str, False),
        ]
    ),
    partition_by=("namesrv",),
    description="Each NameServer run between (re)starts: profile, settings and its scan-tick grid.",
)

ROUTE_FIDELITY = TableSpec(
    name="gold.route_fidelity",
    schema=StructType(
        [
            StructField("namesrv", _str, False),
            StructField("ts", _long, False),
            StructField("topic", _str, False),
            StructField("request_version", IntegerType(), True),
            StructField("captured_code", IntegerType(), False),
            StructField("rebuilt_code", IntegerType(), False),
            StructField("match", BooleanType(), False),
            StructField("captured", _str, True),
            StructField("rebuilt", _str, True),
            StructField("run_id", _str, False),
        ]
    ),
    partition_by=("namesrv",),
    description="Captured GET_ROUTEINFO_BY_TOPIC answers against the rebuilt route at that instant.",
)

# Covered range per NameServer: from its first record to the end of the published windows.
_COVERAGE = ArrayType(
    StructType(
        [
            StructField("namesrv", _str, False),
            StructField("from_ts", _long, False),
            StructField("to_ts", _long, False),
            StructField("profile", _str, False),
        ]
    ),
    False,
)

# What a run wrote: its window, covered range per NameServer, table versions, row counts, quality.
_RUN_FIELDS = [
    StructField("window_from", _long, False),
    StructField("window_to", _long, False),
    StructField("namesrvs", _COVERAGE, False),
    StructField("table_versions", MapType(_str, _long), False),
    StructField("row_counts", MapType(_str, _long), False),
    StructField("quality", _str, False),
]

PUBLISH_LOG = TableSpec(
    name="gold.publish_log",
    schema=StructType([StructField("run_id", _str, False), StructField("published_ms", _long, False)] + _RUN_FIELDS),
    description="One row per published run: readers use only the table versions named here.",
)

# The replay's carried state: every unit's pickled replay at the end of each window (see
# pipelines.replay.unit_replay.UnitReplay), plus a "~facts" row per NameServer with what decided its
# units. The next window resumes from the rows whose window_to is its start.
REPLAY_STATE = TableSpec(
    name="gold.replay_state",
    schema=StructType(
        [
            StructField("namesrv", _str, False),
            StructField("window_to", _long, False),
            StructField("unit", _str, False),
            StructField("state", BinaryType(), False),
            StructField("run_id", _str, False),
        ]
    ),
    partition_by=("namesrv",),
    description="Replay state at the end of each window, per (NameServer, replay unit).",
)

# What a replay stage wrote, waiting for its quality check and publish (one row per replay run).
REPLAY_RUNS = TableSpec(
    name="gold.replay_runs",
    schema=StructType([StructField("run_id", _str, False), StructField("written_ms", _long, False)] + _RUN_FIELDS),
    description="Replay runs written but not necessarily published: what the publish stage publishes.",
)

# Published windows that late input has made stale (detected at ingest): re-run them, in order.
STALE_WINDOWS = TableSpec(
    name="gold.stale_windows",
    schema=StructType(
        [
            StructField("namesrv", _str, False),
            StructField("window_from", _long, False),
            StructField("window_to", _long, False),
            StructField("published_run_id", _str, False),
            StructField("late_from_ts", _long, False),
            StructField("detected_by", _str, False),
            StructField("detected_ms", _long, False),
        ]
    ),
    description="Published windows whose input (or carried state) changed after publishing.",
)

# The key of each interval table: at most one row per (namesrv, key) is valid at any instant.
INTERVAL_KEYS: dict[str, tuple[str, ...]] = {
    TOPIC_QUEUE_INTERVALS.name: ("topic", "broker_name"),
    BROKER_ADDR_INTERVALS.name: ("broker_name",),
    CLUSTER_ADDR_INTERVALS.name: ("cluster", "broker_name"),
    BROKER_LIVE_INTERVALS.name: ("cluster", "broker_addr"),
    FILTER_SERVER_INTERVALS.name: ("cluster", "broker_addr"),
    ORDER_TOPIC_INTERVALS.name: ("topic",),
}

GOLD_TABLES = tuple(INTERVAL_TABLES.values()) + (ROUTE_CHANGES, KEYFRAMES, SCAN_TICKS, NAMESRV_EPOCHS, ROUTE_FIDELITY, PUBLISH_LOG)
REPLAY_TABLES = GOLD_TABLES[:-1] + (REPLAY_STATE,)  # written by a replay stage (publish_log by publish)
