"""assign_units and carries_over: which broker groups replay together, written out by hand from the
rules of pipelines/replay/units.py (each rule alone, then the capacity fallback, then windows)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

from pipelines.replay.run import FACTS_UNIT, STARTS_UNIT
from pipelines.replay.units import BASE_UNIT, KV_UNIT, CarriedFacts, Membership, UnitFacts, UnitMap, WindowFacts, assign_units, carries_over


def test_groups_that_share_nothing_are_units_of_their_own() -> None:
    got = assign_units([Membership("b", "10.0.0.2:1", "c-b", "C"), Membership("a", "10.0.0.1:1", "c-a", "C")])
    assert got == UnitMap(
        by_broker_name={"a": "a", "b": "b"},
        by_addr={"10.0.0.1:1": "a", "10.0.0.2:1": "b"},
        by_conn={"c-a": "a", "c-b": "b"},
        whole_namesrv=False,
    )
    assert got.units() == {"a", "b", KV_UNIT, BASE_UNIT}


def test_a_brokername_spelled_like_a_unit_of_the_replay_is_a_unit_of_its_own() -> None:
    """Any string is a brokerName, "~kv" and "~base" too: a group's unit id is never the KV unit's,
    the base unit's or the id of the saved facts' and start records' rows (a group named so would
    share their records and their saved state), and two groups never share an id."""
    reserved = {KV_UNIT, BASE_UNIT, FACTS_UNIT, STARTS_UNIT}
    names = sorted(reserved | {"~", "~~kv", "~x", "*", "a"})
    got = assign_units([Membership(n, f"10.0.0.{i}:1", f"c{i}", "C") for i, n in enumerate(names)])
    ids = list(got.by_broker_name.values())
    assert len(set(ids)) == len(names) and not set(ids) & reserved
    assert got.units() == set(ids) | {KV_UNIT, BASE_UNIT}
    assert got.by_broker_name["a"] == "a" and got.by_broker_name["*"] == "*"  # other names stay their own ids
    plan = carries_over(got, got)
    assert plan[KV_UNIT] == KV_UNIT and plan[BASE_UNIT] == BASE_UNIT
    assert all(plan[u] == u for u in ids)


def test_an_address_a_connection_or_a_register_topic_body_joins_groups() -> None:
    facts = [
        Membership("a", "10.0.0.1:1", "c-a", "C"),
        Membership("b", "10.0.0.1:1", "c-b", "C"),  # a's address
        Membership("c", "10.0.0.3:1", "c-c", "C"),
        Membership("d", "10.0.0.4:1", "c-c", "C"),  # c's connection
        Membership("e", "10.0.0.5:1", "c-e", "C"),
        Membership("f", "10.0.0.6:1", "c-f", "C"),
        Membership("g", "10.0.0.7:1", "c-g", "C"),
    ]
    got = assign_units(facts, topic_groups=[("f", "e"), ("g",)])  # a body naming f then e; one naming g alone
    # unit ids are the smallest brokerName of the unit
    assert got.by_broker_name == {"a": "a", "b": "a", "c": "c", "d": "c", "e": "e", "f": "e", "g": "g"}
    assert got.by_addr["10.0.0.1:1"] == "a" and got.by_conn["c-c"] == "c" and not got.whole_namesrv


def test_a_brokername_in_two_clusters_joins_every_group_of_both() -> None:
    facts = [
        Membership("a", "10.0.0.1:1", None, "C1"),
        Membership("a", "10.0.0.1:1", None, "C2"),  # moved (or misconfigured)
        Membership("b", "10.0.0.2:1", None, "C1"),
        Membership("c", "10.0.0.3:1", None, "C2"),
        Membership("d", "10.0.0.4:1", None, "C3"),
    ]
    assert assign_units(facts).by_broker_name == {"a": "a", "b": "a", "c": "a", "d": "d"}


def test_a_namesrv_whose_tables_can_outgrow_their_capacity_is_one_unit_when_any_unit_is_shared() -> None:
    # 4.9: addrs is a HashMap of 128 buckets, resized past 96 brokerNames (spec section 1)
    many = [Membership(f"b{i:03d}", f"10.0.{i}.1:1", f"c{i}", "C") for i in range(97)]
    alone = assign_units(many, profiles=["rocketmq-4.9"])
    assert not alone.whole_namesrv and len(set(alone.by_broker_name.values())) == 97  # nothing shared: order stays local
    shared = assign_units(many + [Membership("b001", "10.0.0.1:1", "c0", "C")], profiles=["rocketmq-4.9"])
    assert shared.whole_namesrv and set(shared.by_broker_name.values()) == {"b000"}
    # 5.x tables are larger (256 buckets, resized at 192 entries): the same NameServer keeps its units
    five = assign_units(many + [Membership("b001", "10.0.0.1:1", "c0", "C")], profiles=["rocketmq-5"])
    assert not five.whole_namesrv and len(set(five.by_broker_name.values())) == 96
    # a NameServer that ran under both profiles takes the stricter limits
    assert assign_units(many + [Membership("b001", "10.0.0.1:1", "c0", "C")], profiles=["rocketmq-5", "rocketmq-4.9"]).whole_namesrv


def test_units_carry_over_a_window_unless_two_merge() -> None:
    before = UnitFacts(frozenset({Membership("a", "10.0.0.1:1", "c-a", "C"), Membership("b", "10.0.0.2:1", "c-b", "C")}), profiles=frozenset({"rocketmq-5"}))
    grown = before | UnitFacts(frozenset({Membership("c", "10.0.0.3:1", "c-c", "C")}))
    # a new group starts from the base unit's state, the others resume their own
    assert carries_over(before.assign(), grown.assign()) == {KV_UNIT: KV_UNIT, BASE_UNIT: BASE_UNIT, "a": "a", "b": "b", "c": BASE_UNIT}
    # a new group joining a unit (the same address as a) resumes with it
    joined = before | UnitFacts(frozenset({Membership("d", "10.0.0.1:1", "c-d", "C")}))
    assert joined.assign().by_broker_name["d"] == "a"
    assert carries_over(before.assign(), joined.assign()) == {KV_UNIT: KV_UNIT, BASE_UNIT: BASE_UNIT, "a": "a", "b": "b"}
    # a REGISTER_TOPIC in the next window names a and b together: their states cannot be combined,
    # so that unit is replayed again (None); c resumes as before
    merged = grown | UnitFacts(topic_groups=frozenset({("b", "a")}))
    assert carries_over(grown.assign(), merged.assign()) == {KV_UNIT: KV_UNIT, BASE_UNIT: BASE_UNIT, "a": None, "c": "c"}
    # a unit that split: every unit holding its groups again
    one = UnitMap(by_broker_name={"a": "a", "b": "a", "c": "c"}, by_addr={}, by_conn={}, whole_namesrv=False)
    two = UnitMap(by_broker_name={"a": "a", "b": "b", "c": "c"}, by_addr={}, by_conn={}, whole_namesrv=False)
    assert carries_over(one, two) == {KV_UNIT: KV_UNIT, BASE_UNIT: BASE_UNIT, "a": None, "b": None, "c": "c"}
    # a group without a record since the last start is in no unit: the others resume
    left = UnitMap(by_broker_name={"b": "b", "c": "c"}, by_addr={}, by_conn={}, whole_namesrv=False)
    assert carries_over(one, left) == {KV_UNIT: KV_UNIT, BASE_UNIT: BASE_UNIT, "b": "a", "c": "c"}


def test_a_start_drops_the_facts_before_it_for_the_windows_after() -> None:
    linked = UnitFacts(frozenset({Membership("a", "10.0.0.1:1", "c-a", "C"), Membership("b", "10.0.0.1:1", "c-b", "C")}))
    apart = UnitFacts(frozenset({Membership("a", "10.0.0.2:1", "c-a2", "C"), Membership("b", "10.0.0.3:1", "c-b2", "C")}))
    first = CarriedFacts.after(None, WindowFacts(linked))
    assert first == CarriedFacts(linked, linked)
    # a window with a start after the link: its units still see the link, the next window's do not
    restarted = CarriedFacts.after(first, WindowFacts(linked | apart, apart))
    assert restarted == CarriedFacts(linked | apart, apart)
    assert set(restarted.assigned.assign().by_broker_name.values()) == {"a"}
    following = CarriedFacts.after(restarted, WindowFacts(UnitFacts()))
    assert following == CarriedFacts(apart, apart)
    assert carries_over(restarted.assigned.assign(), following.assigned.assign()) == {KV_UNIT: KV_UNIT, BASE_UNIT: BASE_UNIT, "a": None, "b": None}
    # without a start, facts only grow
    assert CarriedFacts.after(following, WindowFacts(linked)) == CarriedFacts(apart | linked, apart | linked)
    # a row stored before the epoch was kept is both
    assert CarriedFacts.loaded(linked) == CarriedFacts(linked, linked) and CarriedFacts.loaded(first) is first


#: The pickle of CarriedFacts(UnitFacts({Membership("a", "10.0.0.1:1", "c-a", "C"), Membership("b")},
#: {("a", "b")}, {"rocketmq-5"}), UnitFacts()) as gold.replay_state held it before UnitFacts pickled in
#: sorted order (the dataclass's default pickle).
STORED_BEFORE = bytes.fromhex(
    "80049535010000000000008c16706970656c696e65732e7265706c61792e756e697473948c0c436172726965644661637473"
    "9493942981947d94288c0861737369676e65649468008c09556e697446616374739493942981947d94288c0b6d656d626572"
    "7368697073942868008c0a4d656d626572736869709493942981947d94288c0b62726f6b65725f6e616d65948c0162948c0b"
    "62726f6b65725f61646472944e8c04636f6e6e944e8c07636c7573746572944e7562680c2981947d9428680f8c0161946811"
    "8c0a31302e302e302e313a319468128c03632d619468138c014394756291948c0c746f7069635f67726f7570739428681668"
    "10869491948c0870726f66696c657394288c0a726f636b65746d712d3594919475628c0565706f63689468072981947d9428"
    "680a289194681b289194681e289194756275622e"
)

_PICKLE_FACTS = """
import pickle, random, sys
from pipelines.replay.units import CarriedFacts, Membership, UnitFacts
members = [Membership(f"b{i}", f"10.0.0.{i}:10911", f"c{i}", "C") for i in range(30)] + [Membership("x"), Membership("x", "")]
random.Random(int(sys.argv[1])).shuffle(members)
facts = UnitFacts(frozenset(members), frozenset({("b1", "b2"), ("b3", "b4"), ("b5",)}), frozenset({"rocketmq-5", "rocketmq-4.9"}))
sys.stdout.write(pickle.dumps(CarriedFacts(facts, facts | UnitFacts(profiles=frozenset({"rocketmq-5"})))).hex())
"""


def test_equal_facts_pickle_to_equal_bytes_whatever_the_hash_seed_and_older_pickles_still_load() -> None:
    """gold.replay_state's ~facts rows are written by the driver, whose hash seed is random outside
    spark-submit (tests, notebooks, ``nsreplay backfill``): a re-run of a window must still write the
    same bytes. Built in other orders under other seeds, the same facts pickle the same."""
    root = Path(__file__).resolve().parents[2]
    pickles = {
        subprocess.run([sys.executable, "-c", _PICKLE_FACTS, str(seed)], capture_output=True, text=True, check=True, cwd=root,
                       env={**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(root)}).stdout
        for seed in (1, 2, 3)
    }
    assert len(pickles) == 1
    loaded = pickle.loads(bytes.fromhex(pickles.pop()))
    assert isinstance(loaded, CarriedFacts) and len(loaded.assigned.memberships) == 32 and loaded.epoch.profiles == {"rocketmq-4.9", "rocketmq-5"}
    old = UnitFacts(frozenset({Membership("a", "10.0.0.1:1", "c-a", "C"), Membership("b")}), frozenset({("a", "b")}), frozenset({"rocketmq-5"}))
    assert pickle.loads(STORED_BEFORE) == CarriedFacts(old, UnitFacts())
    assert pickle.loads(pickle.dumps(CarriedFacts(old, UnitFacts()))) == CarriedFacts(old, UnitFacts())
