"""Bad input at the edges of what the columns and the model can hold: quarantined, never a crash.

Every line goes through :func:`read_line_row` and its row is converted to Arrow with READ_LINE's
schema, as the Spark task does (``transforms._batches``): a value that fits neither would stop the run.
Where the reference model reads the same record, the ingest's verdict is compared with the model's.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any

import pyarrow as pa
import pytest
from line_parsers import BODY, LIMITS, parser

from nsreplay.model import records as R
from nsreplay.model.namesrv import NameServer
from nsreplay.protocol.register_body import (
    MAX_INFLATED_BODY_BYTES,
    DataVersion,
    RegisterBody,
    TopicConfig,
    body_crc32,
    encode_compressed_register_body,
    encode_json_register_body,
    encode_register_body_bytes,
)
from nsreplay.storage.arrow_types import to_arrow_schema
from pipelines.ingest.capture_reader import RawLine
from pipelines.ingest.records import LineParser
from pipelines.ingest.transforms import ParseOptions, read_line_row
from pipelines.quality.rules import event_rules
from schemas.silver import READ_LINE

OPTIONS = ParseOptions(LIMITS, event_rules(min_ts=0, max_ts=2**62), max_queue_nums=1024, max_perm=15, keep_bytes=1 << 20)
SCHEMA = to_arrow_schema(READ_LINE)
TS = 1732147200123
INT = 2**31
LONG = 2**63


def rows(*records: dict[str, Any] | str, p: LineParser | None = None) -> list[dict[str, Any]]:
    """The READ_LINE rows of these records (one parser, in order), each checked to convert to Arrow."""
    p = p or parser()
    out = []
    for i, record in enumerate(records):
        data = (record if isinstance(record, str) else json.dumps(record)).encode("utf-8")
        row = read_line_row(p, "f.jsonl", RawLine(i + 1, data, len(data)), OPTIONS, set())
        pa.RecordBatch.from_pylist([row], schema=SCHEMA)  # raises when a value does not fit its column
        out.append(row)
    return out


def row(record: dict[str, Any] | str) -> dict[str, Any]:
    return rows(record)[0]


def verdict(r: dict[str, Any]) -> tuple[str, str | None, str | None]:
    return r["status"], r.get("reason"), r.get("detail")


def request(code: int, ext: dict[str, str], **fields: Any) -> dict[str, Any]:
    record = {"namesrv": "10.0.0.10:9876", "ts": TS, "kind": "request", "code": code, "version": 479, "opaque": 17,
              "conn": "10.0.1.5:53422@1732147190000", "extFields": ext}
    record.update(fields)
    return record


def register_header(**overrides: str) -> dict[str, str]:
    ext = {"brokerName": "broker-a", "brokerAddr": "10.0.1.5:10911", "clusterName": "DefaultCluster",
           "haServerAddr": "10.0.1.5:10912", "brokerId": "0", "compressed": "false", "bodyCrc32": "0",
           "enableActingMaster": "false"}
    ext.update(overrides)
    return ext


def register(body: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    ext = fields.pop("extFields", register_header())
    return request(103, ext, body=encode_json_register_body(BODY) if body is None else body, **fields)


def raw_register(raw: bytes, *, compressed: bool = False, **fields: Any) -> dict[str, Any]:
    ext = register_header(compressed=str(compressed).lower(), bodyCrc32=str(body_crc32(raw)))
    return request(103, ext, body_b64=base64.b64encode(raw).decode(), **fields)


def model_remark(record: dict[str, Any], profile: str = "rocketmq-5") -> tuple[int, str | None]:
    out = NameServer(profile, {}, 0).apply(record)
    return out.code, out.remark


# -------------------------------------------------------------------------------- header numbers


@pytest.mark.parametrize("code", [103, 104, 322, 105, 904])
@pytest.mark.parametrize("broker_id", [str(LONG), str(-LONG - 1), "99999999999999999999999"])
def test_a_broker_id_beyond_a_long_is_quarantined_with_the_models_words(code: int, broker_id: str) -> None:
    ext = register_header(brokerId=broker_id) if code != 105 else {"topic": "orders", "brokerId": broker_id}
    record = request(code, ext, body=encode_json_register_body(BODY) if code == 103 else None)
    detail = f"header brokerId is out of range: {broker_id!r}"
    assert verdict(row(record)) == ("quarantined", "wrong_type", detail)
    if code in (103, 104, 322):  # the requests whose brokerId the model reads
        assert model_remark(record) == (1, detail)


def test_the_largest_long_broker_id_is_accepted_and_stored() -> None:
    bad = row(register(extFields=register_header(brokerId=str(LONG))))
    good = row(register(extFields=register_header(brokerId=str(LONG - 1))))
    assert verdict(bad) == ("quarantined", "wrong_type", f"header brokerId is out of range: '{LONG}'")
    assert (good["status"], good["broker_id"], good["code"]) == ("accepted", LONG - 1, 103)


@pytest.mark.parametrize(("broker_id", "value"), [("١", 1), ("+0", 0), ("００", 0), ("٠٣", 3)])
def test_a_broker_id_java_reads_as_a_number_is_accepted_as_that_number(broker_id: str, value: int) -> None:
    """``Long.parseLong`` takes a sign and any script's decimal digits: the NameServer registers such a
    broker under the number, so the ingest keeps the record and the model applies it."""
    record = register(extFields=register_header(brokerId=broker_id))
    got = row(record)
    assert (got["status"], got["broker_id"], got.get("detail")) == ("accepted", value, None)
    assert model_remark(record, "rocketmq-4.9") == (0, None)  # (5.x refuses a new broker with one topic: spec §2)
    applied = NameServer("rocketmq-4.9", {}, 0)
    applied.apply(record)
    assert dict(applied.snapshot().brokerAddrTable["broker-a"].brokerAddrs) == {value: "10.0.1.5:10911"}


def test_a_body_crc_in_other_digits_is_checked_as_its_number() -> None:
    """``bodyCrc32`` goes through ``Integer.parseInt`` too: the CRC written in Arabic-Indic digits is
    the same CRC, and one digit off is a mismatch, for the ingest and the model alike."""
    raw = encode_register_body_bytes(BODY)
    arabic = str(body_crc32(raw)).translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))
    good = request(103, register_header(bodyCrc32=arabic), body_b64=base64.b64encode(raw).decode())
    assert verdict(row(good)) == ("accepted", None, None)
    assert model_remark(good, "rocketmq-4.9") == (0, None)
    off = str(body_crc32(raw) ^ 1).translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))
    bad = request(103, register_header(bodyCrc32=off), body_b64=base64.b64encode(raw).decode())
    assert verdict(row(bad))[:2] == ("quarantined", "crc_mismatch")
    assert model_remark(bad, "rocketmq-4.9") == (1, "crc32 not match")


@pytest.mark.parametrize("broker_id", ["0_0", " 0", "0\n", "\t0", "", "+", "\U0001d7ce"])
def test_a_broker_id_python_would_read_and_java_would_not_is_quarantined(broker_id: str) -> None:
    """Python's ``int()`` takes ``_`` between digits, spaces around them and a digit beyond the BMP;
    ``Long.parseLong`` does not, and the NameServer answers SYSTEM_ERROR."""
    record = register(extFields=register_header(brokerId=broker_id))
    assert verdict(row(record))[:2] == ("quarantined", "wrong_type")
    assert model_remark(record) == (1, f"header brokerId is not an integer: {broker_id!r}")


@pytest.mark.parametrize(
    ("key", "value"),
    [("bodyCrc32", str(INT)), ("bodyCrc32", str(-INT - 1)), ("heartbeatTimeoutMillis", str(LONG))],
)
def test_crc_and_heartbeat_headers_beyond_their_java_type_are_quarantined(key: str, value: str) -> None:
    record = register(extFields=register_header(**{key: value}))
    detail = f"header {key} is out of range: {value!r}"
    assert verdict(row(record)) == ("quarantined", "wrong_type", detail)
    assert model_remark(record) == (1, detail)


def test_a_rejected_line_keeps_only_a_ts_the_column_can_hold() -> None:
    """The quarantine row's ts is a long: a ts beyond it is left out (the line itself is kept)."""
    line = '{"namesrv":"10.0.0.10:9876","ts":18446744073709551615,"kind":"channel","event":"CONNECT","conn":"c","remote":"10.0.1.5:1"}'
    r = row(line)
    assert verdict(r) == ("quarantined", "wrong_type", "ts must be a 64-bit integer, got 18446744073709551615")
    assert (r["ts"], r["namesrv"], r["raw_text"]) == (None, "10.0.0.10:9876", line)


