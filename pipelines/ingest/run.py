"""One ingest run: capture files → bronze → silver, with quarantine, dedup and data quality.

Order of writes (each through the storage module, each an idempotent commit keyed by the run id):

1. Each new file is read and parsed in one pass (one task per file); row-level failures become
   quarantine rows. ``bronze.captures_raw`` gets every line as read, in bronze's form
   (``pipelines.ingest.bronze_form``), and ``bronze.capture_bodies`` the body texts it refers to
   that it did not hold yet. Nothing else passes the line text again, except when a gzip member
   failed its integrity check: then every line it gave a byte to, up to the line its damage ends in
   (flagged by the reader), is quarantined as ``corrupt_gzip`` (``quarantine_damaged_members``), and
   the lines are counted again.
2. Great Expectations validates what silver would receive. On failure nothing is written to silver
   except the quality results and the run row (status ``failed_quality``), and
   :class:`IngestQualityError` is raised with a readable report, which names each reason lines
   would have been quarantined for, with its count and its first line.
3. ``silver.events`` (new records only), ``silver.topic_configs`` (new bodies only),
   ``silver.quarantine``, then ``bronze.ingest_files`` (which marks the files read as ingested) and
   the ``silver.ingest_runs`` row with reconciled counts.

Before it reads, a run deletes what runs stopped halfway (killed) left without a run row, and reads
their files again; run again under the run id of an attempt that failed its data-quality check, it
first discards that attempt's run row and bronze lines (``pipelines.ingest.abandoned``).

A file already ingested by a successful run (same path, size and modification time; the path as
listed, ``s3a://`` for S3, or under ``s3://`` or ``s3n://`` as an earlier version recorded it:
``nsreplay.storage.filesystem.object_uri_aliases``) is skipped, so
re-ingesting the same files adds nothing; skipped files are counted in the run row
(``files_skipped``), not listed in ``bronze.ingest_files``: a schedule that reads the same directory
every run would otherwise add a row for every old file at every run. What a capture directory holds
that is not a capture file by name (``manifest.json``, ``README.md``; :func:`list_captures`) is not
read, so neither quarantined nor counted in the quarantine ratio: the first run to find it (under
its size and modification time) lists it in ``bronze.ingest_files`` (status ``not_capture``, no
lines, the reason as detail), and every run's summary names it. A record seen before (same
``record_id``) counts as a duplicate. A file ingested before under another size or modification
time (a file still being written, or written anew) is read again. When it is larger than the
complete part the latest run to read it recorded (``bronze.ingest_files.complete_bytes``: a plain
file's bytes up to its last newline) and still starts with those bytes (same SHA-256), only the
lines after them are read, numbered on (``IngestResult.files_resumed``,
``bronze.ingest_files.read_from``); else it is read whole
(``pipelines.ingest.capture_reader``). A new file may likewise continue another file's part: a log
renamed when it rolls over is read after what was read under its old name
(``bronze.ingest_files.resumed_file``, ``IngestResult.files_renamed``;
``pipelines.ingest.parts_read_before``). Either way its records read before count as duplicates, and
so do its lines that ``silver.quarantine`` holds already (same file, or the file it was renamed
from; line number, text and reason; ``IngestResult.quarantined_before``): the last line of the
earlier read, if it had no newline then, is read again, and a bad line is quarantined once however
often its file is read. Counts always reconcile: ``lines_read = accepted + duplicates + quarantined``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from nsreplay.config import Settings
from nsreplay.runtime import local_frame
from nsreplay.storage import ColumnRange, CommitInfo, Warehouse
from nsreplay.storage.filesystem import object_uri_aliases
from pipelines.ingest.abandoned import commit_job, discard_abandoned, discard_failed_attempt
from pipelines.ingest.capture_files import (
    CAPTURE_SUFFIXES,
    DOCUMENT_SUFFIXES,
    CaptureFile,
    CaptureListing,
    list_captures,
    open_capture,
    why_not_read,
)
from pipelines.ingest.capture_reader import CompletePart
from pipelines.ingest.parts_read_before import Repeated, parts_read_before, same_bytes
from pipelines.ingest.records import ParserLimits
from pipelines.replay.stale import StaleWindow, late_data_note, mark_stale, new_records_metadata
from pipelines.ingest.transforms import (
    QUARANTINED_BEFORE,
    FileToRead,
    ParseOptions,
    ReadOptions,
    accepted_events,
    adopted_bodies,
    as_events,
    bronze_lines,
    damaged_members,
    duplicate_ids,
    first_quarantined,
    mark_quarantined_before,
    new_bodies,
    new_body_texts,
    new_events,
    quarantine_damaged_members,
    quarantined_rows,
    read_capture_records,
)
from pipelines.quality.rules import event_rules
from pipelines.quality.suites import QualityReport, RunMetrics, validate_ingest
from schemas import ALL_TABLES
from schemas.bronze import CAPTURE_BODIES, CAPTURES_RAW, INGEST_FILES
from schemas.silver import EVENTS, INGEST_RUNS, QUALITY_RESULTS, QUARANTINE, READ_LINE, TOPIC_CONFIGS

JOB = "ingest"


@dataclass(frozen=True)
class QuarantineReason:
    """How many lines of a run were quarantined for one reason, and the first of them (file, line)."""

    reason: str
    count: int
    source_file: str
    line_no: int
    detail: str | None


@dataclass(frozen=True)
class FileQuarantine:
    """How many of one file's lines a run quarantined, of how many it read."""

    source_file: str
    quarantined: int
    lines: int


