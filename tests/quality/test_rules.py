"""The row rules are enforced twice, by the parser (Python's ``re``) and by Great Expectations (Spark's
``rlike``, Java's regex): both must give the same verdict on every value, including the ones where
the two regex dialects differ (``$`` matches before a final newline in both)."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from pipelines.quality.rules import ADDRESS_REGEX, RowRule

ADDRESSES = [
    ("10.0.0.10:9876", True),
    ("broker-a.example_1:10911", True),
    ("[::1]:9876", True),
    ("[fe80::1%eth0]:9876", False),
    ("10.0.0.10:9876\n", False),
    ("10.0.0.10:9876\r\n", False),
    ("10.0.0.10:9876\r", False),
    ("\n10.0.0.10:9876", False),
    ("10.0.0.10:9876 ", False),
    ("10.0.0.10:09876", False),
    ("10.0.0.10:0", False),
    ("10.0.0.10:", False),
    (":9876", False),
    ("10.0.0.10", False),
    ("10.0.0.10:9876:1", False),
    ("", False),
]


@pytest.mark.parametrize("value, valid", ADDRESSES)
def test_the_parser_reads_an_address_as_the_rule_says(value: str, valid: bool) -> None:
    assert RowRule("namesrv_address", "namesrv", regex=ADDRESS_REGEX).passes(value) is valid


def test_spark_reads_every_address_as_the_parser_does(spark) -> None:
    """The same regex in Spark (what Great Expectations' ExpectColumnValuesToMatchRegex runs): a value
    the parser let through never fails the suite, and one it quarantined would fail it."""
    df = spark.createDataFrame([(v,) for v, _ in ADDRESSES], "value string")
    got = {r["value"]: r["ok"] for r in df.select("value", F.col("value").rlike(ADDRESS_REGEX).alias("ok")).collect()}
    assert got == {v: valid for v, valid in ADDRESSES}


def test_a_port_beyond_65535_is_refused_by_the_parser() -> None:
    """The one check the regex leaves to code (a number range): Spark's suite cannot see it, so the
    parser makes it."""
    rule = RowRule("namesrv_address", "namesrv", regex=ADDRESS_REGEX)
    assert rule.passes("10.0.0.10:65535") and not rule.passes("10.0.0.10:65536")
