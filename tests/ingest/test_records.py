"""The record parser: every reason code of the bad-input contract, identities, body decoding once."""

import base64
import json
import zlib

import pytest

from line_parsers import BODY, parser
from nsreplay.protocol.register_body import (
    RegisterBody,
    TopicConfig,
    body_crc32,
    encode_compressed_register_body,
    encode_json_register_body,
    encode_register_body_bytes,
)
from nsreplay.config import load_settings
from pipelines.ingest.bronze_form import STORED_BODY_MIN_BYTES
from pipelines.ingest.records import Accepted, LineParser, ParserLimits, Rejected



def register(**overrides) -> dict:
    record = {
        "namesrv": "10.0.0.10:9876", "ts": 1732147200123, "seq": 5, "kind": "request", "code": 103, "version": 479,
        "opaque": 17, "conn": "10.0.1.5:53422@1732147190000",
        "extFields": {"brokerName": "broker-a", "brokerAddr": "10.0.1.5:10911", "clusterName": "DefaultCluster",
                      "haServerAddr": "10.0.1.5:10912", "brokerId": "0", "compressed": "false", "bodyCrc32": "0",
                      "enableActingMaster": "false"},
        "body": encode_json_register_body(BODY),
    }
    record.update(overrides)
    return record


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def parse(record_or_text, p: LineParser | None = None):
    text = record_or_text if isinstance(record_or_text, str) else json.dumps(record_or_text)
    return (p or parser()).parse(text)


def test_register_is_accepted_with_typed_fields_and_its_body_decoded_once() -> None:
    p = parser()
    first, second = parse(register(), p), parse(register(ts=1732147230123, opaque=18), p)
    assert isinstance(first, Accepted) and isinstance(second, Accepted)
    e = first.event
    assert (e["namesrv"], e["ts"], e["seq"], e["kind"], e["code"], e["broker_id"], e["broker_addr"]) == (
        "10.0.0.10:9876", 1732147200123, 5, "request", 103, 0, "10.0.1.5:10911")
    assert first.new_body is not None and first.new_body.body == BODY
    assert second.new_body is None and second.event["body_id"] == e["body_id"]
    assert second.event["record_id"] != e["record_id"]


def test_record_identity_ignores_key_order_but_not_values() -> None:
    a = parse(register())
    reordered = json.dumps(dict(reversed(list(register().items()))))
    b = parse(reordered)
    c = parse(register(opaque=99))
    assert a.event["record_id"] == b.event["record_id"] != c.event["record_id"]


@pytest.mark.parametrize(
    "text, reason",
    [
        ('{"namesrv": "x:1", "ts": 1', "invalid_json"),
        ("[1, 2]", "not_an_object"),
        ("   ", "empty_line"),
        (" \t\r ", "empty_line"),
        ("\x1f", "invalid_json"),  # not whitespace to JSON, though Python's str.strip() takes it
        ("\x0b\x0c\x1c", "invalid_json"),
        (json.dumps({k: v for k, v in register().items() if k != "ts"}), "missing_field"),
        (json.dumps(register(ts="1732147200123")), "wrong_type"),
        (json.dumps(register(ts=1.5)), "wrong_type"),
        (json.dumps(register(code="103")), "wrong_type"),
        (json.dumps(register(kind="gossip")), "unknown_kind"),
        (json.dumps(register(code=99999)), "unknown_code"),
        (json.dumps(register(extFields={"brokerName": "b"})), "missing_field"),
        (json.dumps(register(extFields={**register()["extFields"], "brokerId": "zero"})), "wrong_type"),
        (json.dumps(register(extFields={**register()["extFields"], "brokerId": 0})), "wrong_type"),
        (json.dumps(register(extFields={**register()["extFields"], "brokerId": "0\n"})), "wrong_type"),
        (json.dumps({"namesrv": "a:1", "ts": 1, "kind": "channel", "event": "REBOOT", "conn": "c", "remote": "r:1"}), "unknown_channel_event"),
        (json.dumps(register(body=None, body_b64="%%%not-base64")), "undecodable_body"),
        (json.dumps(register(body={"topicConfigSerializeWrapper": {"topicConfigTable": {"t": {"perm": "6"}}}})), "undecodable_body"),
        (json.dumps(register(body={"topicConfigSerializeWrapper": {"topicConfigTable": {"t": {"perm": 99}}}})), "quality:perm_range"),
    ],
)
def test_bad_lines_get_their_reason(text: str, reason: str) -> None:
    verdict = parse(text)
    assert isinstance(verdict, Rejected), verdict
    assert verdict.reason == reason, verdict.detail
    # the same from a parser that has accepted the good line before (it remembers valid headers)
    seasoned = parser()
    assert isinstance(parse(register(), seasoned), Accepted)
    again = parse(text, seasoned)
    assert isinstance(again, Rejected) and (again.reason, again.detail) == (verdict.reason, verdict.detail)


