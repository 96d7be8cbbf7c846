"""Round trips and decoding rules of the RegisterBrokerBody codec (semantics spec §2, §8)."""

import base64
import struct
import zlib
from dataclasses import replace

import pytest
from hypothesis import given, strategies as st

from nsreplay.protocol.register_body import (
    BodyDecodeError,
    DataVersion,
    RegisterBody,
    TopicConfig,
    body_crc32,
    decode_json_register_body,
    decode_register_body,
    encode_compressed_register_body,
    encode_json_register_body,
    encode_register_body_bytes,
)

topic_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789_-%|", min_size=1, max_size=20)
configs = st.builds(
    TopicConfig,
    topic_name=topic_names,
    read_queue_nums=st.integers(0, 1024),
    write_queue_nums=st.integers(0, 1024),
    perm=st.integers(0, 15),
    # every field of the JSON TopicConfig (spec §8), so that a codec losing one is seen: topicSysFlag
    # is an int (sys flags are small bit sets; the full int range is covered too), order a boolean,
    # topicFilterType one of Java's TopicFilterType names
    topic_sys_flag=st.one_of(st.integers(0, 7), st.integers(-(2**31), 2**31 - 1)),
    order=st.booleans(),
    topic_filter_type=st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]),
)
bodies = st.builds(
    RegisterBody,
    data_version=st.builds(DataVersion, st.integers(0, 2**40), st.integers(0, 2**45), st.integers(0, 2**40)),
    topic_configs=st.lists(configs, max_size=8, unique_by=lambda c: c.topic_name).map(tuple),
    filter_server_list=st.lists(st.just("10.0.0.9:7777"), max_size=2).map(tuple),
    static_mappings=st.booleans(),
)


@given(bodies)
def test_json_round_trip(body: RegisterBody) -> None:
    raw = encode_register_body_bytes(body)
    decoded = decode_register_body(raw, compressed=False, version=479)
    assert decoded == body
    # spelled out, so that the comparison cannot be weakened by TopicConfig's equality
    assert [(c.topic_name, c.read_queue_nums, c.write_queue_nums, c.perm, c.topic_sys_flag, c.order, c.topic_filter_type)
            for c in decoded.topic_configs] == [
        (c.topic_name, c.read_queue_nums, c.write_queue_nums, c.perm, c.topic_sys_flag, c.order, c.topic_filter_type)
        for c in body.topic_configs]


@given(bodies)
def test_compressed_round_trip_drops_sysflag_and_order(body: RegisterBody) -> None:
    """The compressed form carries "topicName read write perm filterType" per topic (spec §8): the
    filter type survives, topicSysFlag and order do not (they come back as 0 / false)."""
    raw = encode_compressed_register_body(body, with_mappings=True)
    decoded = decode_register_body(raw, compressed=True, version=479)
    expected_configs = tuple(replace(c, topic_sys_flag=0, order=False) for c in body.topic_configs)
    assert decoded == replace(body, topic_configs=expected_configs)
    assert [(c.topic_name, c.read_queue_nums, c.write_queue_nums, c.perm, c.topic_sys_flag, c.order, c.topic_filter_type)
            for c in decoded.topic_configs] == [
        (c.topic_name, c.read_queue_nums, c.write_queue_nums, c.perm, 0, False, c.topic_filter_type)
        for c in body.topic_configs]


def test_compressed_form_drops_a_set_sysflag_and_order() -> None:
    """One hand-written case: a sys flag and order=true go in, 0 / false come out; filterType stays."""
    body = RegisterBody(DataVersion(0, 5, 2), (TopicConfig("ord", 4, 4, 6, 3, True, "MULTI_TAG"),))
    decoded = decode_register_body(encode_compressed_register_body(body), compressed=True, version=400)
    assert decoded.topic_configs == (TopicConfig("ord", 4, 4, 6, 0, False, "MULTI_TAG"),)
    json_decoded = decode_register_body(encode_register_body_bytes(body), compressed=False, version=479)
    assert json_decoded.topic_configs == (TopicConfig("ord", 4, 4, 6, 3, True, "MULTI_TAG"),)


def test_missing_fields_take_java_defaults_and_key_names_nameless_config() -> None:
    obj = {"topicConfigSerializeWrapper": {"topicConfigTable": {"t1": {}, "k": {"topicName": "t2", "perm": 4}}}}
    body = decode_json_register_body(obj, version=479)
    assert body.data_version is None
    assert body.filter_server_list == ()
    assert body.topic_configs == (TopicConfig("t1", 16, 16, 6, 0), TopicConfig("t2", 16, 16, 4, 0))


def test_legacy_wrapper_below_version_37() -> None:
    body = RegisterBody(DataVersion(0, 5, 1), (TopicConfig("a", 8, 8),), (), legacy_wrapper=True)
    obj = encode_json_register_body(body)
    assert "topicConfigSerializeWrapper" not in obj
    assert decode_json_register_body(obj, version=36) == body


@pytest.mark.parametrize("mapping_map", [None, {}, {"t": {"topic": "t", "bname": "b", "epoch": 3}}])
@pytest.mark.parametrize("version", [36, 479])
def test_static_mappings_are_a_non_empty_mapping_map_of_the_wrapper(mapping_map: object, version: int) -> None:
    wrapper = {"topicConfigTable": {"t": {}}, "topicQueueMappingInfoMap": mapping_map}
    obj = wrapper if version < 37 else {"topicConfigSerializeWrapper": wrapper}
    assert decode_json_register_body(obj, version=version).static_mappings is bool(mapping_map)


