"""The capture reader on damaged gzip: every line inflated before the damage comes out, then the line
the damage ends in, flagged with where the damaged member began; the reading goes on at the next
member found; zero padding after the last member, and a hole of zeros or junk between members; CRLF
lines at the length limit."""

import gzip
import importlib
import io
import random
import struct
import zlib

import pytest

import pipelines.ingest.capture_reader as reader
from pipelines.ingest.capture_reader import RawLine, read_raw_stream

INFLATERS = ["zlib", "zlib_ng"]
DEFAULT_SLICE = reader.INFLATE_SLICE_BYTES


def raw_lines(data: bytes, max_line_bytes: int = 1000, keep_bytes: int = 10) -> list[RawLine]:
    return list(read_raw_stream(io.BytesIO(data), max_line_bytes=max_line_bytes, keep_bytes=keep_bytes))


def good(payload: bytes) -> list[RawLine]:
    """The lines of ``payload`` when nothing goes wrong (no \\r, no long line in these payloads)."""
    parts = payload.split(b"\n")
    if parts[-1] == b"":
        parts.pop()
    return [RawLine(no, part, len(part)) for no, part in enumerate(parts, 1)]


def good_then_error(payload: bytes, read_error: str, damaged_from: int | None = None) -> list[RawLine]:
    """The complete lines of ``payload``, then its unterminated rest (possibly empty) flagged."""
    *complete, rest = payload.split(b"\n")
    return good(b"".join(line + b"\n" for line in complete)) + [RawLine(len(complete) + 1, rest, len(rest), read_error, damaged_from)]


def gzip_member(deflated: bytes, payload: bytes) -> bytes:
    """A gzip member around a raw deflate stream of ``payload``."""
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    return header + deflated + struct.pack("<II", zlib.crc32(payload), len(payload) & 0xFFFFFFFF)


def broken_after(payload: bytes) -> bytes:
    """A gzip file that inflates ``payload`` exactly, then meets a block of the reserved type 3 (an
    error zlib reports at that very byte)."""
    comp = zlib.compressobj(6, zlib.DEFLATED, -15)
    deflated = comp.compress(payload) + comp.flush(zlib.Z_FULL_FLUSH)  # byte-aligned: next block starts here
    bad_block = b"\x07"  # BFINAL=1, BTYPE=11
    return gzip_member(deflated + bad_block + b"\x00" * 64, payload)


def payload_of(n: int, tail: bytes = b"") -> bytes:
    return b"".join(b'{"seq":%d,"conn":"c%d"}\n' % (i, i * 7919 % 10007) for i in range(n)) + tail


@pytest.fixture(params=INFLATERS)
def inflater(request, monkeypatch) -> str:
    """Run the test with zlib and with zlib-ng: same lines, same errors."""
    module = zlib if request.param == "zlib" else importlib.import_module("zlib_ng.zlib_ng")
    monkeypatch.setattr(reader, "_inflate", module)
    return request.param


@pytest.mark.parametrize("slice_bytes", [DEFAULT_SLICE, 4096, 7])
def test_lines_inflated_before_corrupt_data_all_come_out(monkeypatch, inflater: str, slice_bytes: int) -> None:
    """The damage sits in the same inflate slice as thousands of good lines (the whole file is one
    slice by default): every one of them comes out, then the partial line before the damage."""
    monkeypatch.setattr(reader, "INFLATE_SLICE_BYTES", slice_bytes)
    payload = payload_of(10_000, tail=b'{"seq":10000,"co')
    data = broken_after(payload)
    assert len(data) < DEFAULT_SLICE
    got = raw_lines(data)
    assert got == good_then_error(payload, "corrupt_gzip", damaged_from=1)
    assert got[-1] == RawLine(10_001, b'{"seq":10000,"co', 16, "corrupt_gzip", damaged_from=1)


def test_damage_right_after_a_complete_line_gives_an_empty_final_line(inflater: str) -> None:
    payload = payload_of(500)
    got = raw_lines(broken_after(payload))
    assert got[:2] == [RawLine(1, b'{"seq":0,"conn":"c0"}', 21), RawLine(2, b'{"seq":1,"conn":"c7919"}', 24)]
    assert got == good(payload) + [RawLine(501, b"", 0, "corrupt_gzip", damaged_from=1)]


