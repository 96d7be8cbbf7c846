"""End-to-end ingest on real Spark and real Delta tables: the bad-input matrix, duplicates,
idempotent re-ingest, reconciled counts and a table-level quality failure."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import hashlib
import json
import shutil
import zlib
from collections import Counter
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import MapType
from published import plain

from nsreplay.config import load_settings
from nsreplay.protocol.register_body import (
    DataVersion,
    RegisterBody,
    TopicConfig,
    body_crc32,
    encode_compressed_register_body,
    encode_json_register_body,
    encode_register_body_bytes,
)
from nsreplay.storage import Warehouse
from pipelines.ingest.capture_reader import HEAD_BYTES
from pipelines.ingest.run import FileQuarantine, IngestQualityError, QuarantineReason, run_ingest, worst_files
from pipelines.ingest.transforms import duplicate_ids
from schemas import ALL_TABLES
from schemas.bronze import CAPTURE_BODIES, CAPTURES_RAW, INGEST_FILES
from schemas.silver import EVENTS, INGEST_RUNS, QUALITY_RESULTS, QUARANTINE, TOPIC_CONFIGS

NS = "10.0.0.10:9876"
T0 = 1732147200000
# "orders" has a topicSysFlag and is ordered: the JSON form carries both, the compressed form neither
BODY_A = RegisterBody(DataVersion(0, T0 - 100_000, 3), (TopicConfig("orders", 8, 8, 6, 1, True), TopicConfig("TBW102", 8, 8, 7, 0)), ())
BODY_B = RegisterBody(DataVersion(2, T0 - 50_000, 9), (TopicConfig("payments", 4, 4, 6, 0),), ("10.0.0.9:7777",))
MAX_LINE = 4096


def settings():
    base = load_settings()
    return dataclasses.replace(base, ingest=dataclasses.replace(base.ingest, max_line_bytes=MAX_LINE, quarantine_keep_bytes=512))


def header(broker: str = "broker-a", addr: str = "10.0.1.5:10911", broker_id: str = "0", **extra: str) -> dict:
    return {"brokerName": broker, "brokerAddr": addr, "clusterName": "DefaultCluster", "haServerAddr": "10.0.1.5:10912",
            "brokerId": broker_id, "compressed": "false", "bodyCrc32": "0", "enableActingMaster": "false", **extra}


def request(ts: int, code: int, ext: dict, seq: int, **fields) -> dict:
    return {"namesrv": NS, "ts": ts, "seq": seq, "kind": "request", "code": code, "version": 479, "opaque": seq,
            "conn": "10.0.1.5:53422@1732147190000", "extFields": ext, **fields}


def good_records() -> list[dict]:
    raw_b = encode_register_body_bytes(BODY_B)
    compressed = encode_compressed_register_body(BODY_A, with_mappings=True)
    return [
        {"namesrv": NS, "ts": T0, "seq": 0, "kind": "namesrv_start", "rocketmq_version": "5.3.3", "config": {"scanNotActiveBrokerInterval": 5000}},
        {"namesrv": NS, "ts": T0 + 1, "seq": 1, "kind": "channel", "event": "CONNECT", "conn": "10.0.1.5:53422@1732147190000", "remote": "10.0.1.5:53422"},
        request(T0 + 2, 103, header(), 2, body=encode_json_register_body(BODY_A)),
        request(T0 + 3, 103, header("broker-b", "10.0.1.6:10911", bodyCrc32=str(body_crc32(raw_b))), 3, body_b64=base64.b64encode(raw_b).decode()),
        request(T0 + 4, 103, header("broker-c", "10.0.1.7:10911", compressed="true"), 4, body_b64=base64.b64encode(compressed).decode()),
        request(T0 + 30_002, 103, header(), 5, body=encode_json_register_body(BODY_A)),
        request(T0 + 30_003, 904, {"brokerAddr": "10.0.1.5:10911", "clusterName": "DefaultCluster"}, 6),
        request(T0 + 30_004, 205, {"brokerName": "broker-a"}, 7),
        request(T0 + 30_005, 216, {"topic": "orders", "clusterName": ""}, 8),
        request(T0 + 30_006, 105, {"topic": "orders"}, 9),
        {"namesrv": NS, "ts": T0 + 30_006, "seq": 10, "kind": "response", "code": 17, "opaque": 9, "conn": "c", "remark": "No topic route info"},
        request(T0 + 40_000, 104, header(), 11),
    ]


BAD_LINES: list[tuple[bytes, str]] = [
    (b'{"namesrv": "10.0.0.10:9876", "ts": 1', "invalid_json"),
    (b"[1, 2, 3]", "not_an_object"),
    (b"\xef\xbb\xbf" + json.dumps({"namesrv": NS, "ts": T0, "kind": "channel", "event": "CLOSE", "conn": "c", "remote": "10.0.1.5:1"}).encode(), "invalid_json"),
    (b"", "empty_line"),
    (json.dumps({"namesrv": NS, "kind": "channel", "event": "CLOSE", "conn": "c", "remote": "10.0.1.5:1"}).encode(), "missing_field"),
    (json.dumps({"namesrv": NS, "ts": str(T0), "kind": "channel", "event": "CLOSE", "conn": "c", "remote": "10.0.1.5:1"}).encode(), "wrong_type"),
    (json.dumps({"namesrv": NS, "ts": T0, "kind": "telemetry"}).encode(), "unknown_kind"),
    (json.dumps(request(T0, 99999, {}, 50)).encode(), "unknown_code"),
    (json.dumps({"namesrv": NS, "ts": T0, "kind": "channel", "event": "REBOOT", "conn": "c", "remote": "10.0.1.5:1"}).encode(), "unknown_channel_event"),
    (json.dumps(request(T0, 103, header(), 51, body_b64="***")).encode(), "undecodable_body"),
    (json.dumps(request(T0, 103, header(bodyCrc32="12345"), 52, body_b64=base64.b64encode(encode_register_body_bytes(BODY_A)).decode())).encode(), "crc_mismatch"),
    (b'{"namesrv": "10.0.0.10:9876", "ts": 1, "kind": "\xff\xfe"}', "invalid_utf8"),
    (json.dumps({"namesrv": "not-an-address", "ts": T0, "kind": "channel", "event": "CLOSE", "conn": "c", "remote": "10.0.1.5:1"}).encode(), "quality:namesrv_address"),
    (json.dumps(request(T0, 104, header(broker_id="9223372036854775808"), 53)).encode(), "wrong_type"),  # beyond a long (-1 is a slave's id)
    (json.dumps({"namesrv": NS + "\n", "ts": T0, "kind": "channel", "event": "CLOSE", "conn": "c", "remote": "10.0.1.5:1"}).encode(), "quality:namesrv_address"),
    (json.dumps({"namesrv": NS, "ts": T0, "kind": "channel", "event": "CLOSE", "conn": "c", "remote": "10.0.1.5:1"})[:-1].encode()
     + b', "x": ' + b"[" * 300 + b"]" * 300 + b"}", "too_deep"),
    (json.dumps(request(T0, 904, {"brokerAddr": "10.0.1.5:10911", "clusterName": "c", "pad": "x" * (MAX_LINE + 10)}, 54)).encode(), "line_too_long"),
]


def jsonl(records: list[dict]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> tuple[Path, dict[tuple[str, int], str]]:
    """A capture directory holding every kind of good and bad input, and the reason expected per line."""
    root = tmp_path_factory.mktemp("matrix")
    (root / "good.jsonl").write_bytes(b"\xef\xbb\xbf" + jsonl(good_records()))  # a BOM starting a file is no part of line 1
    (root / "bad.jsonl").write_bytes(b"\n".join(line for line, _ in BAD_LINES) + b"\n")
    goods = good_records()
    # duplicates: lines 3 and 6 again in another (gzip) file, and line 2 of that file repeated in it
    (root / "dups.jsonl.gz").write_bytes(gzip.compress(jsonl([goods[2], goods[5], goods[5]])))
    truncated = gzip.compress(jsonl([request(T0 + 50_000 + i, 904, {"brokerAddr": "10.0.1.5:10911", "clusterName": "DefaultCluster"}, 100 + i) for i in range(400)]))
    (root / "truncated.jsonl.gz").write_bytes(truncated[: len(truncated) * 2 // 3])
    (root / "empty.jsonl").write_bytes(b"")
    (root / "_manifest.json").write_text("{}")  # not a capture file: ignored
    expected = {("bad.jsonl", i + 1): reason for i, (_, reason) in enumerate(BAD_LINES)}
    return root, expected


@pytest.fixture(scope="module")
def ingested(spark, matrix, tmp_path_factory):
    root, _ = matrix
    warehouse = Warehouse(str(tmp_path_factory.mktemp("wh")), spark, "delta-rs")
    result = run_ingest(spark, warehouse, settings(), str(root), "run-1")
    return warehouse, result


def basename_col(col: str = "source_file"):
    return F.regexp_extract(F.col(col), r"([^/]+)$", 1)


def test_every_table_has_its_declared_schema(ingested) -> None:
    warehouse, _ = ingested
    for spec in ALL_TABLES:
        warehouse.ensure(spec)  # raises SchemaMismatchError unless the stored Delta schema is the spec's
        read = [(f.name, f.dataType.simpleString()) for f in warehouse.read(spec).schema.fields]
        assert read == [(f.name, f.dataType.simpleString()) for f in spec.schema.fields], spec.name


def test_bad_lines_are_quarantined_with_their_reason_and_nothing_else_is(spark, ingested, matrix) -> None:
    warehouse, _ = ingested
    _, expected = matrix
    got = warehouse.read(QUARANTINE).where(basename_col() != "truncated.jsonl.gz").select(basename_col().alias("file"), "line_no", "reason")
    want = spark.createDataFrame([(f, n, r) for (f, n), r in expected.items()], got.schema)
    assert_df_equality(got, want, ignore_row_order=True, ignore_nullable=True)


def complete_lines_of_truncated(root: Path) -> int:
    """The lines of truncated.jsonl.gz that are whole in what inflates from its bytes (zlib, not the
    ingest's reader); the test needs the cut to fall inside a line, which then is line n + 1."""
    inflated = zlib.decompressobj(31).decompress((root / "truncated.jsonl.gz").read_bytes())
    n = inflated.count(b"\n")
    assert 0 < n < 400 and not inflated.endswith(b"\n"), (n, len(inflated))
    return n


def test_truncated_gzip_keeps_its_complete_lines_and_quarantines_the_cut_one(spark, ingested, matrix) -> None:
    warehouse, _ = ingested
    root, _ = matrix
    n = complete_lines_of_truncated(root)
    events = warehouse.read(EVENTS).where(basename_col() == "truncated.jsonl.gz").select("line_no", "ts", "code", "opaque")
    # the file was written from request(T0 + 50_000 + i, 904, ..., 100 + i) for i in range(400)
    want = spark.createDataFrame([(i + 1, T0 + 50_000 + i, 904, 100 + i) for i in range(n)], events.schema)
    assert_df_equality(events, want, ignore_row_order=True, ignore_nullable=True)
    cut = warehouse.read(QUARANTINE).where(basename_col() == "truncated.jsonl.gz").collect()
    assert [(r.reason, r.line_no) for r in cut] == [("truncated_gzip", n + 1)]


def test_duplicates_across_and_within_files_count_once(spark, ingested) -> None:
    warehouse, result = ingested
    good = warehouse.read(EVENTS).where(basename_col().isin("good.jsonl", "dups.jsonl.gz")).select(basename_col().alias("file"), "line_no")
    # Of equal records the copy kept is the first by file path, then line: dups.jsonl.gz sorts first.
    kept = [("dups.jsonl.gz", 1), ("dups.jsonl.gz", 2)] + [("good.jsonl", i) for i in range(1, len(good_records()) + 1) if i not in (3, 6)]
    want = spark.createDataFrame(kept, good.schema)
    assert_df_equality(good, want, ignore_row_order=True, ignore_nullable=True)
    assert result.duplicates == 3


def test_counts_reconcile_and_are_recorded(ingested, matrix) -> None:
    warehouse, result = ingested
    root, _ = matrix
    n = complete_lines_of_truncated(root)
    # every line of every file: good.jsonl, bad.jsonl, the 3 of dups.jsonl.gz, truncated's n whole + 1 cut
    lines_read = len(good_records()) + len(BAD_LINES) + 3 + n + 1
    # dups.jsonl.gz holds good.jsonl's lines 3, 6 and 6: five copies of two records, two kept, three duplicates
    accepted = len(good_records()) + 3 - 3 + n
    quarantined = len(BAD_LINES) + 1
    assert (result.lines_read, result.accepted, result.duplicates, result.quarantined) == (lines_read, accepted, 3, quarantined)
    assert result.lines_read == result.accepted + result.duplicates + result.quarantined
    row = warehouse.read(INGEST_RUNS).where(F.col("run_id") == "run-1").collect()
    assert len(row) == 1 and row[0].status == "succeeded"
    assert (row[0].lines_read, row[0].accepted, row[0].duplicates, row[0].quarantined) == (lines_read, accepted, 3, quarantined)
    assert row[0].quarantined_by_reason == dict(Counter(reason for _, reason in BAD_LINES) + Counter(["truncated_gzip"]))
    assert (row[0].new_bodies, row[0].quality_passed) == (3, True)
    assert warehouse.read(CAPTURES_RAW).count() == result.lines_read
    statuses = {Path(r.source_file).name: r.status for r in warehouse.read(INGEST_FILES).collect()}
    assert statuses == {"good.jsonl": "read", "bad.jsonl": "read", "dups.jsonl.gz": "read", "truncated.jsonl.gz": "read", "empty.jsonl": "empty"}
    assert all(r.success for r in warehouse.read(QUALITY_RESULTS).collect())


def expected_body_row(encoding: str, body: RegisterBody, body_bytes: int) -> tuple:
    """The silver.topic_configs row (without body_id) of ``body`` sent in ``encoding``, stored by run-1.
    The compressed form carries neither topicSysFlag nor order: they read 0 and false (register_body)."""
    dv = body.data_version
    compressed = encoding == "compressed"
    configs = [(c.topic_name, c.read_queue_nums, c.write_queue_nums, c.perm, 0 if compressed else c.topic_sys_flag,
                False if compressed else c.order, c.topic_filter_type) for c in body.topic_configs]
    return (encoding, True, dv.state_version, dv.timestamp, dv.counter, configs, len(configs), list(body.filter_server_list),
            False, body_bytes, False, None, None, "run-1")


def test_each_distinct_register_body_is_parsed_once(spark, ingested) -> None:
    warehouse, _ = ingested
    stored = warehouse.read(TOPIC_CONFIGS)
    got = stored.drop("body_id")
    json_a = json.dumps(encode_json_register_body(BODY_A), sort_keys=True, separators=(",", ":")).encode()  # a body object: its compact JSON
    rows = [
        expected_body_row("json", BODY_A, len(json_a)),
        expected_body_row("json", BODY_B, len(encode_register_body_bytes(BODY_B))),  # body_b64: its bytes
        expected_body_row("compressed", BODY_A, len(encode_compressed_register_body(BODY_A, with_mappings=True))),
    ]
    assert rows[0][5] != rows[2][5]  # the compressed form's topics differ from the JSON form's
    assert_df_equality(got, spark.createDataFrame(rows, got.schema), ignore_row_order=True, ignore_nullable=True)
    assert stored.select("body_id").distinct().count() == 3
    # each kept REGISTER_BROKER refers to the body it carries (good.jsonl lines 3 and 6 are duplicates of dups.jsonl.gz's)
    registers = warehouse.read(EVENTS).where(F.col("code") == 103).join(stored, "body_id", "left")
    got = registers.select(basename_col().alias("file"), "line_no", "encoding", "dv_counter")
    want = [("dups.jsonl.gz", 1, "json", 3), ("dups.jsonl.gz", 2, "json", 3), ("good.jsonl", 4, "json", 9), ("good.jsonl", 5, "compressed", 3)]
    assert_df_equality(got, spark.createDataFrame(want, got.schema), ignore_row_order=True, ignore_nullable=True)


# What an ingest writes, and its bookkeeping (a row per run, or per run and expectation).
WRITTEN = (EVENTS, TOPIC_CONFIGS, QUARANTINE, CAPTURES_RAW, CAPTURE_BODIES, INGEST_FILES)
BOOKKEEPING = (INGEST_RUNS, QUALITY_RESULTS)


def whole(df: DataFrame) -> DataFrame:
    """``df`` with run_id and every other column kept, map columns as sorted JSON (chispa cannot order maps)."""
    for f in df.schema.fields:
        if isinstance(f.dataType, MapType):
            df = df.withColumn(f.name, F.to_json(F.array_sort(F.map_entries(f.name))))
    return df


def assert_as_at(warehouse: Warehouse, spec, version: int, now: DataFrame | None = None) -> None:
    """``spec`` (or ``now``, rows of it) is, row for row and column for column, what it was at ``version``."""
    assert version is not None, spec.name  # read(version=None) is the latest: the comparison would prove nothing
    now = warehouse.read(spec) if now is None else now
    assert_df_equality(whole(warehouse.read(spec, version=version)), whole(now), ignore_row_order=True, ignore_nullable=True)


def test_reingesting_the_same_files_adds_nothing(spark, ingested, matrix) -> None:
    warehouse, _ = ingested
    root, _ = matrix
    versions = {spec.name: warehouse.version(spec) for spec in WRITTEN + BOOKKEEPING}
    again = run_ingest(spark, warehouse, settings(), str(root), "run-2")
    for spec in WRITTEN:
        assert_as_at(warehouse, spec, versions[spec.name])
    for spec in BOOKKEEPING:  # unchanged but for run-2's own rows
        assert_as_at(warehouse, spec, versions[spec.name], warehouse.read(spec).where(F.col("run_id") != "run-2"))
    assert (again.files_read, again.files_skipped, again.lines_read) == (0, 5, 0)
    # the skipped files are counted in the run row, not listed again (a row per old file per run)
    assert [(r.files_seen, r.files_read, r.files_skipped) for r in warehouse.read(INGEST_RUNS).where(F.col("run_id") == "run-2").collect()] == [(5, 0, 5)]
    assert warehouse.read(INGEST_FILES).where(F.col("run_id") == "run-2").isEmpty()
    assert warehouse.read(INGEST_FILES).where(F.col("status") == "skipped").isEmpty()


def test_the_same_run_id_twice_commits_nothing_new(spark, ingested, matrix) -> None:
    warehouse, _ = ingested
    root, _ = matrix
    versions = {spec.name: warehouse.version(spec) for spec in (EVENTS, TOPIC_CONFIGS, QUARANTINE, CAPTURES_RAW)}
    run_ingest(spark, warehouse, settings(), str(root), "run-1")
    assert {spec.name: warehouse.version(spec) for spec in (EVENTS, TOPIC_CONFIGS, QUARANTINE, CAPTURES_RAW)} == versions


def test_a_copied_file_is_listed_with_the_file_it_copies_and_not_read(spark, ingested, matrix, tmp_path) -> None:
    """A copy of a file read before, byte for byte, holds lines read already (as a renamed file
    would): it is hashed, found to be that file, and listed, not read."""
    warehouse, _ = ingested
    root, _ = matrix
    shutil.copy(root / "good.jsonl", tmp_path / "copy-of-good.jsonl")
    versions = {spec.name: warehouse.version(spec) for spec in WRITTEN + BOOKKEEPING}
    result = run_ingest(spark, warehouse, settings(), str(tmp_path), "run-copy")
    assert (result.files_read, result.files_resumed, result.files_renamed, result.lines_read) == (1, 1, 1, 0)
    for spec in (EVENTS, TOPIC_CONFIGS, QUARANTINE, CAPTURE_BODIES, CAPTURES_RAW):
        assert_as_at(warehouse, spec, versions[spec.name])
    size = (root / "good.jsonl").stat().st_size
    files = warehouse.read(INGEST_FILES).where(F.col("run_id") == "run-copy")
    assert [(r.source_file, r.status, r.lines, r.read_from, r.complete_bytes, r.resumed_file) for r in files.collect()] == [
        (str(tmp_path / "copy-of-good.jsonl"), "read", 0, size, size, str(root / "good.jsonl"))]


def test_a_copy_with_a_line_more_is_read_on_after_the_file_it_copies(spark, ingested, matrix, tmp_path) -> None:
    """A copy of a file read before, with a line more (its last line again): it starts with the part
    read of that file, which is shorter than HEAD_BYTES (found by its first bytes' fingerprint at a
    shorter length), so only the line after it is read, a duplicate."""
    warehouse, _ = ingested
    root, _ = matrix
    original = (root / "good.jsonl").read_bytes()
    last = original[:-1].rsplit(b"\n", 1)[-1]
    (tmp_path / "copy-of-good.jsonl").write_bytes(original + last + b"\n")
    assert len(original) < HEAD_BYTES
    versions = {spec.name: warehouse.version(spec) for spec in WRITTEN + BOOKKEEPING}
    result = run_ingest(spark, warehouse, settings(), str(tmp_path), "run-copy-2")
    assert (result.lines_read, result.duplicates, result.accepted) == (1, 1, 0)
    assert (result.files_read, result.files_resumed, result.files_renamed) == (1, 1, 1)
    for spec in (EVENTS, TOPIC_CONFIGS, QUARANTINE, CAPTURE_BODIES):
        assert_as_at(warehouse, spec, versions[spec.name])
    for spec in (CAPTURES_RAW, INGEST_FILES) + BOOKKEEPING:  # unchanged but for run-copy's own rows
        assert_as_at(warehouse, spec, versions[spec.name], warehouse.read(spec).where(F.col("run_id") != "run-copy-2"))
    # bronze keeps the line read, numbered on from the part
    raw = warehouse.read(CAPTURES_RAW).where(F.col("run_id") == "run-copy-2")
    got = raw.select(basename_col().alias("file"), "line_no", "line", "line_bytes", "raw_bytes", "read_error", "body_ref")
    want = [("copy-of-good.jsonl", len(good_records()) + 1, last.decode("utf-8"), len(last), None, None, None)]
    assert_df_equality(got, spark.createDataFrame(want, got.schema), ignore_nullable=True)
    files = warehouse.read(INGEST_FILES).where(F.col("run_id") == "run-copy-2")
    assert [(r.source_file, r.size_bytes, r.status, r.lines, r.read_from) for r in files.collect()] == [
        (str(tmp_path / "copy-of-good.jsonl"), len(original) + len(last) + 1, "read", 1, len(original))]
    # read on after good.jsonl's part, named as the path that read it last (a copy of it, when the test
    # of a copy ran before this one)
    read_as = warehouse.read(INGEST_FILES).where((F.col("complete_sha256") == hashlib.sha256(original).hexdigest()) & (F.col("run_id") != "run-copy-2"))
    paths = {r.source_file for r in read_as.collect()}
    assert str(root / "good.jsonl") in paths and files.first().resumed_file in paths


def test_mostly_junk_input_fails_the_run_and_writes_no_silver(spark, tmp_path) -> None:
    capture = tmp_path / "junk"
    capture.mkdir()
    (capture / "junk.jsonl").write_bytes(b"not json\n" * 8 + jsonl(good_records()[:2]))
    (capture / "a.jsonl").write_bytes(b"not json\n" + jsonl(good_records()[2:3]))  # first by path, not the worst
    warehouse = Warehouse(str(tmp_path / "wh"), spark, "delta-rs")
    with pytest.raises(IngestQualityError) as failure:
        run_ingest(spark, warehouse, settings(), str(capture), "run-junk")
    assert "quarantine_ratio" in failure.value.report.text()
    # the error names the lines: a failed run writes no quarantine rows
    first, junk = str(capture / "a.jsonl"), str(capture / "junk.jsonl")
    assert failure.value.quarantined == (QuarantineReason("invalid_json", 9, first, 1, failure.value.quarantined[0].detail),)
    assert failure.value.quarantined[0].detail.startswith("not valid JSON")
    assert f"  - invalid_json: 9 lines, the first {first}:1: not valid JSON" in failure.value.text()
    # and the files that hold them, the worst first
    assert failure.value.worst_files == (FileQuarantine(junk, 8, 10), FileQuarantine(first, 1, 2))
    assert failure.value.text().endswith(f"the files with the most of them:\n  - {junk}: 8 of its 10 lines\n  - {first}: 1 of its 2 lines")
    assert warehouse.read(EVENTS).count() == 0 and warehouse.read(QUARANTINE).count() == 0
    run = warehouse.read(INGEST_RUNS).collect()
    assert [(r.status, r.quality_passed, r.quarantined) for r in run] == [("failed_quality", False, 9)]
    failed = warehouse.read(QUALITY_RESULTS).where(~F.col("success")).select("expectation", "column").collect()
    assert [(r.expectation, r.column) for r in failed] == [("expect_column_values_to_be_between", "quarantine_ratio")]
    assert warehouse.read(INGEST_FILES).count() == 0  # the files are not marked as ingested: a fixed re-run reads them


def test_a_run_that_failed_its_quality_check_run_again_under_its_run_id_once_fixed_ends_as_one_run_of_the_fix(spark, tmp_path) -> None:
    """The Airflow way to repair a window whose ingest failed its quality check: fix the cause (here
    the quarantine ratio is raised) and clear the task, which runs again under the same run id. That
    attempt discards the failed one's run row and bronze lines, then writes every table anew: bronze,
    silver, the file marks and the run row end as one run with the fix would leave them; the failed
    attempt's quality results stay beside the new ones."""
    capture = tmp_path / "junk"
    capture.mkdir()
    (capture / "junk.jsonl").write_bytes(b"not json\n" * 8 + jsonl(good_records()[:2]))
    (capture / "a.jsonl").write_bytes(b"not json\n" + jsonl(good_records()[2:3]))
    fixed = dataclasses.replace(settings(), quality=dataclasses.replace(settings().quality, max_quarantine_ratio=1.0))
    warehouse = Warehouse(str(tmp_path / "wh"), spark, "delta-rs")
    with pytest.raises(IngestQualityError):
        run_ingest(spark, warehouse, settings(), str(capture), "ingest-01")

    again = run_ingest(spark, warehouse, fixed, str(capture), "ingest-01")

    once = Warehouse(str(tmp_path / "once"), spark, "delta-rs")
    run_ingest(spark, once, fixed, str(capture), "ingest-01")
    assert (again.status, again.replaced_failed, again.discarded) == ("succeeded", True, ())
    assert "run id ingest-01 had failed its data-quality check" in again.summary()
    for spec in (CAPTURES_RAW, EVENTS, QUARANTINE, TOPIC_CONFIGS, INGEST_FILES, INGEST_RUNS):  # run ids and the run's times aside
        got, want = (plain(w.read(spec)).drop("first_run_id", "started_ms", "finished_ms") for w in (warehouse, once))
        assert_df_equality(got, want, ignore_row_order=True, ignore_nullable=True)
    assert [r.run_id for r in warehouse.read(INGEST_RUNS).collect()] == ["ingest-01"]
    checks = lambda w: Counter((r.expectation, r.column, r.success) for r in w.read(QUALITY_RESULTS).collect())  # noqa: E731
    ratio = ("expect_column_values_to_be_between", "quarantine_ratio")
    failed_attempt = checks(once) - Counter({(*ratio, True): 1}) + Counter({(*ratio, False): 1})  # the same checks, one failing
    assert checks(warehouse) == checks(once) + failed_attempt
    # finished now: the same run id again changes nothing
    before = {spec.name: warehouse.version(spec) for spec in ALL_TABLES}
    assert not run_ingest(spark, warehouse, fixed, str(capture), "ingest-01").replaced_failed
    assert {spec.name: warehouse.version(spec) for spec in ALL_TABLES} == before


def test_worst_files_are_the_most_quarantined_first_ties_by_path_and_at_most_three() -> None:
    quarantined = {"/c": 5, "/a": 5, "/b": 7, "/d": 1, "/e": 0}
    lines = {"/a": 10, "/b": 7, "/c": 50, "/d": 1, "/e": 3}
    assert worst_files(quarantined, lines) == (FileQuarantine("/b", 7, 7), FileQuarantine("/a", 5, 10), FileQuarantine("/c", 5, 50))
    assert worst_files({"/e": 0}, lines) == ()


def test_duplicate_ids_are_the_repeated_and_the_already_stored_ones(spark) -> None:
    events = spark.createDataFrame([("a", 1), ("b", 2), ("b", 3), ("c", 4)], "record_id string, line_no long")
    existing = spark.createDataFrame([("c",), ("d",)], "record_id string")
    got = duplicate_ids(events, existing)
    assert_df_equality(got, spark.createDataFrame([("b",), ("c",)], "record_id string"), ignore_row_order=True, ignore_nullable=True)
    assert duplicate_ids(events.where("record_id = 'a'"), existing).isEmpty()
