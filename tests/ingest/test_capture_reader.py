"""The capture reader: line numbering, gzip (multi-member, truncated, corrupt), limits, encoding."""

import gzip
import io

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipelines.ingest.capture_reader import CaptureLine, read_capture_file, read_capture_stream


def lines(data: bytes, max_line_bytes: int = 100, keep_bytes: int = 10) -> list[CaptureLine]:
    return list(read_capture_stream(io.BytesIO(data), max_line_bytes=max_line_bytes, keep_bytes=keep_bytes))


def test_plain_lines_are_numbered_from_one_and_crlf_is_dropped() -> None:
    assert lines(b"a\nbb\r\nccc") == [
        CaptureLine(1, "a", 1),
        CaptureLine(2, "bb", 2),
        CaptureLine(3, "ccc", 3),
    ]


def test_empty_file_has_no_line() -> None:
    assert lines(b"") == []


def test_gzip_is_detected_by_magic_bytes_and_members_are_concatenated() -> None:
    data = gzip.compress(b"1\n2\n") + gzip.compress(b"3\n")
    assert [l.text for l in lines(data)] == ["1", "2", "3"]


def test_truncated_gzip_keeps_every_complete_line_and_flags_the_rest() -> None:
    data = gzip.compress(b"".join(b"line-%03d\n" % i for i in range(200)))
    got = lines(data[: len(data) // 2])
    assert [l.read_error for l in got[:-1]] == [None] * (len(got) - 1)
    assert [l.text for l in got[:-1]] == ["line-%03d" % i for i in range(len(got) - 1)]
    last = got[-1]
    assert last.read_error == "truncated_gzip"
    assert last.line_no == len(got)
    assert last.raw_bytes is not None and (b"line-%03d" % (len(got) - 1)).startswith(last.raw_bytes)


def test_garbage_after_a_gzip_member_is_corrupt() -> None:
    """A hole after the member may have taken the end of the line in progress; the bytes after it
    are no member's, and come out in that line."""
    got = lines(gzip.compress(b"a\nb") + b"\x00\x00garbage")
    assert [(l.text, l.read_error) for l in got] == [("a", None), ("bgarbage", "corrupt_gzip")]


def test_text_appended_to_a_gzip_file_is_read_and_flagged() -> None:
    """Plain lines written after a gzip member are the file's, not lost: each line holding a byte of
    them, the one they finish included, comes out flagged ``not_gzipped`` with its exact bytes."""
    got = lines(gzip.compress(b'{"a":1}\n{"b":') + b'2}\n{"c":3}\n\xff{"d":4}')
    assert got == [
        CaptureLine(1, '{"a":1}', 7),
        CaptureLine(2, '{"b":2}', 7, b'{"b":2}', "not_gzipped"),
        CaptureLine(3, '{"c":3}', 7, b'{"c":3}', "not_gzipped"),
        CaptureLine(4, '\ufffd{"d":4}', 8, b'\xff{"d":4}', "not_gzipped"),
    ]


@pytest.mark.parametrize("inflater", ["zlib", "zlib_ng"])
def test_zlib_and_zlib_ng_read_the_same_lines(monkeypatch, inflater: str) -> None:
    """The reader inflates with zlib-ng when it is installed, else zlib: same lines, same errors."""
    import importlib
    import zlib

    import pipelines.ingest.capture_reader as reader

    module = zlib if inflater == "zlib" else importlib.import_module("zlib_ng.zlib_ng")
    monkeypatch.setattr(reader, "_inflate", module)
    whole = gzip.compress(b"".join(b"line-%03d\n" % i for i in range(300))) + gzip.compress(b"tail\r\nlast")
    assert [(l.line_no, l.text, l.read_error) for l in lines(whole)] == (
        [(i + 1, "line-%03d" % i, None) for i in range(300)] + [(301, "tail", None), (302, "last", None)]
    )
    cut = lines(whole[: len(whole) // 3])
    assert cut[-1].read_error == "truncated_gzip" and all(l.read_error is None for l in cut[:-1])
    assert [(l.text, l.read_error) for l in lines(gzip.compress(b"a\nb") + b"\x00\x00garbage")] == [("a", None), ("bgarbage", "corrupt_gzip")]
    assert [(l.text, l.read_error) for l in lines(gzip.compress(b"a\n") + b"b\n" + gzip.compress(b"c\n"))] == [("a", None), ("b", "not_gzipped"), ("c", None)]


def test_a_line_over_the_limit_is_cut_and_flagged_and_reading_goes_on() -> None:
    got = lines(b"x" * 250 + b"\nok\n", max_line_bytes=100, keep_bytes=10)
    assert got[0] == CaptureLine(1, "x" * 10, 250, b"x" * 10, "line_too_long")
    assert got[1] == CaptureLine(2, "ok", 2)


def test_invalid_utf8_keeps_the_exact_bytes() -> None:
    got = lines(b"\xff\xfe{}\nok\n")
    assert got[0].raw_bytes == b"\xff\xfe{}" and got[0].read_error is None and "\ufffd" in got[0].text
    assert got[1].raw_bytes is None


def test_unreadable_file_becomes_a_flagged_line(tmp_path) -> None:
    got = list(read_capture_file(str(tmp_path / "missing.jsonl"), lambda p: open(p, "rb"), max_line_bytes=10, keep_bytes=10))
    assert len(got) == 1 and got[0].read_error == "unreadable_file" and "FileNotFoundError" in got[0].text


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_lines_do_not_depend_on_chunk_boundaries(monkeypatch, chunk: int) -> None:
    import pipelines.ingest.capture_reader as reader

    monkeypatch.setattr(reader, "CHUNK_BYTES", chunk)
    data = gzip.compress(b"alpha\nbeta\r\n\ngamma")
    assert [l.text for l in lines(data)] == ["alpha", "beta", "", "gamma"]


def test_lines_under_the_limit_are_kept_whole_whatever_keep_bytes_is() -> None:
    got = lines(b"y" * 90 + b"\n", max_line_bytes=100, keep_bytes=10)
    assert got == [CaptureLine(1, "y" * 90, 90)]


def _expected(data: bytes, max_line_bytes: int, keep_bytes: int) -> list[CaptureLine]:
    """The contract written out plainly: split at \\n, drop one trailing \\r, cut lines longer than the
    limit without that \\r."""
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    out = []
    for no, raw in enumerate(parts, 1):
        if len(raw) - raw.endswith(b"\r") > max_line_bytes:
            kept = raw[:keep_bytes]
            out.append(CaptureLine(no, kept.decode("utf-8", "replace"), len(raw), kept, "line_too_long"))
            continue
        raw = raw[:-1] if raw.endswith(b"\r") else raw
        try:
            out.append(CaptureLine(no, raw.decode("utf-8"), len(raw)))
        except UnicodeDecodeError:
            out.append(CaptureLine(no, raw.decode("utf-8", "replace"), len(raw), raw))
    return out


@settings(max_examples=300, deadline=None)
@given(
    data=st.lists(st.sampled_from([b"a", b"{}", b"\n", b"\r", b"\r\n", b"\xff", b"\xc3\xa9", b"x" * 9]), max_size=40).map(b"".join),
    chunk=st.integers(min_value=1, max_value=64),
    inflate_slice=st.integers(min_value=1, max_value=64),
    gz=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=3),
)
# CRLF lines of exactly the limit (20 bytes before the \r), across chunks and slices
@example(data=b"x" * 20 + b"\r\n" + b"y" * 20 + b"\r", chunk=1, inflate_slice=1, gz=True, cuts=[])
def test_any_bytes_in_any_chunks_give_the_contracted_lines(
    monkeypatch_module, data: bytes, chunk: int, inflate_slice: int, gz: bool, cuts: list[int]
) -> None:
    """Whatever the read chunks, the inflated slices and the gzip members (``cuts`` split the data
    into members, so member ends fall anywhere inside a slice)."""
    import pipelines.ingest.capture_reader as reader

    monkeypatch_module.setattr(reader, "CHUNK_BYTES", chunk)
    monkeypatch_module.setattr(reader, "INFLATE_SLICE_BYTES", inflate_slice)
    bounds = [0, *sorted(c % (len(data) + 1) for c in cuts), len(data)]
    members = b"".join(gzip.compress(data[a:b]) for a, b in zip(bounds, bounds[1:]))
    got = lines(members if gz else data, max_line_bytes=20, keep_bytes=5)
    if not gz and data[:2] == b"\x1f\x8b":
        return  # plain bytes that start like gzip are read as gzip (the contract), not compared here
    assert got == _expected(data, 20, 5)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp
