"""Spark adapters of the ingest: a thin ``mapInArrow`` shell around the pure reader and parser (one
pass over each file), and DataFrame → DataFrame steps (split, deduplicate). No I/O here beyond what
a task reads from the capture files it is given; no ``collect()`` of event data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from nsreplay.storage.arrow_types import to_arrow_schema
from pipelines.ingest.bronze_form import split_line
from pipelines.ingest.capture_files import open_capture
from pipelines.ingest.capture_reader import CompletePart, RawLine, ReadOutcome, decoded, read_capture_raw
from pipelines.ingest.records import Accepted, DecodedBody, LineParser, ParserLimits, Rejected, worker_memory
from pipelines.quality.rules import RowRule, first_broken_rule, register_body_problem
from pipelines.worker import gc_paused, steady_archive_imports
from schemas.bronze import CAPTURE_BODIES, CAPTURES_RAW
from schemas.silver import BODY, EVENT, EVENTS, QUARANTINE, READ_LINE, TOPIC_CONFIGS

BATCH_ROWS = 2048
BATCH_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class ReadOptions:
    max_line_bytes: int
    keep_bytes: int


@dataclass(frozen=True)
class PartReadBefore:
    """The complete part of ``source_file`` that an earlier run read; ``inflated``: a plain file's
    part, which the file it is given for, a gzip file, may continue in its inflated text (a log
    compressed as it rolls over)."""

    source_file: str
    part: CompletePart
    inflated: bool = False


@dataclass(frozen=True)
class FileToRead:
    """A capture file an ingest reads, and the complete parts read before that it may continue (its
    own, or a file's it was renamed from): the read resumes after the largest one it still starts
    with (``capture_reader.read_capture_raw``)."""

    path: str
    resume: tuple[PartReadBefore, ...] = ()


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
        "static_mappings": body.static_mappings,
        "topic_keys": None if body.topic_keys is None else list(body.topic_keys),
        "mapping_error": body.mapping_error,
    }


#: A UTF-8 byte order mark. Some tools write one at the start of a file; RFC 8259 lets a parser
#: ignore it, and the first line of a file is parsed without it (bronze keeps the line as read).
UTF8_BOM = b"\xef\xbb\xbf"


def read_line_row(parser: LineParser, source_file: str, line: RawLine, options: ParseOptions, stored: set[str]) -> dict[str, Any]:
    """The READ_LINE row of one raw line: its bronze form and its parse (pure; used by the Spark
    adapter and by tests). ``stored`` holds the body refs whose text this task has emitted already;
    the first line split on a body carries its text (``body_text``) and adds its ref. A register body
    new to the task (``new_body``, for ``silver.topic_configs``) comes with the first *accepted* line
    that carries it. A byte order mark at the start of a file's first line is not part of its record
    (:data:`UTF8_BOM`)."""
    row: dict[str, Any] = {"source_file": source_file, "line_no": line.line_no, "line_bytes": line.line_bytes, "read_error": line.read_error}
    if line.damaged_from is not None:
        row["damaged_from"] = line.damaged_from
    verdict: Accepted | Rejected | None = None
    text: str | None = None
    if line.read_error is None:
        skip = len(UTF8_BOM) if line.line_no == 1 and line.data.startswith(UTF8_BOM) else 0
        parsed = parser.parse_bytes(line.data[skip:] if skip else line.data)
        verdict = parsed.verdict
        if parsed.stored is not None:
            ref = parsed.stored.ref
            row["line"] = split_line(line.data[: skip + parsed.prefix_bytes].decode("utf-8"))
            row["body_ref"] = ref
            if ref not in stored:
                row["body_text"] = parsed.stored.text.decode("utf-8")
                stored.add(ref)
    if "line" not in row:
        captured = decoded(line)
        text = row["line"] = captured.text
        row["raw_bytes"] = captured.raw_bytes
    if isinstance(verdict, Accepted):
        row.update(verdict.event)
        broken = first_broken_rule(options.rules, verdict.event)
        if broken is None:
            if verdict.new_body is not None:
                row["new_body"] = _body_row(verdict.new_body)
            row["status"] = "accepted"
            return row
        if verdict.new_body is not None:  # stored only with an event that uses it: the next such line brings it
            parser.report_again(verdict.new_body.body_id)
        reason, detail = f"quality:{broken}", f"breaks the data-quality rule {broken}"
        namesrv, ts = verdict.event.get("namesrv"), verdict.event.get("ts")
    elif verdict is None:
        reason, detail, namesrv, ts = line.read_error, _read_error_detail(line), None, None
        if line.read_error == "not_gzipped":  # text that may be records appended to the file: say whether it is one
            detail += f"; as read it is {_as_read(parser, line, options)}"
    else:
        reason, detail, namesrv, ts = verdict.reason, verdict.detail, verdict.namesrv, verdict.ts
        if line.unterminated and reason in CUT_SHORT_REASONS:
            reason, detail = "incomplete_line", incomplete_line_detail(reason, detail)
    if text is None:
        text = line.data.decode("utf-8")  # a split line: its bytes are UTF-8
    row.update(status="quarantined", reason=reason, detail=detail, raw_text=text[: options.keep_bytes], namesrv=namesrv, ts=ts)
    for key in ("record_id", "body_id"):
        row.pop(key, None)
    return row


#: What a line cut short while it was being written can be quarantined for (JSON cut off, or a
#: UTF-8 sequence cut in its middle): the file's last line, without a newline, is then ``incomplete_line``.
CUT_SHORT_REASONS = frozenset({"invalid_json", "invalid_utf8"})


def incomplete_line_detail(reason: str, detail: str | None) -> str:
    """What the quarantine says of a file's last line that has no newline and does not parse."""
    return (
        f"the file's last line has no newline and does not parse ({reason}: {detail}): a writer may have been writing it "
        "when the file was read. Once the file has changed, the next ingest reads it again from this line (whole, if what "
        "came before it changed too), and takes the line if it is complete by then"
    )


def _as_read(parser: LineParser, line: RawLine, options: ParseOptions) -> str:
    """"a valid record", or the reason the line would be quarantined for, were it read as a line of
    its own; a register body it is first to carry stays new for the next line that brings it."""
    if len(line.data) < line.line_bytes:  # only its first bytes are kept
        return "line_too_long"
    verdict = parser.parse_bytes(line.data).verdict
    if not isinstance(verdict, Accepted):
        return verdict.reason
    if verdict.new_body is not None:
        parser.report_again(verdict.new_body.body_id)
    broken = first_broken_rule(options.rules, verdict.event)
    return "a valid record" if broken is None else f"quality:{broken}"


def _read_error_detail(line: RawLine) -> str:
    """What the quarantine says of a line the reader flagged."""
    if line.damaged_from is not None:
        suspect = f"line {line.line_no} is" if line.damaged_from == line.line_no else f"lines {line.damaged_from} to {line.line_no} are"
        return (
            "a gzip member that failed its integrity check, or a gap between members (bytes that start no member, such as "
            f"zeros a crash left), ends in this line, so {suspect} suspect (corrupt_gzip); the reading went on at the next "
            "gzip member found, if any"
        )
    if line.read_error == "not_gzipped":
        return (
            "this line holds bytes of a gzip file that no gzip member holds (after a member's end, where no member starts: "
            "text appended to a gzipped file, or junk), read as they are (not_gzipped)"
        )
    if line.read_error == "zero_bytes":
        return f"a run of {line.line_bytes} zero bytes, no part of any record (a hole, such as blocks a crash left zeroed): the line before it ends there"
    return f"the reader could not take this line whole ({line.read_error})"


def read_line_rows(parser: LineParser, source_file: str, lines: Iterable[RawLine], options: ParseOptions, stored: set[str]) -> Iterator[dict[str, Any]]:
    """The READ_LINE rows of a file's lines (:func:`read_line_row`), one parser for the file. A line
    that ends a damaged gzip member's range (``damaged_from``) gives the parser back every register
    body first reported by a line of that range: the ingest quarantines those lines
    (:func:`quarantine_damaged_members`), so the next accepted line of the file that carries such a
    body must bring it. (The bodies reported are few: one per distinct body of the file.)"""
    reported: list[tuple[int, str]] = []  # (line, body_id) of each body reported new so far
    for line in lines:
        row = read_line_row(parser, source_file, line, options, stored)
        body = row.get("new_body")
        if body is not None:
            reported.append((line.line_no, body["body_id"]))
        if line.damaged_from is not None and reported:
            for line_no, body_id in reported:
                if line_no >= line.damaged_from:
                    parser.report_again(body_id)
            reported = [(n, b) for n, b in reported if n < line.damaged_from]
        yield row


def file_reader(read: ReadOptions, parse: ParseOptions) -> Callable[[FileToRead], Iterator[pa.RecordBatch]]:
    """One task's reader: a capture file to read → its READ_LINE rows as record batches, the last of
    which says how the file was read (:func:`with_read_outcome`). Call it in the task (a Python
    worker): the parser it holds reuses the bodies the worker's earlier tasks decoded (same
    configuration only), though which bodies a task reports as new does not depend on them; a body
    text is emitted by the first line of the task split on it (``read_line_row``)."""
    steady_archive_imports()
    arrow_schema = to_arrow_schema(READ_LINE)
    body_options = dict(max_queue_nums=parse.max_queue_nums, max_perm=parse.max_perm)
    memory = worker_memory((parse.limits, parse.max_queue_nums, parse.max_perm))
    parser = LineParser(parse.limits, lambda body: register_body_problem(body, **body_options), memory)
    stored: set[str] = set()

    def batches_of(file: FileToRead) -> Iterator[pa.RecordBatch]:
        outcome = ReadOutcome()
        lines = read_capture_raw(file.path, open_capture, max_line_bytes=read.max_line_bytes, keep_bytes=read.keep_bytes,
                                 resume=[p.part for p in file.resume if not p.inflated],
                                 resume_inflated=[p.part for p in file.resume if p.inflated], outcome=outcome)
        rows = with_read_outcome(read_line_rows(parser, file.path, lines, parse, stored), outcome, {p.part: p.source_file for p in file.resume})
        with gc_paused():
            yield from _batches(rows, arrow_schema, lambda r: 256 + len(r["line"]) + len(r.get("body_text") or "") + len(r.get("raw_text") or ""))

    return batches_of


def with_read_outcome(rows: Iterator[dict[str, Any]], outcome: ReadOutcome, files_of: Mapping[CompletePart, str] | None = None) -> Iterator[dict[str, Any]]:
    """``rows`` (one file's READ_LINE rows), the last one given the READ_LINE columns that say how the
    file was read: ``outcome`` as it stands once the rows are exhausted, and the file whose part the
    read resumed after (``files_of`` names the parts the read was given). A file that yields no row
    (zero bytes) reports nothing."""
    held: dict[str, Any] | None = None
    for row in rows:
        if held is not None:
            yield held
        held = row
    if held is None:
        return
    held["read_from"] = outcome.read_from
    if outcome.resumed is not None:
        held["resumed_file"] = (files_of or {}).get(outcome.resumed)
    if outcome.complete is not None:
        part = outcome.complete
        held.update(complete_bytes=part.size, complete_lines=part.lines, complete_sha256=part.sha256, complete_head_sha256=part.head_sha256)
    yield held


#: The task input of :func:`read_capture_records`: a file, and the complete parts it may resume after.
FILES_TO_READ = "source_file string, resume array<struct<source_file: string, bytes: long, lines: long, sha256: string, head_sha256: string, inflated: boolean>>"


def read_capture_records(spark: SparkSession, files: list[FileToRead], read: ReadOptions, parse: ParseOptions) -> DataFrame:
    """Every line of the given capture files (after the part read before that a file continues, if
    any), read and parsed in one pass (READ_LINE rows), one task per file: what
    bronze keeps of each line and what silver gets from it."""

    def read_files(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        batches_of = file_reader(read, parse)
        for batch in batches:
            for row in batch.to_pylist():
                resume = tuple(PartReadBefore(r["source_file"], CompletePart(r["bytes"], r["lines"], r["sha256"], r["head_sha256"]), r["inflated"])
                               for r in row["resume"])
                yield from batches_of(FileToRead(row["source_file"], resume))

    rows = [(f.path, [(p.source_file, p.part.size, p.part.lines, p.part.sha256, p.part.head_sha256, p.inflated) for p in f.resume]) for f in files]
    tasks = spark.sparkContext.parallelize(rows, max(1, len(rows)))
    return spark.createDataFrame(tasks, FILES_TO_READ).mapInArrow(read_files, READ_LINE)


# --------------------------------------------------------------------------------------- splitting


#: The status of a line that a run read again and quarantined before (:func:`mark_quarantined_before`).
QUARANTINED_BEFORE = "quarantined_before"

#: What makes a quarantined line the same line read again: the file, its place in it, what it holds
#: (as kept) and why it was refused.
QUARANTINE_LINE_KEY = ("source_file", "line_no", "line_bytes", "reason", "raw_text", "raw_bytes")


def mark_quarantined_before(parsed: DataFrame, quarantine: DataFrame) -> DataFrame:
    """``parsed`` with its quarantined lines that ``quarantine`` (``silver.quarantine`` rows) holds
    already given the status :data:`QUARANTINED_BEFORE`: a file read again (it grew, or was written
    anew) yields its bad lines again, and each is kept once, as a record seen before counts once.
    Equal in every column of :data:`QUARANTINE_LINE_KEY` (nulls equal); anything else is unchanged."""
    seen = quarantine.select(*[F.col(c).alias(f"_seen_{c}") for c in QUARANTINE_LINE_KEY]).distinct()
    same = [F.col(c).eqNullSafe(F.col(f"_seen_{c}")) for c in QUARANTINE_LINE_KEY]
    candidates = parsed.withColumn("_quarantined", F.col("status") == "quarantined")
    joined = candidates.join(seen, [F.col("_quarantined"), *same], "left")
    status = F.when(F.col("_seen_source_file").isNotNull(), F.lit(QUARANTINED_BEFORE)).otherwise(F.col("status"))
    return joined.select(*[status.alias(f.name) if f.name == "status" else F.col(f.name) for f in parsed.schema.fields])


def quarantined_rows(parsed: DataFrame) -> DataFrame:
    """The rejected lines, in ``silver.quarantine`` shape."""
    return parsed.where(F.col("status") == "quarantined").select(*[F.col(f.name) for f in QUARANTINE.schema.fields])


def first_quarantined(parsed: DataFrame) -> DataFrame:
    """One row per quarantine reason of the rejected lines: ``reason`` and the first line (by file,
    then line number) given for it, as ``source_file``, ``line_no`` and ``detail``."""
    first = F.min(F.struct("source_file", "line_no", "detail")).alias("first")
    return (
        parsed.where(F.col("status") == "quarantined")
        .groupBy("reason")
        .agg(first)
        .select("reason", "first.source_file", "first.line_no", "first.detail")
    )


def damaged_members(parsed: DataFrame) -> DataFrame:
    """One row per range of lines that gzip members failing their integrity check may have garbled:
    ``source_file``, ``damaged_from`` (the first line such a member gave a byte to) and ``damaged_to``
    (the ``corrupt_gzip`` line the damage ends in: it holds the failed member's last bytes and the
    first ones of the next member found). A file has as many ranges as the reader resumed after damage
    (plus one when it ends in damage); they do not overlap."""
    return parsed.where(F.col("damaged_from").isNotNull()).select("source_file", "damaged_from", F.col("line_no").alias("damaged_to"))


def quarantine_damaged_members(parsed: DataFrame, damaged: DataFrame, bodies: DataFrame, keep_bytes: int) -> DataFrame:
    """``parsed`` with every line of a damaged gzip member quarantined as ``corrupt_gzip``.

    A member whose deflate data or CRC fails may have garbled any line it inflated to (deflate notices
    damage only some way after it, the CRC only at the member's end), and a garbled line can still be
    a valid record, with a ``ts`` months away. So lines ``damaged_from`` to ``damaged_to - 1`` of each
    range in ``damaged`` (:func:`damaged_members`; the last line is ``corrupt_gzip`` already) are
    quarantined whatever their own verdict: ``detail`` gives the range and that verdict, ``raw_text``
    the line as read (rebuilt whole from ``bodies``, ``body_ref`` → ``body_text``, when the line was
    split on its body), and the line yields no event and no register body. (A body a damaged line
    reported first is reported again by the next accepted line of its file that carries it: the
    reader gives it back to the file's parser at the end of the range, :func:`read_line_rows`.) Other
    lines, and the columns bronze takes, are unchanged. ``damaged`` is small (a row per range) and is
    broadcast; only the damaged lines meet ``bodies``, and only the bodies they refer to are kept
    (a broadcast semi-join), so the stored bodies of the whole history are scanned, not shuffled."""
    # renamed apart: ``damaged`` comes from ``parsed``, and a self-join cannot tell their columns apart
    marks = F.broadcast(damaged.select(F.col("source_file").alias("_file"), F.col("damaged_from").alias("_from"), F.col("damaged_to").alias("_to")))
    inside = (F.col("source_file") == F.col("_file")) & (F.col("line_no") >= F.col("_from")) & (F.col("line_no") < F.col("_to"))
    marked = parsed.join(marks, inside, "left")
    columns = parsed.columns
    kept = marked.where(F.col("_from").isNull()).select(*columns)
    damaged_lines = marked.where(F.col("_from").isNotNull())
    # only the bodies the damaged lines refer to, found without shuffling every stored body
    refs = F.broadcast(damaged_lines.where(F.col("body_ref").isNotNull()).select("body_ref").distinct())
    needed = bodies.select("body_ref", F.col("body_text").alias("_body_text")).join(refs, "body_ref", "left_semi")
    hit = damaged_lines.join(F.broadcast(needed), "body_ref", "left")
    as_read = F.when(F.col("status") == "accepted", F.lit("a valid record")).otherwise(F.col("reason"))
    detail = F.format_string(
        "a byte of this line comes from a gzip member that failed its integrity check (lines %d to %d of the file), "
        "so it may be garbled; as read it is %s",
        F.col("_from"), F.col("_to"), as_read,
    )
    text = F.when(F.col("body_ref").isNull(), F.col("line")).otherwise(_rebuilt_line("line", "_body_text"))
    raw_text = F.when(F.col("status") == "accepted", F.expr(f"substring(_text, 1, {int(keep_bytes)})")).otherwise(F.col("raw_text"))
    reworked = (
        hit.withColumn("_text", text)
        .withColumn("detail", detail)
        .withColumn("raw_text", raw_text)
        .withColumn("reason", F.lit("corrupt_gzip"))
        .withColumn("status", F.lit("quarantined"))
        .withColumn("record_id", F.lit(None).cast("string"))
        .withColumn("body_id", F.lit(None).cast("string"))
        .withColumn("new_body", F.lit(None).cast(parsed.schema["new_body"].dataType))
        .select(*columns)
    )
    return kept.unionByName(reworked)


#: Milliseconds in a UTC day (epoch time has no leap seconds).
DAY_MS = 86_400_000


def utc_day(ms: str) -> Column:
    """The UTC calendar day (``YYYY-MM-DD``) of the epoch milliseconds in column ``ms``, the same in
    every Spark session and on every machine: the day number is exact integer arithmetic (floored,
    so a negative ``ms`` is in the day before the epoch), and a DATE's text has no time zone.
    (``date_format(timestamp_millis(ms))`` formats in ``spark.sql.session.timeZone``: in a session
    set to -03:30, 2024-11-21T00:00:00Z fell on 2024-11-20.) For ``ms`` in the years 1-9999 (the
    ``ts_plausible`` rule keeps far fewer); null for a null ``ms``."""
    col = f"`{ms}`"
    return F.expr(f"CAST(date_from_unix_date(CAST(({col} - pmod({col}, {DAY_MS})) div {DAY_MS} AS INT)) AS STRING)")


def accepted_events(parsed: DataFrame) -> DataFrame:
    """The accepted records in ``silver.events`` shape (with ``event_date``, the UTC day of ``ts``:
    :func:`utc_day`), duplicates included."""
    return (
        parsed.where(F.col("status") == "accepted")
        .select(*[F.col(f.name) for f in EVENT.fields])
        .withColumn("event_date", utc_day("ts"))
    )


def first_of_each(df: DataFrame, key: str) -> DataFrame:
    """One row per ``key``: the one from the first file and line (deterministic)."""
    w = Window.partitionBy(key).orderBy(F.col("source_file"), F.col("line_no"))
    return df.withColumn("_rank", F.row_number().over(w)).where(F.col("_rank") == 1).drop("_rank")


def new_events(events: DataFrame, existing_ids: DataFrame) -> DataFrame:
    """Accepted events minus duplicates: within the batch and against ``existing_ids`` (record_id)."""
    unique = first_of_each(events, "record_id")
    return unique.join(existing_ids, on="record_id", how="left_anti").select(*EVENTS.schema.fieldNames())


def duplicate_ids(events: DataFrame, existing_ids: DataFrame) -> DataFrame:
    """The record_ids that make :func:`new_events` drop a row: repeated within the batch or already
    in ``existing_ids``. Only ids are shuffled, so finding out that there are none is cheap; then
    ``new_events(events, …)`` equals ``events`` in ``silver.events`` shape (:func:`as_events`)."""
    ids = events.select("record_id")
    repeated = ids.groupBy("record_id").count().where(F.col("count") > 1).select("record_id")
    return repeated.unionByName(ids.join(existing_ids, on="record_id", how="left_semi"))


def as_events(events: DataFrame) -> DataFrame:
    """Accepted events (no duplicate among them) in ``silver.events`` shape."""
    return events.select(*EVENTS.schema.fieldNames())


def new_bodies(parsed: DataFrame, existing_ids: DataFrame, run_id: str) -> DataFrame:
    """Register bodies decoded in this batch and not yet in ``silver.topic_configs``."""
    bodies = parsed.where(F.col("new_body").isNotNull()).select("source_file", "line_no", "new_body.*")
    unique = first_of_each(bodies, "body_id").select(*BODY.fieldNames())
    return unique.join(existing_ids, on="body_id", how="left_anti").withColumn("first_run_id", F.lit(run_id)).select(*TOPIC_CONFIGS.schema.fieldNames())


def bronze_lines(read: DataFrame) -> DataFrame:
    """The read lines in ``bronze.captures_raw`` shape (``read`` carries run_id and ingest_date)."""
    return read.select(*CAPTURES_RAW.schema.fieldNames())


def adopted_bodies(parsed: DataFrame, stored: DataFrame, runs: list[str]) -> DataFrame:
    """The ``body_id`` of each register body the batch decoded that ``stored`` (``silver.topic_configs``)
    holds from one of ``runs``: runs that stopped before they finished (this run's own earlier attempt
    among them), whose lines the batch reads again. Stored once by content, such a body is new to
    silver with this run, though :func:`new_bodies` leaves it out."""
    ids = parsed.where(F.col("new_body").isNotNull()).select(F.col("new_body.body_id").alias("body_id"))
    theirs = stored.where(F.col("first_run_id").isin(runs)).select("body_id")
    return ids.join(theirs, "body_id", "left_semi").distinct()


def new_body_texts(read: DataFrame, existing_refs: DataFrame, run_id: str) -> DataFrame:
    """Body texts the read lines were split on and ``bronze.capture_bodies`` does not hold yet."""
    texts = read.where(F.col("body_text").isNotNull()).select("source_file", "line_no", "body_ref", "body_text")
    unique = first_of_each(texts, "body_ref")
    return (
        unique.join(existing_refs, on="body_ref", how="left_anti")
        .withColumn("body_text_bytes", F.octet_length("body_text").cast("long"))
        .withColumn("first_run_id", F.lit(run_id))
        .select(*CAPTURE_BODIES.schema.fieldNames())
    )


def whole_lines(lines: DataFrame, bodies: DataFrame) -> DataFrame:
    """``bronze.captures_raw`` rows with ``line`` rebuilt whole from ``bronze.capture_bodies`` (the SQL
    form of :func:`pipelines.ingest.bronze_form.exact_line`); ``body_ref`` is kept."""
    texts = bodies.select("body_ref", F.col("body_text").alias("_body_text"))
    return (
        lines.join(texts, on="body_ref", how="left")
        .withColumn("line", F.when(F.col("body_ref").isNull(), F.col("line")).otherwise(_rebuilt_line("line", "_body_text")))
        .select(*CAPTURES_RAW.schema.fieldNames())
    )


def _rebuilt_line(line: str, body_text: str) -> Column:
    """A split line (column ``line``, bronze form) made whole again with its body's text (``body_text``)."""
    mark = F.when(F.col(body_text).startswith('"'), F.lit(',"body_b64":')).otherwise(F.lit(',"body":'))
    return F.concat(F.expr(f"substring({line}, 1, char_length({line}) - 1)"), mark, F.col(body_text), F.lit("}"))
