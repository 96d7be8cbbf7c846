"""REGISTER_BROKER and the other route-changing requests (semantics spec §2, §3, §6)."""

from __future__ import annotations

import base64
import pickle

import pytest

from nsreplay.model import BrokerLiveInfo, DataVersion, NameServer, QueueData, ResponseCode, route_info
from nsreplay.model import records as R
from nsreplay.protocol.register_body import decode_json_register_body, decode_register_body

T0 = 1_000_000
TBW = ("TBW102", 8, 8, 7)
PROFILES = ["rocketmq-4.9", "rocketmq-5"]


def reg(ts: int, profile: str = "rocketmq-5", **kw: object) -> dict[str, object]:
    kw.setdefault("cluster", "c")
    kw.setdefault("name", "b")
    kw.setdefault("addr", "10.0.0.1:10911")
    kw.setdefault("five", profile == "rocketmq-5")
    return R.register_broker(ts, **kw)  # type: ignore[arg-type]


def live_key(profile: str, addr: str = "10.0.0.1:10911", cluster: str = "c") -> object:
    return addr if profile == "rocketmq-4.9" else (cluster, addr)


# ----------------------------------------------------------------------------------- body and CRC


@pytest.mark.parametrize("form", ["json", "raw", "compressed"])
def test_a_body_decoded_by_the_caller_counts_as_the_captured_one(form: str) -> None:
    """``apply(..., decoded_body=)`` (the Spark replay's path, the body from silver.topic_configs)
    leaves the tables exactly as the captured body does, static-topic mappings included (with
    deleteTopicWithBrokerRegistration they keep the topics a registration no longer lists)."""
    config = {"deleteTopicWithBrokerRegistration": True}
    records = [
        reg(T0 + 30_000 * k, topics=topics, dv=(0, 1, 1 + k), form=form, static_mappings=mappings)
        for k, (topics, mappings) in enumerate([(["t", "u", TBW], False), (["t", TBW], True), (["t", TBW], False), (["t", "u", TBW], True)])
    ]
    captured, decoded = NameServer("rocketmq-5", config, T0), NameServer("rocketmq-5", config, T0)
    states = []
    for k, record in enumerate(records):
        body = decode_register_body(base64.b64decode(record["body_b64"]), compressed=form == "compressed", version=479) if form != "json" \
            else decode_json_register_body(record["body"], version=479)
        bare = {key: value for key, value in record.items() if key not in ("body", "body_b64")}
        captured.apply(record)
        decoded.apply(bare, body_id=f"body-{k}", decoded_body=body)
        assert decoded.snapshot() == captured.snapshot()
        states.append(set(captured.snapshot().topicQueueTable))
    assert states == [{"t", "u", TBW[0]}, {"t", "u", TBW[0]}, {"t", TBW[0]}, {"t", "u", TBW[0]}]
    with pytest.raises(ValueError):
        decoded.apply(bare, decoded_body=body)


@pytest.mark.parametrize("profile", PROFILES)
def test_a_pickled_nameserver_leaves_its_body_cache_and_answers_as_the_original(profile: str) -> None:
    """The decoded bodies are a cache, not state (a replay unit's pickle, gold.replay_state): the
    pickle carries none, and the loaded NameServer answers every later request as the original."""
    bodies = [(form, [f"t{i}" for i in range(k + 1)] + [TBW]) for k, form in enumerate(["json", "raw", "compressed", "json"])]
    before = [reg(T0 + 30_000 * k, profile, topics=topics, dv=(0, 1, 1 + k), form=form) for k, (form, topics) in enumerate(bodies)]
    before.append(reg(T0 + 150_000, profile, name="b2", addr="10.0.0.2:10911", topics=["x", TBW], form="raw"))
    original = NameServer(profile, {}, T0)
    for record in before:
        original.apply(record)
    loaded = pickle.loads(pickle.dumps(original))
    assert pickle.dumps(original._bodies) == pickle.dumps(type(original._bodies)())  # nothing decoded is kept
    # the same bodies again (each broker's last one and an earlier one), a new one, and a CRC mismatch
    after = [
        reg(T0 + 180_000, profile, topics=bodies[3][1], dv=(0, 1, 4), form="json"),
        reg(T0 + 181_000, profile, name="b2", addr="10.0.0.2:10911", topics=["x", TBW], form="raw"),
        reg(T0 + 210_000, profile, topics=bodies[1][1], dv=(0, 1, 2), form="raw"),
        reg(T0 + 240_000, profile, topics=["t0", "new", TBW], dv=(0, 1, 9), form="compressed"),
        reg(T0 + 270_000, profile, name="b2", addr="10.0.0.2:10911", topics=["x", TBW], form="raw", crc=12345),
    ]
    for record in after:
        assert loaded.apply(record) == original.apply(record)
        assert loaded.snapshot() == original.snapshot()
    assert {"new", "x"} <= set(loaded.snapshot().topicQueueTable)
    for tick in range(T0 + 275_000, T0 + 600_000, 10_000):  # after the last record, until every broker expired
        original.scan(tick)
        loaded.scan(tick)
        assert loaded.snapshot() == original.snapshot()
    assert not loaded.snapshot().brokerLiveTable  # every broker expired on both, at the same tick


