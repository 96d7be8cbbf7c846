"""Hadoop's S3 URIs (``s3a://``, as Spark and docs/operations.md spell a bucket) reach pyarrow.fs,
which knows only ``s3://``: capture listing, capture reading and the delta-rs backend all go through
``arrow_filesystem``."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest

from nsreplay.storage.filesystem import arrow_filesystem, arrow_uri


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
    ],
)
def test_only_hadoop_s3_schemes_are_renamed(uri: str, want: str) -> None:
    assert arrow_uri(uri) == want


def test_an_s3a_uri_opens_the_same_s3_filesystem_and_path_as_s3() -> None:
    # ?region= keeps pyarrow from asking AWS for the bucket's region (no network here)
    fs_a, path_a = arrow_filesystem("s3a://bucket/captures?region=us-east-1")
    fs_s, path_s = arrow_filesystem("s3://bucket/captures?region=us-east-1")
    assert isinstance(fs_a, pafs.S3FileSystem) and (path_a, fs_a.region) == (path_s, fs_s.region) == ("bucket/captures", "us-east-1")