#: How many files an ingest quality failure names, those with the most quarantined lines first.
WORST_FILES_SHOWN = 3


class IngestQualityError(RuntimeError):
    """A table-level data-quality check failed; silver was not written. ``quarantined`` says which lines
    the run would have quarantined (a failed run writes no ``silver.quarantine`` rows; bronze keeps
    every line it read), and ``worst_files`` the files with the most of them, so that the error itself
    says what is wrong with the input, and where (a stray non-capture file, say)."""

    def __init__(
        self, report: QualityReport, quarantined: tuple[QuarantineReason, ...] = (), worst_files: tuple[FileQuarantine, ...] = ()
    ) -> None:
        super().__init__(f"{report.text().splitlines()[0]}; silver was not written (see silver.quality_results)")
        self.report = report
        self.quarantined = quarantined
        self.worst_files = worst_files

    def text(self) -> str:
        """The quality report, then each quarantine reason with its count and its first line, then the
        files with the most quarantined lines."""
        lines = [self.report.text()]
        if self.quarantined:
            lines.append("lines that would have been quarantined (none was written; bronze.captures_raw keeps them):")
            for q in sorted(self.quarantined, key=lambda q: (-q.count, q.reason)):
                detail = f": {q.detail}" if q.detail else ""
                lines.append(f"  - {q.reason}: {q.count} lines, the first {q.source_file}:{q.line_no}{detail}")
        if self.worst_files:
            lines.append("the files with the most of them:")
            lines += [f"  - {f.source_file}: {f.quarantined} of its {f.lines} lines" for f in self.worst_files]
        return "\n".join(lines)


def worst_files(quarantined: dict[str, int], lines: dict[str, int], shown: int = WORST_FILES_SHOWN) -> tuple[FileQuarantine, ...]:
    """The ``shown`` files with the most quarantined lines (ties by path), with their line counts."""
    ranked = sorted((n for n in quarantined.items() if n[1]), key=lambda n: (-n[1], n[0]))[:shown]
    return tuple(FileQuarantine(path, count, lines.get(path, count)) for path, count in ranked)