@pytest.mark.parametrize(("field", "literal", "shown"), [
    ("ts", "123456789012345678901234567890", "1.2345678901234568e+29"),  # orjson: a float beyond 64 bits
    ("ts", "1732147200000.5", "1732147200000.5"),
    ("ts", '"1732147200000"', "str"),
    ("seq", "-9223372036854775809", "-9.223372036854776e+18"),
])
def test_a_number_of_the_wrong_kind_or_size_is_shown_in_the_detail(field: str, literal: str, shown: str) -> None:
    base = {"ts": "1732147200000", "seq": "1"}
    base[field] = literal
    line = ('{"namesrv":"10.0.0.10:9876","ts":%s,"seq":%s,"kind":"channel","event":"CONNECT","conn":"c","remote":"r"}'
            % (base["ts"], base["seq"]))
    assert verdict(row(line)) == ("quarantined", "wrong_type", f"{field} must be a 64-bit integer, got {shown}")


# -------------------------------------------------------------------------------- register bodies


def _with_dv(field: str, value: int) -> dict[str, Any]:
    body = encode_json_register_body(BODY)
    body["topicConfigSerializeWrapper"]["dataVersion"][field] = value
    return body


def _with_topic(field: str, value: int) -> dict[str, Any]:
    body = encode_json_register_body(BODY)
    body["topicConfigSerializeWrapper"]["topicConfigTable"]["orders"][field] = value
    return body


