"""Replay units: which broker groups of one NameServer can be replayed independently.

The unit of parallelism is (NameServer, broker group). Groups interact only through shared keys, so
a unit is a connected component of brokerNames linked by anything that makes one group's request
touch another group's entries (semantics spec §1, §2, §5):

* the same broker address under two brokerNames (live/filter entries are keyed by address; expiry and
  channel close walk ``addrs`` to "the first BrokerData holding that address");
* the same connection carrying registrations of two brokerNames (a channel close looks up "the first
  live entry" whose stored connection is the closing one);
* one brokerName registered under two clusters (4.9 removes it from "the first cluster set
  containing it"): every group of those clusters joins the unit;
* a REGISTER_TOPIC body of several entries (it stops at the first brokerName unknown to ``addrs``),
  together with every group that can hold its topic then (whether the topic exists decides whether
  the entries before an unknown brokerName stay): ``topic_groups`` hold both. A body of one entry
  does the same whether the topic exists or not, and links nothing.

Inside a unit every "first … in Java iteration order" decision involves only the unit's own keys,
and their relative order depends only on hash, insertion order and table capacity. Capacity is the
one global input: when a NameServer's tables could outgrow their initial capacity (more brokerNames,
live entries or clusters than the resize threshold) *and* some unit holds more than one group, the
whole NameServer becomes one unit, so the result stays exact.

Requests without a group of their own go to every unit (namesrv_start, DELETE_TOPIC) or to a
dedicated unit (the ORDER_TOPIC_CONFIG KV store); requests naming an address, a connection or a
brokerName that no group used since the NameServer's last start cannot change anything and are not
replayed.

A start empties every route table (spec §4), so only the facts since a NameServer's last start
link groups for what follows it: windows carry those (:class:`CarriedFacts`), and a NameServer's
units do not grow with its whole history (address churn, clusters renamed, the capacity fallback)
but with one epoch's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

KV_UNIT = "~kv"
BASE_UNIT = "~base"  # sees only the records sent to every unit: the state a new unit starts from
BROADCAST = "*"
#: The replay's own unit ids (:data:`KV_UNIT`, :data:`BASE_UNIT`, and the ids of the rows the replay
#: stage saves its facts and start records under) are this character followed by a letter; a broker
#: group's id never is (:func:`group_unit_id`).
RESERVED_PREFIX = "~"


def group_unit_id(broker_name: str) -> str:
    """The unit id of a broker group whose smallest brokerName is ``broker_name``: the name itself,
    or, when it starts with :data:`RESERVED_PREFIX`, the name with one more in front ("~kv" is
    "~~kv"). Any string is a brokerName, so a group named like a unit of the replay's own must not
    take its id (it would share that unit's records and saved state). Injective, and the result is
    never a :data:`RESERVED_PREFIX` followed by a letter."""
    return RESERVED_PREFIX + broker_name if broker_name.startswith(RESERVED_PREFIX) else broker_name


# Resize thresholds (entries) above which Java iteration order could change (spec §1).
#   4.9 HashMap: addrs 128, live 256, clusters 32, resized when size > 0.75 x capacity.
#   5.x ConcurrentHashMap: tables of 256 / 512 / 64, resized when size reaches 0.75 x capacity.
CAPACITY_LIMITS = {
    "rocketmq-4.9": {"broker_names": 96, "live_keys": 192, "clusters": 24},
    "rocketmq-5": {"broker_names": 191, "live_keys": 383, "clusters": 47},
}


@dataclass(frozen=True)
class Membership:
    """One (brokerName, address, connection, cluster) fact seen in a NameServer's requests."""

    broker_name: str
    broker_addr: str | None = None
    conn: str | None = None
    cluster: str | None = None


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


@dataclass(frozen=True)
class UnitMap:
    """Where each request of one NameServer goes. Unit ids are the smallest brokerName of the unit,
    as :func:`group_unit_id` spells it."""

    by_broker_name: dict[str, str]
    by_addr: dict[str, str]
    by_conn: dict[str, str]
    whole_namesrv: bool

    def units(self) -> set[str]:
        return set(self.by_broker_name.values()) | {KV_UNIT, BASE_UNIT}


@dataclass(frozen=True)
class UnitFacts:
    """Everything :func:`assign_units` decides from, for one NameServer; facts of consecutive windows
    combine with ``|`` (the units of the union are those of one window over both)."""

    memberships: frozenset[Membership] = frozenset()
    topic_groups: frozenset[tuple[str, ...]] = frozenset()
    profiles: frozenset[str] = frozenset()

    def __or__(self, other: "UnitFacts") -> "UnitFacts":
        return UnitFacts(self.memberships | other.memberships, self.topic_groups | other.topic_groups, self.profiles | other.profiles)

    def assign(self) -> "UnitMap":
        ordered = sorted(self.memberships, key=lambda m: (m.broker_name, m.broker_addr or "", m.conn or "", m.cluster or ""))
        return assign_units(ordered, topic_groups=sorted(self.topic_groups), profiles=sorted(self.profiles))

    def __reduce__(self) -> tuple:
        """Pickled with each set's members in sorted order: equal facts give equal bytes in
        ``gold.replay_state`` whatever the process's hash seed (a set pickles in its iteration
        order, which ``PYTHONHASHSEED`` changes). Pickles written before load as they did."""
        return _unit_facts, (sorted(self.memberships, key=_membership_order), sorted(self.topic_groups), sorted(self.profiles))


def _membership_order(m: Membership) -> tuple:
    """A total order of memberships (None before any string, "" included)."""
    return tuple((v is not None, v or "") for v in (m.broker_name, m.broker_addr, m.conn, m.cluster))


def _unit_facts(memberships: list[Membership], topic_groups: list[tuple[str, ...]], profiles: list[str]) -> UnitFacts:
    return UnitFacts(frozenset(memberships), frozenset(topic_groups), frozenset(profiles))


@dataclass(frozen=True)
class WindowFacts:
    """One NameServer's facts from a window's records: ``whole`` from all of them, ``since_start``
    from those at or after its last start in the window (None when the window holds no start)."""

    whole: UnitFacts
    since_start: UnitFacts | None = None


@dataclass(frozen=True)
class CarriedFacts:
    """What a window leaves the next about one NameServer's units: ``assigned``, the facts its units
    (and so its saved states) were assigned from, and ``epoch``, the facts of its records since its
    last start at or before the window's end, the only ones that link groups after that end."""

    assigned: UnitFacts
    epoch: UnitFacts

    @staticmethod
    def after(carried: "CarriedFacts | None", window: WindowFacts) -> "CarriedFacts":
        """The facts at a window's end: its units come from the epoch carried in joined with the
        window's own; the next epoch restarts at the window's last start, when it holds one."""
        assigned = (carried.epoch if carried is not None else UnitFacts()) | window.whole
        return CarriedFacts(assigned, window.since_start if window.since_start is not None else assigned)

    @staticmethod
    def loaded(stored: "CarriedFacts | UnitFacts") -> "CarriedFacts":
        """A stored row: windows written before the epoch was kept stored the facts alone."""
        return stored if isinstance(stored, CarriedFacts) else CarriedFacts(stored, stored)


def carries_over(previous: UnitMap, current: UnitMap) -> dict[str, str | None]:
    """Where each unit of ``current`` (the map of a window) resumes from, given ``previous`` (the map
    the states at the window's start were saved under): the previous unit whose state it continues
    (``BASE_UNIT`` for a unit whose groups are all new), or ``None`` for a unit that is replayed
    again from its NameServer's last start before the window, when every route table was empty.

    A unit is replayed again when it joins groups of two previous units (their states cannot be
    combined exactly: the tables' Java iteration order interleaves their entries by insertion
    order), or when its previous unit split: a start dropped the facts that linked its groups, and
    the state holds them interleaved. A previous group missing from ``current`` has had no record
    since that start, so it holds no entry and drops out."""
    targets: dict[str, set[str]] = {}  # previous unit -> the current units holding its groups
    sources: dict[str, set[str]] = {}  # current unit -> the previous units it holds groups of
    for name, unit in previous.by_broker_name.items():
        if name not in current.by_broker_name:
            continue
        targets.setdefault(unit, set()).add(current.by_broker_name[name])
        sources.setdefault(current.by_broker_name[name], set()).add(unit)
    split = {t for ts in targets.values() if len(ts) > 1 for t in ts}
    plan: dict[str, str | None] = {KV_UNIT: KV_UNIT, BASE_UNIT: BASE_UNIT}
    for unit in sorted(current.units() - {KV_UNIT, BASE_UNIT}):
        held = sources.get(unit, set())
        plan[unit] = None if unit in split or len(held) > 1 else next(iter(held), BASE_UNIT)
    return plan


def assign_units(facts: Iterable[Membership], *, topic_groups: Iterable[tuple[str, ...]] = (), profiles: Iterable[str] = ("rocketmq-5",)) -> UnitMap:
    """Group the brokerNames of one NameServer into replay units (see module docstring).

    ``topic_groups``: the brokerNames named together by each REGISTER_TOPIC body; ``profiles``: every
    profile the NameServer ran under in the window (the stricter capacity limits apply).
    """
    facts = list(facts)
    uf = _UnionFind()
    by_addr: dict[str, str] = {}
    by_conn: dict[str, str] = {}
    clusters_of: dict[str, set[str]] = {}
    members: dict[str, set[str]] = {}
    live_keys: set[tuple[str | None, str]] = set()
    for f in facts:
        uf.find(f.broker_name)
        if f.broker_addr is not None:
            uf.union(f.broker_name, by_addr.setdefault(f.broker_addr, f.broker_name))
            live_keys.add((f.cluster, f.broker_addr))
        if f.conn is not None:
            uf.union(f.broker_name, by_conn.setdefault(f.conn, f.broker_name))
        if f.cluster is not None:
            clusters_of.setdefault(f.broker_name, set()).add(f.cluster)
            members.setdefault(f.cluster, set()).add(f.broker_name)
    for names in topic_groups:
        for name in names[1:]:
            uf.union(names[0], name)
    for name, clusters in clusters_of.items():
        if len(clusters) > 1:
            for cluster in clusters:
                for other in members[cluster]:
                    uf.union(name, other)

    names = sorted(uf.parent)
    shared = len({uf.find(n) for n in names}) < len(names)
    limits = [CAPACITY_LIMITS[p] for p in set(profiles) if p in CAPACITY_LIMITS] or [CAPACITY_LIMITS["rocketmq-5"]]
    outgrows = any(
        len(names) > lim["broker_names"] or len(live_keys) > lim["live_keys"] or len(members) > lim["clusters"] for lim in limits
    )
    whole = shared and outgrows
    if whole and names:
        for name in names[1:]:
            uf.union(names[0], name)
    by_name = {n: group_unit_id(uf.find(n)) for n in names}
    return UnitMap(
        by_broker_name=by_name,
        by_addr={a: by_name[n] for a, n in by_addr.items()},
        by_conn={c: by_name[n] for c, n in by_conn.items()},
        whole_namesrv=whole,
    )