@pytest.mark.parametrize("profile", PROFILES)
def test_crc_mismatch_is_rejected_and_changes_nothing(profile: str) -> None:
    ns = NameServer(profile, {}, T0)
    outcome = ns.apply(reg(T0, profile, topics=["t", TBW], form="raw", crc=12345))
    assert (outcome.code, outcome.remark, outcome.changed) == (ResponseCode.SYSTEM_ERROR, "crc32 not match", False)
    assert ns.snapshot() == NameServer(profile, {}, T0).snapshot()


@pytest.mark.parametrize("profile", PROFILES)
def test_matching_crc_and_json_only_body_are_accepted(profile: str) -> None:
    ns = NameServer(profile, {}, T0)
    assert ns.apply(reg(T0, profile, topics=["t", TBW], form="raw")).code == ResponseCode.SUCCESS
    # a record carrying only the decoded JSON body is taken as having passed the CRC check
    assert ns.apply(reg(T0, profile, addr="10.0.0.2:10911", name="b2", topics=["t", TBW], crc=999)).code == 0
    assert set(ns.snapshot().topicQueueTable["t"]) == {"b", "b2"}


@pytest.mark.parametrize("profile", PROFILES)
def test_compressed_body_is_decoded_only_when_the_header_says_so(profile: str) -> None:
    ns = NameServer(profile, {}, T0)
    rejected = ns.apply(reg(T0, profile, topics=[("t", 4, 4, 6, 1), TBW], form="compressed", compressed_flag=False))
    assert rejected.code == ResponseCode.SYSTEM_ERROR and not rejected.changed
    assert ns.snapshot().brokerAddrTable == {}
    accepted = ns.apply(reg(T0, profile, topics=[("t", 4, 4, 6, 1), TBW], form="compressed"))
    assert accepted.code == ResponseCode.SUCCESS
    assert ns.snapshot().topicQueueTable["t"]["b"] == QueueData("b", 4, 4, 6, 0)  # sysFlag not carried


@pytest.mark.parametrize("profile", PROFILES)
def test_undecodable_body_and_missing_header_change_nothing(profile: str) -> None:
    ns = NameServer(profile, {}, T0)
    bad = reg(T0, profile, topics=["t"])
    bad["body_b64"] = base64.b64encode(b"{not json").decode()
    assert ns.apply(bad).code == ResponseCode.SYSTEM_ERROR
    missing = reg(T0, profile, topics=["t"])
    del missing["extFields"]["brokerId"]  # type: ignore[attr-defined]
    outcome = ns.apply(missing)
    assert outcome.code == ResponseCode.SYSTEM_ERROR and outcome.remark == "the custom field <brokerId> is null"
    assert ns.version == 0


@pytest.mark.parametrize("profile", PROFILES)
def test_data_version_defaults(profile: str) -> None:
    ns = NameServer(profile, {}, T0)
    ns.apply(reg(T0, profile, form="none"))
    assert ns.snapshot().brokerLiveTable[live_key(profile)].dataVersion == DataVersion(0, 0, 0)
    ns.apply(reg(T0 + 7, profile, dv=None, topics=["t", TBW]))  # body without a dataVersion
    assert ns.snapshot().brokerLiveTable[live_key(profile)].dataVersion == DataVersion(0, T0 + 7, 0)
    ns.apply(reg(T0 + 8, profile, dv=(3, 5, 6), topics=["t", TBW]))
    expected = DataVersion(3 if profile == "rocketmq-5" else 0, 5, 6)  # no stateVersion in 4.9
    assert ns.snapshot().brokerLiveTable[live_key(profile)].dataVersion == expected


