"""The capture reader on texts that are not plain UTF-8: a UTF-8 byte-order mark, and UTF-16/32 texts
(with a byte-order mark, or recognised by the zero bytes around a record's ``{``), which are read as
the same lines as their UTF-8 form, plain or gzipped, whatever the chunks."""

import codecs
import gzip
import hashlib
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipelines.ingest.capture_reader as reader
from pipelines.ingest.capture_reader import CaptureLine, head_length, read_capture_stream

WIDE = ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"]
TEXT = '{"namesrv":"10.0.0.10:9876","ts":1}\r\n{"topic":"é€😀"}\n\n{"x":"' + "y" * 60 + '"}\n{"last":true}'


def lines(data: bytes, max_line_bytes: int = 40, keep_bytes: int = 8) -> list[CaptureLine]:
    return list(read_capture_stream(io.BytesIO(data), max_line_bytes=max_line_bytes, keep_bytes=keep_bytes))


def utf8_lines(text: str) -> list[CaptureLine]:
    """What the reader makes of the text written in UTF-8: the lines every encoding must give."""
    return lines(text.encode("utf-8"))


def test_the_reference_lines_are_what_the_contract_says() -> None:
    """The UTF-8 form itself, written out (so that the comparisons below compare with something known)."""
    long = '{"x":"' + "y" * 60 + '"}'
    assert utf8_lines(TEXT) == [
        CaptureLine(1, '{"namesrv":"10.0.0.10:9876","ts":1}', 35),
        CaptureLine(2, '{"topic":"é€😀"}', 21),
        CaptureLine(3, "", 0),
        CaptureLine(4, long[:8], len(long), long[:8].encode(), "line_too_long"),
        CaptureLine(5, '{"last":true}', 13),
    ]


def test_a_utf8_text_passes_unchanged_byte_order_mark_and_all() -> None:
    """The reader keeps a UTF-8 mark as line 1's bytes (bronze keeps the line as read; the parse skips it)."""
    assert lines(codecs.BOM_UTF8 + b'{"a":1}\n' + codecs.BOM_UTF8 + b'{"b":2}') == [
        CaptureLine(1, '\ufeff{"a":1}', 10),
        CaptureLine(2, '\ufeff{"b":2}', 10),
    ]


@pytest.mark.parametrize("codec", WIDE)
@pytest.mark.parametrize("bom", [True, False], ids=["bom", "no-bom"])
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_a_utf16_or_utf32_text_gives_the_lines_of_its_utf8_form(codec: str, bom: bool, gz: bool) -> None:
    """The same text, byte-order mark and all, written as UTF-8: the same lines."""
    text = ("\ufeff" if bom else "") + TEXT
    data = text.encode(codec)
    assert lines(gzip.compress(data) if gz else data) == utf8_lines(text)


@pytest.mark.parametrize("codec", WIDE)
def test_a_wide_text_split_in_one_byte_chunks_and_gzip_members(monkeypatch, codec: str) -> None:
    monkeypatch.setattr(reader, "CHUNK_BYTES", 1)
    monkeypatch.setattr(reader, "INFLATE_SLICE_BYTES", 1)
    data = ("\ufeff" + TEXT).encode(codec)
    members = b"".join(gzip.compress(data[at : at + 7]) for at in range(0, len(data), 7))
    assert lines(members) == utf8_lines("\ufeff" + TEXT)
    assert lines(data) == utf8_lines("\ufeff" + TEXT)


def test_a_code_unit_that_does_not_decode_makes_its_line_invalid_utf8_with_its_bytes_kept() -> None:
    """A lone surrogate, and an odd byte at the end of a UTF-16 text: kept as bytes that are not UTF-8."""
    data = codecs.BOM_UTF16_LE + '{"a":1}\n{"b":"'.encode("utf-16-le") + b"\x00\xd8" + '"}\n{'.encode("utf-16-le") + b"\x7b"
    assert lines(data) == [
        CaptureLine(1, '\ufeff{"a":1}', 10),
        CaptureLine(2, '{"b":"\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd"}', 14, b'{"b":"\xed\xb0\x80\xed\xb3\x98"}'),
        CaptureLine(3, "{\ufffd\ufffd\ufffd", 4, b"{\xed\xb1\xbb"),
    ]


def test_a_cut_gzipped_wide_text_keeps_what_was_decoded_before_the_cut() -> None:
    data = gzip.compress(codecs.BOM_UTF16_LE + '{"a":1}\n{"b":2}\n'.encode("utf-16-le"))[:-12]
    got = lines(data)
    assert got[:-1] == [CaptureLine(1, '\ufeff{"a":1}', 10)]
    last = got[-1]
    assert (last.line_no, last.read_error) == (2, "truncated_gzip")
    assert '{"b":2}'.startswith(last.text) and last.text  # some of the cut line, decoded


def test_a_utf8_text_that_starts_with_a_hole_is_not_taken_for_a_wide_one() -> None:
    """Zero bytes before the first record are a hole of a UTF-8 text: ``{`` is not between zeros."""
    assert lines(b"\0\0\0\0\0" + b'{"a":1}\n') == [CaptureLine(1, "", 5, b"", "zero_bytes"), CaptureLine(2, '{"a":1}', 7)]


