"""The read-as-text floor of ``nsreplay bench`` reads exactly the capture files listed, whatever
their names: Hadoop's reader takes ``[``, ``{``, ``*``, ``?`` in a path for a glob."""

from __future__ import annotations

from pathlib import Path

from nsreplay.bench import _floor


def test_the_floor_reads_each_listed_file_once_whatever_its_name(spark, tmp_path: Path) -> None:
    captures = tmp_path / "captures"
    captures.mkdir()
    # b[1] and c{1,2} would match b1 and c1, c2 as globs: the floor then read those twice and the
    # bracketed files not at all
    lines = {"b[1].jsonl": 3, "b1.jsonl": 5, "c{1,2}.jsonl": 7, "c1.jsonl": 11, "c2.jsonl": 13}
    for name, count in lines.items():
        (captures / name).write_text("".join(f'{{"n": {i}}}\n' for i in range(count)))
    _, _, files, _, read, _ = _floor(str(captures), None, "floor-names")
    assert sorted(Path(f.path).name for f in files) == sorted(lines)
    assert read == sum(lines.values())


def test_the_floor_decompresses_gzip_names_in_any_case_as_the_ingest_does(spark, tmp_path: Path) -> None:
    """``X.JSONL.GZ`` is a capture name (the listing compares names without case) and the ingest
    decompresses it; Hadoop's text reader picks its codec by the name's suffix, in any case too, so
    the floor counts the same lines as the ingest's reader."""
    import gzip

    from pipelines.ingest.capture_files import open_capture
    from pipelines.ingest.capture_reader import read_capture_file

    captures = tmp_path / "captures"
    captures.mkdir()
    lines = {"a.jsonl.gz": 3, "B.JSONL.GZ": 5, "c.Jsonl.Gz": 7, "d.jsonl": 11}
    for name, count in lines.items():
        text = "".join(f'{{"n": {i}, "pad": "{"p" * 40}"}}\n' for i in range(count)).encode()
        (captures / name).write_bytes(gzip.compress(text) if name.lower().endswith(".gz") else text)
    _, _, files, _, read, _ = _floor(str(captures), None, "floor-gzip-names")
    as_ingested = sum(len(list(read_capture_file(f.path, open_capture, max_line_bytes=10_000, keep_bytes=100))) for f in files)
    assert read == as_ingested == sum(lines.values())
