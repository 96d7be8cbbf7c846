"""Silver: typed, validated, deduplicated capture records, distinct register bodies, quarantine."""

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from nsreplay.storage import TableSpec

_str = StringType()

# One row per distinct capture record (duplicates removed), every kind. Register bodies are not
# stored here: `body_id` points into silver.topic_configs. Other bodies (QUERY_DATA_VERSION's
# DataVersion, REGISTER_TOPIC's TopicRouteData, responses) are small and kept as compact JSON text
# (`body`) or as the captured base64 (`body_b64`) when they are not JSON.
EVENT = StructType(
    [
        StructField("namesrv", _str, False),
        StructField("ts", LongType(), False),
        StructField("seq", LongType(), True),
        StructField("kind", _str, False),
        StructField("code", IntegerType(), True),
        StructField("version", IntegerType(), True),
        StructField("opaque", IntegerType(), True),
        StructField("conn", _str, True),
        StructField("ext_fields", MapType(_str, _str), True),
        StructField("broker_name", _str, True),
        StructField("broker_addr", _str, True),
        StructField("cluster_name", _str, True),
        StructField("broker_id", LongType(), True),
        StructField("topic", _str, True),
        StructField("body_id", _str, True),
        StructField("body", _str, True),
        StructField("body_b64", _str, True),
        StructField("event", _str, True),
        StructField("remote", _str, True),
        StructField("rocketmq_version", _str, True),
        StructField("config", MapType(_str, _str), True),
        StructField("remark", _str, True),
        StructField("record_id", _str, False),
        StructField("source_file", _str, False),
        StructField("line_no", LongType(), False),
        StructField("run_id", _str, False),
    ]
)

EVENTS = TableSpec(
    name="silver.events",
    schema=StructType(list(EVENT.fields) + [StructField("event_date", _str, False)]),
    partition_by=("namesrv", "event_date"),
    description="Typed capture records, deduplicated, partitioned by NameServer and UTC day for the replay.",
    distinct_columns=("ts", "seq", "opaque", "record_id", "line_no"),
)

TOPIC_CONFIG = StructType(
    [
        StructField("topic_name", _str, False),
        StructField("read_queue_nums", IntegerType(), False),
        StructField("write_queue_nums", IntegerType(), False),
        StructField("perm", IntegerType(), False),
        StructField("topic_sys_flag", IntegerType(), False),
        StructField("order", BooleanType(), False),
        StructField("topic_filter_type", _str, False),
    ]
)

# One row per distinct RegisterBrokerBody, parsed once, keyed by a content hash of (encoding, body).
BODY = StructType(
    [
        StructField("body_id", _str, False),
        StructField("encoding", _str, False),
        StructField("has_data_version", BooleanType(), False),
        StructField("dv_state_version", LongType(), True),
        StructField("dv_timestamp", LongType(), True),
        StructField("dv_counter", LongType(), True),
        StructField("topic_configs", ArrayType(TOPIC_CONFIG, False), False),
        StructField("topic_count", IntegerType(), False),
        StructField("filter_server_list", ArrayType(_str, False), False),
        StructField("legacy_wrapper", BooleanType(), False),
        StructField("body_bytes", LongType(), False),
        # Whether the body carries static-topic mappings (their content is out of scope; their presence
        # decides 5.x's step 7a). Nullable: tables written before it read null, taken as false.
        StructField("static_mappings", BooleanType(), True),
        # The topicConfigTable's keys, one per entry of topic_configs, when one of them differs from
        # its config's topic_name (5.x removes the topics not among the keys); null when they are the
        # names, which is every body written before this column.
        StructField("topic_keys", ArrayType(_str, False), True),
        # Why a 5.x NameServer cannot read the static-topic mapping section of this compressed body
        # (version >= 413; it answers SYSTEM_ERROR, 4.9 never reads the section); null when it can.
        StructField("mapping_error", _str, True),
    ]
)

TOPIC_CONFIGS = TableSpec(
    name="silver.topic_configs",
    schema=StructType(list(BODY.fields) + [StructField("first_run_id", _str, False)]),
    description="Each distinct register body of an accepted registration: DataVersion, topic configs and filter list, parsed once.",
)

