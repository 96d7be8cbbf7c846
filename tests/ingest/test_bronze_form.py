"""Bronze's form of a line (one pass: read, parse, split off a repeated body): every line rebuilds
exactly, a body text is emitted once per task, and the parse is the same as a full parse's."""

from __future__ import annotations

import json

import base64

from nsreplay.protocol.register_body import (
    DataVersion,
    RegisterBody,
    TopicConfig,
    body_crc32,
    encode_compressed_register_body,
    encode_json_register_body,
)
from pipelines.ingest.bronze_form import exact_line, split_body
from pipelines.ingest.capture_reader import RawLine
from pipelines.ingest.records import Accepted, LineParser, ParserLimits, Rejected
from pipelines.ingest.transforms import ParseOptions, read_line_row
from pipelines.quality.rules import event_rules, register_body_problem

LIMITS = ParserLimits(frozenset({103, 904}), frozenset({"CONNECT", "CLOSE"}))
OPTIONS = ParseOptions(LIMITS, event_rules(min_ts=0, max_ts=2**62), max_queue_nums=1024, max_perm=15, keep_bytes=1 << 20)
BIG = RegisterBody(DataVersion(0, 1732147100000, 3), tuple(TopicConfig(f"topic-{i:03d}", 8, 8, 6, 0) for i in range(40)), ())


def parser() -> LineParser:
    return LineParser(LIMITS, lambda b: register_body_problem(b, max_queue_nums=1024, max_perm=15))


def register(ts: int, broker_id: str = "0", body: RegisterBody = BIG) -> str:
    return json.dumps({
        "namesrv": "10.0.0.10:9876", "ts": ts, "kind": "request", "code": 103, "version": 479, "opaque": 1, "conn": "c1",
        "extFields": {"brokerName": "broker-a", "brokerAddr": "10.0.1.5:10911", "clusterName": "C", "brokerId": broker_id},
        "body": encode_json_register_body(body),
    }, separators=(",", ":"))


def rows(texts: list[bytes]) -> list[dict]:
    p, stored = parser(), set()
    return [read_line_row(p, "f.jsonl", RawLine(i + 1, t, len(t)), OPTIONS, stored) for i, t in enumerate(texts)]


def test_repeated_bodies_are_split_off_and_every_line_rebuilds_exactly() -> None:
    texts = [register(1732147200000).encode(), register(1732147230000).encode(), register(1732147260000, broker_id="x").encode(),
             b'{"namesrv":"10.0.0.10:9876","ts":1,"kind":"channel","event":"CLOSE","conn":"c1","remote":"10.0.1.5:1"}',
             b'{"ts":1,"body":{"a":"\xff"}}']
    got = rows(texts)
    texts_by_ref = {r["body_ref"]: r["body_text"] for r in got if r.get("body_text") is not None}
    assert [r.get("body_ref") is not None for r in got] == [True, True, True, False, False]
    assert [r.get("body_text") is not None for r in got] == [True, False, False, False, False]  # once per task
    for row, text in zip(got, texts):
        rebuilt = exact_line(row["line"], texts_by_ref.get(row.get("body_ref")))
        assert (row.get("raw_bytes") or rebuilt.encode()) == text
    assert json.loads(got[0]["line"]) == {k: v for k, v in json.loads(texts[0]).items() if k != "body"}
    # a split line that is quarantined still keeps its whole text in quarantine
    assert (got[2]["status"], got[2]["reason"], got[2]["raw_text"]) == ("quarantined", "wrong_type", texts[2].decode())
    assert (got[4]["status"], got[4]["reason"]) == ("quarantined", "invalid_utf8")


def test_the_split_parse_equals_a_full_parse_of_each_line() -> None:
    texts = [register(1732147200000 + 30_000 * i).encode() for i in range(3)]
    got = rows(texts)
    for row, text in zip(got, texts):
        alone = parser().parse(text.decode())  # a fresh parser: no body seen before
        assert isinstance(alone, Accepted)
        assert {k: row[k] for k in alone.event} == alone.event


def test_small_bodies_and_lines_without_a_trailing_body_stay_whole() -> None:
    small = RegisterBody(DataVersion(0, 1, 1), (TopicConfig("t", 1, 1, 6, 0),), ())
    assert split_body(register(1, body=small).encode()) is not None
    reordered = json.dumps({"body": encode_json_register_body(BIG), **json.loads(register(2))}).encode()  # body not last
    got = rows([register(1, body=small).encode(), register(2, body=small).encode(), reordered])
    assert [r.get("body_ref") for r in got] == [None, None, None]
    assert [r["status"] for r in got] == ["accepted"] * 3