@pytest.mark.parametrize("field", ["crc", "length"])
def test_a_bad_trailer_keeps_every_line_of_the_member(inflater: str, field: str) -> None:
    payload = payload_of(200)
    data = bytearray(gzip.compress(payload))
    data[-8 if field == "crc" else -4] ^= 0x01
    got = raw_lines(bytes(data))
    assert got == good(payload) + [RawLine(201, b"", 0, "corrupt_gzip", damaged_from=1)]


def test_a_bad_trailer_keeps_the_unterminated_last_line_as_the_flagged_one(inflater: str) -> None:
    payload = payload_of(3, tail=b"last")
    data = bytearray(gzip.compress(payload))
    data[-8] ^= 0x01
    assert raw_lines(bytes(data)) == good(payload_of(3)) + [RawLine(4, b"last", 4, "corrupt_gzip", damaged_from=1)]


def test_a_bad_second_member_keeps_the_first_member_and_its_own_lines_before_the_damage(inflater: str) -> None:
    first, second = payload_of(100), b"second-1\nsecond-2\nsecond-"
    got = raw_lines(gzip.compress(first) + broken_after(second))
    assert got == good(first + second[:18]) + [RawLine(103, b"second-", 7, "corrupt_gzip", damaged_from=101)]


def bad_crc(payload: bytes) -> bytes:
    """A gzip member of ``payload`` whose CRC trailer does not match: every byte inflates, then the check fails."""
    data = bytearray(gzip.compress(payload, mtime=0))
    data[-8] ^= 0x01
    return bytes(data)


@pytest.mark.parametrize(
    ("members", "lines", "damaged_from"),
    [
        pytest.param([b"a\nb\n", b"c\nd\n"], [b"a", b"b", b"c", b"d", b""], 3, id="the-member-starts-a-line"),
        pytest.param([b"a\nb", b"c\nd\n"], [b"a", b"bc", b"d", b""], 2, id="a-line-spans-both-members"),
        pytest.param([b"a\nb", b"\nc\n"], [b"a", b"b", b"c", b""], 2, id="only-its-newline-is-in-the-member"),
        pytest.param([b"a\n", b"b\n", b"c\nd"], [b"a", b"b", b"c", b"d"], 3, id="the-third-of-three"),
    ],
)
def test_a_damaged_member_is_marked_from_the_first_line_holding_one_of_its_bytes(
    inflater: str, members: list[bytes], lines: list[bytes], damaged_from: int
) -> None:
    """The last member fails its CRC: every line it gave a byte to, a newline included, may be garbled."""
    data = b"".join(gzip.compress(m, mtime=0) for m in members[:-1]) + bad_crc(members[-1])
    got = raw_lines(data)
    assert [line.data for line in got] == lines
    assert [(line.read_error, line.damaged_from) for line in got] == [(None, None)] * (len(lines) - 1) + [("corrupt_gzip", damaged_from)]


def test_something_not_gzip_right_after_a_member_is_read_as_text(inflater: str) -> None:
    """Bytes after a member that start no member are the file's, though no member's: they come out as
    they are, in lines flagged ``not_gzipped``; the lines before them are the member's own."""
    assert raw_lines(gzip.compress(b"a\nb\n") + b"garbage") == [RawLine(1, b"a", 1), RawLine(2, b"b", 1), RawLine(3, b"garbage", 7, "not_gzipped")]


def flagged(got: list[RawLine]) -> list[tuple[int, int | None]]:
    """(line, damaged_from) of each flagged line."""
    return [(line.line_no, line.damaged_from) for line in got if line.read_error]