def test_a_header_remembered_as_valid_is_valid_only_with_its_code() -> None:
    p = parser()
    ext = {"brokerName": "broker-a", "brokerAddr": "10.0.1.5:10911", "clusterName": "DefaultCluster", "brokerId": "0"}
    assert isinstance(parse(register(code=322, extFields=ext, body={"counter": 1, "timestamp": 2, "stateVersion": 0}), p), Accepted)
    for code, reason in ((99999, "unknown_code"), (100, "missing_field")):
        verdict = parse(register(code=code, extFields=ext, body=None), p)
        assert isinstance(verdict, Rejected) and verdict.reason == reason, verdict
    unhashable = parse(register(code=322, extFields={**ext, "brokerId": ["0"]}, body=None), p)
    assert isinstance(unhashable, Rejected) and unhashable.reason == "wrong_type"


def test_invalid_utf8_is_rejected_before_parsing() -> None:
    verdict = parser().parse(json.dumps(register()), exact=False)
    assert isinstance(verdict, Rejected) and verdict.reason == "invalid_utf8"


def test_crc_is_checked_against_the_raw_bytes_only() -> None:
    raw = encode_register_body_bytes(BODY)
    ext = {**register()["extFields"], "bodyCrc32": str(body_crc32(raw))}
    good = parse(register(body=None, body_b64=base64.b64encode(raw).decode(), extFields=ext))
    assert isinstance(good, Accepted) and good.new_body.body == BODY
    bad_ext = {**ext, "bodyCrc32": str(body_crc32(raw) ^ 1)}
    bad = parse(register(body=None, body_b64=base64.b64encode(raw).decode(), extFields=bad_ext))
    assert isinstance(bad, Rejected) and bad.reason == "crc_mismatch"
    json_only = parse(register(extFields=bad_ext))  # a decoded JSON body is taken as having passed
    assert isinstance(json_only, Accepted)


def test_compressed_body_needs_the_compressed_header() -> None:
    raw = base64.b64encode(encode_compressed_register_body(BODY)).decode()
    ok = parse(register(body=None, body_b64=raw, extFields={**register()["extFields"], "compressed": "true"}))
    assert isinstance(ok, Accepted) and ok.new_body.encoding == "compressed"
    assert ok.new_body.body.topic_configs == BODY.topic_configs
    rejected = parse(register(body=None, body_b64=raw))
    assert isinstance(rejected, Rejected) and rejected.reason == "undecodable_body"


@pytest.mark.parametrize("flag", ["TRUE", "True"])
def test_the_compressed_header_is_read_like_boolean_parse_boolean(flag: str) -> None:
    """Java's Boolean.parseBoolean ignores case, and so does the model: "TRUE" is compressed."""
    raw = base64.b64encode(encode_compressed_register_body(BODY, with_mappings=True)).decode()
    ok = parse(register(body=None, body_b64=raw, extFields={**register()["extFields"], "compressed": flag}))
    assert isinstance(ok, Accepted) and ok.new_body.encoding == "compressed"
    assert ok.new_body.body == BODY


def test_every_line_with_a_bad_body_is_rejected_not_only_the_first() -> None:
    p = parser()
    bad = register(body={"topicConfigSerializeWrapper": {"topicConfigTable": {"t": {"perm": 99}}}})
    assert [parse(bad, p).reason, parse({**bad, "ts": bad["ts"] + 1}, p).reason] == ["quality:perm_range"] * 2


