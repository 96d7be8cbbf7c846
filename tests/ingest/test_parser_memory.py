"""Parsers sharing a worker's memory of decoded bodies give exactly the rows of fresh parsers.

A Spark Python worker runs the read-and-parse tasks of many capture files one after the other; the
parsers of those tasks share one :class:`ParserMemory`. What a task emits must not depend on which
tasks ran before it in that process: every file is compared, whole row by whole row, with the same
file read by a parser that starts empty.
"""

from __future__ import annotations

import itertools
import json

import pytest

from nsreplay.generator import generate, preset
from nsreplay.protocol.register_body import DataVersion, RegisterBody, TopicConfig, encode_json_register_body
from pipelines.ingest.capture_files import list_capture_files, open_capture
from pipelines.ingest.capture_reader import RawLine, read_capture_raw
from pipelines.ingest.records import Accepted, LineParser, ParserLimits, ParserMemory, Rejected, worker_memory
from pipelines.ingest.transforms import ParseOptions, read_line_row, read_line_rows
from pipelines.quality.rules import event_rules, register_body_problem
from nsreplay.config import load_settings

SETTINGS = load_settings()
LIMITS = ParserLimits(SETTINGS.ingest.known_codes, frozenset(SETTINGS.ingest.channel_events))
OPTIONS = ParseOptions(
    LIMITS,
    event_rules(min_ts=SETTINGS.quality.min_ts, max_ts=SETTINGS.quality.max_ts),
    max_queue_nums=SETTINGS.quality.max_queue_nums,
    max_perm=SETTINGS.quality.max_perm,
    keep_bytes=SETTINGS.ingest.quarantine_keep_bytes,
)


def parser(memory: ParserMemory | None = None) -> LineParser:
    rule = lambda b: register_body_problem(b, max_queue_nums=OPTIONS.max_queue_nums, max_perm=OPTIONS.max_perm)  # noqa: E731
    return LineParser(LIMITS, rule, memory)


def file_rows(lines: list[RawLine], name: str, memory: ParserMemory | None = None) -> list[dict]:
    """One task's rows: a parser of its own (over ``memory``) and its own set of emitted body texts."""
    p, stored = parser(memory), set()
    return [read_line_row(p, name, line, OPTIONS, stored) for line in lines]


@pytest.fixture(scope="module")
def tiny_files(tmp_path_factory) -> dict[str, list[RawLine]]:
    out = tmp_path_factory.mktemp("tiny-memory")
    generate(preset("tiny"), out, workers=1)
    ingest = SETTINGS.ingest
    return {
        f.path: list(read_capture_raw(f.path, open_capture, max_line_bytes=ingest.max_line_bytes, keep_bytes=ingest.quarantine_keep_bytes))
        for f in list_capture_files(str(out))
    }


def test_every_file_after_any_other_gives_the_rows_of_a_fresh_parser(tiny_files) -> None:
    fresh = {name: file_rows(lines, name) for name, lines in tiny_files.items()}
    bodies = sum(1 for rows in fresh.values() for r in rows if r.get("new_body") is not None)
    assert bodies > 0 and any(r["status"] == "quarantined" for rows in fresh.values() for r in rows)
    for order in itertools.permutations(tiny_files):
        memory = ParserMemory()
        for name in order:
            assert file_rows(tiny_files[name], name, memory) == fresh[name], f"{name} after {order[: order.index(name)]}"


def _register(ts: int, body: RegisterBody) -> bytes:
    return json.dumps({
        "namesrv": "10.0.0.10:9876", "ts": ts, "kind": "request", "code": 103, "version": 479, "opaque": 1, "conn": "c1",
        "extFields": {"brokerName": "broker-a", "brokerAddr": "10.0.1.5:10911", "clusterName": "C", "brokerId": "0"},
        "body": encode_json_register_body(body),
    }, separators=(",", ":")).encode()