@dataclass(frozen=True)
class IngestResult:
    run_id: str
    files_seen: int
    files_read: int
    files_skipped: int
    lines_read: int
    accepted: int
    duplicates: int  # records seen before, and lines quarantined before (``quarantined_before`` of them)
    quarantined: int
    quarantined_by_reason: dict[str, int]
    new_bodies: int
    quality: QualityReport | None
    status: str
    seconds: float = 0.0
    window: tuple[int | None, int | None] = field(default=(None, None))
    stages: dict[str, float] = field(default_factory=dict)
    stale: tuple[StaleWindow, ...] = ()
    discarded: tuple[str, ...] = ()  # abandoned runs whose rows this run deleted first (pipelines.ingest.abandoned)
    warehouse: str = ""  # the warehouse root, for the commands the messages suggest
    ignored: tuple[str, ...] = ()  # what the capture directory holds that was not read (CaptureListing.ignored)
    quarantined_before: int = 0  # lines of files read again that silver.quarantine holds already (in duplicates)
    files_resumed: int = 0  # files read after the complete part an earlier run read (in files_read)
    files_renamed: int = 0  # of those, files that continue the part read of another file (renamed since)
    replaced_failed: bool = False  # this run id's earlier attempt had failed its data-quality check: discarded first

    def late_data(self) -> str:
        """A warning naming the published windows this run's records made stale ('' if none)."""
        return late_data_note(self.stale, self.warehouse)

    def summary(self) -> str:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(self.quarantined_by_reason.items())) or "none"
        return (
            f"ingest {self.run_id}: {self.status}; files {self.files_read} read"
            + (f" ({self.files_resumed} of them after the part read before"
               + (f", {self.files_renamed} of those under a new name" if self.files_renamed else "") + ")" if self.files_resumed else "")
            + f", {self.files_skipped} already ingested; "
            f"lines {self.lines_read} = accepted {self.accepted} + duplicates {self.duplicates}"
            + (f" ({self.quarantined_before} of them lines quarantined before)" if self.quarantined_before else "")
            + f" + quarantined {self.quarantined} "
            f"(reasons: {reasons}); new register bodies {self.new_bodies}; {self.seconds:.1f} s"
        ) + (f"\n{self.replaced_note()}" if self.replaced_failed else "") + (f"\n{self.discard_note()}" if self.discarded else "") + (
            f"\n{self.late_data()}" if self.stale else "") + (
            f"\n{self.ignored_note()}" if self.ignored else ""
        )

    def ignored_note(self) -> str:
        """What the capture directory holds that was not read, a few of them named ('' if nothing)."""
        if not self.ignored:
            return ""
        shown = ", ".join(self.ignored[:3]) + (f" and {len(self.ignored) - 3} more" if len(self.ignored) > 3 else "")
        return (
            f"not read: {len(self.ignored)} entries of the capture directory are not capture files by name "
            f"(a name ending in {', '.join(CAPTURE_SUFFIXES)}, any case, but not {', '.join(DOCUMENT_SUFFIXES)}; or a rotated log's) "
            f"or are links to folders (bronze.ingest_files status not_capture): {shown}"
        )

    def replaced_note(self) -> str:
        """What this run discarded of its run id's attempt that failed its data-quality check ('' if none)."""
        if not self.replaced_failed:
            return ""
        return (
            f"run id {self.run_id} had failed its data-quality check: that attempt's run row and bronze lines were discarded "
            "and this run replaces them (its quality results stay in silver.quality_results)"
        )

    def discard_note(self) -> str:
        """What this run deleted before it read ('' if nothing)."""
        if not self.discarded:
            return ""
        return (
            f"discarded the rows of {len(self.discarded)} ingest run(s) that stopped before they finished "
            f"({', '.join(self.discarded)}); their files count as not read: those among this run's captures were "
            "read by it, any other is read by the next ingest that is given it"
        )