@pytest.mark.parametrize("slice_bytes", [DEFAULT_SLICE, 4096, 7])
def test_the_reading_goes_on_at_the_member_after_a_damaged_one(monkeypatch, inflater: str, slice_bytes: int) -> None:
    """Three members, the middle one with a byte inverted: its lines up to the damage come out and
    are all marked, up to the line the damage ends in, which also holds the first bytes of the third
    member; the third member's other lines come out clean."""
    monkeypatch.setattr(reader, "INFLATE_SLICE_BYTES", slice_bytes)
    middle = bytearray(gzip.compress(payload_of(20_000), mtime=0))
    middle[len(middle) // 2] ^= 0xFF
    prefix = _inflatable_prefix(bytes(middle))
    data = gzip.compress(b"a\nb\n", mtime=0) + bytes(middle) + gzip.compress(b"c\nd\n", mtime=0)
    got = raw_lines(data, max_line_bytes=1 << 20, keep_bytes=1 << 20)
    *complete, rest = prefix.split(b"\n")
    junction = len(complete) + 3
    assert [line.data for line in got] == [b"a", b"b", *complete, rest + b"c", b"d"]
    assert flagged(got) == [(junction, 3)] and got[junction - 1].read_error == "corrupt_gzip"


@pytest.mark.parametrize(
    ("members", "lines", "marks"),
    [
        pytest.param([b"a\nb\n", b"c\nd\n"], [b"a", b"b", b"c", b"d"], [(3, 1)], id="the-next-member-starts-a-line"),
        pytest.param([b"a\nb", b"c\nd\n"], [b"a", b"bc", b"d"], [(2, 1)], id="a-line-spans-the-gap"),
        pytest.param([b"a\nb", b"c\nd"], [b"a", b"bc", b"d"], [(2, 1)], id="the-last-line-unterminated"),
        pytest.param([b"a\nb\n", b""], [b"a", b"b", b""], [(3, 1)], id="the-next-member-is-empty"),
        pytest.param([b"a\n", b"b", b"c\nd\n"], [b"a", b"bc", b"d"], [(2, 1)], id="two-failed-in-a-row"),
        pytest.param([b"a", b"b", b"c\nd\n"], [b"abc", b"d"], [(1, 1)], id="two-failed-in-a-row-in-one-line"),
        pytest.param([b"a\n", b"b\nc", b"d\n"], [b"a", b"b", b"cd"], [(2, 1), (3, 3)], id="two-failed-apart"),
    ],
)
def test_a_member_that_fails_its_crc_is_marked_and_the_next_one_read(
    inflater: str, members: list[bytes], lines: list[bytes], marks: list[tuple[int, int]]
) -> None:
    """Every member but the last fails its CRC (its bytes all inflate): each marks the lines from the
    first one holding its bytes to the line in progress when the next member starts (which may start
    in the middle of a line whose beginning was lost), never a line marked before."""
    data = b"".join(bad_crc(m) for m in members[:-1]) + gzip.compress(members[-1], mtime=0)
    got = raw_lines(data)
    assert [line.data for line in got] == lines
    assert flagged(got) == marks and {line.read_error for line in got} <= {None, "corrupt_gzip"}


def test_garbage_between_members_marks_one_line() -> None:
    """Bytes that are no member come out as text up to what looks like a member header; that false
    member fails at once, inflating nothing, and the reading goes on at the next true one: the line
    in progress, holding the text and that member's first bytes, is the only one marked."""
    garbage = b"junk\x1f\x8b\x08\x00junk\x1f\x8b\x08\xffjunk"
    got = raw_lines(gzip.compress(b"a\nb\n") + garbage + gzip.compress(b"c\nd\n"))
    assert got == [RawLine(1, b"a", 1), RawLine(2, b"b", 1), RawLine(3, b"junkc", 5, "corrupt_gzip", damaged_from=3), RawLine(4, b"d", 1)]


def unfinished_member(payload: bytes) -> bytes:
    """A member whose deflate data has no final block: zlib reads on, through its trailer, into
    whatever follows it before it fails."""
    comp = zlib.compressobj(6, zlib.DEFLATED, -15)
    return gzip_member(comp.compress(payload) + comp.flush(zlib.Z_SYNC_FLUSH), payload)


@pytest.mark.parametrize("sliced", [False, True])
def test_a_member_is_found_though_the_damage_shows_only_inside_it(monkeypatch, inflater: str, sliced: bool) -> None:
    """The damage before it shows a few bytes into the next member's header: the resync looks back
    (and without the lookback, that member would be lost). ``sliced``: the byte that raises starts an
    inflate slice, and the lookback is just long enough, so the header lies in the slice before."""
    rnd = random.Random(0)
    first = unfinished_member(b"".join(b'{"k":%d}\n' % rnd.randrange(10**6) for _ in range(50)))
    data = first + gzip.compress(b"next-1\nnext-2\n", mtime=0)
    shows_at = len(_inflatable_prefix(data, positions=True))
    assert shows_at > len(first)  # the byte that raises lies inside the next member
    if sliced:
        monkeypatch.setattr(reader, "INFLATE_SLICE_BYTES", shows_at)
        monkeypatch.setattr(reader, "RESYNC_LOOKBACK_BYTES", shows_at + 1 - len(first))
    got = raw_lines(data)
    assert got[-2].data.endswith(b"next-1") and got[-1] == RawLine(52, b"next-2", 6)  # line 51 holds the bytes read past the end
    assert flagged(got) == [(51, 1)]
    monkeypatch.setattr(reader, "RESYNC_LOOKBACK_BYTES", 0)
    assert b"next-2" not in [line.data for line in raw_lines(data)]


def test_a_member_found_after_damage_counts_only_once_checked(inflater: str) -> None:
    """Cut before its trailer, a member found by a resync was never checked (it may be bytes that only
    look like a member): its lines are marked, and the file ends ``corrupt_gzip``."""
    whole = bad_crc(b"a\nb\n") + gzip.compress(b"c\nd\ne\n", mtime=0)
    got = raw_lines(whole[:-4])
    assert got == [RawLine(1, b"a", 1), RawLine(2, b"b", 1), RawLine(3, b"c", 1, "corrupt_gzip", damaged_from=1),
                   RawLine(4, b"d", 1), RawLine(5, b"e", 1), RawLine(6, b"", 0, "corrupt_gzip", damaged_from=4)]


def test_damage_with_no_member_after_it_ends_the_file(inflater: str) -> None:
    got = raw_lines(bad_crc(b"a\nb") + b"no member here" + b"\x1f\x8b")
    assert got == [RawLine(1, b"a", 1), RawLine(2, b"b", 1, "corrupt_gzip", damaged_from=1)]


def test_a_cut_member_marks_no_damaged_lines(inflater: str) -> None:
    """A cut stream garbles nothing before the cut: ``damaged_from`` stays None."""
    whole = gzip.compress(b"a\nb\n") + gzip.compress(payload_of(200))
    got = raw_lines(whole[:-20])
    assert got[-1].read_error == "truncated_gzip" and {line.damaged_from for line in got} == {None}


def _inflatable_prefix(data: bytes, positions: bool = False) -> bytes:
    """What zlib inflates from one gzip member fed byte by byte, up to the byte that raises (with
    ``positions``: the bytes fed before it)."""
    decomp = zlib.decompressobj(wbits=31)
    out = bytearray()
    for at in range(len(data)):
        try:
            out += decomp.decompress(data[at : at + 1])
        except zlib.error:
            return data[:at] if positions else bytes(out)
    raise AssertionError("the data was expected to be corrupt")


@pytest.mark.parametrize("where", [0.25, 0.5, 0.9])
def test_a_flipped_byte_keeps_everything_inflated_before_the_error_is_seen(inflater: str, where: float) -> None:
    """Whatever byte is damaged, the lines are those an incremental inflate produces before it fails
    (deflate may decode garbage for a while after the damage; no check can tell before the error)."""
    data = bytearray(gzip.compress(payload_of(20_000)))
    data[int(len(data) * where)] ^= 0xFF
    prefix = _inflatable_prefix(bytes(data))
    assert prefix.count(b"\n") > 20_000 * where * 0.9
    assert raw_lines(bytes(data), max_line_bytes=1 << 20, keep_bytes=1 << 20) == good_then_error(prefix, "corrupt_gzip", damaged_from=1)


@pytest.mark.parametrize("slice_bytes", [DEFAULT_SLICE, 5])
@pytest.mark.parametrize("padding", [1, 16, 100_000])
def test_zero_padding_after_the_last_member_is_ignored(monkeypatch, slice_bytes: int, padding: int) -> None:
    monkeypatch.setattr(reader, "INFLATE_SLICE_BYTES", slice_bytes)
    members = gzip.compress(b"a\nb\n") + gzip.compress(b"c\nlast")
    assert raw_lines(members + b"\x00" * padding) == [
        RawLine(1, b"a", 1),
        RawLine(2, b"b", 1),
        RawLine(3, b"c", 1),
        RawLine(4, b"last", 4, unterminated=True),  # no newline ends it
    ]


@pytest.mark.parametrize("slice_bytes", [DEFAULT_SLICE, 5])
@pytest.mark.parametrize("padding", [1, 16, 100_000])
def test_a_member_after_zero_padding_is_read_and_the_line_after_the_hole_flagged(monkeypatch, inflater: str, slice_bytes: int, padding: int) -> None:
    """A crash leaves zeroed blocks, and the writer goes on after them: the zeros are a hole, not the
    end. The member after it is read; the line in progress there is flagged, its range itself alone
    (the hole may have held the end of the line before it, or the start of the member's first line)."""
    monkeypatch.setattr(reader, "INFLATE_SLICE_BYTES", slice_bytes)
    hole = b"\x00" * padding
    got = raw_lines(gzip.compress(b"a\nb\n", mtime=0) + hole + gzip.compress(b"c\nd\n", mtime=0) + gzip.compress(b"e\n", mtime=0))
    assert got == [RawLine(1, b"a", 1), RawLine(2, b"b", 1), RawLine(3, b"c", 1, "corrupt_gzip", damaged_from=3), RawLine(4, b"d", 1), RawLine(5, b"e", 1)]
    # the line in progress at the hole takes the next member's first bytes
    got = raw_lines(gzip.compress(b"a\nb", mtime=0) + hole + gzip.compress(b"c\nd\n", mtime=0))
    assert got == [RawLine(1, b"a", 1), RawLine(2, b"bc", 2, "corrupt_gzip", damaged_from=2), RawLine(3, b"d", 1)]


@pytest.mark.parametrize(
    ("gap", "tail", "lines"),
    [
        pytest.param(b"\x00" * 16 + b"x", b"", [RawLine(1, b"a", 1), RawLine(2, b"bx", 2, "corrupt_gzip", damaged_from=2)], id="text-after-padding"),
        pytest.param(b"x", b"", [RawLine(1, b"a", 1), RawLine(2, b"bx", 2, "not_gzipped")], id="one-stray-byte"),
        pytest.param(b"\x00" * 16 + b"junk\x1f\x8b\x09", b"c\nd\n", [RawLine(1, b"a", 1), RawLine(2, b"bjunk\x1f\x8b\x09c", 9, "corrupt_gzip", damaged_from=2), RawLine(3, b"d", 1)],
                     id="junk-and-a-false-header-after-padding"),
        pytest.param(b"junk", b"c\nd\n", [RawLine(1, b"a", 1), RawLine(2, b"bjunkc", 6, "not_gzipped"), RawLine(3, b"d", 1)], id="junk-right-after-a-member"),
        pytest.param(b"x\ny\n", b"c\nd\n", [RawLine(1, b"a", 1), RawLine(2, b"bx", 2, "not_gzipped"), RawLine(3, b"y", 1, "not_gzipped"), RawLine(4, b"c", 1), RawLine(5, b"d", 1)],
                     id="lines-between-members"),
    ],
)
def test_a_gap_after_a_member_is_read_past(inflater: str, gap: bytes, tail: bytes, lines: list[RawLine]) -> None:
    """Bytes that start no member after one that passed its check, with or without zeros before them,
    come out as text, whether a member follows or the file ends (``gzip -t`` calls both "trailing
    garbage" and drops them): every line holding one is flagged ``not_gzipped``, or ``corrupt_gzip``
    when zeros came first (the hole may have taken the end of the line in progress); one stray byte
    is not taken for a cut member."""
    assert raw_lines(gzip.compress(b"a\nb", mtime=0) + gap + (gzip.compress(tail, mtime=0) if tail else b"")) == lines


def test_a_member_after_padding_cut_before_its_check_is_suspect_whole(inflater: str) -> None:
    """As a member found after damage: its bytes may only look like a member until its check passes."""
    got = raw_lines(gzip.compress(b"a\n", mtime=0) + b"\x00" * 512 + gzip.compress(b"b\nc\nd", mtime=0)[:-8])
    assert got == [RawLine(1, b"a", 1), RawLine(2, b"b", 1, "corrupt_gzip", damaged_from=2), RawLine(3, b"c", 1), RawLine(4, b"d", 1, "corrupt_gzip", damaged_from=3)]


def test_a_cut_gzip_header_after_a_member_is_a_cut_member() -> None:
    """One byte of the magic is where a member being written was cut: ``truncated_gzip``, as a cut."""
    assert raw_lines(gzip.compress(b"a\nb\n", mtime=0) + b"\x1f") == [RawLine(1, b"a", 1), RawLine(2, b"b", 1), RawLine(3, b"", 0, "truncated_gzip")]


@pytest.mark.parametrize("chunk", [1, 3, 4096])
def test_a_crlf_line_of_exactly_the_limit_is_kept_whole(monkeypatch, chunk: int) -> None:
    """The limit counts the line without its \\r, as with LF alone."""
    monkeypatch.setattr(reader, "CHUNK_BYTES", chunk)
    got = raw_lines(b"abcdefgh\r\nabcdefghi\r\nabcdefgh\nok\r\n", max_line_bytes=8, keep_bytes=3)
    assert got == [
        RawLine(1, b"abcdefgh", 8),
        RawLine(2, b"abc", 10, "line_too_long"),
        RawLine(3, b"abcdefgh", 8),
        RawLine(4, b"ok", 2),
    ]


def test_a_last_crlf_line_of_exactly_the_limit_is_kept_whole() -> None:
    assert raw_lines(b"abcdefgh\r", max_line_bytes=8, keep_bytes=3) == [RawLine(1, b"abcdefgh", 8, unterminated=True)]
    assert raw_lines(b"abcdefghi", max_line_bytes=8, keep_bytes=3) == [RawLine(1, b"abc", 9, "line_too_long")]


@pytest.mark.parametrize("after", [pytest.param(b"", id="padding-to-the-end"), pytest.param(gzip.compress(b"b\n", mtime=0), id="a-member-after-the-hole")])
def test_a_long_run_of_zeros_is_skipped_in_little_memory(after: bytes) -> None:
    """The zeros are skipped as they are read: a resync after them starts after them, so the reader
    keeps none of their slices (a preallocated file left by a crash can hold gigabytes of them)."""
    import tracemalloc

    stream = io.BytesIO(gzip.compress(b"a\n", mtime=0) + bytes(64 << 20) + after)
    tracemalloc.start()
    try:
        got = list(read_raw_stream(stream, max_line_bytes=100, keep_bytes=10))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == [RawLine(1, b"a", 1)] + ([RawLine(2, b"b", 1, "corrupt_gzip", damaged_from=2)] if after else [])
    assert peak < 16 << 20, f"{peak / 2**20:.1f} MiB"


def holes_in_text() -> list:
    """(text, lines) pairs: runs of zero bytes in the text of a file."""
    return [
        pytest.param(b"a\n" + bytes(3) + b"b\n", [RawLine(1, b"a", 1), RawLine(2, b"", 3, "zero_bytes"), RawLine(3, b"b", 1)], id="between-lines"),
        pytest.param(b'{"x":' + bytes(5000) + b"b\nc\n", [RawLine(1, b'{"x":', 5), RawLine(2, b"", 5000, "zero_bytes"), RawLine(3, b"b", 1), RawLine(4, b"c", 1)],
                     id="inside-a-line-longer-than-the-limit"),
        pytest.param(b"abcdefghijklmnop" + bytes(2) + b"b\n", [RawLine(1, b"abcdefghij", 16, "line_too_long"), RawLine(2, b"", 2, "zero_bytes"), RawLine(3, b"b", 1)],
                     id="after-a-line-too-long"),
        pytest.param(b"a\r" + bytes(1) + b"\nb", [RawLine(1, b"a", 1), RawLine(2, b"", 1, "zero_bytes"), RawLine(3, b"", 0), RawLine(4, b"b", 1, unterminated=True)], id="before-a-newline"),
        pytest.param(b"a\n" + bytes(7), [RawLine(1, b"a", 1), RawLine(2, b"", 7, "zero_bytes")], id="at-the-end"),
        pytest.param(bytes(9) + b"a\n", [RawLine(1, b"", 9, "zero_bytes"), RawLine(2, b"a", 1)], id="at-the-start"),
    ]


@pytest.mark.parametrize("chunk", [1, 2, 4096])
@pytest.mark.parametrize(("text", "lines"), holes_in_text())
def test_a_run_of_zero_bytes_in_a_plain_file_is_a_line_of_its_own(monkeypatch, chunk: int, text: bytes, lines: list[RawLine]) -> None:
    """A crash that zeroes blocks of a plain capture, the writer going on after them: the record after
    the hole is a line of its own (before, it was lost in one long line with the zeros), the hole is
    a ``zero_bytes`` line, and the line it cut keeps its first part. A run split over reads is one hole."""
    monkeypatch.setattr(reader, "CHUNK_BYTES", chunk)
    assert raw_lines(text, max_line_bytes=10, keep_bytes=10) == lines


@pytest.mark.parametrize(("text", "lines"), holes_in_text())
def test_a_run_of_zero_bytes_in_gzipped_text_is_a_line_of_its_own(inflater: str, text: bytes, lines: list[RawLine]) -> None:
    """The same in a file gzipped after the crash: the zeros are in the text, not between members."""
    assert raw_lines(gzip.compress(text, mtime=0), max_line_bytes=10, keep_bytes=10) == lines


def test_a_hole_split_by_a_member_boundary_is_two_holes(inflater: str) -> None:
    assert raw_lines(gzip.compress(b"a\n\0", mtime=0) + gzip.compress(b"\0\0b\n", mtime=0)) == [
        RawLine(1, b"a", 1), RawLine(2, b"", 1, "zero_bytes"), RawLine(3, b"", 2, "zero_bytes"), RawLine(4, b"b", 1),
    ]


def test_a_hole_ends_the_line_a_damaged_member_ends_in(inflater: str) -> None:
    """The line in progress at a hole is ended by it, damaged range and all, as by a newline."""
    got = raw_lines(gzip.compress(b"a\n", mtime=0) + bad_crc(b"b\nc") + gzip.compress(b"d" + bytes(2) + b"e\n", mtime=0))
    assert got == [RawLine(1, b"a", 1), RawLine(2, b"b", 1), RawLine(3, b"cd", 2, "corrupt_gzip", damaged_from=2), RawLine(4, b"", 2, "zero_bytes"), RawLine(5, b"e", 1)]


def test_a_hole_just_before_a_cut_still_comes_out(inflater: str) -> None:
    """Zeros that are the last text a cut member gave are a hole, then the cut's empty last line."""
    member = zlib.compressobj(6, zlib.DEFLATED, 31)
    cut = member.compress(b"a\n" + bytes(5)) + member.flush(zlib.Z_SYNC_FLUSH)  # no final block, no trailer
    assert raw_lines(cut) == [RawLine(1, b"a", 1), RawLine(2, b"", 5, "zero_bytes"), RawLine(3, b"", 0, "truncated_gzip")]


@pytest.mark.parametrize("keep", [2, 3, 4, 10])
def test_a_line_too_long_keeps_at_most_the_limit_and_counts_its_whole_length(keep: int) -> None:
    """However much the caller asks to keep, no more than ``max_line_bytes`` of a line too long is
    kept, and ``line_bytes`` is its whole length."""
    assert raw_lines(b"abcdefgh\nxy\n", max_line_bytes=2, keep_bytes=keep) == [RawLine(1, b"abcdefgh"[: min(keep, 2)], 8, "line_too_long"), RawLine(2, b"xy", 2)]


@pytest.mark.parametrize("slice_bytes", [DEFAULT_SLICE, 5, 2])
def test_text_after_a_member_comes_out_whole_whatever_the_slices(monkeypatch, inflater: str, slice_bytes: int) -> None:
    """Text after a member is passed on a slice or so at a time, a member header split between two
    slices included: every byte comes out once, in order, up to the next member and after the last."""
    monkeypatch.setattr(reader, "INFLATE_SLICE_BYTES", slice_bytes)
    text = b"".join(b'{"n":%d}\n' % i for i in range(2000))
    tail = text[:50]  # six lines and the start of a seventh, with no newline
    got = raw_lines(gzip.compress(b"a\n", mtime=0) + text + gzip.compress(b"b\n", mtime=0) + tail)
    appended = text.split(b"\n")[:-1]
    tail_lines = tail.split(b"\n")
    want = (
        [RawLine(1, b"a", 1)]
        + [RawLine(2 + i, line, len(line), "not_gzipped") for i, line in enumerate(appended)]
        + [RawLine(2 + len(appended), b"b", 1)]
        + [RawLine(3 + len(appended) + i, line, len(line), "not_gzipped") for i, line in enumerate(tail_lines)]
    )
    assert got == want