LONG_FIELDS = ["counter", "timestamp", "stateVersion"]
INT_FIELDS = ["readQueueNums", "writeQueueNums", "perm", "topicSysFlag"]


@pytest.mark.parametrize("value", [LONG, -LONG - 1])
@pytest.mark.parametrize("field", LONG_FIELDS)
def test_a_data_version_beyond_a_long_is_an_undecodable_body_in_every_form(field: str, value: int) -> None:
    """A JSON `body` (orjson), a raw JSON body (Python's json) and a compressed one alike."""
    body = _with_dv(field, value)
    compressed = _compressed_with_dv({"counter": 3, "stateVersion": 0, "timestamp": 1732147100000, field: value})
    detail = f"{field} is out of range of a Java long"
    for record in (raw_register(json.dumps(body).encode()), raw_register(compressed, compressed=True)):
        assert verdict(row(record)) == ("quarantined", "undecodable_body", detail)
        assert model_remark(record) == (1, f"Failed to decode RegisterBrokerBody: {detail}")
    # orjson reads the line's integers in [-2**63, 2**64) as integers, others as floats
    in_line = detail if value >= 0 else f"{field} is not an integer"
    assert verdict(row(register(body))) == ("quarantined", "undecodable_body", in_line)


def _compressed_with_dv(dv: dict[str, int]) -> bytes:
    """A compressed body of BODY whose DataVersion JSON is ``dv`` (any integers)."""
    plain = zlib.decompress(encode_compressed_register_body(BODY))
    (length,) = struct.unpack_from(">i", plain)
    dv_json = json.dumps(dv).encode()
    return zlib.compress(struct.pack(">i", len(dv_json)) + dv_json + plain[4 + length :])


@pytest.mark.parametrize("value", [INT, -INT - 1])
@pytest.mark.parametrize("field", INT_FIELDS)
def test_a_topic_config_number_beyond_an_int_is_an_undecodable_body(field: str, value: int) -> None:
    body = _with_topic(field, value)
    detail = f"{field} is out of range of a Java int"
    for record in (register(body), raw_register(json.dumps(body).encode())):
        assert verdict(row(record)) == ("quarantined", "undecodable_body", detail)
        assert model_remark(record) == (1, f"Failed to decode RegisterBrokerBody: {detail}")


@pytest.mark.parametrize("config", [TopicConfig("orders", INT, 8, 6), TopicConfig("orders", 8, -INT - 1, 6), TopicConfig("orders", 8, 8, INT)])
def test_a_compressed_topic_entry_beyond_an_int_is_an_undecodable_body(config: TopicConfig) -> None:
    raw = encode_compressed_register_body(RegisterBody(BODY.data_version, (config,), ()))
    record = raw_register(raw, compressed=True)
    detail = "compressed topic entry has a field out of range of a Java int"
    assert verdict(row(record)) == ("quarantined", "undecodable_body", detail)
    assert model_remark(record) == (1, f"Failed to decode RegisterBrokerBody: {detail}")


