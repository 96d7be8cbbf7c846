"""Planned incidents and what they do to broker processes and topic tables.

Contract of :func:`plan_scenario` (pure, seeded):

* Group incidents (crash, graceful shutdown, slave promotion, network partition) never overlap on one
  broker group: each reserves its group from 60 s before to 60 s after it settles. Topic changes are
  placed only where every group they touch is free, so a bump never races an incident.
* Incidents are placed after every broker has started (window start + 90 s) and end before the window
  does; one that does not fit is skipped (the manifest lists what was planned, with member addresses).
* Roles are resolved in time order per group, so an incident after a promotion targets the new master.
* The result holds every broker process (one per JVM run), each group's table :class:`Lineage`, the
  NameServer restarts, and the admin operations the simulation turns into records.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from nsreplay.protocol.register_body import TopicConfig

from .brokers import BrokerProcess, Lineage
from .config import GeneratorConfig
from .world import World, business_topic_config, rng, topic_name

__all__ = [
    "GroupIncident",
    "NamesrvRestart",
    "TopicChange",
    "PermWipe",
    "KvChange",
    "Scenario",
    "plan_scenario",
]

_SETTLE_MS = 60_000
_WARMUP_MS = 90_000
_COOLDOWN_MS = 30_000


@dataclass
class GroupIncident:
    """A crash, graceful shutdown, promotion or partition on one broker group."""

    kind: str
    group: int
    ts: int
    role: str
    #: crash/shutdown: time until the restart; promotion: time until the slave takes over.
    delay_ms: int
    #: promotion: time after the takeover until the old master returns as a slave (None: never).
    return_ms: int | None = None
    outcome: str | None = None
    namesrvs: frozenset[int] = frozenset()
    duration_ms: int = 0
    #: Filled when applied: what actually happened, for the manifest.
    resolved: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NamesrvRestart:
    """A NameServer down at ``down_ms`` and started again (namesrv_start) at ``up_ms``."""

    namesrv: int
    down_ms: int
    up_ms: int


@dataclass
class TopicChange:
    """mqadmin updateTopic / deleteTopic: broker-side bumps, and for deletes a DELETE_TOPIC_IN_NAMESRV."""

    kind: str  # "create" | "update" | "delete"
    ts: int
    topic: TopicConfig
    cluster: str
    groups: tuple[int, ...]
    with_cluster: bool
    admin_version: int
    admin_namesrv: int
    #: (group, bump ts) actually applied.
    bumps: list[tuple[int, int]] = field(default_factory=list)


@dataclass(frozen=True)
class PermWipe:
    """WIPE_WRITE_PERM_OF_BROKER at ``wipe_ms`` then ADD_WRITE_PERM_OF_BROKER at ``add_ms``."""

    group: int
    wipe_ms: int
    add_ms: int
    admin_version: int


@dataclass(frozen=True)
class KvChange:
    """PUT_KV_CONFIG / DELETE_KV_CONFIG in namespace ORDER_TOPIC_CONFIG."""

    kind: str  # "put" | "delete"
    ts: int
    topic: str
    value: str
    admin_version: int


@dataclass
class Scenario:
    """The planned timeline."""

    processes: dict[tuple[int, int], list[BrokerProcess]]
    lineages: list[Lineage]
    group_incidents: list[GroupIncident]
    namesrv_restarts: list[NamesrvRestart]
    topic_changes: list[TopicChange]
    perm_wipes: list[PermWipe]
    kv_changes: list[KvChange]

    def all_processes(self) -> list[BrokerProcess]:
        """Every process, ordered by (group, member, start)."""
        return [p for key in sorted(self.processes) for p in self.processes[key]]

    def describe(self, world: World) -> list[dict[str, Any]]:
        """JSON-ready incident list (time order) for the manifest."""
        items: list[dict[str, Any]] = []
        for inc in self.group_incidents:
            items.append({"kind": inc.kind, "ts": inc.ts, "brokerName": world.groups[inc.group].name,
                          **inc.resolved})
        for rs in self.namesrv_restarts:
            items.append({"kind": "namesrv_restart", "ts": rs.down_ms, "namesrv": world.namesrvs[rs.namesrv].addr,
                          "down_ms": rs.down_ms, "up_ms": rs.up_ms})
        for tc in self.topic_changes:
            items.append({"kind": f"topic_{tc.kind}", "ts": tc.ts, "topic": tc.topic.topic_name,
                          "cluster": tc.cluster, "brokerNames": [world.groups[g].name for g, _ in tc.bumps],
                          "withClusterName": tc.with_cluster if tc.kind == "delete" else None})
        for pw in self.perm_wipes:
            items.append({"kind": "perm_wipe", "ts": pw.wipe_ms, "brokerName": world.groups[pw.group].name,
                          "wipe_ms": pw.wipe_ms, "add_ms": pw.add_ms})
        for kv in self.kv_changes:
            items.append({"kind": f"kv_{kv.kind}", "ts": kv.ts, "topic": kv.topic, "value": kv.value})
        items.sort(key=lambda d: (d["ts"], d["kind"]))
        for d in items:
            for key in [k for k, v in d.items() if v is None]:
                del d[key]
        return items


def _uniform_ms(r: random.Random, bounds: tuple[int, int]) -> int:
    lo, hi = bounds
    return r.randint(min(lo, hi) * 1000, max(lo, hi) * 1000)


class _Reservations:
    def __init__(self, groups: int) -> None:
        self._busy: dict[int, list[tuple[int, int]]] = {g: [] for g in range(groups)}

    def free(self, group: int, lo: int, hi: int) -> bool:
        return all(hi <= a or lo >= b for a, b in self._busy[group])

    def reserve(self, group: int, lo: int, hi: int) -> None:
        self._busy[group].append((lo, hi))


def _admin_version(r: random.Random) -> int:
    return r.choice((399, 401, 453, 475, 479))


def plan_scenario(config: GeneratorConfig, world: World) -> Scenario:
    """Plan every incident of the window and derive processes and table lineages from them."""
    r = rng(config.seed, "scenario")
    inc = config.incidents
    start, end = config.timing.start_ms, config.end_ms
    lo_ts, hi_ts = start + _WARMUP_MS, end - _COOLDOWN_MS
    n_groups = len(world.groups)
    res = _Reservations(n_groups)

    # ---------------------------------------------------------------- group incidents
    kinds = (["crash"] * inc.crashes + ["graceful_shutdown"] * inc.graceful_shutdowns
             + ["promotion"] * inc.promotions + ["partition"] * inc.partitions)
    r.shuffle(kinds)
    outcomes = sorted(o for o, w in inc.crash_outcomes.items() if w > 0) or ["silent"]
    weights = [inc.crash_outcomes.get(o, 1.0) for o in outcomes]
    first_cycle = list(outcomes)
    r.shuffle(first_cycle)

    def crash_outcome() -> str:
        # Every outcome once (in a seeded order) before drawing by weight, so small presets show them all.
        return first_cycle.pop() if first_cycle else r.choices(outcomes, weights)[0]

    group_incidents: list[GroupIncident] = []
    for kind in kinds:
        if kind == "crash":
            delay = _uniform_ms(r, inc.crash_downtime_s)
            span = delay + 40_000
            gi = GroupIncident(kind, -1, 0, r.choice(("master", "slave")), delay, outcome=crash_outcome())
        elif kind == "graceful_shutdown":
            delay = _uniform_ms(r, inc.shutdown_downtime_s)
            span = delay + 40_000
            gi = GroupIncident(kind, -1, 0, r.choice(("master", "slave")), delay)
        elif kind == "promotion":
            delay = _uniform_ms(r, inc.promotion_delay_s)
            back = _uniform_ms(r, inc.crash_downtime_s) if r.random() < inc.promotion_old_master_returns else None
            span = delay + (back or 0) + 40_000
            gi = GroupIncident(kind, -1, 0, "master", delay, return_ms=back, outcome=crash_outcome())
        else:
            duration = _uniform_ms(r, inc.partition_s)
            span = duration + 40_000
            n_ns = len(world.namesrvs)
            size = r.randint(1, max(1, n_ns - 1))
            hidden = frozenset(r.sample(range(n_ns), size))
            gi = GroupIncident(kind, -1, 0, r.choice(("master", "slave")), 0, namesrvs=hidden,
                               duration_ms=duration)
        if hi_ts - span <= lo_ts:
            continue
        candidates = [g for g in range(n_groups)
                      if kind != "promotion" or len(world.groups[g].members) > 1]
        for _attempt in range(400):
            ts = r.randint(lo_ts, hi_ts - span)
            g = r.choice(candidates) if candidates else -1
            if g >= 0 and res.free(g, ts - _SETTLE_MS, ts + span + _SETTLE_MS):
                res.reserve(g, ts - _SETTLE_MS, ts + span + _SETTLE_MS)
                gi.group, gi.ts = g, ts
                group_incidents.append(gi)
                break
    group_incidents.sort(key=lambda x: (x.ts, x.group))

    # ---------------------------------------------------------------- NameServer restarts
    restarts: list[NamesrvRestart] = []
    ns_choices = list(range(len(world.namesrvs)))
    r.shuffle(ns_choices)
    for k in range(inc.namesrv_restarts):
        down = _uniform_ms(r, inc.namesrv_downtime_s)
        if hi_ts - down <= lo_ts:
            break
        for _attempt in range(200):
            ts = r.randint(lo_ts, hi_ts - down)
            if all(ts + down + 120_000 <= x.down_ms or ts >= x.up_ms + 120_000 for x in restarts):
                restarts.append(NamesrvRestart(ns_choices[k % len(ns_choices)], ts, ts + down))
                break
    restarts.sort(key=lambda x: x.down_ms)

    # ---------------------------------------------------------------- topic changes
    changes: list[TopicChange] = []
    touched: set[str] = set()
    serial = len(world.topics)
    clusters = list(world.clusters)
    per_topic = config.topology.groups_per_topic
    topic_kinds = ["create"] * inc.topic_creates + ["update"] * inc.topic_updates + ["delete"] * inc.topic_deletes
    for kind in topic_kinds if hi_ts - 60_000 > lo_ts else []:
        for _attempt in range(300):
            ts = r.randint(lo_ts, hi_ts - 60_000)
            window = (ts - 30_000, ts + 60_000)
            if kind == "create":
                cluster = r.choice(clusters)
                free = [g for g in range(n_groups)
                        if world.groups[g].cluster == cluster and res.free(g, *window)]
                if not free:
                    continue
                name = topic_name(r, serial)
                serial += 1
                cfg = business_topic_config(r, name)
                groups = tuple(sorted(r.sample(free, min(per_topic, len(free)))))
            else:
                candidates = [t for t in world.topics if t.config.topic_name not in touched]
                if not candidates:
                    break
                spec = r.choice(candidates)
                if not all(res.free(g, *window) for g in spec.groups):
                    continue
                cluster, groups = spec.cluster, spec.groups
                cfg = spec.config
                if kind == "update":
                    grown = min(cfg.read_queue_nums * 2, 64)
                    if grown == cfg.read_queue_nums:
                        grown = max(1, cfg.read_queue_nums // 2)
                    cfg = TopicConfig(cfg.topic_name, grown, grown, 6 if cfg.perm != 6 else cfg.perm,
                                      cfg.topic_sys_flag, cfg.order, cfg.topic_filter_type)
                touched.add(cfg.topic_name)
            for g in groups:
                res.reserve(g, *window)
            version = _admin_version(r)
            changes.append(TopicChange(kind, ts, cfg, cluster, groups, with_cluster=version >= 475 or r.random() < 0.3,
                                       admin_version=version, admin_namesrv=r.randrange(len(world.namesrvs))))
            break
    changes.sort(key=lambda c: c.ts)

    # ---------------------------------------------------------------- admin-only operations
    wipes: list[PermWipe] = []
    for _ in range(inc.perm_wipes):
        dur = _uniform_ms(r, inc.perm_wipe_s)
        if hi_ts - dur <= lo_ts:
            break
        ts = r.randint(lo_ts, hi_ts - dur)
        wipes.append(PermWipe(r.randrange(n_groups), ts, ts + dur, _admin_version(r)))
    kvs: list[KvChange] = []
    put_topics: list[str] = []
    for _ in range(inc.kv_puts):
        if not world.topics or hi_ts <= lo_ts:
            break
        spec = r.choice(world.topics)
        value = ";".join(f"{world.groups[g].name}:{spec.config.write_queue_nums}" for g in spec.groups)
        ts = r.randint(lo_ts, hi_ts)
        kvs.append(KvChange("put", ts, spec.config.topic_name, value, _admin_version(r)))
        put_topics.append(spec.config.topic_name)
    for _ in range(inc.kv_deletes):
        if not put_topics or hi_ts <= lo_ts:
            break
        ts = r.randint(lo_ts, hi_ts)
        kvs.append(KvChange("delete", ts, r.choice(put_topics), "", _admin_version(r)))
    kvs.sort(key=lambda k: k.ts)
    wipes.sort(key=lambda w: w.wipe_ms)

    processes = _initial_processes(config, world)
    _apply_group_incidents(config, world, processes, group_incidents, r)
    lineages = _apply_bumps(world, processes, changes, group_incidents, r)
    _derive_versions(world, processes, lineages)
    return Scenario(processes, lineages, group_incidents, restarts, changes, wipes, kvs)


def _initial_processes(config: GeneratorConfig, world: World) -> dict[tuple[int, int], list[BrokerProcess]]:
    timing = config.timing
    processes: dict[tuple[int, int], list[BrokerProcess]] = {}
    for group in world.groups:
        for member in group.members:
            r = rng(config.seed, "start", group.index, member.index)
            bounds = timing.master_start_s if member.initial_id == 0 else timing.slave_start_s
            start = timing.start_ms + _uniform_ms(r, bounds) + r.randint(0, 999)
            processes[(group.index, member.index)] = [
                BrokerProcess(group.index, member.index, start, config.end_ms, initial_id=member.initial_id,
                              sync_offset_ms=r.randint(1000, 10_000))
            ]
    return processes


def _alive(processes: dict[tuple[int, int], list[BrokerProcess]], g: int, m: int, ts: int) -> BrokerProcess | None:
    procs = processes.get((g, m), [])
    if procs and procs[-1].alive_at(ts):
        return procs[-1]
    return None


def _apply_group_incidents(
    config: GeneratorConfig,
    world: World,
    processes: dict[tuple[int, int], list[BrokerProcess]],
    incidents: list[GroupIncident],
    r: random.Random,
) -> None:
    end = config.end_ms
    id_of: dict[tuple[int, int], int | None] = {(g.index, m.index): m.initial_id for g in world.groups for m in g.members}

    def restart(g: int, m: int, ts: int, broker_id: int) -> None:
        if ts < end:
            pr = rng(config.seed, "restart", g, m, ts)
            processes[(g, m)].append(BrokerProcess(g, m, ts, end, initial_id=broker_id,
                                                   sync_offset_ms=pr.randint(1000, 10_000)))

    for gi in incidents:
        g = gi.group
        members = world.groups[g].members
        alive = [(id_of[(g, mm.index)], mm.index) for mm in members
                 if id_of[(g, mm.index)] is not None and _alive(processes, g, mm.index, gi.ts)]
        alive.sort()
        if not alive:
            gi.resolved = {"skipped": "no live broker"}
            continue
        masters = [m for i, m in alive if i == 0]
        slaves = [(i, m) for i, m in alive if i != 0]
        kind = gi.kind
        if kind == "promotion" and (not masters or not slaves):
            kind = "crash"
        if gi.role == "slave" and slaves:
            target = r.choice(slaves)[1]
        elif masters:
            target = masters[0]
        else:
            target = alive[0][1]
        proc = processes[(g, target)][-1]
        addr = members[target].addr
        if kind in ("crash", "graceful_shutdown"):
            proc.end_ms = gi.ts
            proc.end_reason = "crash" if kind == "crash" else "shutdown"
            proc.crash_outcome = gi.outcome if kind == "crash" else None
            broker_id = id_of[(g, target)]
            assert broker_id is not None
            restart(g, target, gi.ts + gi.delay_ms, broker_id)
            gi.resolved = {"brokerAddr": addr, "brokerId": broker_id, "restart_ms": gi.ts + gi.delay_ms}
            if kind == "crash":
                gi.resolved["outcome"] = gi.outcome
            if kind != gi.kind:
                gi.resolved["note"] = "no slave alive: planned promotion became a master crash"
        elif kind == "promotion":
            new_master = min(slaves)[1]
            old_slave_id = id_of[(g, new_master)]
            assert old_slave_id is not None
            proc.end_ms = gi.ts
            proc.end_reason = "crash"
            proc.crash_outcome = gi.outcome
            takeover = gi.ts + gi.delay_ms
            promoted = processes[(g, new_master)][-1]
            promoted.id_changes.append((takeover, 0))
            if world.groups[g].is_v5:
                promoted.role_change_registers.append(takeover + r.randint(2, 40))
            id_of[(g, new_master)] = 0
            id_of[(g, target)] = None
            gi.resolved = {"brokerAddr": addr, "outcome": gi.outcome, "promoted_addr": members[new_master].addr,
                           "promoted_from_id": old_slave_id, "takeover_ms": takeover}
            if gi.return_ms is not None and takeover + gi.return_ms < end:
                restart(g, target, takeover + gi.return_ms, old_slave_id)
                id_of[(g, target)] = old_slave_id
                gi.resolved["old_master_returns_ms"] = takeover + gi.return_ms
                gi.resolved["old_master_returns_as_id"] = old_slave_id
        else:  # partition
            proc.partitions.append((gi.namesrvs, gi.ts, gi.ts + gi.duration_ms))
            gi.resolved = {"brokerAddr": addr, "brokerId": id_of[(g, target)],
                           "hidden_from": sorted(world.namesrvs[i].addr for i in gi.namesrvs),
                           "until_ms": gi.ts + gi.duration_ms}


def _master_at(processes: dict[tuple[int, int], list[BrokerProcess]], world: World, g: int, ts: int) -> BrokerProcess | None:
    for member in world.groups[g].members:
        for proc in processes[(g, member.index)]:
            if proc.alive_at(ts) and proc.id_at(ts) == 0:
                return proc
    return None


def _apply_bumps(
    world: World,
    processes: dict[tuple[int, int], list[BrokerProcess]],
    changes: list[TopicChange],
    incidents: list[GroupIncident],
    r: random.Random,
) -> list[Lineage]:
    lineages = [Lineage(g.index, g.initial_topics, g.initial_dv) for g in world.groups]
    requests: list[tuple[int, int, str, TopicChange | None]] = []
    for tc in changes:
        for rank, g in enumerate(tc.groups):
            requests.append((tc.ts + 150 + 20 * rank + r.randint(0, 9), g, tc.kind, tc))
    for gi in incidents:
        if gi.kind == "promotion" and "takeover_ms" in gi.resolved and world.groups[gi.group].is_v5:
            requests.append((gi.resolved["takeover_ms"], gi.group, "promotion", None))
    requests.sort(key=lambda x: (x[0], x[1]))
    for ts, g, kind, tc in requests:
        master = _master_at(processes, world, g, ts)
        if master is None:
            continue
        lineage = lineages[g]
        if kind == "promotion":
            lineage.bump(ts, state_version_delta=1)
            continue
        assert tc is not None
        if kind == "delete":
            lineage.bump(ts, remove=(tc.topic.topic_name,))
        else:
            version = lineage.bump(ts, upsert=(tc.topic,))
            master.increments.append((ts + r.randint(1, 15), version.index))
        tc.bumps.append((g, ts))
    return lineages


def _derive_versions(world: World, processes: dict[tuple[int, int], list[BrokerProcess]], lineages: list[Lineage]) -> None:
    for group in world.groups:
        lineage = lineages[group.index]
        bumps = lineage.bumps()
        for member in group.members:
            held = 0
            for proc in processes[(group.index, member.index)]:
                steps: list[tuple[int, int]] = [(proc.start_ms, held)]
                if lineage.version_at(proc.start_ms) != held and proc.id_at(proc.start_ms) != 0:
                    tick = proc.next_sync_tick(proc.start_ms + 1)
                    if tick < proc.end_ms:
                        steps.append((tick, lineage.version_at(tick)))
                for ts, index in bumps:
                    if not proc.start_ms <= ts < proc.end_ms:
                        continue
                    if proc.id_at(ts) == 0:
                        steps.append((ts, index))
                    else:
                        tick = proc.next_sync_tick(ts)
                        if tick < proc.end_ms:
                            steps.append((tick, lineage.version_at(tick)))
                steps.sort(key=lambda s: s[0])
                collapsed: list[tuple[int, int]] = []
                for ts, index in steps:
                    if collapsed and collapsed[-1][0] == ts:
                        collapsed[-1] = (ts, max(collapsed[-1][1], index))
                    elif not collapsed or collapsed[-1][1] != index:
                        collapsed.append((ts, index))
                proc.versions = collapsed
                held = proc.version_at(proc.end_ms - 1)