def test_queue_data_goes_to_the_config_topic_name_not_the_map_key() -> None:
    ns = NameServer("rocketmq-5", {}, T0)
    record = reg(T0, topics=["real", TBW])
    table = record["body"]["topicConfigSerializeWrapper"]["topicConfigTable"]  # type: ignore[index]
    table["alias"] = table.pop("real")
    ns.apply(record)
    assert set(ns.snapshot().topicQueueTable) == {"real", "TBW102"}


@pytest.mark.parametrize("profile", PROFILES)
def test_live_entry_holds_time_dv_conn_and_ha(profile: str) -> None:
    ns = NameServer(profile, {}, T0)
    ns.apply(reg(T0 + 5, profile, dv=(0, 9, 2), conn="conn-1", ha_addr="10.0.0.1:10912", heartbeat_timeout=30_000))
    timeout = 120_000 if profile == "rocketmq-4.9" else 30_000
    assert ns.snapshot().brokerLiveTable[live_key(profile)] == BrokerLiveInfo(
        T0 + 5, timeout, DataVersion(0, 9, 2), "conn-1", "10.0.0.1:10912")


# ----------------------------------------------------------------------------------- topic application


def test_49_topics_are_applied_only_by_the_master_on_first_registration_or_dv_change() -> None:
    ns = NameServer("rocketmq-4.9", {}, T0)
    ns.apply(reg(T0, "rocketmq-4.9", name="b", addr="m:1", topics=[("t", 8, 8, 6)], dv=(0, 1, 1)))
    ns.apply(reg(T0, "rocketmq-4.9", name="b", addr="s:1", broker_id=1, topics=[("t", 2, 2, 6), "slave-only"]))
    assert ns.snapshot().topicQueueTable == {"t": {"b": QueueData("b", 8, 8, 6, 0)}}
    ns.apply(reg(T0 + 1, "rocketmq-4.9", name="b", addr="m:1", topics=[("t", 4, 4, 6)], dv=(0, 1, 1)))
    assert ns.snapshot().topicQueueTable["t"]["b"].readQueueNums == 8  # same dv: ignored
    ns.apply(reg(T0 + 2, "rocketmq-4.9", name="b", addr="m:1", topics=[("t", 4, 4, 6)], dv=(0, 1, 2)))
    assert ns.snapshot().topicQueueTable["t"]["b"].readQueueNums == 4


@pytest.mark.parametrize("profile", PROFILES)
def test_topics_the_broker_stops_reporting_stay(profile: str) -> None:
    ns = NameServer(profile, {}, T0)
    ns.apply(reg(T0, profile, topics=["a", "b2", TBW], dv=(0, 1, 1)))
    ns.apply(reg(T0 + 1, profile, topics=["a", TBW], dv=(0, 1, 2)))
    assert set(ns.snapshot().topicQueueTable) == {"a", "b2", "TBW102"}


def test_49_deleted_topic_stays_deleted_until_the_dv_changes() -> None:
    ns = NameServer("rocketmq-4.9", {}, T0)
    ns.apply(reg(T0, "rocketmq-4.9", topics=["t", TBW], dv=(0, 1, 1)))
    ns.apply(R.request(T0 + 1, 216, {"topic": "t"}))
    ns.apply(reg(T0 + 2, "rocketmq-4.9", topics=["t", TBW], dv=(0, 1, 1)))
    assert route_info(ns, "t", request_version=479).code == ResponseCode.TOPIC_NOT_EXIST
    ns.apply(reg(T0 + 3, "rocketmq-4.9", topics=["t", TBW], dv=(0, 1, 2)))
    assert route_info(ns, "t", request_version=479).code == ResponseCode.SUCCESS