def test_a_body_is_decoded_once_per_memory_and_reported_new_once_per_parser() -> None:
    big = RegisterBody(DataVersion(0, 1732147100000, 3), tuple(TopicConfig(f"t-{i:03d}", 8, 8, 6, 0) for i in range(40)), ())
    memory = ParserMemory()
    first, second = parser(memory), parser(memory)
    a, a2 = first.parse(_register(1, big).decode()), first.parse(_register(2, big).decode())
    b = second.parse(_register(3, big).decode())
    assert isinstance(a, Accepted) and isinstance(a2, Accepted) and isinstance(b, Accepted)
    assert a.new_body is not None and a2.new_body is None
    assert b.new_body is a.new_body  # reported again by the second parser, from the first one's decoding
    assert b.event["body_id"] == a.event["body_id"]


def test_a_rejected_body_stays_rejected_for_every_parser_of_the_memory() -> None:
    wide = RegisterBody(DataVersion(0, 1, 1), (TopicConfig("t", 8, OPTIONS.max_queue_nums + 1, 6, 0),), ())
    memory = ParserMemory()
    verdicts = [parser(memory).parse(_register(ts, wide).decode()) for ts in (1, 2)]
    alone = parser().parse(_register(1, wide).decode())
    assert isinstance(alone, Rejected) and alone.reason.startswith("quality:")
    assert [(v.reason, v.detail) for v in verdicts if isinstance(v, Rejected)] == [(alone.reason, alone.detail)] * 2


@pytest.mark.parametrize("bound", [("MAX_BODIES", 2), ("MAX_BODY_BYTES", 1)])
def test_the_decoded_bodies_start_afresh_at_their_bound(monkeypatch, bound) -> None:
    monkeypatch.setattr(ParserMemory, *bound)
    memory, p = ParserMemory(), parser()
    bodies = [RegisterBody(DataVersion(0, 1, n), (TopicConfig(f"t{n}", 8, 8, 6, 0),), ()) for n in range(5)]
    expected = [p.parse(_register(n, b).decode()) for n, b in enumerate(bodies)]
    shared = parser(memory)
    got = [shared.parse(_register(n, b).decode()) for n, b in enumerate(bodies)]
    assert len(memory.bodies) <= 2
    assert got == expected
    # a body dropped from the memory is decoded again, but not reported new twice by one parser
    again = shared.parse(_register(9, bodies[0]).decode())
    assert isinstance(again, Accepted) and again.new_body is None


def test_a_worker_keeps_one_memory_for_the_latest_configuration() -> None:
    one = worker_memory(("limits", 1024, 15))
    assert worker_memory(("limits", 1024, 15)) is one
    other = worker_memory(("limits", 512, 15))
    assert other is not one
    assert worker_memory(("limits", 1024, 15)) is not one  # the first was dropped, not kept beside the second


def test_a_body_comes_with_the_first_accepted_line_that_carries_it() -> None:
    """A register line that a row rule rejects yields no event, so its body is not reported new with
    it (``silver.topic_configs`` would hold a body no event uses); the next accepted line brings it."""
    body = RegisterBody(DataVersion(0, 1732147100000, 3), tuple(TopicConfig(f"t-{i:03d}", 8, 8, 6, 0) for i in range(40)), ())
    T = 1732147200000
    rejected = json.loads(_register(T, body))
    rejected["extFields"]["brokerAddr"] = "not an address"
    texts = [json.dumps(rejected, separators=(",", ":")).encode(), _register(T + 1, body), _register(T + 2, body)]
    rows = file_rows([RawLine(i + 1, t, len(t)) for i, t in enumerate(texts)], "f.jsonl")
    assert [(r["status"], r.get("reason")) for r in rows] == [("quarantined", "quality:broker_address"), ("accepted", None), ("accepted", None)]
    assert [r.get("new_body") is not None for r in rows] == [False, True, False]
    assert rows[1]["new_body"]["body_id"] == rows[1]["body_id"] == rows[2]["body_id"]