def test_other_kinds() -> None:
    start = parse({"namesrv": "a:1", "ts": 1, "kind": "namesrv_start", "rocketmq_version": "5.3.3", "config": {"scanNotActiveBrokerInterval": 5000, "supportActingMaster": True, "x": "y"}})
    assert start.event["config"] == {"scanNotActiveBrokerInterval": "5000", "supportActingMaster": "true", "x": "y"}
    channel = parse({"namesrv": "a:1", "ts": 1, "kind": "channel", "event": "CLOSE", "conn": "c1", "remote": "10.0.0.1:5555"})
    assert (channel.event["event"], channel.event["remote"]) == ("CLOSE", "10.0.0.1:5555")
    response = parse({"namesrv": "a:1", "ts": 1, "kind": "response", "code": 17, "opaque": 3, "conn": "c", "remark": "No topic"})
    assert response.event["code"] == 17 and response.event["remark"] == "No topic"
    qdv = parse(register(code=322, body={"counter": 3, "stateVersion": 0, "timestamp": 5}))
    assert json.loads(qdv.event["body"]) == {"counter": 3, "stateVersion": 0, "timestamp": 5} and qdv.event.get("body_id") is None


# a body the parser learns for its fast path: STORED_BODY_MIN_BYTES or more of JSON text
FAST_BODY = RegisterBody(BODY.data_version, tuple(TopicConfig(f"t-{i:03d}", 8, 8, 6, 0) for i in range(40)), ())
BODY_TEXT = json.dumps(encode_json_register_body(FAST_BODY), separators=(",", ":"))
PREFIX = json.dumps({k: v for k, v in register().items() if k != "body"})[:-1]


@pytest.mark.parametrize(
    "line",
    [
        PREFIX + ',"body":' + BODY_TEXT + "}",                                   # the common case
        PREFIX + ',"x":"a,\\"body\\":' + BODY_TEXT + '"}',                      # the mark inside a string
        PREFIX + ',"nested":{"y":1,"body":' + BODY_TEXT + "}}",                  # not at the top level
        PREFIX + ',"body":{"a":1},"body":' + BODY_TEXT + "}",                    # duplicate key: last wins
        PREFIX[:-5] + ',"body":' + BODY_TEXT + "}",                              # broken prefix
        PREFIX + ',"body":' + BODY_TEXT + "}}",                                  # trailing garbage
        PREFIX.replace('"ts": 1732147200123', '"ts": "1732147200123"') + ',"body":' + BODY_TEXT + "}",
        '{,"body":' + BODY_TEXT + "}",                                         # no member before the comma
        '{ ,"body":' + BODY_TEXT + "}",
    ],
)
def test_the_repeated_body_fast_path_agrees_with_a_full_parse(line: str) -> None:
    assert len(BODY_TEXT) >= STORED_BODY_MIN_BYTES  # else no line below would take the fast path
    warm = parser()
    warm.parse(PREFIX + ',"body":' + BODY_TEXT + "}")  # teaches the parser this body text
    cold = parser().parse(line)
    fast = warm.parse(line)
    if isinstance(cold, Accepted):
        assert isinstance(fast, Accepted) and fast.event == cold.event
    else:
        assert fast == cold


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    "where", ["channel member", "response body", "start config", "register body member", "admin body", "large response body", "large admin body"]
)
def test_a_value_nested_deeper_than_can_be_stored_is_quarantined_not_raised(where: str) -> None:
    """orjson reads 1,024 levels but writes 254: a record whose identity or stored text needs a
    deeper value is quarantined as too_deep, with its NameServer and ts, rather than failing the run.
    A large last ``body`` (1 KiB or more, which the parser learns for its fast path) too."""
    deep = _nested(300)
    head = '"namesrv":"10.0.0.10:9876","ts":1732147200123'
    pad = '"pad":"' + "x" * 1100 + '"'
    text = {
        "channel member": f'{{{head},"kind":"channel","event":"CLOSE","conn":"c","remote":"10.0.1.5:1","x":{deep}}}',
        "response body": f'{{{head},"kind":"response","code":0,"opaque":1,"conn":"c","body":{{"x":{deep}}}}}',
        "start config": f'{{{head},"kind":"namesrv_start","rocketmq_version":"4.9.4","config":{{"x":{deep}}}}}',
        "register body member": json.dumps(register())[:-2] + f',"ignored":{deep}}}}}',
        "admin body": f'{{{head},"kind":"request","code":217,"version":479,"opaque":1,"conn":"c","extFields":{{"topic":"t"}},"body":{{"queueDatas":[],"x":{deep}}}}}',
        "large response body": f'{{{head},"kind":"response","code":0,"opaque":1,"conn":"c","body":{{{pad},"x":{deep}}}}}',
        "large admin body": f'{{{head},"kind":"request","code":217,"version":479,"opaque":1,"conn":"c","extFields":{{"topic":"t"}},"body":{{"queueDatas":[],{pad},"x":{deep}}}}}',
    }[where]
    json.loads(text)  # valid JSON
    verdict = parse(text)
    assert isinstance(verdict, Rejected), verdict
    assert (verdict.reason, verdict.namesrv, verdict.ts) == ("too_deep", "10.0.0.10:9876", 1732147200123), verdict.detail
    shallow = parse(text.replace(deep, _nested(200)))
    assert isinstance(shallow, Accepted), shallow


