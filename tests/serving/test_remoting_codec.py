"""The remoting codec (nsreplay.serving.remoting): exact bytes of both header types, round trips
(examples and hypothesis properties) and every malformed-frame error."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsreplay.serving.remoting import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    JSON,
    LANGUAGES,
    MAX_FRAME_BYTES,
    ROCKETMQ,
    BadFrameLength,
    BadJsonHeader,
    EncodeError,
    FrameError,
    FrameLengthMismatch,
    HeaderTooLong,
    NotUtf8,
    RemotingCommand,
    TruncatedBinaryHeader,
    UnknownSerializeType,
    decode_frame,
    decode_payload,
    encode_frame,
    frame_length,
    response_to,
)


def frame(header: bytes, body: bytes = b"", serialize_type: int = JSON) -> bytes:
    """A frame assembled by hand (independent of the encoder)."""
    return struct.pack(">iI", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


def binary_header(code=105, lang=13, version=121, opaque=9, flag=0, remark: bytes | None = None,
                  ext: list[tuple[bytes, bytes]] | None = None) -> bytes:
    out = struct.pack(">hbhii", code, lang, version, opaque, flag)
    out += struct.pack(">i", len(remark or b"")) + (remark or b"")
    fields = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in ext or [])
    return out + struct.pack(">i", len(fields)) + fields


# ------------------------------------------------------------------------------------ exact bytes


def test_decodes_the_ali_ons_request_as_seen_on_the_wire():
    header = b'{"code":105,"language":"JAVA","opaque":1,"flag":0,"version":121,"extFields":{"topic":"orders"}}'
    assert decode_frame(frame(header)) == RemotingCommand(
        code=105, language="JAVA", version=121, opaque=1, flag=0, ext_fields={"topic": "orders"}, serialize_type=JSON)


def test_decodes_the_cpp_request_with_its_extra_ext_fields():
    header = json.dumps({"code": 105, "extFields": {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "",
                                                    "topic": "t"}, "flag": 0, "language": "CPP", "opaque": 3,
                         "serializeTypeCurrentRPC": "JSON", "version": 63}).encode()
    cmd = decode_frame(frame(header))
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.ext("topic")) == (105, "CPP", 63, 3, "t")
    assert cmd.ext("OnsChannel") == "ALIYUN" and cmd.body is None


def test_json_response_bytes_are_fastjson_like():
    request = RemotingCommand(code=105, version=121, opaque=77, ext_fields={"topic": "t"})
    response = response_to(request, 17, remark="No topic\nSee x", version=401)
    header = (b'{"code":17,"flag":1,"language":"JAVA","opaque":77,"remark":"No topic\\nSee x",'
              b'"serializeTypeCurrentRPC":"JSON","version":401}')
    assert encode_frame(response) == frame(header)


def test_binary_header_bytes_and_decode():
    cmd = RemotingCommand(code=106, language="NODE_JS", version=121, opaque=9, flag=FLAG_RESPONSE, remark="ok",
                          ext_fields={"a": "1"}, body=b"{}", serialize_type=ROCKETMQ)
    expected = frame(binary_header(code=106, flag=1, remark=b"ok", ext=[(b"a", b"1")]), b"{}", ROCKETMQ)
    assert encode_frame(cmd) == expected
    assert decode_frame(expected) == cmd


def test_response_echoes_opaque_sets_bit_0_and_keeps_the_serialize_type():
    for st_ in (JSON, ROCKETMQ):
        request = RemotingCommand(code=105, opaque=123456, flag=0, serialize_type=st_, ext_fields={"topic": "x"})
        response = decode_frame(encode_frame(response_to(request, 0, body=b'{"a":1}')))
        assert (response.opaque, response.flag, response.serialize_type, response.body) == (123456, 1, st_, b'{"a":1}')
        assert response.is_response and not response.is_oneway


def test_flags():
    cmd = RemotingCommand(code=105, flag=FLAG_ONEWAY)
    assert cmd.is_oneway and not cmd.is_response


def test_json_header_defaults_and_lenient_ext_values():
    cmd = decode_frame(frame(b'{"code":206,"extFields":{"n":5,"b":true,"z":null,"s":"x"}}'))
    assert cmd == RemotingCommand(code=206, language="JAVA", version=0, opaque=0, flag=0,
                                  ext_fields={"n": "5", "b": "true", "s": "x"})


def test_body_is_everything_after_the_header():
    body = bytes(range(256)) * 3
    cmd = decode_frame(frame(b'{"code":0,"flag":1}', body))
    assert cmd.body == body


def test_unicode_in_remark_and_ext_fields_both_types():
    for st_ in (JSON, ROCKETMQ):
        cmd = RemotingCommand(code=105, remark="é\n\u2603\U0001F600\"\\", ext_fields={"töpic": "順序\x00", "": ""},
                              serialize_type=st_)
        assert decode_frame(encode_frame(cmd)) == cmd


def test_binary_empty_remark_and_ext_fields_decode_as_none():
    cmd = RemotingCommand(code=105, remark="", ext_fields={}, serialize_type=ROCKETMQ)
    back = decode_frame(encode_frame(cmd))
    assert (back.remark, back.ext_fields) == (None, None)
    json_back = decode_frame(encode_frame(RemotingCommand(code=105, remark="", ext_fields={})))
    assert (json_back.remark, json_back.ext_fields) == ("", {})


def test_unknown_language_byte_round_trips_as_its_number():
    raw = frame(binary_header(lang=77), serialize_type=ROCKETMQ)
    cmd = decode_frame(raw)
    assert cmd.language == "77"
    assert encode_frame(cmd) == raw


# ------------------------------------------------------------------------------------ properties

texts = st.text(max_size=40)
ints32 = st.integers(-(2**31), 2**31 - 1)
ints16 = st.integers(-(2**15), 2**15 - 1)
ext_maps = st.none() | st.dictionaries(texts, texts, max_size=6)
bodies = st.none() | st.binary(min_size=1, max_size=300)


@st.composite
def commands(draw) -> RemotingCommand:
    serialize_type = draw(st.sampled_from([JSON, ROCKETMQ]))
    small = serialize_type == ROCKETMQ
    remark = draw(st.none() | texts)
    ext = draw(ext_maps)
    if small:  # a binary header writes no difference between empty and none
        remark = remark or None
        ext = ext or None
    return RemotingCommand(
        code=draw(ints16 if small else ints32),
        language=draw(st.sampled_from(LANGUAGES)),
        version=draw(ints16 if small else ints32),
        opaque=draw(ints32),
        flag=draw(ints32),
        remark=remark,
        ext_fields=ext,
        body=draw(bodies),
        serialize_type=serialize_type,
    )


@settings(max_examples=300, deadline=None)
@given(commands())
def test_round_trip_property(cmd):
    raw = encode_frame(cmd)
    assert frame_length(raw[:4]) == len(raw) - 4
    assert decode_frame(raw) == cmd
    assert decode_payload(raw[4:]) == cmd


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_raise_a_frame_error(data):
    try:
        decode_frame(data)
    except FrameError:
        pass


@settings(max_examples=200, deadline=None)
@given(commands(), st.data())
def test_truncated_or_flipped_frames_decode_or_raise_a_frame_error(cmd, data):
    raw = bytearray(encode_frame(cmd))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
    else:
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] ^= 1 << data.draw(st.integers(0, 7))
    try:
        decode_frame(bytes(raw))
    except FrameError:
        pass


# ------------------------------------------------------------------------------------ errors


@pytest.mark.parametrize("total", [-1, -(2**31), 0, 3])
def test_bad_length_too_small_or_negative(total):
    with pytest.raises(BadFrameLength):
        frame_length(struct.pack(">i", total))


def test_frame_limit_is_16_mib_including_the_prefix():
    assert frame_length(struct.pack(">i", MAX_FRAME_BYTES - 4)) == MAX_FRAME_BYTES - 4
    with pytest.raises(BadFrameLength, match="16 MiB"):
        frame_length(struct.pack(">i", MAX_FRAME_BYTES - 3))
    with pytest.raises(BadFrameLength):
        frame_length(struct.pack(">i", 2**31 - 1))
    with pytest.raises(EncodeError):
        encode_frame(RemotingCommand(code=0, body=b"x" * MAX_FRAME_BYTES))


def test_prefix_must_be_4_bytes():
    with pytest.raises(BadFrameLength):
        frame_length(b"\x00\x00")


@pytest.mark.parametrize("raw", [b"", b"\x00\x00\x00", frame(b'{"code":1}')[:-1], frame(b'{"code":1}') + b"x"])
def test_length_mismatch(raw):
    with pytest.raises(FrameLengthMismatch):
        decode_frame(raw)


def test_payload_too_short_for_the_header_length():
    with pytest.raises(FrameLengthMismatch):
        decode_payload(b"\x00\x00")


def test_header_longer_than_frame():
    raw = struct.pack(">ii", 4 + 5, 6) + b"12345"
    with pytest.raises(HeaderTooLong):
        decode_frame(raw)


@pytest.mark.parametrize("serialize_type", [2, 0x7F, 0xFF])
def test_unknown_serialize_type(serialize_type):
    with pytest.raises(UnknownSerializeType):
        decode_frame(frame(b'{"code":1}', serialize_type=serialize_type))


@pytest.mark.parametrize("header", [
    b"{", b"[]", b'"x"', b"null", b'{"code":1.5}', b'{"code":true}',
    b'{"code":2147483648}', b'{"code":1,"opaque":"x"}', b'{"code":1,"language":5}', b'{"code":1,"remark":5}',
    b'{"code":1,"extFields":[]}', b'{"code":1,"extFields":{"a":{}}}', b'{"code":1,"extFields":{"a":[1]}}',
    b"[" * 100000,
    # number fields written as strings fastjson would not read, or would read only on some paths
    b'{"code":"2147483648"}', b'{"code":"-2147483649"}', b'{"code":"9' + b"9" * 5000 + b'"}', b'{"code":"+105"}',
    b'{"code":"105 "}', b'{"code":"1,05"}', b'{"code":"105.0"}', b'{"code":""}', b'{"code":"null"}',
    b'{"code":"0x69"}', "{\"code\":\"\u0661\u0660\u0665\"}".encode(), b'{"code":"105\\n"}', b'{"code":1,"flag":"-"}',
])
def test_bad_json_header(header):
    with pytest.raises(BadJsonHeader):
        decode_frame(frame(header))


@pytest.mark.parametrize("header, want", [
    (b'{"code":"105","version":"401","opaque":"7","flag":"0","extFields":{"topic":"orders"}}',
     RemotingCommand(code=105, version=401, opaque=7, flag=0, ext_fields={"topic": "orders"})),
    (b'{"code":"105","version":"121","opaque":"-2147483648","flag":"2","language":"CPP"}',
     RemotingCommand(code=105, language="CPP", version=121, opaque=-2147483648, flag=FLAG_ONEWAY)),
    (b'{"code":"0000000000000000000206","opaque":"2147483647","version":"-0"}',
     RemotingCommand(code=206, version=0, opaque=2147483647)),
])
def test_json_number_fields_written_as_decimal_strings(header, want):
    """fastjson reads a JSON string of decimal digits into RemotingCommand's int fields (code, version,
    opaque, flag) as the number, leading zeros and all; the NameServer answers such a frame."""
    assert decode_frame(frame(header)) == want


@pytest.mark.parametrize("header", [b"{}", b'{"code":null}', b'{"opaque":5,"code":null}'])
def test_json_header_without_a_code_is_code_0(header):
    """fastjson leaves an int field that is absent or null at Java's default, ``code`` as the others:
    such a frame is a request of code 0 (which the shim refuses as not supported), not a broken frame."""
    assert decode_frame(frame(header)) == RemotingCommand(code=0, opaque=5 if b"opaque" in header else 0)


@pytest.mark.parametrize("header", [
    b'{"code":1,"remark":"\xff"}',
    b'{"code":105,"extFields":{"topic":"a\xedb"}}',  # cut short
    b'{"code":105,"extFields":{"topic":"a\xed\xa0\x80b"}}',  # a UTF-16 surrogate written as UTF-8
    b'{"code":105,"extFields":{"topic":"a\xc0\xafb"}}',  # an overlong '/'
    b'{"code":105,"extFields":{"topic":"a\xf4\x90\x80\x80b"}}',  # beyond U+10FFFF
])
def test_json_header_not_utf8(header):
    """The NameServer parses the JSON header's bytes with fastjson (JSON.parseObject(byte[], ...)), whose
    UTF-8 decoder refuses any malformed sequence: the header decodes to null and the connection is closed."""
    with pytest.raises(NotUtf8):
        decode_frame(frame(header))


@pytest.mark.parametrize("header", [
    b"",
    struct.pack(">hbhii", 1, 0, 0, 0, 0),  # no remark length
    struct.pack(">hbhii", 1, 0, 0, 0, 0) + struct.pack(">i", 10) + b"abc",  # remark shorter than said
    struct.pack(">hbhii", 1, 0, 0, 0, 0) + struct.pack(">i", -1),  # negative remark length
    struct.pack(">hbhii", 1, 0, 0, 0, 0) + struct.pack(">i", 0),  # no extFields length
    struct.pack(">hbhii", 1, 0, 0, 0, 0) + struct.pack(">ii", 0, 20) + b"\x00\x01a",  # ext shorter than said
    struct.pack(">hbhii", 1, 0, 0, 0, 0) + struct.pack(">ii", 0, 3) + b"\x00\x05a",  # key longer than fields
    struct.pack(">hbhii", 1, 0, 0, 0, 0) + struct.pack(">ii", 0, 2) + b"\xff\xff",  # negative key length
    struct.pack(">hbhii", 1, 0, 0, 0, 0) + struct.pack(">ii", 0, 5) + b"\x00\x01a\x00\x00",  # value length cut
    struct.pack(">hbhii", 1, 0, 0, 0, 0) + struct.pack(">ii", 0, 8) + b"\x00\x01a\x00\x00\x00\x05x",  # value cut
    binary_header() + b"junk",  # bytes after the last field
])
def test_truncated_binary_header(header):
    with pytest.raises(TruncatedBinaryHeader):
        decode_frame(frame(header, serialize_type=ROCKETMQ))


@pytest.mark.parametrize("remark, ext, want_remark, want_ext", [
    (b"\xc3", [], "\ufffd", None),  # cut short by the end
    (b"ok\xffok", [(b"\xff", b"v")], "ok\ufffdok", {"\ufffd": "v"}),
    (None, [(b"k", b"\xed\xa0\x80")], None, {"k": "\ufffd"}),  # a UTF-16 surrogate: one U+FFFD for its three bytes
    (None, [(b"topic", b"a\xe6\x97b"), (b"k", b"\xf0\x9f\x98")], None, {"topic": "a\ufffdb", "k": "\ufffd"}),
    (None, [(b"a\xc0\xaf", b"\xf4\x90\x80\x80")], None, {"a\ufffd\ufffd": "\ufffd\ufffd\ufffd\ufffd"}),
])
def test_binary_text_not_utf8_reads_as_java_reads_it(remark, ext, want_remark, want_ext):
    """The NameServer reads a ROCKETMQ header's remark and extFields with new String(bytes, UTF_8) (4.9.4)
    or Netty's readCharSequence(len, UTF_8) (5.x): malformed UTF-8 becomes U+FFFD, the frame is answered."""
    header = binary_header(code=105, lang=1, version=63, opaque=4, remark=remark, ext=ext)
    assert decode_frame(frame(header, serialize_type=ROCKETMQ)) == RemotingCommand(
        code=105, language="CPP", version=63, opaque=4, remark=want_remark, ext_fields=want_ext, serialize_type=ROCKETMQ)


def test_every_decode_error_is_a_frame_error_and_a_value_error():
    for exc in (BadFrameLength, FrameLengthMismatch, HeaderTooLong, UnknownSerializeType, BadJsonHeader,
                TruncatedBinaryHeader, NotUtf8):
        assert issubclass(exc, FrameError) and issubclass(exc, ValueError)


@pytest.mark.parametrize("cmd", [
    RemotingCommand(code=40000, serialize_type=ROCKETMQ),
    RemotingCommand(code=1, version=-40000, serialize_type=ROCKETMQ),
    RemotingCommand(code=1, opaque=2**31, serialize_type=ROCKETMQ),
    RemotingCommand(code=1, opaque=2**31),
    RemotingCommand(code=1, language="KLINGON", serialize_type=ROCKETMQ),
    RemotingCommand(code=1, ext_fields={"k" * 40000: "v"}, serialize_type=ROCKETMQ),
    RemotingCommand(code=1, serialize_type=5),
])
def test_encode_errors(cmd):
    with pytest.raises(EncodeError):
        encode_frame(cmd)
