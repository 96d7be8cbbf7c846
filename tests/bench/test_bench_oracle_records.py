"""What the rebuild benchmark's reference-model check reads from the capture files for one
NameServer: its own well-formed records, whatever the other NameServers' lines say about it."""

from __future__ import annotations

import gzip
from pathlib import Path

from nsreplay.bench import _oracle_records

BODY = '{"topicConfigSerializeWrapper":{"topicConfigTable":{}},"filterServerList":["ns-a:9876"]}'


def _write(path: Path, lines: list[bytes]) -> str:
    data = b"\n".join(lines) + b"\n"
    if path.suffix == ".gz":
        data = gzip.compress(data)
    path.write_bytes(data)
    return str(path)


def test_one_namesrv_s_records_with_their_file_and_line(tmp_path: Path) -> None:
    first = _write(tmp_path / "a.jsonl.gz", [
        b'{"namesrv":"ns-a:9876","ts":1,"kind":"request","code":103,"body":' + BODY.encode() + b"}",
        # another NameServer's line that names ns-a (in its body): not ns-a's record
        b'{"namesrv":"ns-b:9876","ts":2,"kind":"request","code":103,"body":' + BODY.encode() + b"}",
        b'{"namesrv": "ns-a:9876", "ts": 3, "kind": "channel", "event": "CLOSE"}',  # spaced members
        b'{"namesrv":"ns-a:9876","ts":4,"kind":"request","code":103,"body":' + BODY.encode() + b"}",  # body seen before
        b'{"namesrv":"ns-a:9876","ts":"5","kind":"request"}',  # ts not an integer
        b'{"namesrv":"ns-a:9876","ts":6,"kind":"gossip"}',  # unknown kind
        b'{"namesrv":"ns-a:9876","ts":7,"kind":"request","remark":"\xff"}',  # not UTF-8
        b'{"namesrv":"ns-a:9876","ts":8,',  # cut
    ])
    second = _write(tmp_path / "b.jsonl", [
        b'{"namesrv":"n\\u015b:1","ts":9,"kind":"namesrv_start"}',
        b'{"kind":"response","ts":10,"namesrv":"ns-a:9876","code":105}',  # namesrv not first
    ])
    body = {"topicConfigSerializeWrapper": {"topicConfigTable": {}}, "filterServerList": ["ns-a:9876"]}

    assert list(_oracle_records([first, second], "ns-a:9876")) == [
        {"namesrv": "ns-a:9876", "ts": 1, "kind": "request", "code": 103, "body": body, "_file": first, "_line": 1},
        {"namesrv": "ns-a:9876", "ts": 3, "kind": "channel", "event": "CLOSE", "_file": first, "_line": 3},
        {"namesrv": "ns-a:9876", "ts": 4, "kind": "request", "code": 103, "body": body, "_file": first, "_line": 4},
        {"kind": "response", "ts": 10, "namesrv": "ns-a:9876", "code": 105, "_file": second, "_line": 2},
    ]
    assert list(_oracle_records([first, second], "n\u015b:1")) == [
        {"namesrv": "n\u015b:1", "ts": 9, "kind": "namesrv_start", "_file": second, "_line": 1},
    ]
    assert list(_oracle_records([first, second], "ns-b:9876")) == [
        {"namesrv": "ns-b:9876", "ts": 2, "kind": "request", "code": 103, "body": body, "_file": first, "_line": 2},
    ]