@pytest.mark.parametrize("tail", ["]" * 1100 + "}", "]" * 1099 + "}"])
def test_a_line_nested_deeper_than_json_is_read_is_too_deep_not_invalid(tail: str) -> None:
    """orjson reads 1,024 levels: a line nested deeper is too deep to be read (whether or not the rest
    of it is well formed, which is not known), with the same reason as one too deep to be stored."""
    verdict = parse('{"namesrv":"10.0.0.10:9876","ts":1732147200123,"kind":"channel","x":' + "[" * 1100 + tail)
    assert isinstance(verdict, Rejected) and verdict.reason == "too_deep", verdict
    assert verdict.detail.startswith("a value nested too deeply to be read (depth limit exceeded"), verdict.detail


def _compressed(dv_json: bytes, entries: list[bytes]) -> bytes:
    """A compressed register body (semantics spec §8) from its parts, without the mapping section."""
    chunk = lambda data: len(data).to_bytes(4, "big", signed=True) + data  # noqa: E731
    return zlib.compress(chunk(dv_json) + len(entries).to_bytes(4, "big") + b"".join(map(chunk, entries)) + chunk(b"[]"))


@pytest.mark.parametrize("where", ["register body", "compressed dataVersion", "data version body", "admin body"])
def test_a_raw_body_nested_deeper_than_python_reads_is_quarantined_not_raised(where: str) -> None:
    """JSON in ``body_b64`` is read with Python's json module, whose stack ends near 1,000 levels: a
    body nested deeper is undecodable (quarantined with its NameServer and ts), not a crash of the run."""
    deep = _nested(1100).encode()
    ext = register()["extFields"]
    record = {
        "register body": register(body=None, body_b64=_b64(b'{"filterServerList":' + deep + b"}")),
        "compressed dataVersion": register(body=None, version=400, body_b64=_b64(_compressed(deep, [])), extFields={**ext, "compressed": "true"}),
        "data version body": register(code=322, body=None, body_b64=_b64(deep), extFields={"brokerAddr": "10.0.1.5:10911", "clusterName": "C"}),
        "admin body": register(code=217, body=None, body_b64=_b64(b'{"queueDatas":' + deep + b"}"), extFields={"topic": "t"}),
    }[where]
    verdict = parse(record)
    assert isinstance(verdict, Rejected), verdict
    assert (verdict.reason, verdict.namesrv, verdict.ts) == ("undecodable_body", "10.0.0.10:9876", 1732147200123)
    assert "too deeply" in verdict.detail, verdict.detail


