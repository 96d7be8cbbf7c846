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
    # what RocketMQ writes for an IPv6 broker (brokerIP1 unset: "[" + getHostAddress() + "]", uncompressed,
    # with the zone of a link-local address), for an unbracketed brokerIP1 (split at the last colon, as
    # RocketMQ's string2SocketAddress does) and for a peer (Netty's InetSocketAddress text: JDK 8
    # unbracketed, JDK 14+ bracketed)
    ("[fe80::1%eth0]:9876", True),
    ("[fe80:0:0:0:fc:ff:fe00:1%eth0]:10911", True),
    ("[fe80:0:0:0:fc:ff:fe00:1%2]:10911", True),
    ("[fe80:0:0:0:0:0:0:1%br-1a2b3c4d5e6f]:54321", True),
    ("[2001:DB8::5]:10911", True),
    ("[::ffff:10.0.0.1]:10911", True),
    ("[::]:9876", True),
    ("2001:db8::5:10911", True),
    ("0:0:0:0:0:0:0:1:54321", True),
    ("fe80:0:0:0:0:0:0:1%eth0:54321", True),
    ("::1:9876", True),
    ("[0:0:0:0:0:0:0:1]:65535", True),
    # not an address: an empty or broken IPv6 host, a zone that is empty or spaced, no port
    ("[]:9876", False),
    ("[fe80::1%]:9876", False),
    ("[fe80::1%eth 0]:9876", False),
    ("[fe80::1%eth0\n]:9876", False),
    ("[1:2:3:4:5:6:7:8:9]:9876", False),
    ("[2001:db8:::5]:9876", False),
    ("[1::2::3]:9876", False),
    ("[12345::1]:9876", False),
    ("[::1]", False),
    ("[::1]:", False),
    ("[::1]:0", False),
    ("[::1]9876", False),
    ("[::1]:9876\n", False),
    (" [::1]:9876", False),
    ("[::1:9876", False),
    ("::1]:9876", False),
    ("2001:db8::5", False),
    ("fe80::1", False),
    ("::9876", False),
    ("1:2:3", False),
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
    assert rule.passes("[::1]:65535") and not rule.passes("[::1]:65536")
    assert rule.passes("2001:db8::5:65535") and not rule.passes("2001:db8::5:99999")
