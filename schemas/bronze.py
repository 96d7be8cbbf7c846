"""Bronze: capture files exactly as read. Append-only; nothing here is interpreted.

Each line is kept exactly, with a repeated register body stored once (see
``pipelines.ingest.bronze_form``): ``line`` is either the whole line (``body_ref`` null) or the line
without its ``body`` (or ``body_b64``) member, whose text is ``bronze.capture_bodies.body_text`` for
that ``body_ref`` (a ``body_b64`` text is stored as its JSON string, quotes included).
The SQL view ``capture_lines`` (``nsreplay.sql``) gives every line whole.
"""

from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from nsreplay.storage import TableSpec

# One row per line read. `line` is the line decoded as UTF-8 (invalid bytes replaced), or its split
# form when `body_ref` is set; `raw_bytes` keeps the exact bytes whenever the text alone would lose
# something (invalid UTF-8, a cut line). `read_error` marks lines the reader could not take whole:
# line_too_long, truncated_gzip, corrupt_gzip, not_gzipped (bytes of a gzip file outside its members),
# zero_bytes (a run of zero bytes in the text: a hole, its own line, with no text), unreadable_file. `line_bytes` is the whole line's length.
CAPTURE_LINE = StructType(
    [
        StructField("source_file", StringType(), False),
        StructField("line_no", LongType(), False),
        StructField("line", StringType(), False),
        StructField("line_bytes", LongType(), False),
        StructField("raw_bytes", BinaryType(), True),
        StructField("read_error", StringType(), True),
        StructField("body_ref", StringType(), True),
    ]
)

CAPTURES_RAW = TableSpec(
    name="bronze.captures_raw",
    schema=StructType(
        [StructField("run_id", StringType(), False)]
        + list(CAPTURE_LINE.fields)
        + [StructField("ingest_date", StringType(), False)]
    ),
    partition_by=("ingest_date",),
    description="Every capture line as read, with its file, line number and ingest run.",
    distinct_columns=("line_no", "line"),
)

# One row per distinct body text that split lines refer to (written by the run that first met it).
CAPTURE_BODIES = TableSpec(
    name="bronze.capture_bodies",
    schema=StructType(
        [
            StructField("body_ref", StringType(), False),
            StructField("body_text", StringType(), False),
            StructField("body_text_bytes", LongType(), False),
            StructField("first_run_id", StringType(), False),
        ]
    ),
    description="Each distinct body text of the split capture lines, stored once by content id.",
)

# One row per capture file an ingest run looked at. A file already ingested with the same size and
# modification time is skipped (status 'skipped') so re-ingesting the same files adds nothing.
INGEST_FILES = TableSpec(
    name="bronze.ingest_files",
    schema=StructType(
        [
            StructField("run_id", StringType(), False),
            StructField("source_file", StringType(), False),
            StructField("size_bytes", LongType(), False),
            StructField("mtime_ms", LongType(), False),
            StructField("status", StringType(), False),
            StructField("lines", LongType(), True),
            StructField("detail", StringType(), True),
            StructField("read_from", LongType(), True),
            StructField("complete_bytes", LongType(), True),
            StructField("complete_lines", LongType(), True),
            StructField("complete_sha256", StringType(), True),
            StructField("complete_head_sha256", StringType(), True),
            StructField("resumed_file", StringType(), True),
        ]
    ),
    description="The files each ingest run read: read, empty or unreadable; not_capture for what the capture directory "
    "holds that the run did not read (no lines; detail says why: a name that is not a capture file's, such as "
    "manifest.json or README.md, or a link to a folder); lines is how many lines the run read of "
    "the file, from byte read_from (0: the whole file; more: the file starts with the complete part an earlier run "
    "read of resumed_file, this file grown or the file it was renamed from, and was read after it; for a gzip file "
    "that continues a plain file's part, a log compressed as it rolled over, read_from counts bytes of its inflated "
    "text). complete_bytes, "
    "complete_lines and complete_sha256 are the file's part up to its last newline as this run read it, after which "
    "a later read of this file, or of a file it is renamed to, resumes while that file still starts with those bytes "
    "(null for UTF-16/32 files, always read whole; a gzip file's part is the whole file, never read on after, but "
    "a file that is it byte for byte, renamed, is not read again); complete_head_sha256 is the SHA-256 of the part's "
    "first 65,536 bytes (all of it when shorter), which picks the parts a new file may continue. Files already ingested are counted in "
    "silver.ingest_runs.files_skipped (older warehouses also hold rows 'skipped' for them).",
)
