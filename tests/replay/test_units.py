"""assign_units and carries_over: which broker groups replay together, written out by hand from the
rules of pipelines/replay/units.py (each rule alone, then the capacity fallback, then windows)."""

from __future__ import annotations

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
