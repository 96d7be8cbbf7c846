"""Hadoop's S3 URIs (``s3a://``, as Spark and docs/operations.md spell a bucket) reach pyarrow.fs,
which knows only ``s3://``, and a GCS URI retries for a bounded time: capture listing, capture reading
and the delta-rs backend all go through ``arrow_filesystem``."""

from __future__ import annotations

import datetime
import time

import pyarrow.fs as pafs
import pytest

from nsreplay.storage.filesystem import GCS_RETRY_LIMIT_SECONDS, arrow_filesystem, arrow_uri, object_uri, object_uri_aliases
from pipelines.ingest.capture_files import list_captures


@pytest.mark.parametrize(
    ("uri", "want"),
    [
        ("s3a://bucket/captures/day-1", "s3://bucket/captures/day-1"),
        ("S3A://bucket/k", "s3://bucket/k"),
        ("s3n://bucket/k?region=eu-west-1", "s3://bucket/k?region=eu-west-1"),
        ("s3://bucket/k", "s3://bucket/k"),
        ("hdfs://nn:8020/captures", "hdfs://nn:8020/captures"),
        ("file:///tmp/s3a://x", "file:///tmp/s3a://x"),
        ("/tmp/s3a-captures", "/tmp/s3a-captures"),
        ("gs://bucket/k", f"gs://bucket/k?retry_limit_seconds={GCS_RETRY_LIMIT_SECONDS}"),
        ("GCS://bucket/k?endpoint_override=x", f"gcs://bucket/k?endpoint_override=x&retry_limit_seconds={GCS_RETRY_LIMIT_SECONDS}"),
        ("gs://bucket/k?retry_limit_seconds=900", "gs://bucket/k?retry_limit_seconds=900"),
    ],
)
def test_hadoop_s3_schemes_are_renamed_and_gcs_gets_a_retry_limit(uri: str, want: str) -> None:
    assert arrow_uri(uri) == want


@pytest.mark.parametrize(
    ("uri", "one_name", "aliases"),
    [
        ("s3://b/day/a.jsonl", "s3a://b/day/a.jsonl", ("s3://b/day/a.jsonl", "s3n://b/day/a.jsonl")),
        ("s3a://b/day/a.jsonl", "s3a://b/day/a.jsonl", ("s3://b/day/a.jsonl", "s3n://b/day/a.jsonl")),
        ("S3N://b/k?region=eu-west-1", "s3a://b/k?region=eu-west-1", ("s3://b/k?region=eu-west-1", "s3n://b/k?region=eu-west-1")),
        ("gcs://b/k", "gs://b/k", ("gcs://b/k",)),
        ("GS://b/k", "gs://b/k", ("gcs://b/k",)),
        ("hdfs://nn:8020/c/s3://x", "hdfs://nn:8020/c/s3://x", ()),
        ("/tmp/s3://x", "/tmp/s3://x", ()),
        ("file:///c/a.jsonl", "file:///c/a.jsonl", ()),
    ],
)
def test_an_object_has_one_uri_and_its_other_schemes_are_its_aliases(uri: str, one_name: str, aliases: tuple[str, ...]) -> None:
    """``s3://``, ``s3a://`` and ``s3n://`` (and ``gcs://`` and ``gs://``) name the same objects:
    a capture file is recorded under one of them, and found under the others an earlier version
    recorded."""
    assert object_uri(uri) == one_name
    assert object_uri_aliases(uri) == (one_name, *aliases)
    assert all(object_uri(alias) == one_name for alias in object_uri_aliases(uri))


def test_an_s3a_uri_opens_the_same_s3_filesystem_and_path_as_s3() -> None:
    # ?region= keeps pyarrow from asking AWS for the bucket's region (no network here)
    fs_a, path_a = arrow_filesystem("s3a://bucket/captures?region=us-east-1")
    fs_s, path_s = arrow_filesystem("s3://bucket/captures?region=us-east-1")
    assert isinstance(fs_a, pafs.S3FileSystem) and (path_a, fs_a.region) == (path_s, fs_s.region) == ("bucket/captures", "us-east-1")


def retry_time_limit(fs: pafs.FileSystem) -> datetime.timedelta | None:
    """A GcsFileSystem's retry limit, as it is pickled for the executors."""
    return fs.__reduce__()[1][0]["retry_time_limit"]


def test_a_gcs_uri_retries_for_a_bounded_time_unless_it_says() -> None:
    """pyarrow's GCS client retries for 15 minutes by default: without credentials, a listing of
    ``gs://`` captures sat for as long before its error. The limit reaches the filesystem, and one
    given in the URI wins."""
    assert retry_time_limit(arrow_filesystem("gs://bucket/captures")[0]) == datetime.timedelta(seconds=GCS_RETRY_LIMIT_SECONDS)
    assert retry_time_limit(arrow_filesystem("gs://bucket/captures?retry_limit_seconds=900")[0]) == datetime.timedelta(seconds=900)
    assert retry_time_limit(pafs.FileSystem.from_uri("gs://bucket/captures")[0]) is None  # pyarrow's own: its default


def test_a_gcs_capture_that_cannot_be_reached_fails_within_the_limit() -> None:
    """No credentials and no network here: the listing gives up after the URI's limit, with an error."""
    started = time.monotonic()
    with pytest.raises(OSError):  # here: "Could not create a OAuth2 access token ..."
        list_captures("gs://nsreplay-no-such-bucket/day?retry_limit_seconds=2")
    assert time.monotonic() - started < 60