def test_5x_deleted_topic_comes_back_at_the_next_registration_even_with_the_same_dv() -> None:
    ns = NameServer("rocketmq-5", {}, T0)
    ns.apply(reg(T0, topics=["t", TBW], dv=(0, 1, 1)))
    ns.apply(R.request(T0 + 1, 216, {"topic": "t"}))
    assert route_info(ns, "t", request_version=479).code == ResponseCode.TOPIC_NOT_EXIST
    ns.apply(reg(T0 + 2, topics=["t", TBW], dv=(0, 1, 1)))
    assert route_info(ns, "t", request_version=479).code == ResponseCode.SUCCESS


def test_5x_changed_queue_config_with_same_dv_is_ignored_for_a_present_topic() -> None:
    ns = NameServer("rocketmq-5", {}, T0)
    ns.apply(reg(T0, topics=[("t", 8, 8, 6), TBW], dv=(0, 1, 1)))
    ns.apply(reg(T0 + 1, topics=[("t", 2, 2, 6), TBW], dv=(0, 1, 1)))
    assert ns.snapshot().topicQueueTable["t"]["b"].readQueueNums == 8
    ns.apply(reg(T0 + 2, topics=[("t", 2, 2, 6), TBW], dv=(1, 1, 1)))  # stateVersion counts in 5.x
    assert ns.snapshot().topicQueueTable["t"]["b"].readQueueNums == 2


def test_5x_prime_slave_of_an_acting_master_group_registers_read_only_topics() -> None:
    ns = NameServer("rocketmq-5", {}, T0)
    ns.apply(reg(T0, name="b", addr="s:1", broker_id=1, topics=["t", TBW], enable_acting_master=True))
    topics = ns.snapshot().topicQueueTable
    assert topics["t"]["b"].perm == 4 and topics["TBW102"]["b"].perm == 5


def test_5x_slave_of_an_old_broker_is_never_prime() -> None:
    ns = NameServer("rocketmq-5", {}, T0)
    ns.apply(reg(T0, name="b", addr="s:1", broker_id=1, topics=["t", TBW], enable_acting_master=None))
    assert ns.snapshot().topicQueueTable == {}
    assert dict(ns.snapshot().brokerAddrTable["b"].brokerAddrs) == {1: "s:1"}


def test_5x_prime_slave_without_acting_master_keeps_perms() -> None:
    ns = NameServer("rocketmq-5", {}, T0)
    ns.apply(reg(T0, name="b", addr="s:1", broker_id=1, topics=["t", TBW], enable_acting_master=False))
    assert ns.snapshot().topicQueueTable["t"]["b"].perm == 6


def test_5x_group_flags_are_overwritten_by_every_member() -> None:
    ns = NameServer("rocketmq-5", {}, T0)
    ns.apply(reg(T0, addr="m:1", topics=["t", TBW], enable_acting_master=True, zone="z1"))
    ns.apply(reg(T0, addr="s:1", broker_id=1, topics=["t", TBW], enable_acting_master=False))
    group = ns.snapshot().brokerAddrTable["b"]
    assert (group.enableActingMaster, group.zoneName) == (False, None)


def test_49_group_has_no_5x_fields() -> None:
    ns = NameServer("rocketmq-4.9", {}, T0)
    ns.apply(reg(T0, "rocketmq-4.9", topics=["t"], five=True, enable_acting_master=True, zone="z"))
    group = ns.snapshot().brokerAddrTable["b"]
    assert (group.enableActingMaster, group.zoneName) == (False, None)


def test_brokerdata_cluster_is_fixed_at_creation() -> None:
    ns = NameServer("rocketmq-4.9", {}, T0)
    ns.apply(reg(T0, "rocketmq-4.9", cluster="c1", topics=["t"]))
    ns.apply(reg(T0 + 1, "rocketmq-4.9", cluster="c2", topics=["t"]))
    snap = ns.snapshot()
    assert snap.brokerAddrTable["b"].cluster == "c1"
    assert snap.clusterAddrTable == {"c1": frozenset({"b"}), "c2": frozenset({"b"})}


# ----------------------------------------------------------------------------------- 5.x special rules


