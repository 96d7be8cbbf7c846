"""A warehouse at a URI: the delta-rs backend creates and commits its tables through delta-rs, but
Spark writes their data files, through the Hadoop filesystem of the URI's scheme. A warehouse whose
scheme Spark has no filesystem for (``s3a://`` without the hadoop-aws jars, as here) is refused
when the Warehouse is made, before a table is created: an ingest into it used to create every empty
table and then fail on its first write (ClassNotFoundException: S3AFileSystem), leaving that
skeleton behind. Against a real S3 endpoint (moto's server, tests/s3_endpoint.py)."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest

from nsreplay.config import load_settings
from nsreplay.storage import Warehouse
from nsreplay.storage.errors import UnsupportedPathError
from pipelines.ingest.run import run_ingest
from tests.s3_endpoint import s3_endpoint

LINE = '{"namesrv":"10.0.0.10:9876","ts":1732147200123,"kind":"channel","event":"CONNECT","conn":"c1","remote":"10.0.1.5:1"}\n'


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
        for name, value in {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": "testing",
                            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
                            "AWS_EC2_METADATA_DISABLED": "true"}.items():
            monkeypatch.setenv(name, value)
        fs = pafs.S3FileSystem(endpoint_override=endpoint, access_key="testing", secret_key="testing", region="us-east-1", allow_bucket_creation=True)
        fs.create_dir("warehouse")
        capture = tmp_path / "capture.jsonl"
        capture.write_text(LINE)
        for root in ("s3a://warehouse/nsreplay", "s3://warehouse/nsreplay"):
            with pytest.raises(UnsupportedPathError, match="Spark has no filesystem for") as refused:
                run_ingest(spark, Warehouse(root, spark, "delta-rs"), load_settings(), str(capture), "r1")
            assert root in str(refused.value) and "\n" not in str(refused.value), refused.value
            left = [i.path for i in fs.get_file_info(pafs.FileSelector("warehouse", recursive=True))]
            assert left == [], (root, left)
        assert "hadoop-aws" in str(refused.value)