@settings(max_examples=200, deadline=None)
@given(
    body=st.lists(st.sampled_from(["a", "{}", "\n", "\r", "\r\n", "é", "😀", "x" * 9, '"k":1']), max_size=30).map("".join),
    codec=st.sampled_from(WIDE),
    bom=st.booleans(),
    chunk=st.integers(min_value=1, max_value=64),
    inflate_slice=st.integers(min_value=1, max_value=64),
    gz=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=3),
)
def test_any_wide_text_in_any_chunks_gives_the_lines_of_its_utf8_form(
    monkeypatch_module, body: str, codec: str, bom: bool, chunk: int, inflate_slice: int, gz: bool, cuts: list[int]
) -> None:
    """A text starting with ``{`` (or a byte-order mark), however read and cut into gzip members."""
    text = ("\ufeff" if bom else "") + "{" + body
    monkeypatch_module.setattr(reader, "CHUNK_BYTES", chunk)
    monkeypatch_module.setattr(reader, "INFLATE_SLICE_BYTES", inflate_slice)
    data = text.encode(codec)
    bounds = [0, *sorted(c % (len(data) + 1) for c in cuts), len(data)]
    members = b"".join(gzip.compress(data[a:b]) for a, b in zip(bounds, bounds[1:]))
    monkeypatch_module.setattr(reader, "CHUNK_BYTES", 1 << 20)  # the reference: one chunk, UTF-8
    want = utf8_lines(text)
    monkeypatch_module.setattr(reader, "CHUNK_BYTES", chunk)
    assert lines(members if gz else data) == want


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.mark.parametrize("start", [codecs.BOM_UTF16_LE + b"{}", codecs.BOM_UTF16_BE + b"ab"], ids=repr)
def test_a_utf8_text_that_starts_like_a_wide_one_without_its_first_character_stays_utf8(start: bytes) -> None:
    """The bytes of a mark not followed by ``{`` or a blank in that encoding: invalid UTF-8, read as such."""
    assert lines(start + b'\n{"a":1}\n') == [
        CaptureLine(1, start.decode("utf-8", "replace"), 4, start),
        CaptureLine(2, '{"a":1}', 7),
    ]


def test_a_capture_saved_as_utf16_by_a_windows_tool_ingests_as_its_utf8_form(tmp_path) -> None:
    """A task's whole read of a file (reader, parser, Arrow rows): the UTF-16 copy PowerShell's ``>``
    would write (byte-order mark, CRLF) gives the rows of the same text in UTF-8, mark and all."""
    import pyarrow as pa
    from line_parsers import LIMITS

    from pipelines.ingest.transforms import FileToRead, ParseOptions, ReadOptions, file_reader
    from pipelines.quality.rules import event_rules

    records = [
        '{"namesrv":"10.0.0.10:9876","ts":1732147200000,"kind":"namesrv_start","rocketmq_version":"4.9.4","config":{}}',
        '{"namesrv":"10.0.0.10:9876","ts":1732147200123,"kind":"request","code":103,"version":479,"opaque":17,'
        '"conn":"c1","extFields":{"brokerName":"broker-é","brokerAddr":"10.0.1.5:10911","clusterName":"C",'
        '"haServerAddr":"10.0.1.5:10912","brokerId":"0","compressed":"false","bodyCrc32":"0"},'
        '"body":{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"timestamp":1},'
        '"topicConfigTable":{"orders":{"topicName":"orders","readQueueNums":8,"writeQueueNums":8,"perm":6}}}}}',
        '{"namesrv":"10.0.0.10:9876","ts":1732147200200,"kind":"channel","event":"CLOSE","conn":"c1","remote":"10.0.1.5:1"}',
        "not json",
    ]
    utf8, utf16 = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    utf8.write_bytes(codecs.BOM_UTF8 + "\n".join(records).encode("utf-8") + b"\n")
    utf16.write_bytes(codecs.BOM_UTF16_LE + "\r\n".join(records).encode("utf-16-le") + "\r\n".encode("utf-16-le"))
    options = ParseOptions(LIMITS, event_rules(min_ts=0, max_ts=2**62), max_queue_nums=1024, max_perm=15, keep_bytes=1 << 20)

    def table(path) -> pa.Table:
        batches = list(file_reader(ReadOptions(max_line_bytes=1 << 20, keep_bytes=1 << 10), options)(FileToRead(str(path))))
        return pa.Table.from_batches(batches).drop_columns(["source_file"])

    # the UTF-8 file's complete part is where a later read may resume; a UTF-16 one is always read whole
    how_read = ["complete_bytes", "complete_lines", "complete_sha256", "complete_head_sha256"]
    got, want = table(utf16), table(utf8)
    data = utf8.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    head = hashlib.sha256(data[: head_length(len(data))]).hexdigest()  # the file is shorter than HEAD_BYTES: its first half, quarter, ...
    assert want.select(how_read).to_pylist()[-1] == {"complete_bytes": len(data), "complete_lines": 4, "complete_sha256": sha,
                                                    "complete_head_sha256": head}
    assert got.select(how_read).to_pylist()[-1] == dict.fromkeys(how_read)
    got, want = got.drop_columns(how_read), want.drop_columns(how_read)
    assert want.num_rows == 4 and want.column("status").to_pylist() == ["accepted", "accepted", "accepted", "quarantined"]
    assert got.to_pylist() == want.to_pylist()