def _compressed_entry_body(entry: bytes) -> bytes:
    """A compressed body (spec §8) of one topic entry, written byte for byte."""
    dv = json.dumps(BODY.data_version.to_json()).encode()
    return zlib.compress(b"".join([struct.pack(">i", len(dv)), dv, struct.pack(">i", 1), struct.pack(">i", len(entry)), entry,
                                   struct.pack(">i", 2), b"[]"]))


@pytest.mark.parametrize(
    ("entry", "detail"),
    [(b"orders 8_0 8 6 SINGLE_TAG", "compressed topic entry has a non-integer field"),
     (b"orders 8 8 6 single_tag", "compressed topic entry has a filter type that is not SINGLE_TAG or MULTI_TAG"),
     (b"orders 8 8 6 ", "compressed topic entry has too few fields")],
)
def test_a_compressed_topic_entry_java_cannot_read_is_an_undecodable_body(entry: bytes, detail: str) -> None:
    """``Integer.parseInt`` refuses ``8_0`` (Python's ``int()`` would take it), ``TopicFilterType.valueOf``
    an unknown name, and ``String.split`` drops the empty last field: the NameServer fails the body."""
    record = raw_register(_compressed_entry_body(entry), compressed=True)
    assert verdict(row(record)) == ("quarantined", "undecodable_body", detail)
    assert model_remark(record) == (1, f"Failed to decode RegisterBrokerBody: {detail}")


def test_a_compressed_topic_name_that_is_not_utf8_is_read_as_java_reads_it() -> None:
    """``new String(bytes, UTF_8)`` puts U+FFFD for what is not UTF-8, one for the three bytes of an
    encoded surrogate: the NameServer registers the topic under that name."""
    record = raw_register(_compressed_entry_body(b"or\xed\xa0\x80ders 8 8 6 SINGLE_TAG"), compressed=True)
    assert verdict(row(record))[0] == "accepted"
    applied = NameServer("rocketmq-4.9", {}, 0)
    assert applied.apply(record).code == 0
    assert set(applied.snapshot().topicQueueTable) == {"or\ufffdders"}


def _zeros_compressed(size: int) -> bytes:
    """A zlib stream of ``size`` zero bytes: ~1 KB per MB (an inflation "bomb")."""
    c = zlib.compressobj(9)
    step = 1 << 20
    return b"".join(c.compress(bytes(min(step, size - at))) for at in range(0, size, step)) + c.flush()


def test_a_compressed_body_beyond_the_inflation_limit_is_quarantined_not_inflated() -> None:
    """Inflated whole, a 24 MB line of such a body would take ~36 GB of a worker: the decoder stops at
    MAX_INFLATED_BODY_BYTES, the line is quarantined and the model answers SYSTEM_ERROR, in their words."""
    record = raw_register(_zeros_compressed(MAX_INFLATED_BODY_BYTES + 1), compressed=True)
    detail = f"compressed body inflates to more than {MAX_INFLATED_BODY_BYTES:,} bytes (nsreplay's limit)"
    assert verdict(row(record)) == ("quarantined", "undecodable_body", detail)
    assert model_remark(record) == (1, f"Failed to decode RegisterBrokerBody: {detail}")


def test_numbers_at_the_java_limits_are_accepted_and_stored() -> None:
    limits = RegisterBody(DataVersion(-LONG, LONG - 1, LONG - 1), (TopicConfig("orders", 8, 8, 6, INT - 1), TopicConfig("x", 0, 0, 0, -INT)), ())
    too_big = _with_dv("counter", LONG)
    first, again, bad = rows(register(encode_json_register_body(limits)), raw_register(encode_register_body_bytes(limits)), register(too_big))
    for r, encoding in ((first, "json"), (again, "json")):
        assert r["status"] == "accepted" and r["new_body"]["encoding"] == encoding
        nb = r["new_body"]
        assert (nb["dv_state_version"], nb["dv_timestamp"], nb["dv_counter"]) == (-LONG, LONG - 1, LONG - 1)
        assert [c["topic_sys_flag"] for c in nb["topic_configs"]] == [INT - 1, -INT]
    assert verdict(bad) == ("quarantined", "undecodable_body", "counter is out of range of a Java long")


