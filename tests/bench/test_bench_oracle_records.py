"""What the rebuild benchmark's reference-model check reads from the capture files: each NameServer's
own well-formed records, whatever the other NameServers' lines say about it, read in one pass."""

from __future__ import annotations

import gzip
from pathlib import Path

from nsreplay.bench_oracle import file_records, records_by_namesrv

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

    groups = records_by_namesrv([first, second])
    assert groups == {
        "ns-a:9876": [
            {"namesrv": "ns-a:9876", "ts": 1, "kind": "request", "code": 103, "body": body, "_file": first, "_line": 1},
            {"namesrv": "ns-a:9876", "ts": 3, "kind": "channel", "event": "CLOSE", "_file": first, "_line": 3},
            {"namesrv": "ns-a:9876", "ts": 4, "kind": "request", "code": 103, "body": body, "_file": first, "_line": 4},
            {"kind": "response", "ts": 10, "namesrv": "ns-a:9876", "code": 105, "_file": second, "_line": 2},
        ],
        "ns-b:9876": [
            {"namesrv": "ns-b:9876", "ts": 2, "kind": "request", "code": 103, "body": body, "_file": first, "_line": 2},
        ],
        "n\u015b:1": [
            {"namesrv": "n\u015b:1", "ts": 9, "kind": "namesrv_start", "_file": second, "_line": 1},
        ],
    }
    assert list(file_records(second)) == groups["n\u015b:1"] + groups["ns-a:9876"][-1:]


def test_a_repeated_body_is_one_object_and_a_repeated_broken_one_is_still_skipped(tmp_path: Path) -> None:
    broken = b'{"topicConfigSerializeWrapper":{"topicConfigTable":{}},"filterServerList":["\xff"]}'
    path = _write(tmp_path / "c.jsonl", [
        b'{"namesrv":"ns-a:9876","ts":1,"kind":"request","code":103,"body":' + BODY.encode() + b"}",
        b'{"namesrv":"ns-a:9876","ts":2,"kind":"request","code":103,"body":' + BODY.encode() + b"}",
        b'{"namesrv":"ns-a:9876","ts":3,"kind":"request","code":103,"body":' + broken + b"}",
        b'{"namesrv":"ns-a:9876","ts":4,"kind":"request","code":103,"body":' + broken + b"}",
        b'{"namesrv":"ns-a:9876","ts":5,"kind":"request","code":103,"body":[1]}',
        b'{"namesrv":"ns-a:9876","ts":6,"kind":"request","code":103,"body":[1]}',
        b'{"namesrv":7,"ts":7,"kind":"request"}',  # namesrv not a string
        # the last ',"body":' of these lines is in an object nested in their (different) bodies
        b'{"namesrv":"ns-a:9876","ts":9,"kind":"request","body":{"x":{"a":1,"body":{"k":2}}}}',
        b'{"namesrv":"ns-a:9876","ts":10,"kind":"request","body":{"y":{"b":1,"body":{"k":2}}}}',
        b'[{"namesrv":"ns-a:9876","ts":8,"kind":"request","body":{}}]',  # not an object
    ])
    records = list(file_records(path))
    assert [r["ts"] for r in records] == [1, 2, 5, 6, 9, 10]
    assert records[-2]["body"] == {"x": {"a": 1, "body": {"k": 2}}} and records[-1]["body"] == {"y": {"b": 1, "body": {"k": 2}}}
    assert records[0]["body"] is records[1]["body"]
    assert records[2]["body"] == records[3]["body"] == [1]


def test_a_gzip_file_is_read_whatever_its_name_as_the_ingest_reads_it(tmp_path: Path) -> None:
    """``X.JSONL.GZ`` (a capture name in any case: the listing takes it) and gzip bytes under
    ``.jsonl``: the ingest decompresses both by their first bytes, so the model check must read the
    same records from them as from ``x.jsonl.gz`` (it read none: the lines of compressed bytes are
    not JSON, and the model replayed without them)."""
    from pipelines.ingest.capture_files import open_capture
    from pipelines.ingest.capture_reader import read_capture_file

    lines = [b'{"namesrv":"ns-a:9876","ts":1,"kind":"channel","event":"CLOSE","conn":"c","remote":"10.0.1.5:1"}',
             b'{"namesrv":"ns-a:9876","ts":2,"kind":"request","code":103,"body":' + BODY.encode() + b"}"]
    data = gzip.compress(b"\n".join(lines) + b"\n")
    paths = []
    for name in ("x.jsonl.gz", "X.JSONL.GZ", "y.Jsonl.Gz", "gzipped.jsonl"):
        (tmp_path / name).write_bytes(data)
        paths.append(str(tmp_path / name))
    first = list(file_records(paths[0]))
    assert [(r["ts"], r["_line"]) for r in first] == [(1, 1), (2, 2)]
    for path in paths[1:]:
        assert list(file_records(path)) == [{**r, "_file": path} for r in first], path
        as_ingested = read_capture_file(path, open_capture, max_line_bytes=10_000, keep_bytes=100)
        assert [line.text.encode() for line in as_ingested] == lines, path
