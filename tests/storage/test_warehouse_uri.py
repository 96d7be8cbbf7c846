"""A warehouse at a URI. Its tables are read without Spark (the serving shim, the publish log) through
pyarrow, with the files the Delta log names: keys holding ``%`` (Spark's Hive-escaped partition
directories, ``namesrv=10.0.0.1%3A9876``) must reach pyarrow as they are, not URI-decoded.

The delta-rs backend creates and commits its tables through delta-rs, but
Spark writes their data files, through the Hadoop filesystem of the URI's scheme. A warehouse whose
scheme Spark has no filesystem for (``s3a://`` without the hadoop-aws jars, as here) is refused
when the Warehouse is made, before a table is created: an ingest into it used to create every empty
table and then fail on its first write (ClassNotFoundException: S3AFileSystem), leaving that
skeleton behind. Against a real S3 endpoint (moto's server, tests/s3_endpoint.py)."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest
from pyspark.sql import types as T

from nsreplay.config import load_settings
from nsreplay.storage import CommitInfo, TableSpec, Warehouse
from nsreplay.storage.arrow_types import dataset
from nsreplay.storage.errors import UnsupportedPathError
from pipelines.ingest.run import run_ingest
from s3_endpoint import put_object, s3_endpoint

LINE = '{"namesrv":"10.0.0.10:9876","ts":1732147200123,"kind":"channel","event":"CONNECT","conn":"c1","remote":"10.0.1.5:1"}\n'


def point_at(endpoint: str, monkeypatch) -> pafs.S3FileSystem:
    """The environment of an AWS SDK user (pyarrow's and delta-rs's) pointed at ``endpoint``, and
    pyarrow's filesystem of it."""
    for name, value in {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": "testing",
                        "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
                        "AWS_EC2_METADATA_DISABLED": "true"}.items():
        monkeypatch.setenv(name, value)
    return pafs.S3FileSystem(endpoint_override=endpoint, access_key="testing", secret_key="testing", region="us-east-1", allow_bucket_creation=True)


ROUTES = TableSpec(
    name="gold.routes",
    schema=T.StructType([T.StructField("namesrv", T.StringType(), False), T.StructField("ts", T.LongType(), False)]),
    partition_by=("namesrv",),
)


def test_a_table_in_a_bucket_is_read_without_spark_whatever_its_partition_values(spark, monkeypatch, tmp_path) -> None:
    """Written where Spark can write (a local warehouse), then copied into a bucket as it is, as a
    cluster's S3A writes it: ``Warehouse(s3a://..., None).files`` and ``arrow_types.dataset`` (what
    the shim reads with) read every row. Before, ``namesrv=10.0.0.1%3A9876/part-...`` was opened as
    ``namesrv=10.0.0.1:9876/part-...`` (FileNotFoundError: the shim could not load such a warehouse)."""
    rows = [("10.0.0.1:9876", 1), ("50%", 2), ("a b", 3), ("é", 4)]
    local = Warehouse(str(tmp_path / "wh"), spark, "delta-rs")
    local.ensure(ROUTES)
    local.append(ROUTES, spark.createDataFrame(rows, ROUTES.schema), CommitInfo(run_id="r1", job="test"))
    with s3_endpoint() as endpoint:
        fs = point_at(endpoint, monkeypatch)
        fs.create_dir("lake")
        for file in (tmp_path / "wh").rglob("*"):
            if file.is_file():
                put_object(endpoint, f"lake/wh/{file.relative_to(tmp_path / 'wh').as_posix()}", file.read_bytes())
        for root in ("s3a://lake/wh", "s3://lake/wh/", "S3://lake/wh", "S3A://lake/wh"):  # a URI's scheme is case-insensitive
            remote = Warehouse(root, None, "delta-rs")
            table = dataset(ROUTES, remote.files(ROUTES)).to_table()
            assert sorted(zip(table.column("namesrv").to_pylist(), table.column("ts").to_pylist())) == sorted(rows), root


def spark_has_filesystem(spark, scheme: str) -> bool:
    try:
        spark._jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, spark._jsc.hadoopConfiguration())
        return True
    except Exception:  # noqa: BLE001 - py4j's error for "no FileSystem" or "class not found"
        return False


def test_an_ingest_into_a_bucket_spark_cannot_write_fails_before_creating_any_table(spark, monkeypatch, tmp_path) -> None:
    if spark_has_filesystem(spark, "s3a"):
        pytest.skip("this Spark has Hadoop's S3A: an s3a:// warehouse is writable here")
    with s3_endpoint() as endpoint:
        fs = point_at(endpoint, monkeypatch)
        fs.create_dir("warehouse")
        capture = tmp_path / "capture.jsonl"
        capture.write_text(LINE)
        for root in ("s3a://warehouse/nsreplay", "s3://warehouse/nsreplay", "S3A://warehouse/nsreplay"):
            with pytest.raises(UnsupportedPathError, match="Spark has no filesystem for") as refused:
                run_ingest(spark, Warehouse(root, spark, "delta-rs"), load_settings(), str(capture), "r1")
            assert root.lower() in str(refused.value) and "\n" not in str(refused.value), refused.value
            left = [i.path for i in fs.get_file_info(pafs.FileSelector("warehouse", recursive=True))]
            assert left == [], (root, left)
        assert "hadoop-aws" in str(refused.value)


def test_an_endpoint_over_http_that_delta_rs_refuses_is_reported_on_one_plain_line(monkeypatch, capsys) -> None:
    """delta-rs reaches an ``http://`` endpoint only with AWS_ALLOW_HTTP=true; without it its error,
    several causes joined by a red arrow, came out with the terminal's colour codes in it
    (``\\x1b[31m↳\\x1b[0m``), on screen and in the reason file of spark-submit.sh alike."""
    from nsreplay.runtime import guarded

    with s3_endpoint() as endpoint:
        fs = point_at(endpoint, monkeypatch)
        monkeypatch.delenv("AWS_ALLOW_HTTP")
        fs.create_dir("plain")

        @guarded
        def main(argv: list[str] | None = None) -> int:
            Warehouse("s3a://plain/wh", None, "delta-rs").exists(ROUTES)
            return 0

        assert main([]) == 1
        [line] = capsys.readouterr().err.splitlines()
        assert "URL scheme is not allowed" in line and "\x1b" not in line and "↳" in line, repr(line)