@pytest.mark.parametrize(
    "key, text, outcome",
    [
        ("brokerId", "1" * 5000, "wrong_type"),
        ("brokerId", "0" * 5000 + "1", 1),           # Long.parseLong reads any number of leading zeros
        ("brokerId", "٠" * 5000 + "٢", 2),           # of any script
        ("bodyCrc32", "7" * 5000, "wrong_type"),
        ("heartbeatTimeoutMillis", "-" + "9" * 4400, "wrong_type"),
    ],
)
def test_integer_headers_longer_than_python_reads_are_read_as_java_reads_them(key: str, text: str, outcome) -> None:
    """Python's int() refuses more than 4,300 digits; Java reads them (leading zeros) or refuses them
    as out of range. Either way the line gets a verdict: never an exception that stops the run."""
    verdict = parse(register(extFields={**register()["extFields"], key: text}))
    if isinstance(outcome, str):
        assert isinstance(verdict, Rejected) and verdict.reason == outcome and "out of range" in verdict.detail, verdict
    else:
        assert isinstance(verdict, Accepted) and verdict.event["broker_id"] == outcome, verdict


@pytest.mark.parametrize("read, outcome", [("8" * 5000, None), ("0" * 5000 + "8", 8)])
def test_compressed_topic_numbers_longer_than_python_reads_are_read_as_java_reads_them(read: str, outcome: int | None) -> None:
    entry = f"orders {read} 8 6 SINGLE_TAG".encode()
    raw = _compressed(b'{"counter":3,"stateVersion":0,"timestamp":1732147100000}', [entry])
    verdict = parse(register(body=None, version=400, body_b64=_b64(raw), extFields={**register()["extFields"], "compressed": "true"}))
    if outcome is None:
        assert isinstance(verdict, Rejected) and verdict.reason == "undecodable_body" and "out of range" in verdict.detail, verdict
    else:
        assert isinstance(verdict, Accepted) and verdict.new_body.body.topic_configs[0].read_queue_nums == outcome, verdict


def test_below_version_37_the_body_is_a_bare_wrapper_whatever_the_compressed_header_says() -> None:
    """The NameServer's pre-3.0.11 path (version < 37) reads the body as JSON without looking at
    ``compressed`` (semantics spec §2, §8): such a line is accepted as the same bare wrapper as with
    compressed=false, and a zlib body at that version is undecodable."""
    legacy = RegisterBody(BODY.data_version, BODY.topic_configs, (), legacy_wrapper=True)
    raw = encode_register_body_bytes(legacy)
    ext = {**register()["extFields"], "bodyCrc32": "0"}
    plain = parse(register(version=36, body=None, body_b64=_b64(raw), extFields={**ext, "compressed": "false"}))
    flagged = parse(register(version=36, body=None, body_b64=_b64(raw), extFields={**ext, "compressed": "true"}))
    assert isinstance(plain, Accepted) and isinstance(flagged, Accepted), (plain, flagged)
    assert flagged.new_body.encoding == "legacy_wrapper" and flagged.new_body.body == plain.new_body.body == legacy
    assert flagged.event["body_id"] == plain.event["body_id"]
    zlib_body = parse(register(version=36, body=None, body_b64=_b64(encode_compressed_register_body(BODY)), extFields={**ext, "compressed": "true"}))
    assert isinstance(zlib_body, Rejected) and zlib_body.reason == "undecodable_body", zlib_body


def test_a_member_given_as_null_is_the_same_record_as_one_without_it() -> None:
    """The duplicate rule (a record equal in every field): ``"seq": null`` is an absent seq, as the
    parser reads it, so the two lines are one record."""
    without = {k: v for k, v in register().items() if k != "seq"}
    nulls = {**without, "seq": None, "body_b64": None}
    a, b = parse(without), parse(nulls)
    assert isinstance(a, Accepted) and isinstance(b, Accepted)
    assert a.event == b.event
    assert a.event["record_id"] != parse(register()).event["record_id"]


@pytest.mark.parametrize("code", [318, 319])
def test_the_namesrv_config_requests_are_accepted(code: int) -> None:
    """UPDATE_NAMESRV_CONFIG (318) and GET_NAMESRV_CONFIG (319) are NameServer requests (4.9 and 5.x):
    accepted with the default settings' codes; they change no route table (docs/spec-questions.md,
    question 10, and tests/model: test_read_only_and_unknown_codes_change_nothing)."""
    settings = load_settings()
    p = LineParser(ParserLimits(settings.ingest.known_codes, frozenset(settings.ingest.channel_events)))
    verdict = parse(register(code=code, extFields={}, body=None), p)
    assert isinstance(verdict, Accepted) and verdict.event["code"] == code, verdict