def test_a_line_found_too_deep_after_its_body_gives_the_body_to_the_next_line() -> None:
    """A value too deep to store is found last, when the record's id is computed, after the body was
    decoded: that line is rejected, and the next line that carries the body still brings it."""
    body = RegisterBody(DataVersion(0, 1732147100000, 3), tuple(TopicConfig(f"t-{i:03d}", 8, 8, 6, 0) for i in range(40)), ())
    T = 1732147200000
    deep = _register(T, body)[:-1] + b',"note":' + b"[" * 300 + b"]" * 300 + b"}"
    texts = [deep, _register(T + 1, body)]
    rows = file_rows([RawLine(i + 1, t, len(t)) for i, t in enumerate(texts)], "f.jsonl")
    assert [(r["status"], r.get("reason")) for r in rows] == [("quarantined", "too_deep"), ("accepted", None)]
    assert [r.get("new_body") is not None for r in rows] == [False, True]


def test_a_damaged_range_gives_back_the_bodies_its_lines_reported() -> None:
    """A line that ends a damaged gzip member's range (``damaged_from``) gives the parser back the
    bodies first reported by lines of that range (the ingest quarantines them): the next accepted
    line carrying one brings it again. A body reported before the range stays reported."""
    before, inside = (
        RegisterBody(DataVersion(0, 1732147100000, 3), tuple(TopicConfig(f"{p}-{i:03d}", 8, 8, 6, 0) for i in range(40)), ())
        for p in ("before", "inside")
    )
    T = 1732147200000
    texts = [_register(T, before), _register(T + 1, inside), b"garbled", _register(T + 2, inside), _register(T + 3, before)]
    lines = [RawLine(i + 1, t, len(t)) for i, t in enumerate(texts)]
    lines[2] = RawLine(3, b"garbled", 7, "corrupt_gzip", damaged_from=2)
    rows = list(read_line_rows(parser(), "f.jsonl.gz", lines, OPTIONS, set()))
    assert [r["status"] for r in rows] == ["accepted", "accepted", "quarantined", "accepted", "accepted"]
    assert [r.get("new_body") is not None for r in rows] == [True, True, False, True, False]
    assert rows[1]["new_body"]["body_id"] == rows[3]["new_body"]["body_id"] != rows[0]["new_body"]["body_id"]
    assert "lines 2 to 3 are suspect" in rows[2]["detail"]


def test_text_after_a_gzip_member_says_what_it_reads_as_and_leaves_its_body_new() -> None:
    """A ``not_gzipped`` line is quarantined whatever it holds, and its detail says what it reads as
    (a valid record, or the reason it would be quarantined for): whoever recovers such text knows
    which lines are records. A register body it carries first is not stored from it: the next
    accepted line carrying that body brings it."""
    body = RegisterBody(DataVersion(0, 1732147100000, 3), tuple(TopicConfig(f"appended-{i:03d}", 8, 8, 6, 0) for i in range(40)), ())
    T = 1732147200000
    texts = [_register(T, body), b'{"namesrv":', _register(T + 1, body)]
    lines = [RawLine(1, texts[0], len(texts[0]), "not_gzipped"), RawLine(2, texts[1], len(texts[1]), "not_gzipped"), RawLine(3, texts[2], len(texts[2]))]
    rows = list(read_line_rows(parser(), "f.jsonl.gz", lines, OPTIONS, set()))
    assert [(r["status"], r.get("reason")) for r in rows] == [("quarantined", "not_gzipped"), ("quarantined", "not_gzipped"), ("accepted", None)]
    assert rows[0]["detail"].endswith("; as read it is a valid record") and rows[1]["detail"].endswith("; as read it is invalid_json")
    assert rows[0].get("new_body") is None and rows[2]["new_body"] is not None
    assert rows[0]["raw_text"] == texts[0].decode()
    cut = read_line_row(parser(), "f.jsonl.gz", RawLine(4, texts[0][:100], len(texts[0]), "not_gzipped"), OPTIONS, set())
    assert cut["detail"].endswith("; as read it is line_too_long")  # not judged by its first bytes alone