def test_5x_conflict_rule_keeps_the_newer_state_version() -> None:
    ns = NameServer("rocketmq-5", {}, T0)
    ns.apply(reg(T0, addr="a:1", dv=(5, 1, 1), topics=["t", TBW]))
    outcome = ns.apply(reg(T0 + 1, addr="b:1", dv=(3, 1, 1), topics=["t", TBW]))
    assert outcome.code == ResponseCode.SUCCESS
    snap = ns.snapshot()
    assert dict(snap.brokerAddrTable["b"].brokerAddrs) == {0: "a:1"}
    assert set(snap.brokerLiveTable) == {("c", "a:1")}
    ns.apply(reg(T0 + 2, addr="b:1", dv=(6, 1, 1), topics=["t", TBW]))
    snap = ns.snapshot()
    assert dict(snap.brokerAddrTable["b"].brokerAddrs) == {0: "b:1"}
    assert set(snap.brokerLiveTable) == {("c", "a:1"), ("c", "b:1")}


def test_5x_conflict_rule_removes_the_losers_own_live_entry() -> None:
    ns = NameServer("rocketmq-5", {}, T0)
    ns.apply(reg(T0, addr="b:1", broker_id=1, dv=(1, 1, 1), topics=["t", TBW]))
    ns.apply(reg(T0, addr="a:1", broker_id=0, dv=(5, 1, 1), topics=["t", TBW]))
    ns.apply(reg(T0 + 1, addr="b:1", broker_id=0, dv=(3, 1, 1), topics=["t", TBW]))
    snap = ns.snapshot()
    # step 3 (same-address removal) stays applied; b:1 lost its live entry
    assert dict(snap.brokerAddrTable["b"].brokerAddrs) == {0: "a:1"}
    assert set(snap.brokerLiveTable) == {("c", "a:1")}


def test_5x_single_topic_first_registration_fails_leaving_an_empty_brokerdata() -> None:
    ns = NameServer("rocketmq-5", {}, T0)
    outcome = ns.apply(reg(T0, topics=["only"]))
    assert (outcome.code, outcome.remark, outcome.changed) == (ResponseCode.SYSTEM_ERROR, "register broker failed", True)
    snap = ns.snapshot()
    assert dict(snap.brokerAddrTable["b"].brokerAddrs) == {}
    assert snap.clusterAddrTable == {"c": frozenset({"b"})}
    assert snap.topicQueueTable == {} and snap.brokerLiveTable == {}
    # once the id is known, single-topic registrations go through
    ns.apply(reg(T0 + 1, topics=["only", TBW]))
    assert ns.apply(reg(T0 + 2, topics=["only"])).code == ResponseCode.SUCCESS


def test_5x_single_topic_rule_counts_the_keys_of_the_topic_table() -> None:
    """Step 5 counts the topicConfigTable's entries: a compressed body that lists one topic twice holds
    one topic (the NameServer keys them by name); a JSON table with two keys holds two, whatever the
    configs' topicNames."""
    ns = NameServer("rocketmq-5", {}, T0)
    twice = ns.apply(reg(T0, topics=["only", "only"], form="compressed"))
    assert (twice.code, twice.remark) == (ResponseCode.SYSTEM_ERROR, "register broker failed")
    two_keys = ns.apply(reg(T0 + 1, name="b2", addr="10.0.0.2:10911", topics=["only", "only"], topic_keys=["only", "alias"]))
    assert two_keys.code == ResponseCode.SUCCESS
    assert set(ns.snapshot().topicQueueTable) == {"only"}


