"""Capture files in an S3 bucket, listed and read through pyarrow's S3 filesystem (as
docs/operations.md says the parts that do not use Spark reach ``s3://`` and ``s3a://`` captures),
against a real S3 endpoint: moto's server on 127.0.0.1 (tests/s3_endpoint.py; the tests skip when it
is not installed).

The endpoint is reached as a user reaches one: the AWS SDK's own ``AWS_ENDPOINT_URL`` (and
credentials in the environment), or pyarrow's URI options (``?endpoint_override=...&scheme=http``)."""

from __future__ import annotations

import gzip
import itertools
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from pipelines.ingest.capture_files import CaptureNotFoundError, list_captures, open_capture
from pipelines.ingest.capture_reader import read_capture_file
from s3_endpoint import put_object, s3_endpoint

ROOT = Path(__file__).resolve().parents[2]
LINE = b'{"namesrv":"10.0.0.10:9876","ts":1732147200123,"kind":"channel","event":"CONNECT","conn":"c1","remote":"10.0.1.5:1"}\n'
_buckets = itertools.count()


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with s3_endpoint() as url:
        yield url


@pytest.fixture
def bucket(endpoint, monkeypatch) -> tuple[pafs.S3FileSystem, str]:
    """A new bucket of the endpoint (pyarrow's filesystem writing to it, and its name), with the
    environment of an AWS SDK user pointed at the endpoint."""
    for name, value in {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
                        "AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}.items():
        monkeypatch.setenv(name, value)
    fs = pafs.S3FileSystem(endpoint_override=endpoint, access_key="testing", secret_key="testing", region="us-east-1", allow_bucket_creation=True)
    name = f"captures-{os.getpid()}-{next(_buckets)}"
    fs.create_dir(name)
    return fs, name


def put(fs: pafs.S3FileSystem, path: str, data: bytes) -> None:
    """Store ``data`` as ``path`` (``bucket/key``), as it is, at the endpoint the bucket fixture's
    environment names (so before a test removes AWS_ENDPOINT_URL)."""
    put_object(os.environ["AWS_ENDPOINT_URL"], path, data)


def texts(path: str) -> list[str | None]:
    """The lines read from ``path`` (an unreadable file's line is its error text, prefixed)."""
    return [line.text if line.read_error is None else f"{line.read_error}: {line.text}"
            for line in read_capture_file(path, open_capture, max_line_bytes=1000, keep_bytes=1000)]


NAMES = ["with space.jsonl", "é ü.jsonl", "pct%20name.jsonl", "hash#x.jsonl", "q?x.jsonl", "br[1].jsonl", "tab\tx.jsonl",
         "a+b.jsonl", "date=2024-01-01/x.jsonl.gz"]


def test_every_listed_object_opens_whatever_its_key_holds(bucket) -> None:
    """A listed path is a URI that names its object: a key with a space, a non-ASCII letter, ``%``,
    ``#``, ``?``, ``[`` or a tab is percent-encoded, as a URI must be. Before, the key went into the
    URI as it is: opening it failed with ArrowInvalid (not an I/O error: the Spark task, and the
    whole ingest, failed) or opened another key (``%20`` read as a space, ``#`` cutting the path),
    which quarantined a file that exists as unreadable. Names URIs allow stay as they are, so the
    fingerprints of files ingested before keep their path."""
    fs, name = bucket
    for key in NAMES:
        put(fs, f"{name}/day/{key}", gzip.compress(LINE) if key.endswith(".gz") else LINE)
    for spec in (f"s3://{name}/day", f"s3a://{name}/day/", f"s3://{name}/day/**"):
        files = list_captures(spec).files
        assert len(files) == len(NAMES), (spec, files)
        for f in files:
            assert texts(f.path) == [LINE.decode().strip()], (spec, f.path)
    paths = {f.path for f in list_captures(f"s3://{name}/day").files}
    assert {f"s3a://{name}/day/a+b.jsonl", f"s3a://{name}/day/date=2024-01-01/x.jsonl.gz", f"s3a://{name}/day/with%20space.jsonl",
            f"s3a://{name}/day/pct%2520name.jsonl"} <= paths


def test_the_uri_options_of_the_capture_path_reach_the_reading_of_every_file(bucket, endpoint, monkeypatch) -> None:
    """``?endpoint_override=`` (or ``?region=``, ``?scheme=``) says how to reach the bucket; each
    listed path keeps the capture path's options, so the file is read where it was listed. Before,
    the listed paths dropped them: a capture listed from a local endpoint was read from AWS (every
    file an unreadable_file line), with the default region."""
    fs, name = bucket
    put(fs, f"{name}/day/a.jsonl", LINE)
    put(fs, f"{name}/day/sub/b.jsonl", LINE)
    monkeypatch.delenv("AWS_ENDPOINT_URL")  # the URI alone says where the bucket is
    options = f"?endpoint_override={endpoint.removeprefix('http://')}&scheme=http&region=us-east-1"
    for spec in (f"s3://{name}/day{options}", f"s3a://{name}/day/**/*.jsonl{options}", f"s3://{name}/day/a.jsonl{options}"):
        files = list_captures(spec).files
        assert files, spec
        for f in files:
            assert texts(f.path) == [LINE.decode().strip()], (spec, f.path)
        assert all(f.path.endswith(options) for f in files), (spec, files)


def test_an_object_deleted_between_listing_and_reading_is_an_unreadable_file_line(bucket) -> None:
    fs, name = bucket
    put(fs, f"{name}/day/kept.jsonl", LINE)
    put(fs, f"{name}/day/gone.jsonl", LINE)
    files = list_captures(f"s3://{name}/day").files
    fs.delete_file(f"{name}/day/gone.jsonl")
    got = {os.path.basename(f.path): texts(f.path) for f in files}
    assert got["kept.jsonl"] == [LINE.decode().strip()]
    [line] = got["gone.jsonl"]
    assert line.startswith("unreadable_file: FileNotFoundError") and f"{name}/day/gone.jsonl" in line, line


def test_prefixes_markers_and_buckets(bucket) -> None:
    """A prefix holding nothing but a "directory marker" (an empty object whose key ends in ``/``, as
    consoles create folders) is an existing directory without capture files: an empty capture. A
    marker among capture files is not a file. A key or bucket that does not exist, and a glob that
    matches nothing, are CaptureNotFoundError, as for a local path."""
    fs, name = bucket
    fs.create_dir(f"{name}/incoming")  # the marker "incoming/"
    fs.create_dir(f"{name}/day/marker")
    put(fs, f"{name}/day/a.jsonl.gz", gzip.compress(LINE))
    assert list_captures(f"s3://{name}/incoming").files == []
    assert list_captures(f"s3://{name}/incoming/").files == []
    assert [f.path for f in list_captures(f"s3://{name}/day").files] == [f"s3a://{name}/day/a.jsonl.gz"]
    assert texts(f"s3://{name}/day/a.jsonl.gz") == [LINE.decode().strip()]  # decompressed
    for wrong in (f"s3://{name}/nothing-here", f"s3://{name}/day/*.log", f"s3://no-such-bucket-{name}/day", f"s3://no-such-bucket-{name}/*.jsonl"):
        with pytest.raises(CaptureNotFoundError, match="no capture file"):
            list_captures(wrong)


def test_the_fingerprint_is_the_objects_size_and_last_modified_time(bucket) -> None:
    """``_already_ingested`` skips a file listed again under the same (path, size, mtime): a second
    listing of unchanged objects gives the same fingerprints; an object written anew gives another."""
    fs, name = bucket
    put(fs, f"{name}/day/a.jsonl", LINE)
    before = time.time()
    [first] = list_captures(f"s3://{name}/day").files
    assert first.size_bytes == len(LINE) and abs(first.mtime_ms / 1000 - before) < 120, first
    assert list_captures(f"s3://{name}/day").files == [first]
    time.sleep(1.1)  # S3's Last-Modified has whole seconds
    put(fs, f"{name}/day/a.jsonl", LINE + LINE)
    [again] = list_captures(f"s3://{name}/day").files
    assert again.path == first.path and (again.size_bytes, again.mtime_ms > first.mtime_ms) == (2 * len(LINE), True)


def job(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "jobs" / "ingest_captures.py"), *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def test_a_capture_path_that_cannot_be_listed_ends_the_job_with_one_line_and_no_warehouse(bucket, tmp_path) -> None:
    """An endpoint that does not answer, an unknown scheme, a bucket that does not exist, credentials
    the endpoint refuses: the job ends before Spark starts, with one line saying why, and writes
    nothing to the warehouse."""
    fs, name = bucket
    put(fs, f"{name}/day/a.jsonl", LINE)
    warehouse = tmp_path / "wh"
    cases = [
        ({"AWS_ENDPOINT_URL": "http://127.0.0.1:1"}, f"s3://{name}/day", "Could not connect"),
        ({}, f"foo://{name}/day", "Unrecognized filesystem type in URI: foo://"),
        ({}, f"s3://no-such-bucket-{name}/day", "no capture file at s3://no-such-bucket-"),
    ]
    with s3_endpoint(checks_credentials=True) as strict:
        cases.append(({"AWS_ENDPOINT_URL": strict, "AWS_ACCESS_KEY_ID": "nobody"}, f"s3://{name}/day", "ACCESS_DENIED"))
        for env, spec, says in cases:
            done = job("--captures", spec, "--warehouse", str(warehouse), env=env)
            lines = done.stderr.strip().splitlines()
            assert done.returncode == 1 and len(lines) == 1 and lines[0].startswith("ingest_captures.py: ") and says in lines[0], (spec, done.stderr[-2000:])
            assert not warehouse.exists(), spec


def test_an_ingest_reads_a_bucket_and_skips_its_files_the_next_time(spark, bucket, endpoint, monkeypatch, tmp_path) -> None:
    """The whole ingest from a bucket into a local warehouse, without Hadoop's S3A (the Spark tasks
    read the files through pyarrow): a key with a space and a gzip object are read; a second run
    finds each file under the same path, size and modification time and reads none of them. (The
    endpoint is in the URI: Spark's Python workers were started with the environment of an earlier
    time, without this test's AWS_ENDPOINT_URL.)"""
    from nsreplay.config import load_settings
    from nsreplay.storage import Warehouse
    from pipelines.ingest.run import run_ingest
    from schemas.bronze import INGEST_FILES

    fs, name = bucket
    put(fs, f"{name}/day/first hour.jsonl", LINE)
    put(fs, f"{name}/day/second.jsonl.gz", gzip.compress(LINE.replace(b'"c1"', b'"c2"')))
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    captures = f"s3a://{name}/day?endpoint_override={endpoint.removeprefix('http://')}&scheme=http"
    warehouse = Warehouse(str(tmp_path / "wh"), spark, "delta-rs")
    first = run_ingest(spark, warehouse, load_settings(), captures, "s3-1")
    again = run_ingest(spark, warehouse, load_settings(), captures, "s3-2")
    assert (first.status, first.files_read, first.accepted, first.quarantined) == ("succeeded", 2, 2, 0), first.summary()
    assert (again.status, again.files_read, again.files_skipped, again.lines_read) == ("succeeded", 0, 2, 0), again.summary()
    rows = sorted((r.source_file, r.status, r.lines) for r in warehouse.read(INGEST_FILES).where("run_id = 's3-1'").collect())
    options = captures[captures.index("?"):]
    assert rows == [(f"s3a://{name}/day/first%20hour.jsonl{options}", "read", 1), (f"s3a://{name}/day/second.jsonl.gz{options}", "read", 1)]


def test_a_uri_without_a_bucket_is_refused_not_read_as_every_bucket(bucket) -> None:
    """``--captures "s3a://$BUCKET"`` with BUCKET unset is ``s3a://``: pyarrow lists every bucket the
    credentials reach, and the ingest used to read the capture files of all of them."""
    fs, name = bucket
    put(fs, f"{name}/day/a.jsonl", LINE)
    for spec in ("s3://", "s3a://", "s3a://?region=us-east-1", "s3a:///", "s3a://*", "s3a:///*.jsonl"):
        with pytest.raises(ValueError, match="bucket") as refused:
            list_captures(spec)
        assert "\n" not in str(refused.value), refused.value


def test_a_capture_uri_whose_scheme_is_in_capitals_names_the_same_files(spark, bucket, endpoint, monkeypatch, tmp_path) -> None:
    """A URI's scheme is case-insensitive (RFC 3986, 3.1), but pyarrow knows only ``s3://`` and Hadoop
    looks a scheme's filesystem up as spelled: ``S3://`` was refused ("ArrowInvalid: Unrecognized
    filesystem type in URI: S3://..."), and ``S3A://`` listed files named ``S3A://...``, which an
    ingest of the same bucket spelled ``s3a://`` read a second time. A capture path's scheme is
    taken in lower case: the same files, under the same names, read once."""
    from nsreplay.config import load_settings
    from nsreplay.storage import Warehouse
    from pipelines.ingest.run import run_ingest

    fs, name = bucket
    put(fs, f"{name}/day/a.jsonl", LINE)
    for upper, lower in ((f"S3://{name}/day", f"s3://{name}/day"), (f"S3A://{name}/day", f"s3a://{name}/day"),
                         (f"S3://{name}/day/*.jsonl", f"s3://{name}/day/*.jsonl")):
        assert list_captures(upper) == list_captures(lower), upper
    [listed] = list_captures(f"S3A://{name}/day").files
    assert listed.path == f"s3a://{name}/day/a.jsonl" and texts(listed.path) == [LINE.decode().strip()]
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    options = f"?endpoint_override={endpoint.removeprefix('http://')}&scheme=http"
    warehouse = Warehouse(str(tmp_path / "wh"), spark, "delta-rs")
    first = run_ingest(spark, warehouse, load_settings(), f"S3A://{name}/day{options}", "caps-1")
    again = run_ingest(spark, warehouse, load_settings(), f"s3a://{name}/day{options}", "caps-2")
    assert (first.files_read, first.accepted) == (1, 1), first.summary()
    assert (again.files_read, again.files_skipped) == (0, 1), again.summary()


#: A line the ingest quarantines (invalid_json), for the tests that follow a bad line across runs.
BAD = b"not json\n"


def _files_read(spark, warehouse, bucket_name: str):
    """bronze.ingest_files, silver.quarantine and bronze.captures_raw as the tests below compare them:
    the bucket's name and the URI options taken out of the paths."""
    from schemas.bronze import CAPTURES_RAW, INGEST_FILES
    from schemas.silver import QUARANTINE

    def short(column: str):
        from pyspark.sql import functions as F

        return F.regexp_replace(F.regexp_replace(column, r"\?.*$", ""), bucket_name, "B").alias(column)

    return (warehouse.read(INGEST_FILES).select("run_id", short("source_file"), "status", "lines", "read_from", short("resumed_file")),
            warehouse.read(QUARANTINE).select("run_id", short("source_file"), "line_no", "reason"),
            warehouse.read(CAPTURES_RAW).select("run_id", short("source_file"), "line_no"))


def test_a_bucket_listed_as_s3_and_as_s3a_names_each_file_once(spark, bucket, endpoint, monkeypatch, tmp_path) -> None:
    """``s3://b/day`` (pyarrow's and AWS's spelling) and ``s3a://b/day`` (Hadoop's, the DAG's) name the
    same objects, and list them under one name, ``s3a://``. Before, each listed its files under its
    own scheme, so an ingest given the other spelling (by hand, then by Airflow) took every file for
    a new one: a file whose part read was under 512 bytes and that grew since was read whole again,
    its lines twice in bronze.captures_raw and its bad line quarantined again under the other name;
    an unchanged file was hashed whole by a task and listed again as a file renamed; a stray file
    listed again as not_capture."""
    from chispa import assert_df_equality

    from nsreplay.config import load_settings
    from nsreplay.storage import Warehouse
    from pipelines.ingest.run import run_ingest

    fs, name = bucket
    small, big = LINE + BAD, LINE * 6 + BAD  # a part under 512 bytes, and one above
    put(fs, f"{name}/day/small.jsonl", small)
    put(fs, f"{name}/day/big.jsonl", big)
    put(fs, f"{name}/day/README.md", b"notes\n")
    assert [f.path for f in list_captures(f"s3://{name}/day").files] == [f.path for f in list_captures(f"s3a://{name}/day").files] \
        == [f"s3a://{name}/day/big.jsonl", f"s3a://{name}/day/small.jsonl"]
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    options = f"?endpoint_override={endpoint.removeprefix('http://')}&scheme=http"
    warehouse = Warehouse(str(tmp_path / "wh"), spark, "delta-rs")
    first = run_ingest(spark, warehouse, load_settings(), f"s3://{name}/day{options}", "by-hand")
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    put(fs, f"{name}/day/small.jsonl", small + LINE.replace(b'"c1"', b'"c2"'))  # grown since
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    second = run_ingest(spark, warehouse, load_settings(), f"s3a://{name}/day{options}", "by-airflow")
    assert (first.files_read, first.quarantined) == (2, 2), first.summary()
    assert (second.files_read, second.files_skipped, second.files_resumed, second.files_renamed, second.lines_read, second.accepted,
            second.quarantined) == (1, 1, 1, 0, 1, 1, 0), second.summary()
    files, quarantine, raw = _files_read(spark, warehouse, name)
    a = "s3a://B/day/"
    assert_df_equality(files, spark.createDataFrame([
        ("by-hand", f"{a}README.md", "not_capture", None, None, None), ("by-hand", f"{a}big.jsonl", "read", 7, 0, None),
        ("by-hand", f"{a}small.jsonl", "read", 2, 0, None), ("by-airflow", f"{a}small.jsonl", "read", 1, len(small), f"{a}small.jsonl"),
    ], files.schema), ignore_row_order=True, ignore_nullable=True)
    assert_df_equality(quarantine, spark.createDataFrame([("by-hand", f"{a}big.jsonl", 7, "invalid_json"), ("by-hand", f"{a}small.jsonl", 2, "invalid_json")],
                                                         quarantine.schema), ignore_row_order=True, ignore_nullable=True)
    assert_df_equality(raw, spark.createDataFrame([("by-hand", f"{a}big.jsonl", n) for n in range(1, 8)] + [("by-hand", f"{a}small.jsonl", n) for n in (1, 2)]
                                                  + [("by-airflow", f"{a}small.jsonl", 3)], raw.schema), ignore_row_order=True, ignore_nullable=True)


def _as_an_earlier_version_recorded(spark, warehouse, scheme: str) -> None:
    """The warehouse's names of capture files rewritten from ``s3a://`` to ``scheme://``, as an
    earlier nsreplay recorded them for a capture path given as ``scheme://`` (it named each file
    under the scheme it was given): bronze.ingest_files, bronze.captures_raw, silver.quarantine."""
    from pyspark.sql import functions as F

    from nsreplay.runtime import local_frame
    from nsreplay.storage import CommitInfo
    from schemas.bronze import CAPTURES_RAW, INGEST_FILES
    from schemas.silver import QUARANTINE

    for spec in (INGEST_FILES, CAPTURES_RAW, QUARANTINE):
        renamed = warehouse.read(spec)
        for column in {"source_file", "resumed_file"} & set(renamed.columns):
            renamed = renamed.withColumn(column, F.regexp_replace(column, "^s3a://", f"{scheme}://"))
        rows = [r.asDict(recursive=True) for r in renamed.collect()]
        warehouse.overwrite(spec, local_frame(spark, rows, spec.schema), CommitInfo(run_id=f"as-{scheme}", job="test"))


def test_a_file_an_earlier_version_recorded_as_s3_is_the_s3a_files_own(spark, bucket, endpoint, monkeypatch, tmp_path) -> None:
    """A warehouse written by an earlier version from ``s3://b/day`` names its files ``s3://b/day/...``;
    listed now as ``s3a://b/day/...``, each is found under that name: an unchanged file is skipped,
    a grown one read on after its part (as its own, not as a file renamed), a file written anew read
    whole with its bad line known as quarantined before, a stray file not listed again. Before, the
    rows under the old name were not looked at: the grown file (its part under 512 bytes) was read
    whole again and both files' old bad lines quarantined again, the unchanged file was hashed whole
    and listed as renamed, and the stray file listed again."""
    from chispa import assert_df_equality

    from nsreplay.config import load_settings
    from nsreplay.storage import Warehouse
    from pipelines.ingest.run import run_ingest

    fs, name = bucket
    small, big = LINE + BAD, LINE * 6 + BAD
    put(fs, f"{name}/day/small.jsonl", small)
    put(fs, f"{name}/day/big.jsonl", big)
    put(fs, f"{name}/day/anew.jsonl", LINE.replace(b'"c1"', b'"c4"') + BAD)
    put(fs, f"{name}/day/README.md", b"notes\n")
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    captures = f"s3a://{name}/day?endpoint_override={endpoint.removeprefix('http://')}&scheme=http"
    warehouse = Warehouse(str(tmp_path / "wh"), spark, "delta-rs")
    run_ingest(spark, warehouse, load_settings(), captures, "earlier")
    _as_an_earlier_version_recorded(spark, warehouse, "s3")
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    put(fs, f"{name}/day/small.jsonl", small + LINE.replace(b'"c1"', b'"c2"') + BAD)  # grown since, a bad line more
    put(fs, f"{name}/day/anew.jsonl", LINE.replace(b'"c1"', b'"c3-anew"') + BAD)  # written anew (another size): read whole
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    now = run_ingest(spark, warehouse, load_settings(), captures, "now")
    assert (now.files_read, now.files_skipped, now.files_resumed, now.files_renamed, now.lines_read, now.accepted, now.quarantined,
            now.quarantined_before) == (2, 1, 1, 0, 4, 2, 1, 1), now.summary()
    files, quarantine, _ = _files_read(spark, warehouse, name)
    s, a = "s3://B/day/", "s3a://B/day/"
    assert_df_equality(files, spark.createDataFrame([
        ("earlier", f"{s}README.md", "not_capture", None, None, None), ("earlier", f"{s}anew.jsonl", "read", 2, 0, None),
        ("earlier", f"{s}big.jsonl", "read", 7, 0, None), ("earlier", f"{s}small.jsonl", "read", 2, 0, None),
        ("now", f"{a}anew.jsonl", "read", 2, 0, None), ("now", f"{a}small.jsonl", "read", 2, len(small), f"{a}small.jsonl"),
    ], files.schema), ignore_row_order=True, ignore_nullable=True)
    assert_df_equality(quarantine, spark.createDataFrame([("earlier", f"{s}anew.jsonl", 2, "invalid_json"), ("earlier", f"{s}big.jsonl", 7, "invalid_json"),
                                                          ("earlier", f"{s}small.jsonl", 2, "invalid_json"),
                                                          ("now", f"{a}small.jsonl", 4, "invalid_json")], quarantine.schema),
                       ignore_row_order=True, ignore_nullable=True)