def test_a_body_holding_a_member_named_body_is_cut_at_the_top_level() -> None:
    # a topic named "body" puts ',"body":' inside the body too; the cut is the record's own member
    named_body = RegisterBody(BIG.data_version, (TopicConfig("a-topic", 8, 8, 6, 0), TopicConfig("body", 8, 8, 6, 0), *BIG.topic_configs), ())
    texts = [register(1732147200000 + 30_000 * i, body=named_body).encode() for i in range(2)]
    assert texts[0].count(b',"body":') == 2
    got = rows(texts)
    assert [r.get("body_ref") is not None for r in got] == [True, True]
    body_text = got[0]["body_text"]
    assert json.loads(body_text) == encode_json_register_body(named_body)
    for row, text in zip(got, texts):
        assert exact_line(row["line"], body_text).encode() == text
        alone = parser().parse(text.decode())
        assert isinstance(alone, Accepted) and {k: row[k] for k in alone.event} == alone.event


def test_a_repeated_top_level_body_member_keeps_the_line_whole_and_the_last_value() -> None:
    # JSON's last-member-wins: the parse must match a full parse, and no cut may lose the first member
    big = json.dumps(encode_json_register_body(BIG), separators=(",", ":"))
    head = register(1732147200000)[:-1].rsplit(',"body":', 1)[0]
    twice = f'{head},"body":{{"filterServerList":[]}},"body":{big}}}'.encode()
    got = rows([register(1732147190000).encode(), twice])  # the first line teaches the parser the body text
    alone = parser().parse(twice.decode())
    assert isinstance(alone, Accepted)
    assert got[1].get("body_ref") is None and got[1]["line"] == twice.decode()
    assert {k: got[1][k] for k in alone.event} == alone.event


def register_b64(ts: int, raw: bytes, crc: int) -> bytes:
    """A REGISTER_BROKER whose body is given as compressed bytes (``body_b64``, the last member)."""
    return json.dumps({
        "namesrv": "10.0.0.10:9876", "ts": ts, "kind": "request", "code": 103, "version": 479, "opaque": 1, "conn": "c1",
        "extFields": {"brokerName": "broker-a", "brokerAddr": "10.0.1.5:10911", "clusterName": "C", "brokerId": "0",
                      "compressed": "true", "bodyCrc32": str(crc)},
        "body_b64": base64.b64encode(raw).decode(),
    }, separators=(",", ":")).encode()


def test_repeated_body_b64_texts_are_split_off_too_and_checked_on_every_line() -> None:
    import hashlib

    varied = RegisterBody(BIG.data_version, tuple(TopicConfig(hashlib.sha1(b"%d" % i).hexdigest(), 8, 8, 6, 0) for i in range(40)), ())
    raw = encode_compressed_register_body(varied)  # topic names that do not compress away: over 1 KiB of base64
    assert len(base64.b64encode(raw)) >= 1024
    texts = [register_b64(1732147200000 + 30_000 * i, raw, body_crc32(raw)) for i in range(3)]
    texts.append(register_b64(1732147290000, raw, body_crc32(raw) ^ 1))  # same bytes, a wrong CRC in the header
    got = rows(texts)
    assert [r.get("body_ref") is not None for r in got] == [True] * 4
    assert len({r["body_ref"] for r in got}) == 1
    body_text = got[0]["body_text"]
    assert body_text == json.dumps(base64.b64encode(raw).decode()) and json.loads(got[0]["line"]).get("body_b64") is None
    for row, text in zip(got, texts):
        assert exact_line(row["line"], body_text).encode() == text
        alone = parser().parse(text.decode())  # a fresh parser: the full parse of the line
        if isinstance(alone, Accepted):
            assert row["status"] == "accepted" and {k: row[k] for k in alone.event} == alone.event
        else:
            assert isinstance(alone, Rejected) and (row["status"], row["reason"]) == ("quarantined", alone.reason)
    assert [r["status"] for r in got] == ["accepted"] * 3 + ["quarantined"]
    assert got[3]["reason"] == "crc_mismatch" and got[3]["raw_text"] == texts[3].decode()


def test_a_byte_order_mark_starting_a_file_is_not_part_of_its_first_record() -> None:
    """RFC 8259 lets a parser ignore a BOM; some tools write one at the start of a file. The first
    line parses as the record after it (split or whole), bronze keeps the line as read, and a BOM
    anywhere else is still a line that is not JSON."""
    bom = b"\xef\xbb\xbf"
    channel = b'{"namesrv":"10.0.0.10:9876","ts":1,"kind":"channel","event":"CLOSE","conn":"c1","remote":"10.0.1.5:1"}'
    for first in (register(1732147200000).encode(), channel):
        got = rows([bom + first, bom + channel])
        plain = rows([first])[0]
        assert got[0]["status"] == "accepted"
        as_read = ("line", "body_text", "line_bytes")  # the line as read: with its BOM
        assert {k: got[0][k] for k in plain if k not in as_read} == {k: plain[k] for k in plain if k not in as_read}
        assert got[0]["line_bytes"] == plain["line_bytes"] + len(bom)
        texts_by_ref = {r["body_ref"]: r["body_text"] for r in got if r.get("body_text") is not None}
        assert exact_line(got[0]["line"], texts_by_ref.get(got[0].get("body_ref"))).encode() == bom + first
        assert (got[1]["status"], got[1]["reason"], got[1]["raw_text"].encode()) == ("quarantined", "invalid_json", bom + channel)