def test_5x_delete_with_registration_keeps_the_topics_among_the_keys() -> None:
    """Step 7a removes the topics *not among the keys* of the topicConfigTable; 7b then applies each
    config to its own topicName. A key K whose config names T keeps topic K, and T is (re)applied."""
    ns = NameServer("rocketmq-5", {"deleteTopicWithBrokerRegistration": True}, T0)
    ns.apply(reg(T0, topics=["K", "T", "gone", TBW]))
    outcome = ns.apply(reg(T0 + 1000, topics=["T", TBW], topic_keys=["K", "TBW102"], dv=(0, 1, 2)))
    assert outcome.code == ResponseCode.SUCCESS
    assert set(ns.snapshot().topicQueueTable) == {"K", "T", "TBW102"}
    assert route_info(ns, "K", request_version=479).code == ResponseCode.SUCCESS


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("section", [b"", b"\x00\x00\x00\x01", b"\x00\x00\x00\x01\x00\x00\x00\x03[1]"], ids=["missing", "entry-missing", "not-an-object"])
def test_a_broken_mapping_section_is_undecodable_only_for_5x(profile: str, section: bytes) -> None:
    """From version 413 the 5.x NameServer reads the compressed body's static-topic mapping section and
    answers SYSTEM_ERROR, changing nothing, when it cannot; 4.9 never reads the section."""
    ns = NameServer(profile, {}, T0)
    outcome = ns.apply(reg(T0, profile, topics=["t", TBW], form="compressed", mapping_section=section, version=479))
    if profile == "rocketmq-5":
        assert outcome.code == ResponseCode.SYSTEM_ERROR and not outcome.changed
        assert outcome.remark is not None and outcome.remark.startswith("Failed to decode RegisterBrokerBody: static-topic mapping section")
        assert ns.snapshot() == NameServer(profile, {}, T0).snapshot()
    else:
        assert outcome.code == ResponseCode.SUCCESS
        assert set(ns.snapshot().topicQueueTable) == {"t", "TBW102"}
    old = NameServer(profile, {}, T0)  # before 413 there is no section to read
    assert old.apply(reg(T0, profile, topics=["t", TBW], form="compressed", mapping_section=section, version=412)).code == ResponseCode.SUCCESS


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize(("good", "bad"), [(1, True), (1, 1.0)], ids=["bool-for-int", "float-for-int"])
def test_a_body_equal_only_by_python_equality_is_decoded_again(profile: str, good: object, bad: object) -> None:
    """The last-body cache must not take ``true`` for ``1`` (Python's ``==`` does): the same record gives
    the same answer whatever the broker sent before."""
    def with_perm(ts: int, perm: object) -> dict[str, object]:
        record = reg(ts, profile, topics=["t", TBW])
        record["body"]["topicConfigSerializeWrapper"]["topicConfigTable"]["t"]["perm"] = perm  # type: ignore[index]
        return record

    alone = NameServer(profile, {}, T0).apply(with_perm(T0, bad))
    ns = NameServer(profile, {}, T0)
    assert ns.apply(with_perm(T0, good)).code == ResponseCode.SUCCESS
    after = ns.apply(with_perm(T0 + 1, bad))
    assert (after.code, after.remark) == (alone.code, alone.remark) == (ResponseCode.SYSTEM_ERROR, "Failed to decode RegisterBrokerBody: perm is not an integer")
    assert ns.snapshot().topicQueueTable["t"]["b"].perm == 1


def test_49_has_no_single_topic_rule() -> None:
    ns = NameServer("rocketmq-4.9", {}, T0)
    assert ns.apply(reg(T0, "rocketmq-4.9", topics=["only"])).code == ResponseCode.SUCCESS
    assert set(ns.snapshot().topicQueueTable) == {"only"}


# ----------------------------------------------------------------------------------- filter servers


@pytest.mark.parametrize("profile", PROFILES)
def test_filter_server_list_store_remove_and_legacy_untouched(profile: str) -> None:
    ns = NameServer(profile, {}, T0)
    key = live_key(profile)
    ns.apply(reg(T0, profile, topics=["t", TBW], filter_servers=["f:1", "f:2"]))
    assert ns.snapshot().filterServerTable == {key: ("f:1", "f:2")}
    ns.apply(reg(T0 + 1, profile, topics=["t", TBW], version=36))  # bare wrapper: untouched
    assert ns.snapshot().filterServerTable == {key: ("f:1", "f:2")}
    ns.apply(reg(T0 + 2, profile, form="none", version=36))  # old broker, no body: untouched
    assert ns.snapshot().filterServerTable == {key: ("f:1", "f:2")}
    ns.apply(reg(T0 + 3, profile, form="none"))  # no body counts as an empty list
    assert ns.snapshot().filterServerTable == {}