def test_a_query_data_version_body_beyond_a_long_is_undecodable() -> None:
    ext = {"brokerName": "broker-a", "brokerAddr": "10.0.1.5:10911", "clusterName": "DefaultCluster", "brokerId": "0"}
    body = {"counter": LONG, "stateVersion": 0, "timestamp": 1}
    assert verdict(row(request(322, ext, body=body))) == ("quarantined", "undecodable_body", "DataVersion: counter is out of range of a Java long")


# -------------------------------------------------------------------------------- lone surrogates


def _raw_json_body(topic_entry: str, filters: str = "[]") -> bytes:
    """A raw JSON register body written by hand (so that it can hold ``\\ud800`` escapes)."""
    return (
        '{"filterServerList":' + filters + ',"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"stateVersion":0,'
        '"timestamp":1732147100000},"topicConfigTable":{' + topic_entry + "}}}"
    ).encode()


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        (_raw_json_body('"a":{"topicName":"orders\\ud800","perm":6}'), "topic name 'orders\\ud800' holds a lone surrogate (not valid UTF-8 text)"),
        (_raw_json_body('"orders\\udc00":{"perm":6}'), "topic name 'orders\\udc00' holds a lone surrogate (not valid UTF-8 text)"),
        (_raw_json_body('"a":{"topicName":"orders","topicFilterType":"\\ud800"}'), "topic filter type '\\ud800' holds a lone surrogate (not valid UTF-8 text)"),
        (_raw_json_body('"orders\\ud800":{"topicName":"orders"}'), "topic key 'orders\\ud800' holds a lone surrogate (not valid UTF-8 text)"),
        (_raw_json_body('"a":{"topicName":"orders"}', '["10.0.0.9:7777\\udfff"]'), "filter server '10.0.0.9:7777\\udfff' holds a lone surrogate (not valid UTF-8 text)"),
    ],
    ids=["topicName", "key as name", "filter type", "key", "filter server"],
)
def test_a_raw_body_with_a_lone_surrogate_is_undecodable_on_every_line(raw: bytes, detail: str) -> None:
    """A surrogate pair (an escaped emoji) and other non-ASCII text are fine; a lone surrogate is not."""
    record = raw_register(raw)
    fine = raw_register(_raw_json_body('"a":{"topicName":"\\u4e3b\\u9898-\\ud83d\\ude00","perm":6}'))
    first, second, ok = rows(record, dict(record, ts=TS + 30_000), fine)  # the second line meets the remembered verdict
    assert verdict(first) == verdict(second) == ("quarantined", "undecodable_body", detail)
    assert first.get("new_body") is None
    assert ok["status"] == "accepted"
    assert [c["topic_name"] for c in ok["new_body"]["topic_configs"]] == ["主题-😀"]


# -------------------------------------------------------------------------------- start records


def start(version: str, config: dict[str, Any]) -> dict[str, Any]:
    return {"namesrv": "10.0.0.10:9876", "ts": TS, "kind": "namesrv_start", "rocketmq_version": version, "config": config}


@pytest.mark.parametrize(
    ("version", "config", "problem"),
    [
        ("v5.1.0", {}, "unsupported rocketmq_version 'v5.1.0'"),
        ("3.2.6", {}, "unsupported rocketmq_version '3.2.6'"),
        ("", {}, "unsupported rocketmq_version ''"),
        ("5.3.3", {"scanNotActiveBrokerInterval": "5s"}, "config scanNotActiveBrokerInterval must be an integer, got '5s'"),
        ("5.3.3", {"scanNotActiveBrokerInterval": 0}, "config scanNotActiveBrokerInterval must be positive"),
        ("4.9.4", {"scanNotActiveBrokerInterval": "-1"}, "config scanNotActiveBrokerInterval must be positive"),
        ("5.3.3", {"scanNotActiveBrokerInterval": True}, "config scanNotActiveBrokerInterval must be an integer, got 'true'"),
        ("5.3.3", {"scanNotActiveBrokerInterval": 1.5}, "config scanNotActiveBrokerInterval must be an integer, got '1.5'"),
        ("5.3.3", {"scanNotActiveBrokerInterval": "99999999999999999999"}, "config scanNotActiveBrokerInterval is out of range of a Java long, got '99999999999999999999'"),
        ("5.3.3", {"scanNotActiveBrokerInterval": "--5"}, "config scanNotActiveBrokerInterval must be an integer, got '--5'"),
        # beyond the 4,300 digits Python's int() reads; the value shown cut short
        ("5.3.3", {"scanNotActiveBrokerInterval": "1" * 5000}, "config scanNotActiveBrokerInterval is out of range of a Java long, got '" + "1" * 56 + "..."),
    ],
)
def test_a_start_record_the_model_cannot_start_from_is_quarantined(version: str, config: dict[str, Any], problem: str) -> None:
    r = row(start(version, config))
    assert verdict(r) == ("quarantined", "wrong_type", f"namesrv_start: {problem}")
    with pytest.raises(ValueError, match="^" + problem.replace("(", r"\(").replace(")", r"\)") + "$"):
        # what the replay feeds the model: the record as stored (config values as strings)
        NameServer("rocketmq-5", {}, 0).apply(start(version, {k: json.dumps(v) if not isinstance(v, str) else v for k, v in config.items()}))