def test_the_compressed_mapping_section_counts_only_from_version_413() -> None:
    raw = encode_compressed_register_body(RegisterBody(DataVersion(0, 1, 1), (TopicConfig("t"),), static_mappings=True), with_mappings=True)
    assert decode_register_body(raw, compressed=True, version=413).static_mappings
    assert not decode_register_body(raw, compressed=True, version=412).static_mappings  # no section before 413
    empty = encode_compressed_register_body(RegisterBody(DataVersion(0, 1, 1), (TopicConfig("t"),)), with_mappings=True)
    assert not decode_register_body(empty, compressed=True, version=479).static_mappings
    with pytest.raises(ValueError):
        encode_compressed_register_body(RegisterBody(DataVersion(0, 1, 1), (), static_mappings=True))


def test_compressed_body_sent_with_compressed_false_is_rejected() -> None:
    raw = encode_compressed_register_body(RegisterBody(DataVersion(0, 1, 1), ()))
    with pytest.raises(BodyDecodeError):
        decode_register_body(raw, compressed=False, version=479)


@pytest.mark.parametrize(
    "raw",
    [b"not json", b"[1,2]", zlib.compress(b"\x00\x00"), b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"a":{"perm":"6"}}}}'],
)
def test_undecodable_bodies_raise(raw: bytes) -> None:
    with pytest.raises(BodyDecodeError):
        decode_register_body(raw, compressed=raw.startswith(b"x"), version=479)


def test_crc_is_masked_to_31_bits() -> None:
    raw = base64.b64decode(base64.b64encode(b"\xff" * 100))
    assert body_crc32(raw) == zlib.crc32(raw) & 0x7FFFFFFF
    assert 0 <= body_crc32(raw) < 2**31


# ------------------------------------------------------------------- keys, repeated names, mapping section


def _wrapper_body(table: dict[str, dict[str, object]]) -> dict[str, object]:
    return {"filterServerList": [], "topicConfigSerializeWrapper": {"dataVersion": {"counter": 1, "stateVersion": 0, "timestamp": 1}, "topicConfigTable": table}}


def test_json_keys_that_differ_from_the_topic_names_are_kept_one_per_config() -> None:
    body = decode_json_register_body(_wrapper_body({"K": {"topicName": "T"}, "u": {"topicName": "u"}, "v": {}}), version=479)
    assert [c.topic_name for c in body.topic_configs] == ["T", "u", "v"]  # a config without topicName takes its key
    assert body.topic_keys == ("K", "u", "v")
    assert body.table_keys == frozenset({"K", "u", "v"})
    assert decode_json_register_body(encode_json_register_body(body), version=479) == body  # the keys round-trip
    plain = decode_json_register_body(_wrapper_body({"u": {"topicName": "u"}, "v": {}}), version=479)
    assert plain.topic_keys is None and plain.table_keys == frozenset({"u", "v"})
    with pytest.raises(ValueError):
        encode_compressed_register_body(body, with_mappings=True)  # the compressed form keys by name
    with pytest.raises(ValueError):
        RegisterBody(None, (TopicConfig("a"),), topic_keys=("a", "b"))


def test_a_compressed_topic_listed_twice_counts_once_with_its_last_entry() -> None:
    body = RegisterBody(DataVersion(0, 1, 1), (TopicConfig("a", 1, 1), TopicConfig("b", 2, 2), TopicConfig("a", 3, 3)))
    decoded = decode_register_body(encode_compressed_register_body(body), compressed=True, version=400)
    assert decoded.topic_configs == (TopicConfig("a", 3, 3), TopicConfig("b", 2, 2))
    assert decoded.table_keys == frozenset({"a", "b"})


def _section(*entries: bytes, count: int | None = None) -> bytes:
    head = struct.pack(">i", len(entries) if count is None else count)
    return head + b"".join(struct.pack(">i", len(e)) + e for e in entries)


@pytest.mark.parametrize(
    ("section", "error", "mappings"),
    [
        pytest.param(b"", "static-topic mapping section: compressed body is truncated", False, id="missing"),
        pytest.param(_section(count=1), "static-topic mapping section: compressed body is truncated", False, id="entry-missing"),
        pytest.param(_section(b"{\"topic\":\"t\"}", count=2), "static-topic mapping section: compressed body is truncated", False, id="second-entry-missing"),
        pytest.param(struct.pack(">i", 1) + struct.pack(">i", 50) + b"{}", "static-topic mapping section: compressed body has a bad length prefix", False, id="entry-cut"),
        pytest.param(_section(b"not json"), "static-topic mapping section: static-topic mapping entry is not valid JSON", False, id="not-json"),
        pytest.param(_section(b"[1]"), "static-topic mapping section: static-topic mapping entry is not a JSON object", False, id="not-an-object"),
        pytest.param(_section(), None, False, id="empty"),
        pytest.param(_section(count=-3), None, False, id="negative-count"),
        pytest.param(_section(b"{\"topic\":\"t\"}"), None, True, id="one-entry"),
        pytest.param(_section(b"{\"topic\":\"t\"}") + b"trailing bytes are not read", None, True, id="trailing-bytes"),
    ],
)
def test_the_mapping_section_from_version_413_must_be_whole(section: bytes, error: str | None, mappings: bool) -> None:
    """A 5.x NameServer reads the section of every compressed body from version 413 on and fails on a
    missing or broken one; the body still decodes (4.9 never reads the section), with the reason."""
    head = zlib.decompress(encode_compressed_register_body(RegisterBody(DataVersion(0, 1, 1), (TopicConfig("t"),))))
    raw = zlib.compress(head + section)
    body = decode_register_body(raw, compressed=True, version=479)
    assert (body.mapping_error, body.static_mappings) == (error, mappings)
    assert body.topic_configs == (TopicConfig("t", 16, 16, 6),)
    before = decode_register_body(raw, compressed=True, version=412)  # no section before 413: not read
    assert (before.mapping_error, before.static_mappings) == (None, False)
