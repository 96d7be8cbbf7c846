"""The register-body decoder reads numbers as Java does: int fields (queue numbers, perm, topicSysFlag)
and long fields (DataVersion) beyond their Java type fail to decode, as on the NameServer."""

import json
import struct
import zlib

import pytest

from nsreplay.protocol.register_body import (
    MAX_INFLATED_BODY_BYTES,
    BodyDecodeError,
    DataVersion,
    RegisterBody,
    TopicConfig,
    decode_data_version,
    decode_json_register_body,
    decode_register_body,
    encode_compressed_register_body,
    encode_json_register_body,
)

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
BODY = RegisterBody(DataVersion(0, 1732147100000, 3), (TopicConfig("orders", 8, 8, 6, 0),), ())


@pytest.mark.parametrize("field", ["counter", "timestamp", "stateVersion"])
def test_data_version_fields_are_java_longs(field: str) -> None:
    for value in (LONG_MIN, LONG_MAX):
        dv = decode_data_version({field: value})
        assert dv == DataVersion(**{"state_version": 0, "timestamp": 0, "counter": 0, {"stateVersion": "state_version"}.get(field, field): value})
    for value in (LONG_MIN - 1, LONG_MAX + 1, 2**64):
        with pytest.raises(BodyDecodeError, match=f"^{field} is out of range of a Java long$"):
            decode_data_version({field: value})


@pytest.mark.parametrize(("field", "attribute"), [("readQueueNums", "read_queue_nums"), ("writeQueueNums", "write_queue_nums"),
                                                   ("perm", "perm"), ("topicSysFlag", "topic_sys_flag")])
def test_topic_config_numbers_are_java_ints(field: str, attribute: str) -> None:
    body = encode_json_register_body(BODY)
    entry = body["topicConfigSerializeWrapper"]["topicConfigTable"]["orders"]
    for value in (INT_MIN, INT_MAX):
        entry[field] = value
        decoded = decode_json_register_body(body, version=479)
        assert getattr(decoded.topic_configs[0], attribute) == value
    for value in (INT_MIN - 1, INT_MAX + 1, LONG_MAX):
        entry[field] = value
        with pytest.raises(BodyDecodeError, match=f"^{field} is out of range of a Java int$"):
            decode_json_register_body(body, version=479)
        with pytest.raises(BodyDecodeError, match=f"^{field} is out of range of a Java int$"):
            decode_register_body(json.dumps(body).encode(), compressed=False, version=479)


@pytest.mark.parametrize("position", [0, 1, 2])
def test_compressed_topic_numbers_are_java_ints(position: int) -> None:
    def body_with(value: int) -> bytes:
        numbers = [8, 8, 6]
        numbers[position] = value
        return encode_compressed_register_body(RegisterBody(BODY.data_version, (TopicConfig("orders", *numbers),), ()))

    for value in (INT_MIN, INT_MAX):
        decoded = decode_register_body(body_with(value), compressed=True, version=400)
        config = decoded.topic_configs[0]
        assert (config.read_queue_nums, config.write_queue_nums, config.perm)[position] == value
    for value in (INT_MIN - 1, INT_MAX + 1):
        with pytest.raises(BodyDecodeError, match="^compressed topic entry has a field out of range of a Java int$"):
            decode_register_body(body_with(value), compressed=True, version=400)


def test_a_compressed_data_version_beyond_a_long_fails_to_decode() -> None:
    plain = zlib.decompress(encode_compressed_register_body(BODY))
    (length,) = struct.unpack_from(">i", plain)
    dv = json.dumps({"counter": LONG_MAX + 1, "stateVersion": 0, "timestamp": 1}).encode()
    raw = zlib.compress(struct.pack(">i", len(dv)) + dv + plain[4 + length :])
    with pytest.raises(BodyDecodeError, match="^counter is out of range of a Java long$"):
        decode_register_body(raw, compressed=True, version=400)


def test_a_compressed_body_is_inflated_up_to_the_limit_and_no_further(monkeypatch: pytest.MonkeyPatch) -> None:
    """Exactly at the limit a body decodes; one byte more (however it compresses) is refused before
    any more of it is inflated; a stream cut short is still refused as before."""
    plain = zlib.decompress(encode_compressed_register_body(BODY))
    monkeypatch.setattr("nsreplay.protocol.register_body.MAX_INFLATED_BODY_BYTES", len(plain))
    assert decode_register_body(zlib.compress(plain), compressed=True, version=400) == BODY
    assert decode_register_body(zlib.compress(plain) + b"after the stream", compressed=True, version=400) == BODY
    with pytest.raises(BodyDecodeError, match=f"^compressed body inflates to more than {len(plain):,} bytes"):
        decode_register_body(zlib.compress(plain + b" "), compressed=True, version=400)
    with pytest.raises(BodyDecodeError, match="^compressed body is not a zlib stream"):
        decode_register_body(zlib.compress(plain)[:-4], compressed=True, version=400)
    assert MAX_INFLATED_BODY_BYTES == 256 << 20  # the shipped limit (monkeypatch replaced the module's)
