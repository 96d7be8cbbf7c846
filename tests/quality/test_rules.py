"""The row rules are enforced twice, by the parser (Python's ``re``) and by Great Expectations (Spark's
``rlike``, Java's regex): both must give the same verdict on every value, including the ones where
the two regex dialects differ (``$`` matches before a final newline in both)."""

from __future__ import annotations

import ipaddress
import random
import re

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


_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def _address_by_rocketmq(value: str) -> bool:
    """An independent reading of the rule: split at the last colon (RocketMQ's string2SocketAddress);
    the port 1..65535 without a leading zero; the host a name, or an IPv6 address as Python's
    ``ipaddress`` reads it, bracketed or not, with an optional zone of name characters."""
    host, colon, port = value.rpartition(":")
    if not colon or not re.fullmatch(r"[1-9][0-9]{0,4}", port) or int(port) > 65535:
        return False
    bracketed = host.startswith("[") and host.endswith("]")
    if not bracketed and ":" not in host:
        return _NAME.fullmatch(host) is not None
    address, percent, zone = (host[1:-1] if bracketed else host).partition("%")
    if percent and not _NAME.fullmatch(zone):
        return False
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return False
    return True


def _generated_addresses(count: int, seed: int) -> list[str]:
    """IPv6 ``host:port`` text, valid and nearly so: random addresses (mostly zeros, as real ones are)
    written compressed, exploded or as Java does (groups without leading zeros), some with an IPv4
    tail, then maybe damaged (a colon more or less, a group more, a non-hex digit, upper case), given a
    zone or not, bracketed or not, with a port among good and bad ones (all at most 65535: the range
    is the parser's alone, tested above)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        groups = [rng.choice([0, 0, 0, 1, 0xFE80, 0xFFFF, rng.getrandbits(16)]) for _ in range(8)]
        ip = ipaddress.IPv6Address(sum(g << (16 * (7 - i)) for i, g in enumerate(groups)))
        text = rng.choice([ip.compressed, ip.exploded, ":".join(f"{g:x}" for g in groups),
                           f"::ffff:{ipaddress.IPv4Address(groups[7] | groups[6] << 16)}"])
        damage = rng.randrange(14)
        if damage == 0:
            text = text.replace(":", "::", 1)
        elif damage == 1:
            text = text.replace("::", ":", 1)
        elif damage == 2:
            text += ":1"
        elif damage == 3:
            text = text.replace("0", "g", 1)
        elif damage == 4:
            text = text.upper()
        elif damage == 5:
            text = text[1:]
        text += rng.choice(["", "", "", "", "%eth0", "%2", "%br-1a2b.100", "", "%", "%e th0", "%eth0%1"])
        if rng.random() < 0.5:
            text = f"[{text}]"
        out.append(text + ":" + rng.choice(["10911", "10911", "10911", "54321", "1", "65535", "0", "09876", "", "1x"]))
    return out


GENERATED = _generated_addresses(3000, seed=65)


def test_the_parser_reads_generated_ipv6_addresses_as_rocketmq_does() -> None:
    rule = RowRule("broker_address", "broker_addr", regex=ADDRESS_REGEX)
    wrong = [v for v in GENERATED if rule.passes(v) is not _address_by_rocketmq(v)]
    assert not wrong, wrong[:20]
    assert 0.2 < sum(map(_address_by_rocketmq, GENERATED)) / len(GENERATED) < 0.8  # both verdicts well tried


def test_spark_reads_generated_ipv6_addresses_as_the_parser_does(spark) -> None:
    df = spark.createDataFrame([(v,) for v in GENERATED], "value string")
    got = {r["value"]: r["ok"] for r in df.select("value", F.col("value").rlike(ADDRESS_REGEX).alias("ok")).collect()}
    rule = RowRule("broker_address", "broker_addr", regex=ADDRESS_REGEX)
    wrong = [v for v in GENERATED if got[v] is not rule.passes(v)]
    assert not wrong, wrong[:20]