def test_a_start_record_number_with_thousands_of_leading_zeros_is_read_as_long_parse_long_reads_it() -> None:
    r = row(start("5.3.3", {"scanNotActiveBrokerInterval": "0" * 5000 + "7000"}))
    assert r["status"] == "accepted", r
    ns = NameServer("rocketmq-5", {}, 0)
    ns.apply(start(r["rocketmq_version"], r["config"]))
    assert ns.config.scanNotActiveBrokerInterval == 7000


def test_a_start_record_the_model_accepts_is_stored_as_it_reads_it() -> None:
    good, bad = rows(
        start("4.9.4", {"scanNotActiveBrokerInterval": 10000, "supportActingMaster": "yes", "other": {"a": 1}}),
        start("v5.1.0", {}),
    )
    assert good["status"] == "accepted"
    assert (good["rocketmq_version"], good["config"]) == ("4.9.4", {"scanNotActiveBrokerInterval": "10000", "supportActingMaster": "yes", "other": '{"a":1}'})
    NameServer("rocketmq-5", {}, 0).apply(start(good["rocketmq_version"], good["config"]))
    assert verdict(bad) == ("quarantined", "wrong_type", "namesrv_start: unsupported rocketmq_version 'v5.1.0'")


# -------------------------------------------------------------------------------- empty body_b64


EVENT_FIELDS = ("status", "reason", "detail", "code", "broker_id", "broker_name", "topic", "body_id", "body", "body_b64", "new_body")


def _event_view(r: dict[str, Any]) -> dict[str, Any]:
    return {k: r.get(k) for k in EVENT_FIELDS}


@pytest.mark.parametrize("compressed", ["false", "true"])
def test_an_empty_register_body_b64_is_no_body(compressed: str) -> None:
    """Even beside a `body` object: zero raw bytes are authoritative, and they are no body (still
    checked against a non-zero bodyCrc32, as in Java)."""
    ext = register_header(compressed=compressed)
    empty, absent = rows(register(extFields=ext, body_b64=""), request(103, ext))
    assert empty["status"] == "accepted"
    assert _event_view(empty) == _event_view(absent)
    assert (empty["broker_id"], empty.get("body_id"), empty.get("new_body"), empty.get("body_b64")) == (0, None, None, None)
    assert model_remark(register(extFields=ext, body_b64="")) == model_remark(request(103, ext)) == (0, None)
    # Java checks crc32(null body) = 0 against a non-zero bodyCrc32, and so does the model
    record = request(103, register_header(compressed=compressed, bodyCrc32="12345"), body_b64="")
    assert verdict(row(record)) == ("quarantined", "crc_mismatch", "bodyCrc32 12345 does not match the body (0)")
    assert model_remark(record) == (1, "crc32 not match")