QUARANTINE = TableSpec(
    name="silver.quarantine",
    schema=StructType(
        [
            StructField("run_id", _str, False),
            StructField("source_file", _str, False),
            StructField("line_no", LongType(), False),
            StructField("reason", _str, False),
            StructField("detail", _str, True),
            StructField("raw_text", _str, True),
            StructField("raw_bytes", BinaryType(), True),
            StructField("line_bytes", LongType(), False),
            StructField("namesrv", _str, True),
            StructField("ts", LongType(), True),
        ]
    ),
    description="Lines that were not accepted, with the reason code; nothing is dropped silently.",
)

INGEST_RUNS = TableSpec(
    name="silver.ingest_runs",
    schema=StructType(
        [
            StructField("run_id", _str, False),
            StructField("started_ms", LongType(), False),
            StructField("finished_ms", LongType(), False),
            StructField("files_seen", LongType(), False),
            StructField("files_read", LongType(), False),
            StructField("files_skipped", LongType(), False),
            StructField("lines_read", LongType(), False),
            StructField("accepted", LongType(), False),
            StructField("duplicates", LongType(), False),
            StructField("quarantined", LongType(), False),
            StructField("quarantined_by_reason", MapType(_str, LongType()), False),
            StructField("new_bodies", LongType(), False),
            StructField("quality_passed", BooleanType(), False),
            StructField("status", _str, False),
        ]
    ),
    description="One row per ingest run: reconciled counts (lines = accepted + duplicates + quarantined).",
)

QUALITY_RESULTS = TableSpec(
    name="silver.quality_results",
    schema=StructType(
        [
            StructField("run_id", _str, False),
            StructField("suite", _str, False),
            StructField("expectation", _str, False),
            StructField("column", _str, True),
            StructField("success", BooleanType(), False),
            StructField("element_count", LongType(), True),
            StructField("unexpected_count", LongType(), True),
            StructField("unexpected_percent", DoubleType(), True),
            StructField("details", _str, True),
            # a replay run's gold check: the run id's attempt checked (pipelines.replay.attempts); null: an ingest's check
            StructField("attempt", IntegerType(), True),
        ]
    ),
    description="Great Expectations results per run, one row per expectation.",
)

# The parser's output (not a table): every event column, nullable, plus the verdict on the line, the
# raw line when it is quarantined, and the decoded register body the first time a task meets it.
PARSED_LINE = StructType(
    [StructField(f.name, f.dataType, True) for f in EVENT.fields]
    + [
        StructField("status", _str, False),
        StructField("reason", _str, True),
        StructField("detail", _str, True),
        StructField("raw_text", _str, True),
        StructField("raw_bytes", BinaryType(), True),
        StructField("line_bytes", LongType(), False),
        StructField("new_body", BODY, True),
    ]
)

# The ingest's one pass over the capture files (not a table): every PARSED_LINE column plus the
# line's bronze form (bronze.captures_raw: `line`, `read_error`, `body_ref`; `raw_bytes` and
# `line_bytes` are shared) and, the first time a task splits a line on a body, that body's text.
# `damaged_from`, on a `corrupt_gzip` line only, is the first line of the file that the damaged gzip
# member gave a byte to (this line itself after a gap between members, such as a hole of zeros): lines
# `damaged_from` to this one may be garbled (pipelines.ingest.capture_reader).
# The last row of each file also says how it was read (null on every other row): `read_from`, the byte
# the read started at (0: whole), and the file's complete part as read now (`complete_bytes`,
# `complete_lines`, `complete_sha256`, `complete_head_sha256`: capture_reader.CompletePart; null when a
# later read cannot resume after it), which bronze.ingest_files keeps for the next read of the file, and
# `resumed_file`, the file whose part read before a resumed read started after (this file, or the one
# it was renamed from).
READ_LINE = StructType(
    list(PARSED_LINE.fields)
    + [
        StructField("line", _str, False),
        StructField("read_error", _str, True),
        StructField("body_ref", _str, True),
        StructField("body_text", _str, True),
        StructField("damaged_from", LongType(), True),
        StructField("read_from", LongType(), True),
        StructField("complete_bytes", LongType(), True),
        StructField("complete_lines", LongType(), True),
        StructField("complete_sha256", _str, True),
        StructField("complete_head_sha256", _str, True),
        StructField("resumed_file", _str, True),
    ]
)