class _Stopwatch:
    """Seconds spent per named stage (reported by the run and the benchmark)."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round(self.laps.get(name, 0.0) + now - self._last, 2)
        self._last = now


@dataclass(frozen=True)
class _HowRead:
    """How a run read a file: from byte ``read_from`` (0: whole), its ``complete`` part as read, and
    the file whose part read before it continued (``resumed_file``: itself grown, or the file it was
    renamed from; None for a whole read)."""

    read_from: int
    complete: CompletePart | None
    resumed_file: str | None = None

    def renamed_from(self, path: str) -> str | None:
        """The file whose part ``path``, the file read, continued when that is another file (it was
        renamed or compressed since); None otherwise."""
        return self.resumed_file if self.resumed_file not in (None, path) else None

    def columns(self) -> tuple[int | None, int | None, int | None, str | None, str | None, str | None]:
        """``bronze.ingest_files``' read_from, complete_bytes, complete_lines, complete_sha256,
        complete_head_sha256 and resumed_file."""
        part = self.complete
        return (self.read_from, *((part.size, part.lines, part.sha256, part.head_sha256) if part else (None, None, None, None)), self.resumed_file)


#: The ``bronze.ingest_files`` columns of :meth:`_HowRead.columns` for a file not read.
_NOT_READ = (None, None, None, None, None, None)


@dataclass(frozen=True)
class _LineCounts:
    """A run's lines counted by status, by quarantine reason and by file; the files that could not be
    read; how each file was read (absent for a file that yielded no line)."""

    by_status: dict[str, int]
    by_reason: dict[str, int]
    per_file: dict[str, int]
    unreadable: frozenset[str]
    quarantined_per_file: dict[str, int] = field(default_factory=dict)
    reads: dict[str, _HowRead] = field(default_factory=dict)

    @staticmethod
    def of(parsed: DataFrame) -> _LineCounts:
        """The counts of the READ_LINE rows ``parsed`` (one small aggregation, collected)."""
        by_status: dict[str, int] = {}
        by_reason: dict[str, int] = {}
        per_file: dict[str, int] = {}
        quarantined: dict[str, int] = {}
        unreadable: set[str] = set()
        reads: dict[str, _HowRead] = {}
        # a file's last row alone carries how it was read: its group's maxima are those values
        how_read = [F.max(c).alias(c) for c in ("read_from", "complete_bytes", "complete_lines", "complete_sha256", "complete_head_sha256", "resumed_file")]
        for r in parsed.groupBy("status", "reason", "source_file").agg(F.count(F.lit(1)).alias("count"), *how_read).collect():
            by_status[r.status] = by_status.get(r.status, 0) + r["count"]
            per_file[r.source_file] = per_file.get(r.source_file, 0) + r["count"]
            if r.reason and r.status == "quarantined":  # not a line quarantined before (mark_quarantined_before)
                by_reason[r.reason] = by_reason.get(r.reason, 0) + r["count"]
                quarantined[r.source_file] = quarantined.get(r.source_file, 0) + r["count"]
            if r.reason == "unreadable_file":
                unreadable.add(r.source_file)
            if r.read_from is not None:
                complete = None if r.complete_bytes is None else CompletePart(r.complete_bytes, r.complete_lines, r.complete_sha256, r.complete_head_sha256)
                reads[r.source_file] = _HowRead(r.read_from, complete, r.resumed_file)
        return _LineCounts(by_status, by_reason, per_file, frozenset(unreadable), quarantined, reads)


def _utc_date(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d")


@dataclass(frozen=True)
class _ListedBefore:
    """What ``bronze.ingest_files`` holds of a capture listing's entries, each as (path as listed,
    size, modification time): ``ingested``, the files a successful run ingested; ``not_capture``, the
    entries not read for their name that a run listed."""

    ingested: frozenset[tuple[str, int, int]]
    not_capture: frozenset[tuple[str, int, int]]

    def not_listed(self, entries: Iterable[CaptureFile]) -> list[CaptureFile]:
        """Of the capture directory's ``entries`` not read (``not_capture``), those that no run has
        listed under the same size and modification time: a schedule that reads the same directory
        every run lists a stray file once, not once per run (the summary names it every run)."""
        return [f for f in entries if (f.path, f.size_bytes, f.mtime_ms) not in self.not_capture]


def _listed_before(spark: SparkSession, warehouse: Warehouse, listing: CaptureListing) -> _ListedBefore:
    """What earlier runs recorded of ``listing``'s files and of its entries not read (file metadata
    only; one read of ``bronze.ingest_files``, joined with the names the entries may be recorded
    under: :func:`recorded_names`). A file that could not be read is not among the ingested: once
    readable, the next run reads it; nor is a file a run did not read for its name (``not_capture``),
    which a glob naming it reads. A path among them under another size or modification time is a
    file read again (it grew, or was written anew)."""
    entries = [*listing.files, *listing.ignored]
    if not entries:
        return _ListedBefore(frozenset(), frozenset())
    rows = (warehouse.read(INGEST_FILES).where(~F.col("status").isin("skipped", "unreadable"))
            .join(F.broadcast(recorded_names(spark, entries)), "source_file")
            .select("path", "size_bytes", "mtime_ms", (F.col("status") == "not_capture").alias("not_capture")).distinct().collect())
    return _ListedBefore(frozenset((r.path, r.size_bytes, r.mtime_ms) for r in rows if not r.not_capture),
                         frozenset((r.path, r.size_bytes, r.mtime_ms) for r in rows if r.not_capture))


def recorded_names(spark: SparkSession, files: Iterable[CaptureFile]) -> DataFrame:
    """``source_file`` and ``path``: each of ``files``' paths (as listed: under one scheme per store,
    ``s3a://`` for S3) and each name it may be recorded under in the warehouse: that path, and the
    same URI under the other schemes of its store that an earlier version recorded for a capture path
    given so (``s3://``, ``s3n://``; ``nsreplay.storage.filesystem.object_uri_aliases``). A row
    recorded under one of them is the file's. A local frame, to be joined: a filter ``isin`` of
    10,000 paths costs more than reading the table (each value a call to the JVM;
    ``scripts/bench/ingest_file_reads.py``)."""
    return local_frame(spark, sorted({(name, f.path) for f in files for name in object_uri_aliases(f.path)}), "source_file string, path string")


def _existing_record_ids(warehouse: Warehouse, events: DataFrame) -> DataFrame:
    """record_ids already in silver.events that the batch's records could repeat: a record_id is a
    hash of the whole record, ``ts`` included, so only the files whose ``ts`` statistics overlap the
    batch's span are opened, and in them only the partitions (NameServer, day) the batch touches.
    Nothing is read while silver.events is empty."""
    if not warehouse.files(EVENTS):  # the first ingest into a warehouse: the Delta log alone says so
        return warehouse.read(EVENTS).select("record_id").limit(0)
    partitions = events.groupBy("namesrv", "event_date").agg(F.min("ts").alias("first"), F.max("ts").alias("last")).collect()
    if not partitions:
        return warehouse.read(EVENTS).select("record_id").limit(0)
    span = ColumnRange("ts", above=min(p.first for p in partitions) - 1, at_most=max(p.last for p in partitions))
    cond = None
    for p in partitions:
        c = (F.col("namesrv") == p.namesrv) & (F.col("event_date") == p.event_date)
        cond = c if cond is None else cond | c
    return warehouse.read(EVENTS, where=span).where(cond).select("record_id")


def parse_options(settings: Settings) -> ParseOptions:
    """What decides each line's verdict (accepted, or quarantined with a reason) under ``settings``:
    the known codes and channel events, the row rules and the register body limits."""
    ingest, quality = settings.ingest, settings.quality
    return ParseOptions(
        limits=ParserLimits(ingest.known_codes, frozenset(ingest.channel_events)),
        rules=event_rules(min_ts=quality.min_ts, max_ts=quality.max_ts),
        max_queue_nums=quality.max_queue_nums,
        max_perm=quality.max_perm,
        keep_bytes=ingest.quarantine_keep_bytes,
    )


def run_ingest(spark: SparkSession, warehouse: Warehouse, settings: Settings, captures: str, run_id: str) -> IngestResult:
    """Ingest the capture files at ``captures`` under ``run_id`` (see module docstring)."""
    started = int(time.time() * 1000)
    listing = list_captures(captures)  # before any table is created: a wrong path leaves no trace
    files = listing.files
    for spec in ALL_TABLES:
        warehouse.ensure(spec)
    # this run id's attempt that failed its data-quality check first: its bronze lines are then an
    # abandoned run's, which the discard of abandoned runs skips as discarded already
    replaced_failed = discard_failed_attempt(spark, warehouse, JOB, run_id)
    discarded = discard_abandoned(spark, warehouse, JOB, run_id)
    # after the discard: it may have deleted this run id's own earlier attempt, which then writes anew
    commit = CommitInfo(run_id=run_id, job=commit_job(warehouse, JOB, run_id))
    listed_before = _listed_before(spark, warehouse, listing)
    done = listed_before.ingested
    to_read = [f for f in files if (f.path, f.size_bytes, f.mtime_ms) not in done]
    skipped = [f for f in files if f not in to_read]

    ingest_date = _utc_date(started)
    ingest = settings.ingest
    clock = _Stopwatch()
    options = parse_options(settings)
    rules = options.rules
    read_before = {path for path, _, _ in done}
    repeated: dict[str, Repeated] = {}  # files that are a part read before, whole: nothing to read
    reading: list[FileToRead] = []
    if to_read:
        resume = parts_read_before(warehouse, to_read, read_before, open_capture)
        as_long = {f.path: [p for p in resume.get(f.path, ()) if not p.inflated and p.part.size == f.size_bytes] for f in to_read}
        repeated = same_bytes(spark, {path: parts for path, parts in as_long.items() if parts})
        reading = [FileToRead(f.path, tuple(p for p in resume.get(f.path, ()) if p.inflated or p.part.size < f.size_bytes))
                   for f in to_read if f.path not in repeated]
    if repeated:
        clock.lap("files read before, whole")
    if reading:
        read = read_capture_records(spark, reading, ReadOptions(ingest.max_line_bytes, ingest.quarantine_keep_bytes), options)
    else:
        read = local_frame(spark, [], READ_LINE)
    parsed = read.withColumn("run_id", F.lit(run_id)).withColumn("ingest_date", F.lit(ingest_date)).persist(StorageLevel.MEMORY_AND_DISK)
    cached = [parsed]
    try:
        counts = _LineCounts.of(parsed)
        clock.lap("read and parse files")
        # a gzip file whose text is a part read before, whole (a log compressed as it rolled over,
        # read to its end before), yields no line: which part it is, and its own part
        silent = {f.path: [p for p in f.resume if p.inflated] for f in reading
                  if not counts.per_file.get(f.path) and any(p.inflated for p in f.resume)}
        if silent:
            repeated |= same_bytes(spark, silent)
            clock.lap("compressed files read before, whole")
        if to_read:
            warehouse.append(CAPTURES_RAW, bronze_lines(parsed), commit)
            warehouse.append(CAPTURE_BODIES, new_body_texts(parsed, warehouse.read(CAPTURE_BODIES).select("body_ref"), run_id), commit)
        clock.lap("write bronze")
        if counts.by_reason.get("corrupt_gzip"):  # only then can a damaged member's lines be among the accepted
            damaged = damaged_members(parsed)
            if not damaged.isEmpty():
                # after bronze: its body texts make the split lines whole again for their quarantine rows
                bodies_read = warehouse.read(CAPTURE_BODIES).select("body_ref", "body_text")
                as_read = parsed
                parsed = quarantine_damaged_members(as_read, damaged, bodies_read, options.keep_bytes).persist(StorageLevel.MEMORY_AND_DISK)
                cached.append(parsed)
                counts = _LineCounts.of(parsed)  # computes the new cache in full: the lines as read can go
                as_read.unpersist()
            clock.lap("quarantine damaged gzip members")
        # a file read again yields the bad lines quarantined when it was read before: they count as
        # duplicates; so does a renamed file's line read again after the part read under the old name
        # (the last line, if it had no newline then)
        with_bad_lines = {p for p, n in counts.quarantined_per_file.items() if n}
        read_again = read_before & with_bad_lines
        renamed = {p: old for p in with_bad_lines if p in counts.reads and (old := counts.reads[p].renamed_from(p)) is not None}
        if read_again or renamed:
            as_read = parsed
            # each line quarantined before under the name it was read as: the file's own (or one an
            # earlier version recorded it under, s3:// for s3a://), or the file's it was renamed from
            named = sorted({(old, path) for path in read_again for old in object_uri_aliases(path)} | {(old, new) for new, old in renamed.items()})
            names = local_frame(spark, named, "source_file string, read_as string")
            recorded = warehouse.read(QUARANTINE).where(F.col("source_file").isin(sorted({old for old, _ in named})))  # the filter reaches the scan
            known = recorded.join(F.broadcast(names), "source_file").withColumn("source_file", F.col("read_as")).drop("read_as")
            parsed = mark_quarantined_before(as_read, known).persist(StorageLevel.MEMORY_AND_DISK)
            cached.append(parsed)
            counts = _LineCounts.of(parsed)
            as_read.unpersist()
            clock.lap("lines quarantined before")
        by_status, by_reason, per_file, unreadable = counts.by_status, counts.by_reason, counts.per_file, counts.unreadable
        # how each file was read: a file that repeats a part read before as if read after it, to its end
        reads = {**counts.reads, **{path: _HowRead(r.before.part.size, r.complete, r.before.source_file) for path, r in repeated.items()}}
        events_all = accepted_events(parsed)
        existing_ids = _existing_record_ids(warehouse, events_all)
        if duplicate_ids(events_all, existing_ids).isEmpty():
            # the usual case: no wide shuffle to drop nothing, and the events are a projection of the
            # cached lines, cheap to scan again (a cache of their own would copy them once more)
            events, events_cached = as_events(events_all), False
        else:
            events, events_cached = new_events(events_all, existing_ids).persist(StorageLevel.MEMORY_AND_DISK), True
            cached.append(events)
        bodies = new_bodies(parsed, warehouse.read(TOPIC_CONFIGS).select("body_id"), run_id).persist(StorageLevel.MEMORY_AND_DISK)
        cached.append(bodies)
        lines_read = sum(by_status.values())
        accepted_total = by_status.get("accepted", 0)
        # without duplicates every accepted line is a new event: the count is known already
        n_events, n_bodies = (events.count() if events_cached else accepted_total), bodies.count()
        if discarded or commit.job != JOB:  # a stopped run's bodies stay stored: the run reading them again counts them
            n_bodies += adopted_bodies(parsed, warehouse.read(TOPIC_CONFIGS), [*discarded, run_id]).count()
        clock.lap("dedup, bodies")
        spans = {r.namesrv: (r.first, r.last) for r in events.groupBy("namesrv").agg(F.min("ts").alias("first"), F.max("ts").alias("last")).collect()} if n_events else {}  # one row per NameServer
        window = (min(f for f, _ in spans.values()), max(t for _, t in spans.values())) if spans else (None, None)
        quarantined_before = by_status.get(QUARANTINED_BEFORE, 0)
        metrics = RunMetrics(lines_read, n_events, accepted_total - n_events + quarantined_before, by_status.get("quarantined", 0),
                             by_reason.get("unreadable_file", 0))
        report = validate_ingest(
            spark,
            run_id=run_id,
            events=events,
            bodies=bodies,
            metrics=metrics,
            rules=rules,
            max_queue_nums=settings.quality.max_queue_nums,
            max_perm=settings.quality.max_perm,
            max_quarantine_ratio=settings.quality.max_quarantine_ratio,
            events_cheap=not events_cached,
        )
        clock.lap("great expectations")
        warehouse.append(QUALITY_RESULTS, local_frame(spark, report.rows, QUALITY_RESULTS.schema), commit)
        status = "succeeded" if report.passed else "failed_quality"
        stale: tuple[StaleWindow, ...] = ()
        if report.passed:
            # the earliest new record per NameServer, for the publish of a window replayed before this
            earliest_new = {ns: first for ns, (first, _) in spans.items()}
            warehouse.append(EVENTS, events, dataclasses.replace(commit, extra=new_records_metadata(earliest_new)))
            warehouse.append(TOPIC_CONFIGS, bodies, commit)
            warehouse.append(QUARANTINE, quarantined_rows(parsed), commit)
            file_rows = [(run_id, f.path, f.size_bytes, f.mtime_ms,
                          "unreadable" if f.path in unreadable else "read" if per_file.get(f.path) or f.path in repeated else "empty",
                          per_file.get(f.path, 0), None, *(reads[f.path].columns() if f.path in reads else _NOT_READ)) for f in to_read]
            file_rows += [(run_id, f.path, f.size_bytes, f.mtime_ms, "not_capture", None, why_not_read(f.path), *_NOT_READ)
                          for f in listed_before.not_listed(listing.ignored)]
            if file_rows:
                warehouse.append(INGEST_FILES, local_frame(spark, file_rows, INGEST_FILES.schema), commit)
            if n_events:
                stale = tuple(mark_stale(spark, warehouse, earliest_new, run_id))
        clock.lap("write silver")
        result = IngestResult(
            run_id=run_id,
            files_seen=len(files),
            files_read=len(to_read),
            files_skipped=len(skipped),
            lines_read=lines_read,
            accepted=metrics.accepted,
            duplicates=metrics.duplicates,
            quarantined_before=quarantined_before,
            files_resumed=sum(1 for r in reads.values() if r.read_from),
            files_renamed=sum(1 for path, how in reads.items() if how.renamed_from(path) is not None),
            quarantined=metrics.quarantined,
            quarantined_by_reason=by_reason,
            new_bodies=n_bodies,
            quality=report,
            status=status,
            seconds=(time.time() * 1000 - started) / 1000,
            window=(window[0], window[1]),
            stages=clock.laps,
            stale=stale,
            discarded=discarded,
            replaced_failed=replaced_failed,
            warehouse=warehouse.root,
            ignored=tuple(f.path for f in listing.ignored),
        )
        run_row = [(
            run_id, started, int(time.time() * 1000), result.files_seen, result.files_read, result.files_skipped,
            result.lines_read, result.accepted, result.duplicates, result.quarantined, by_reason, result.new_bodies,
            report.passed, status,
        )]
        warehouse.append(INGEST_RUNS, local_frame(spark, run_row, INGEST_RUNS.schema), commit)
        if not report.passed:
            # the counts are the run's own (by_reason); only the first line of each reason is looked up
            firsts = first_quarantined(parsed).collect()
            raise IngestQualityError(
                report,
                tuple(QuarantineReason(r.reason, by_reason[r.reason], r.source_file, r.line_no, r.detail) for r in firsts),
                worst_files(counts.quarantined_per_file, per_file),
            )
        return result
    finally:
        for frame in cached:
            frame.unpersist()