@pytest.mark.parametrize(
    ("code", "ext"),
    [
        (322, {"brokerName": "broker-a", "brokerAddr": "10.0.1.5:10911", "clusterName": "DefaultCluster", "brokerId": "0"}),
        (217, {"topic": "t1"}),
        (104, {"brokerName": "broker-a", "brokerAddr": "10.0.1.5:10911", "clusterName": "DefaultCluster", "brokerId": "0"}),
        (904, {"brokerAddr": "10.0.1.5:10911", "clusterName": "DefaultCluster"}),
        (100, {"namespace": "ns", "key": "k", "value": "v"}),
        (105, {"topic": "orders"}),
    ],
)
def test_an_empty_body_b64_is_no_body_for_every_code(code: int, ext: dict[str, str]) -> None:
    empty, with_object, absent = rows(request(code, ext, body_b64=""), request(code, ext, body_b64="", body={"counter": 1}), request(code, ext))
    assert _event_view(empty) == _event_view(with_object) == _event_view(absent)
    assert (empty.get("body"), empty.get("body_b64")) == (None, None)
    assert (empty["status"], empty.get("reason")) == ("accepted", None)  # 217 without a body: SUCCESS, no change


# ------------------------------------------------------------------------- REGISTER_TOPIC bodies


def test_register_topic_bodies_the_nameserver_takes_are_accepted_as_the_model_reads_them() -> None:
    """A 217 without a body or with ``queueDatas: null`` is SUCCESS with no change; a raw body in
    fastjson's shape (bare integer map keys, as in a TopicRouteData's brokerAddrs) is JSON to the
    NameServer and to the model, so the ingest reads it the same way and stores its canonical JSON."""
    fastjson = b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.1.5:10911"},"brokerName":"broker-a","cluster":"c"}],"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
    absent, null_queues, shaped = rows(
        request(217, {"topic": "t1"}),
        request(217, {"topic": "t1"}, body={"queueDatas": None}),
        request(217, {"topic": "t1"}, body_b64=base64.b64encode(fastjson).decode()),
    )
    assert [r["status"] for r in (absent, null_queues, shaped)] == ["accepted"] * 3
    assert absent.get("body") is None and null_queues["body"] == '{"queueDatas":null}'
    stored = json.loads(shaped["body"])
    assert stored["brokerDatas"][0]["brokerAddrs"] == {"0": "10.0.1.5:10911"}
    assert stored["queueDatas"][0]["brokerName"] == "broker-a"
    ns = NameServer("rocketmq-5", {}, 0)
    ns.apply(R.register_broker(1, cluster="c", name="broker-a", addr="10.0.1.5:10911", topics=["x", "TBW102"]))
    for record in (request(217, {"topic": "t1"}), request(217, {"topic": "t1"}, body={"queueDatas": None})):
        assert ns.apply({**record, "ts": 2}).code == 0
    assert "t1" not in ns.snapshot().topicQueueTable
    assert ns.apply({**request(217, {"topic": "t1"}, body=stored), "ts": 3}).code == 0  # the stored body, as the replay feeds it
    assert set(ns.snapshot().topicQueueTable["t1"]) == {"broker-a"}


def test_a_raw_small_body_that_cannot_be_stored_as_json_text_is_undecodable() -> None:
    lone, huge = rows(
        request(217, {"topic": "t1"}, body_b64=base64.b64encode(b'{"queueDatas":[{"brokerName":"b\\ud800"}]}').decode()),
        request(322, {"brokerName": "b", "brokerAddr": "a:1", "clusterName": "c", "brokerId": "0"},
                body_b64=base64.b64encode(b'{"counter":1,"other":' + str(2**70).encode() + b"}").decode()),
    )
    assert (lone["status"], lone["reason"]) == ("quarantined", "undecodable_body")
    assert (huge["status"], huge["reason"]) == ("quarantined", "undecodable_body")


def test_a_quarantine_keep_beyond_the_line_limit_is_a_configuration_error(tmp_path) -> None:
    """Keeping more of a quarantined line than the longest line kept whole makes no sense: said at load."""
    import shutil

    from nsreplay.config import PROJECT_ROOT, ConfigError, load_settings

    shutil.copytree(PROJECT_ROOT / "conf" / "base", tmp_path / "base")
    (tmp_path / "small").mkdir()
    (tmp_path / "small" / "nsreplay.toml").write_text("[ingest]\nmax_line_bytes = 65536\n")
    with pytest.raises(ConfigError, match=r"quarantine_keep_bytes \(1048576\) must not exceed max_line_bytes \(65536\)"):
        load_settings("small", tmp_path)
    (tmp_path / "small" / "nsreplay.toml").write_text("[ingest]\nmax_line_bytes = 65536\nquarantine_keep_bytes = 65536\n")
    assert load_settings("small", tmp_path).ingest.quarantine_keep_bytes == 65536