@pytest.mark.parametrize("profile", PROFILES)
def test_below_version_37_the_compressed_header_is_not_read(profile: str) -> None:
    """A request below version 37 takes the NameServer's pre-3.0.11 path in 4.9 and 5.x alike, which
    reads the body as a bare wrapper in JSON whatever ``compressed`` says (spec §2 step 7, §8): JSON
    bytes sent with compressed=true register their topics and leave the filter servers as they were,
    and a zlib body at that version is not a JSON body (SYSTEM_ERROR, nothing changes)."""
    ns = NameServer(profile, {}, T0)
    key = live_key(profile)
    ns.apply(reg(T0, profile, topics=["t", TBW], filter_servers=["f:1"]))
    before = ns.snapshot()
    zlib_body = ns.apply(reg(T0 + 1, profile, topics=["t", "u", TBW], dv=(0, 1, 2), form="compressed", version=36))
    assert zlib_body.code == ResponseCode.SYSTEM_ERROR and ns.snapshot() == before
    outcome = ns.apply(reg(T0 + 2, profile, topics=["t", "u", TBW], dv=(0, 1, 3), form="raw", compressed_flag=True, version=36))
    assert outcome.code == ResponseCode.SUCCESS
    assert set(ns.snapshot().topicQueueTable) == {"t", "u", TBW[0]}
    assert ns.snapshot().filterServerTable == {key: ("f:1",)}


# ----------------------------------------------------------------------------------- heartbeats (§3)


def test_904_refreshes_only_an_existing_entry_and_creates_nothing() -> None:
    ns = NameServer("rocketmq-5", {}, T0)
    outcome = ns.apply(R.broker_heartbeat(T0, cluster="c", name="b", addr="10.0.0.1:10911"))
    assert outcome.code == ResponseCode.SUCCESS and not outcome.changed
    assert ns.snapshot().brokerLiveTable == {}
    ns.apply(reg(T0, topics=["t", TBW], conn="first", heartbeat_timeout=9_000))
    ns.apply(R.broker_heartbeat(T0 + 50, cluster="c", name="b", addr="10.0.0.1:10911", conn="other"))
    info = ns.snapshot().brokerLiveTable[("c", "10.0.0.1:10911")]
    assert (info.lastUpdateTimestamp, info.conn, info.heartbeatTimeoutMillis) == (T0 + 50, "first", 9_000)


def test_904_is_not_a_49_request() -> None:
    ns = NameServer("rocketmq-4.9", {}, T0)
    ns.apply(reg(T0, "rocketmq-4.9", topics=["t"]))
    outcome = ns.apply(R.broker_heartbeat(T0 + 50, cluster="c", name="b", addr="10.0.0.1:10911"))
    assert outcome.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and not outcome.changed


def test_49_query_data_version_refreshes_only_when_dv_is_equal() -> None:
    ns = NameServer("rocketmq-4.9", {}, T0)
    ns.apply(reg(T0, "rocketmq-4.9", topics=["t"], dv=(0, 1, 1)))
    ns.apply(R.query_data_version(T0 + 10, cluster="c", name="b", addr="10.0.0.1:10911", dv=(0, 1, 2)))
    assert ns.snapshot().brokerLiveTable["10.0.0.1:10911"].lastUpdateTimestamp == T0
    ns.apply(R.query_data_version(T0 + 20, cluster="c", name="b", addr="10.0.0.1:10911", dv=(7, 1, 1)))
    assert ns.snapshot().brokerLiveTable["10.0.0.1:10911"].lastUpdateTimestamp == T0 + 20


def test_5x_query_data_version_refreshes_unconditionally() -> None:
    ns = NameServer("rocketmq-5", {}, T0)
    ns.apply(reg(T0, topics=["t", TBW], dv=(0, 1, 1)))
    ns.apply(R.query_data_version(T0 + 10, cluster="c", name="b", addr="10.0.0.1:10911", dv=(9, 9, 9)))
    assert ns.snapshot().brokerLiveTable[("c", "10.0.0.1:10911")].lastUpdateTimestamp == T0 + 10
    ns.apply(R.query_data_version(T0 + 20, cluster="other", name="b", addr="10.0.0.1:10911", dv=(9, 9, 9)))
    assert set(ns.snapshot().brokerLiveTable) == {("c", "10.0.0.1:10911")}


# ----------------------------------------------------------------------------------- §6 requests


@pytest.mark.parametrize("profile", PROFILES)
def test_wipe_and_add_write_perm(profile: str) -> None:
    ns = NameServer(profile, {}, T0)
    ns.apply(reg(T0, profile, topics=[("t", 8, 8, 15), TBW]))
    ns.apply(R.request(T0 + 1, 205, {"brokerName": "b"}))
    assert ns.snapshot().topicQueueTable["t"]["b"].perm == 13
    ns.apply(R.request(T0 + 2, 327, {"brokerName": "b"}))
    assert ns.snapshot().topicQueueTable["t"]["b"].perm == 6  # PRIORITY / INHERIT dropped


