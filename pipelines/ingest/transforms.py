"""Spark adapters of the ingest: thin ``mapInArrow`` shells around the pure reader and parser, and
DataFrame → DataFrame steps (split, deduplicate). No I/O here beyond what a task reads from the
capture files it is given; no ``collect()`` of event data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from nsreplay.storage.arrow_types import to_arrow_schema
from pipelines.ingest.capture_files import open_capture
from pipelines.ingest.capture_reader import read_capture_file
from pipelines.ingest.records import Accepted, DecodedBody, LineParser, ParserLimits
from pipelines.quality.rules import RowRule, first_broken_rule, register_body_problem
from schemas.bronze import CAPTURE_LINE
from schemas.silver import BODY, EVENT, EVENTS, PARSED_LINE, QUARANTINE, TOPIC_CONFIGS

BATCH_ROWS = 2048
BATCH_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class ReadOptions:
    max_line_bytes: int
    keep_bytes: int


@dataclass(frozen=True)
class ParseOptions:
    limits: ParserLimits
    rules: tuple[RowRule, ...]
    max_queue_nums: int
    max_perm: int
    keep_bytes: int


def _batches(rows: Iterator[dict[str, Any]], schema: pa.Schema, size_of: Callable[[dict[str, Any]], int]) -> Iterator[pa.RecordBatch]:
    """Group row dicts into record batches of at most BATCH_ROWS rows / about BATCH_BYTES bytes."""
    pending: list[dict[str, Any]] = []
    pending_bytes = 0
    for row in rows:
        pending.append(row)
        pending_bytes += size_of(row)
        if len(pending) >= BATCH_ROWS or pending_bytes >= BATCH_BYTES:
            yield pa.RecordBatch.from_pylist(pending, schema=schema)
            pending, pending_bytes = [], 0
    if pending:
        yield pa.RecordBatch.from_pylist(pending, schema=schema)


# ------------------------------------------------------------------------------------------ reading


def read_capture_lines(spark: SparkSession, paths: list[str], options: ReadOptions) -> DataFrame:
    """Every line of the given capture files (schema ``schemas.bronze.CAPTURE_LINE``), one task per file."""
    arrow_schema = to_arrow_schema(CAPTURE_LINE)

    def read_files(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for path in batch.column(0).to_pylist():
                lines = read_capture_file(path, open_capture, max_line_bytes=options.max_line_bytes, keep_bytes=options.keep_bytes)
                rows = (
                    {
                        "source_file": path,
                        "line_no": line.line_no,
                        "line": line.text,
                        "line_bytes": line.line_bytes,
                        "raw_bytes": line.raw_bytes,
                        "read_error": line.read_error,
                    }
                    for line in lines
                )
                yield from _batches(rows, arrow_schema, lambda r: len(r["line"]))

    files = spark.sparkContext.parallelize([(p,) for p in paths], max(1, len(paths)))
    return spark.createDataFrame(files, "source_file string").mapInArrow(read_files, CAPTURE_LINE)


# ------------------------------------------------------------------------------------------ parsing


def _body_row(decoded: DecodedBody) -> dict[str, Any]:
    body = decoded.body
    dv = body.data_version
    return {
        "body_id": decoded.body_id,
        "encoding": decoded.encoding,
        "has_data_version": dv is not None,
        "dv_state_version": dv.state_version if dv else None,
        "dv_timestamp": dv.timestamp if dv else None,
        "dv_counter": dv.counter if dv else None,
        "topic_configs": [
            {
                "topic_name": c.topic_name,
                "read_queue_nums": c.read_queue_nums,
                "write_queue_nums": c.write_queue_nums,
                "perm": c.perm,
                "topic_sys_flag": c.topic_sys_flag,
                "order": c.order,
                "topic_filter_type": c.topic_filter_type,
            }
            for c in body.topic_configs
        ],
        "topic_count": len(body.topic_configs),
        "filter_server_list": list(body.filter_server_list),
        "legacy_wrapper": body.legacy_wrapper,
        "body_bytes": decoded.body_bytes,
    }


def parse_line_row(parser: LineParser, line: dict[str, Any], options: ParseOptions) -> dict[str, Any]:
    """The PARSED_LINE row for one bronze line (pure; used by the Spark adapter and by tests)."""
    row: dict[str, Any] = {"source_file": line["source_file"], "line_no": line["line_no"], "run_id": line.get("run_id"), "line_bytes": line["line_bytes"]}
    read_error = line.get("read_error")
    verdict = None if read_error else parser.parse(line["line"], exact=line.get("raw_bytes") is None)
    if isinstance(verdict, Accepted):
        row.update(verdict.event)
        if verdict.new_body is not None:
            row["new_body"] = _body_row(verdict.new_body)
        broken = first_broken_rule(options.rules, verdict.event)
        if broken is None:
            row["status"] = "accepted"
            return row
        reason, detail = f"quality:{broken}", f"breaks the data-quality rule {broken}"
        namesrv, ts = verdict.event.get("namesrv"), verdict.event.get("ts")
    elif verdict is None:
        reason, detail, namesrv, ts = read_error, f"the reader could not take this line whole ({read_error})", None, None
    else:
        reason, detail, namesrv, ts = verdict.reason, verdict.detail, verdict.namesrv, verdict.ts
    row.update(
        status="quarantined",
        reason=reason,
        detail=detail,
        raw_text=line["line"][: options.keep_bytes],
        raw_bytes=line.get("raw_bytes"),
        namesrv=namesrv,
        ts=ts,
    )
    for key in ("record_id", "body_id"):
        row.pop(key, None)
    return row


def parse_capture_lines(lines: DataFrame, options: ParseOptions) -> DataFrame:
    """Parse bronze lines (columns of CAPTURE_LINE plus run_id) into PARSED_LINE rows."""
    arrow_schema = to_arrow_schema(PARSED_LINE)
    columns = ["run_id", "source_file", "line_no", "line", "line_bytes", "raw_bytes", "read_error"]

    def parse_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        body_options = dict(max_queue_nums=options.max_queue_nums, max_perm=options.max_perm)
        parser = LineParser(options.limits, lambda body: register_body_problem(body, **body_options))

        def rows() -> Iterator[dict[str, Any]]:
            for batch in batches:
                for line in batch.to_pylist():
                    yield parse_line_row(parser, line, options)

        yield from _batches(rows(), arrow_schema, lambda r: 256 + len(r.get("raw_text") or ""))

    return lines.select(*columns).mapInArrow(parse_batches, PARSED_LINE)


# --------------------------------------------------------------------------------------- splitting


def quarantined_rows(parsed: DataFrame) -> DataFrame:
    """The rejected lines, in ``silver.quarantine`` shape."""
    return parsed.where(F.col("status") == "quarantined").select(*[F.col(f.name) for f in QUARANTINE.schema.fields])


def accepted_events(parsed: DataFrame) -> DataFrame:
    """The accepted records in ``silver.events`` shape (with ``event_date``), duplicates included."""
    return (
        parsed.where(F.col("status") == "accepted")
        .select(*[F.col(f.name) for f in EVENT.fields])
        .withColumn("event_date", F.date_format(F.timestamp_millis("ts"), "yyyy-MM-dd"))
    )


def first_of_each(df: DataFrame, key: str) -> DataFrame:
    """One row per ``key``: the one from the first file and line (deterministic)."""
    w = Window.partitionBy(key).orderBy(F.col("source_file"), F.col("line_no"))
    return df.withColumn("_rank", F.row_number().over(w)).where(F.col("_rank") == 1).drop("_rank")


def new_events(events: DataFrame, existing_ids: DataFrame) -> DataFrame:
    """Accepted events minus duplicates: within the batch and against ``existing_ids`` (record_id)."""
    unique = first_of_each(events, "record_id")
    return unique.join(existing_ids, on="record_id", how="left_anti").select(*EVENTS.schema.fieldNames())


def new_bodies(parsed: DataFrame, existing_ids: DataFrame, run_id: str) -> DataFrame:
    """Register bodies decoded in this batch and not yet in ``silver.topic_configs``."""
    bodies = parsed.where(F.col("new_body").isNotNull()).select("source_file", "line_no", "new_body.*")
    unique = first_of_each(bodies, "body_id").select(*BODY.fieldNames())
    return unique.join(existing_ids, on="body_id", how="left_anti").withColumn("first_run_id", F.lit(run_id)).select(*TOPIC_CONFIGS.schema.fieldNames())
