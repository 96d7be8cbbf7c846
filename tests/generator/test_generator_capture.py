"""The tiny capture is valid capture format v1, its manifest matches the files, and it is reproducible."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path
from typing import Any

from capture_checks import Line, read_lines

from nsreplay.generator import JUNK_REASONS, apply_overrides, generate, preset


def _files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()}


def test_same_seed_gives_identical_bytes_whatever_the_workers(tiny_capture, tmp_path):
    out, _ = tiny_capture
    again = tmp_path / "again"
    generate(preset("tiny"), again, workers=1)
    assert _files(again) == _files(out)


def test_generating_again_replaces_only_the_files_a_run_wrote(tiny_capture, tmp_path):
    """A second run into the same directory replaces the first one's files (a run with fewer files
    leaves none of the first's behind) and keeps every other file, whatever its name."""
    out, _ = tiny_capture
    again = tmp_path / "again"
    again.mkdir()
    users = {"capture-2024-11-20-prod.jsonl": b"mine\n", "capture-old.tmp": b"x", "notes.txt": b"y", "capture-00007.json": b"z"}
    for name, data in users.items():
        (again / name).write_bytes(data)
    (again / "capture-00042.jsonl.gz").write_bytes(b"an earlier run's file")  # named as a run names its files
    generate(preset("tiny"), again, workers=1)
    assert _files(again) == {**_files(out), **users}


def test_another_seed_gives_another_capture(tiny_capture, tmp_path):
    out, _ = tiny_capture
    other = tmp_path / "other"
    generate(apply_overrides(preset("tiny"), {"seed": 8}), other, workers=1)
    assert _files(other) != _files(out)


def test_files_are_gzip_jsonl_and_end_with_newline(tiny_capture):
    out, _ = tiny_capture
    names = sorted(p.name for p in out.iterdir())
    assert "_manifest.json" in names
    capture_files = [n for n in names if n.endswith(".jsonl.gz")]
    assert len(capture_files) == 3
    for name in capture_files:
        data = gzip.decompress((out / name).read_bytes())
        assert data.endswith(b"\n") and b"\r" not in data


def test_every_line_is_a_valid_record_or_counted_junk(tiny_lines, tiny_manifest):
    junk = Counter(line.reason for line in tiny_lines if line.reason is not None)
    assert dict(junk) == tiny_manifest["junk"]["by_reason"]
    assert set(junk) == set(JUNK_REASONS), "tiny injects one line of every reason"
    assert all(count == 1 for count in junk.values())


def test_manifest_counts_equal_file_contents(tiny_lines: list[Line], tiny_manifest: dict[str, Any], tiny_records):
    m = tiny_manifest
    assert len(tiny_lines) == m["lines_total"]
    per_file = Counter(line.file for line in tiny_lines)
    assert {f["name"]: f["lines"] for f in m["files"]} == dict(per_file)
    valid = [line for line in tiny_lines if line.record is not None]
    assert len(tiny_records) == m["records"]["total"]
    assert len(valid) - len(tiny_records) == m["duplicates"]["lines"] > 0
    assert dict(Counter(r["kind"] for r in tiny_records)) == m["records"]["by_kind"]
    codes = Counter(str(r["code"]) for r in tiny_records if r["kind"] == "request")
    assert dict(codes) == m["records"]["by_code"]
    events = Counter(r["event"] for r in tiny_records if r["kind"] == "channel")
    assert dict(events) == m["records"]["by_channel_event"]
    per_ns = Counter(r["namesrv"] for r in tiny_records)
    assert {ns: info["records"] for ns, info in m["namesrvs"].items()} == dict(per_ns)
    assert m["window"]["first_ts"] == min(r["ts"] for r in tiny_records)
    assert m["window"]["last_ts"] == max(r["ts"] for r in tiny_records)
    bodies = {(line.record.get("body_b64") or repr(line.record.get("body"))) for line in tiny_lines
              if line.record is not None and line.record["kind"] == "request" and line.record["code"] == 103}
    assert len(bodies) == m["register_bodies"]["distinct"]


def test_manifest_sizes_match_the_files(tiny_capture, tiny_manifest):
    out, summary = tiny_capture
    for f in tiny_manifest["files"]:
        path = out / f["name"]
        assert path.stat().st_size == f["bytes"]
        assert len(gzip.decompress(path.read_bytes())) == f["uncompressed_bytes"]
    assert summary.bytes == tiny_manifest["bytes_total"]


def test_duplicates_are_exact_copies_and_some_are_in_another_file(tiny_lines):
    files_of: dict[bytes, set[str]] = {}
    count: Counter[bytes] = Counter()
    for line in tiny_lines:
        if line.record is not None:
            count[line.raw] += 1
            files_of.setdefault(line.raw, set()).add(line.file)
    duplicated = [raw for raw, n in count.items() if n > 1]
    assert duplicated
    assert any(len(files_of[raw]) > 1 for raw in duplicated)
    assert not any(line.reason is not None and count[line.raw] > 1 for line in tiny_lines)


def test_files_mix_namesrvs_and_are_not_sorted_by_time(tiny_lines):
    by_file: dict[str, list[dict[str, Any]]] = {}
    for line in tiny_lines:
        if line.record is not None:
            by_file.setdefault(line.file, []).append(line.record)
    for records in by_file.values():
        assert len({r["namesrv"] for r in records}) >= 2
    assert any([r["ts"] for r in records] != sorted(r["ts"] for r in records) for records in by_file.values())


def test_plain_output_has_the_same_lines(tiny_capture, tmp_path):
    out, _ = tiny_capture
    plain = tmp_path / "plain"
    generate(apply_overrides(preset("tiny"), {"output.compress": "false"}), plain, workers=2)
    assert sorted(p.name for p in plain.glob("*.jsonl")) == sorted(p.name[:-3] for p in out.glob("*.jsonl.gz"))
    assert [(l.file + ".gz", l.raw) for l in read_lines(plain)] == [(l.file, l.raw) for l in read_lines(out)]


def test_large_bodies_are_spliced_into_valid_gzip(tmp_path):
    """Splicing pre-deflated tails (forced for every tail here) still yields the same lines."""
    base = apply_overrides(preset("tiny"), {"junk.lines_per_reason": 0, "duplicate_batches": 0})
    streamed, spliced = tmp_path / "streamed", tmp_path / "spliced"
    generate(apply_overrides(base, {"splice_min_bytes": 10**9}), streamed, workers=1)
    generate(apply_overrides(base, {"splice_min_bytes": 1}), spliced, workers=1)
    assert [l.raw for l in read_lines(spliced)] == [l.raw for l in read_lines(streamed)]