@pytest.mark.parametrize("profile", PROFILES)
def test_delete_topic_by_cluster(profile: str) -> None:
    ns = NameServer(profile, {}, T0)
    ns.apply(reg(T0, profile, cluster="c1", name="b1", addr="a:1", topics=["t", TBW]))
    ns.apply(reg(T0, profile, cluster="c2", name="b2", addr="a:2", topics=["t", TBW]))
    ns.apply(R.request(T0 + 1, 216, {"topic": "t", "clusterName": "nope"}))
    assert set(ns.snapshot().topicQueueTable["t"]) == {"b1", "b2"}
    ns.apply(R.request(T0 + 1, 216, {"topic": "t", "clusterName": "c1"}))
    assert set(ns.snapshot().topicQueueTable["t"]) == {"b2"}
    ns.apply(R.request(T0 + 1, 216, {"topic": "t", "clusterName": "c2"}))
    assert "t" not in ns.snapshot().topicQueueTable
    ns.apply(R.request(T0 + 1, 216, {"topic": "TBW102", "clusterName": ""}))  # empty = no cluster
    assert ns.snapshot().topicQueueTable == {}


def test_5x_register_topic_aborts_at_an_unknown_broker_name() -> None:
    ns = NameServer("rocketmq-5", {}, T0)
    ns.apply(reg(T0, name="b1", addr="a:1", topics=["x", TBW]))
    ns.apply(reg(T0, name="b2", addr="a:2", topics=["x", TBW]))
    qd = {"brokerName": "b1", "perm": 6, "readQueueNums": 2, "writeQueueNums": 2}
    body = {"queueDatas": [qd, {"brokerName": "ghost", "perm": 6}, {"brokerName": "b2", "perm": 6}]}
    ns.apply(R.request(T0 + 1, 217, {"topic": "new"}, body=body))
    assert "new" not in ns.snapshot().topicQueueTable  # new topic: nothing stored
    ns.apply(R.request(T0 + 1, 217, {"topic": "x"}, body=body))
    x = ns.snapshot().topicQueueTable["x"]
    assert x["b1"] == QueueData("b1", 2, 2, 6, 0)  # stored as given, before the unknown name
    assert x["b2"] == QueueData("b2", 8, 8, 6, 0)  # after it: untouched
    ns.apply(R.request(T0 + 2, 217, {"topic": "new"}, body={"queueDatas": [{"brokerName": "b2"}]}))
    assert ns.snapshot().topicQueueTable["new"] == {"b2": QueueData("b2", 0, 0, 0, 0)}  # missing fields: 0


def test_register_topic_is_not_a_49_request() -> None:
    ns = NameServer("rocketmq-4.9", {}, T0)
    ns.apply(reg(T0, "rocketmq-4.9", topics=["x"]))
    body = {"queueDatas": [{"brokerName": "b", "perm": 6}]}
    assert ns.apply(R.request(T0 + 1, 217, {"topic": "new"}, body=body)).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert set(ns.snapshot().topicQueueTable) == {"x"}


@pytest.mark.parametrize("code", [105, 106, 206, 318, 319, 34, 9999])
def test_read_only_and_unknown_codes_change_nothing(code: int) -> None:
    ns = NameServer("rocketmq-5", {}, T0)
    ns.apply(reg(T0, topics=["t", TBW]))
    before = ns.snapshot()
    outcome = ns.apply(R.request(T0 + 1, code, {"topic": "t", "brokerName": "b"}))
    assert not outcome.changed and ns.snapshot() is before


def test_kv_config_put_and_delete() -> None:
    ns = NameServer("rocketmq-5", {}, T0)
    kv = {"namespace": "ORDER_TOPIC_CONFIG", "key": "t", "value": "b:4"}
    assert ns.apply(R.request(T0, 100, kv)).changed
    ns.apply(R.request(T0, 100, {**kv, "namespace": "OTHER", "key": "u"}))
    assert ns.snapshot().orderTopicConf == {"t": "b:4"}
    ns.apply(R.request(T0 + 1, 102, {"namespace": "ORDER_TOPIC_CONFIG", "key": "t"}))
    assert ns.snapshot().orderTopicConf == {}
