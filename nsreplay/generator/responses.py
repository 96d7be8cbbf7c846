"""Ground-truth answers to client GET_ROUTEINFO_BY_TOPIC (105) queries: ``kind = response`` records.

The answer is what the simulated NameServer held for the topic when it processed the query. It is
computed here from the generator's own knowledge and never by the project's reference model or replay
code (those are what the answers check). Two views of the simulated world are used, and a query is
answered only when they agree and nothing is in flux:

* the **NameServer view**: one pass over that NameServer's planned records in processing order
  (:class:`_NsView`). It works on the generator's compact records (group / member / broker id / table
  version indexes, never parsed capture lines) and keeps only what a route answer needs: each group's
  ``{brokerId: member}``, each live entry (last refresh, DataVersion, connection, timeout), each
  topic's QueueData per group, the cluster sets. It follows the registration, heartbeat, removal and
  admin rules of the semantics spec (§2-§6) in a simplified way: no Java hash order (the generator
  never misconfigures two groups to share an address or a name), no filter servers, no KV store;
* the **process view**: which broker processes run, are not hidden from that NameServer by a
  partition, and have registered with it in its current incarnation, with their ids and the table
  version they hold (:mod:`scenario`, :mod:`brokers`). The group's brokerAddrs and the topic's
  QueueData of the NameServer view must match it (a perm changed by WIPE/ADD_WRITE_PERM may differ
  from the topic config).

A query is **skipped** (no response record) when, on that NameServer, within the last
``130 s + one scan interval`` (:func:`window_ms`):

* the NameServer (re)started (or the window began) -- ``namesrv_restart``;
* the topic was created, updated or deleted, a DataVersion bump touched it, DELETE_TOPIC_IN_NAMESRV
  named it or any of its QueueData changed -- ``topic_transition``;
* a group that holds the topic, or could hold it (any version of its table lists the topic), saw a
  transition: one of its broker processes started, registered for the first time or after a gap, got a
  new broker id (promotion), crashed, shut down / unregistered, was partitioned from or reconnected to
  that NameServer, had a connection closed, its live entry expired or is due to expire, its brokerAddrs
  changed, or a WIPE/ADD_WRITE_PERM named it -- ``broker_transition``;

and also when a 5.x acting-master group of the topic has no master (``acting_master_without_master``),
when an expiry may or may not have happened before a request of that broker (NameServer without a
start record, so without a known scan grid) and the two possibilities do not provably end in the same
state -- ``unclear_history`` from then on for the group (:meth:`_NsView._resolve`), when the
two views disagree (``views_disagree``; e.g. a deleted topic brought back by a 5.x registration that
raced the delete), when the NameServer has ``orderMessageEnable`` (the answer would carry
orderTopicConf: ``order_topic_conf``), or when the NameServer's next record follows the request too
closely (``no_room``, see below).

Only a seeded share ``traffic.response_fraction`` of the queries is considered at all (drawn per query
before the checks above, which are the costly part; the others count as ``sampled_out``), so about that
share of the answerable queries gets a response.

Response record: ``ts`` = request ``ts`` + 1..3 ms, never after the NameServer's next record and
before it unless that record changes no table (a read-only request, a CONNECT), so the state at the
response's ``ts`` is the state the query was answered from; ``seq`` right after the request's.
``code`` 0 with the TopicRouteData (``body`` object for request version >= 401, else ``body_b64`` of
the legacy bytes with unquoted integer brokerAddrs keys) and ``"remark":null``, or code 17
(TOPIC_NOT_EXIST) with its remark and no body.
"""

from __future__ import annotations

import base64
import heapq
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

from nsreplay.protocol.register_body import DataVersion

from .config import GeneratorConfig
from .records import (
    CHANNEL,
    HEARTBEAT,
    JUNK,
    QUERY_DV,
    REGISTER,
    REQUEST,
    RESPONSE,
    START,
    UNREGISTER,
    PlannedRecord,
)
from .scenario import Scenario
from .world import World, rng

__all__ = [
    "ROUTE_QUERY",
    "TOPIC_NOT_EXIST",
    "SKIP_REASONS",
    "ResponseStats",
    "ResponsePlanner",
    "window_ms",
    "not_exist_remark",
    "route_body",
]

ROUTE_QUERY = 105
SUCCESS = 0
TOPIC_NOT_EXIST = 17
STANDARD_JSON_MIN_VERSION = 401
FAQ_URL = "http://rocketmq.apache.org/docs/faq/"  # 4.9.4's FAQUrl.APPLY_TOPIC_URL
FAQ_URL_5 = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"  # 5.x's

SKIP_REASONS = (
    "namesrv_restart",
    "topic_transition",
    "broker_transition",
    "acting_master_without_master",
    "unclear_history",
    "views_disagree",
    "order_topic_conf",
    "no_room",
    "sampled_out",
)

#: Requests that change no table (a response may share their ``ts``).
_READ_ONLY = frozenset((105, 106, 206))
_EXPIRY_MS_49 = 120_000
_SCAN_MS_49 = 10_000
_TICK_OFFSET_49 = 5_000
_TICK_OFFSET_5 = 5
#: A live entry this close to its expiry deadline makes its group "in transition".
_EXPIRY_MARGIN_MS = 2_000

QD = tuple[int, int, int, int]  # readQueueNums, writeQueueNums, perm, topicSysFlag


def window_ms(scan_ms: int) -> int:
    """How long after a transition queries stay unanswered: 130 s + one scan interval."""
    return 130_000 + scan_ms


def not_exist_remark(topic: str, five: bool = False) -> str:
    """The TOPIC_NOT_EXIST remark (spec §7) of a 4.9 or (``five``) a 5.x NameServer."""
    return f"No topic route info in name server for the topic: {topic}\nSee {FAQ_URL_5 if five else FAQ_URL} for further details."


def _truthy(value: object) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def _js(text: str) -> str:
    return orjson.dumps(text).decode()


def route_body(broker_datas: list[tuple[str, str, tuple[tuple[int, str], ...], bool | None]],
               queue_datas: list[tuple[str, QD]], *, legacy: bool) -> str:
    """TopicRouteData text like fastjson: keys alphabetical, compact, nulls omitted, no filter servers.

    ``broker_datas``: (brokerName, cluster, ((id, addr), ...), enableActingMaster or None for a 4.9
    NameServer); ``queue_datas``: (brokerName, (read, write, perm, sysFlag)). ``legacy`` writes the
    brokerAddrs keys unquoted (not valid JSON: what clients below version 401 get)."""
    bds = []
    for name, cluster, addrs, eam in broker_datas:
        if legacy:
            inner = ",".join(f"{bid}:{_js(addr)}" for bid, addr in addrs)
        else:
            inner = ",".join(f'"{bid}":{_js(addr)}' for bid, addr in addrs)
        text = f'{{"brokerAddrs":{{{inner}}},"brokerName":{_js(name)},"cluster":{_js(cluster)}'
        if eam is not None:
            text += ',"enableActingMaster":' + ("true" if eam else "false")
        bds.append(text + "}")
    qds = [f'{{"brokerName":{_js(name)},"perm":{p},"readQueueNums":{r},"topicSysFlag":{s},"writeQueueNums":{w}}}'
           for name, (r, w, p, s) in queue_datas]
    return '{"brokerDatas":[' + ",".join(bds) + '],"filterServerTable":{},"queueDatas":[' + ",".join(qds) + "]}"


@dataclass
class ResponseStats:
    """What happened to the client route queries (for the manifest)."""

    queries: int = 0
    answered: int = 0
    by_code: Counter[str] = field(default_factory=Counter)
    by_shape: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    per_namesrv: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_dict(self, fraction: float) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "route_queries": self.queries,
            "answered": self.answered,
            "skipped": sum(self.skipped.values()),
            "skipped_by_reason": {r: self.skipped.get(r, 0) for r in SKIP_REASONS},
            "answered_by_code": dict(sorted(self.by_code.items())),
            "answered_by_shape": dict(sorted(self.by_shape.items())),
            "response_fraction": fraction,
            "per_namesrv": dict(sorted(self.per_namesrv.items())),
        }


class _Live:
    """One live-table entry (brokerLiveTable) as far as the route answer needs it."""

    __slots__ = ("refreshed", "dv", "conn", "timeout", "stuck")

    def __init__(self, refreshed: int, dv: DataVersion, conn: str, timeout: int) -> None:
        self.refreshed = refreshed
        self.dv = dv
        self.conn = conn
        self.timeout = timeout
        #: 5.x: expired but no BrokerData holds the address, so the entry stays (spec §4).
        self.stuck = False


class ResponsePlanner:
    """Computes the response records of every NameServer (see the module docstring)."""

    def __init__(self, config: GeneratorConfig, world: World, scenario: Scenario) -> None:
        self.config = config
        self.world = world
        self.scenario = scenario
        self.stats = ResponseStats()
        self.fraction = config.traffic.response_fraction
        period = max(10_000, min(config.timing.register_period_ms, 60_000))
        #: A refresh of a live entry after this much silence counts as a re-registration after a gap.
        self.gap_ms = period * 3 // 2 + 1_000
        self.group_of_name = {g.name: g.index for g in world.groups}
        self.member_of_host = {m.host: (g.index, m.index) for g in world.groups for m in g.members}
        self._tables: dict[tuple[int, int, bool], dict[str, QD]] = {}
        # Every group that could hold a topic: any version of its table lists it.
        could: dict[str, set[int]] = {}
        for lineage in scenario.lineages:
            for v in lineage.versions:
                for cfg in v.topics:
                    could.setdefault(cfg.topic_name, set()).add(lineage.group)
        self.could_hold = {t: tuple(sorted(gs)) for t, gs in could.items()}
        self._transitions = [self._known_transitions(i) for i in range(len(world.namesrvs))]
        self._answers: dict[tuple[Any, ...], bytes] = {}

    # ------------------------------------------------------------------ generator knowledge

    def table(self, group: int, version: int, incremental: bool) -> dict[str, QD]:
        """The QueueData a registration of ``group`` at table ``version`` carries, by topic."""
        key = (group, version, incremental)
        hit = self._tables.get(key)
        if hit is None:
            tv = self.scenario.lineages[group].versions[version]
            compressed = self.world.groups[group].body_form == "compressed"  # no topicSysFlag on the wire
            hit = {c.topic_name: (c.read_queue_nums, c.write_queue_nums, c.perm, 0 if compressed else c.topic_sys_flag)
                   for c in (tv.changed if incremental else tv.topics)}
            self._tables[key] = hit
        return hit

    def _known_transitions(self, ns: int) -> list[tuple[int, int, Any]]:
        """(ts, 0, group) / (ts, 1, topic) transitions the scenario knows of, for NameServer ``ns``."""
        out: list[tuple[int, int, Any]] = []
        sc = self.scenario
        for proc in sc.all_processes():
            g = proc.group
            out.append((proc.start_ms, 0, g))
            if proc.end_reason != "window":
                out.append((proc.end_ms, 0, g))
            for when, _new_id in proc.id_changes:
                out.append((when, 0, g))
            for hidden, lo, hi in proc.partitions:
                if ns in hidden:
                    out.append((lo, 0, g))
                    out.append((hi, 0, g))
        for lineage in sc.lineages:
            prev = lineage.versions[0]
            for v in lineage.versions[1:]:
                names = {c.topic_name for c in v.changed}
                names |= {c.topic_name for c in prev.topics} - {c.topic_name for c in v.topics}
                if v.dv.state_version != prev.dv.state_version or not names:
                    out.append((v.created_ms, 0, lineage.group))
                out.extend((v.created_ms, 1, name) for name in sorted(names))
                prev = v
        for tc in sc.topic_changes:
            out.append((tc.ts, 1, tc.topic.topic_name))
        for pw in sc.perm_wipes:
            out.append((pw.wipe_ms, 0, pw.group))
            out.append((pw.add_ms, 0, pw.group))
        out.sort(key=lambda x: (x[0], x[1], str(x[2])))
        return out

    def process_at(self, group: int, member: int, ts: int) -> Any:
        """The broker process of that member running at ``ts`` (None when none runs)."""
        for proc in self.scenario.processes.get((group, member), ()):
            if proc.start_ms <= ts < proc.end_ms:
                return proc
        return None

    # ------------------------------------------------------------------ entry point

    def respond(self, ns: int, planned: list[PlannedRecord]) -> list[PlannedRecord]:
        """``planned`` (one NameServer's records in processing order) with the response records inserted."""
        view = _NsView(self, ns)
        return view.run(planned)

    def answer_tail(self, key: tuple[Any, ...], build: Any) -> bytes:
        """Interned response tail for an answer ``key`` (identical answers share their bytes)."""
        tail = self._answers.get(key)
        if tail is None:
            tail = build()
            self._answers[key] = tail
        return tail


class _NsView:
    """One NameServer's route-relevant state, swept over its records in processing order."""

    def __init__(self, planner: ResponsePlanner, ns: int) -> None:
        self.p = planner
        self.ns = ns
        world = planner.world
        info = world.namesrvs[ns]
        self.addr = info.addr
        self.v5 = info.is_v5
        cfg = info.config
        if self.v5:
            self.scan = int(cfg.get("scanNotActiveBrokerInterval", 5000) or 5000)
            self.tick_offset = _TICK_OFFSET_5
        else:
            self.scan = _SCAN_MS_49
            self.tick_offset = _TICK_OFFSET_49
        self.window = window_ms(self.scan)
        self.delete_with_reg = self.v5 and _truthy(cfg.get("deleteTopicWithBrokerRegistration", False))
        self.order_enabled = _truthy(cfg.get("orderMessageEnable", False))
        topo = planner.config.topology
        self.hb_timeout = topo.broker_not_active_timeout_ms
        self.sends_timeout = [g.is_v5 and (g.acting_master or topo.v5_always_send_heartbeat_timeout)
                              for g in world.groups]
        self.rand = rng(planner.config.seed, "responses", ns)
        self.stats = Counter()
        self.last_g: dict[int, int] = {}
        self.last_t: dict[str, int] = {}
        self._reset(planner.config.timing.start_ms, grid_known=False)

    # ------------------------------------------------------------------ state

    def _reset(self, ts: int, *, grid_known: bool) -> None:
        self.epoch_start = ts
        self.grid_known = grid_known
        self.addrs: dict[int, dict[int, int]] = {}  # group -> {brokerId: member}
        self.eam: dict[int, bool] = {}  # 5.x enableActingMaster of each BrokerData
        self.clusters: dict[str, set[int]] = {}
        self.topics: dict[str, dict[int, QD]] = {}
        self.held: dict[int, set[str]] = {}  # group -> topics holding its QueueData
        self.live: dict[tuple[int, int], _Live] = {}
        self.conn_owner: dict[str, tuple[int, int]] = {}
        self.last_reg: dict[tuple[int, int], int] = {}
        self.dirty: set[int] = set()  # groups that lost QueueData since their last full topic check
        self.perm_ops: set[int] = set()
        self.tainted: set[int] = set()
        self.unsure: set[tuple[int, int]] = set()  # expired or not: decided at the next registration
        self.heap: list[tuple[int, int, tuple[int, int], _Live]] = []
        self.heap_n = 0
        self._pv_cache: dict[int, tuple[tuple[int | None, int], dict[int, int], Any]] = {}
        self._answer_cache: dict[tuple[str, bool], tuple[tuple[Any, ...], int, bytes]] = {}

    def _mark_g(self, g: int, ts: int) -> None:
        if self.last_g.get(g, -1) < ts:
            self.last_g[g] = ts

    def _mark_t(self, topic: str, ts: int) -> None:
        if self.last_t.get(topic, -1) < ts:
            self.last_t[topic] = ts

    def _expiry_at(self, ent: _Live) -> int:
        """When the scan removes ``ent`` if nothing refreshes it: the first tick after refresh + timeout
        (with an unknown tick grid: the latest moment it can happen)."""
        deadline = ent.refreshed + ent.timeout
        if not self.grid_known:
            return deadline + self.scan
        origin = self.epoch_start + self.tick_offset
        if deadline < origin:
            return origin
        return origin + ((deadline - origin) // self.scan + 1) * self.scan

    def _refreshed(self, key: tuple[int, int], ent: _Live, ts: int) -> None:
        if ts - ent.refreshed > self.p.gap_ms:
            self._mark_g(key[0], ts)
        ent.refreshed = ts
        if ent.stuck:  # its heap item was dropped when it got stuck
            ent.stuck = False
            self._schedule(key, ent)

    def _schedule(self, key: tuple[int, int], ent: _Live) -> None:
        """Put ``ent`` in the expiry heap. One item per entry: a refresh does not push another, the
        item is moved to the new expiry time when it comes up (:meth:`_expire_until`)."""
        self.heap_n += 1
        heapq.heappush(self.heap, (self._expiry_at(ent), self.heap_n, key, ent))

    def _expire_until(self, ts: int) -> None:
        heap = self.heap
        while heap and heap[0][0] < ts:
            when, _n, key, ent = heapq.heappop(heap)
            if self.live.get(key) is not ent or ent.stuck:
                continue
            due = self._expiry_at(ent)
            if due > when:  # refreshed since it was scheduled
                self.heap_n += 1
                heapq.heappush(heap, (due, self.heap_n, key, ent))
                continue
            self._mark_g(key[0], ent.refreshed + ent.timeout)
            self._mark_g(key[0], when)
            self._destroy(key, when)

    def _ambiguous(self, key: tuple[int, int], ts: int) -> bool:
        """True when an expiry of ``key``'s live entry may or may not have happened before ``ts``."""
        ent = self.live.get(key)
        return (ent is not None and not ent.stuck and not self.grid_known
                and ts > ent.refreshed + ent.timeout)

    def _put_qd(self, topic: str, g: int, qd: QD, ts: int) -> None:
        by_group = self.topics.get(topic)
        if by_group is None:
            by_group = self.topics[topic] = {}
        if by_group.get(g) != qd:
            by_group[g] = qd
            self.held.setdefault(g, set()).add(topic)
            self._mark_t(topic, ts)

    def _drop_qd(self, topic: str, g: int, ts: int) -> None:
        by_group = self.topics.get(topic)
        if by_group is not None and g in by_group:
            del by_group[g]
            if not by_group:
                del self.topics[topic]
            self.held.get(g, set()).discard(topic)
            self.dirty.add(g)
            self._mark_t(topic, ts)

    def _remove_group(self, g: int, ts: int) -> None:
        self.addrs.pop(g, None)
        self.eam.pop(g, None)
        cluster = self.p.world.groups[g].cluster
        names = self.clusters.get(cluster)
        if names is not None:
            names.discard(g)
            if not names:
                del self.clusters[cluster]
        for topic in sorted(self.held.pop(g, set())):
            self._drop_qd(topic, g, ts)
        self.dirty.discard(g)
        self._mark_g(g, ts)

    def _set_perms(self, g: int, ts: int, *, wipe: bool) -> None:
        for topic in sorted(self.held.get(g, ())):
            r, w, perm, s = self.topics[topic][g]
            self._put_qd(topic, g, (r, w, perm & ~2 if wipe else 6, s), ts)

    def _destroy(self, key: tuple[int, int], ts: int) -> None:
        """Expiry or channel destroy of one broker address (spec §4, §5)."""
        g, m = key
        self.unsure.discard(key)
        ids = self.addrs.get(g)
        held_by = [bid for bid, mm in ids.items() if mm == m] if ids is not None else []
        if not self.v5:
            self.live.pop(key, None)
            if held_by:
                del ids[held_by[0]]  # type: ignore[index]
                self._mark_g(g, ts)
                if not ids:
                    self._remove_group(g, ts)
            return
        if not held_by:
            ent = self.live.get(key)
            if ent is not None:
                ent.stuck = True  # 5.x: no BrokerData holds the address; the live entry stays
            return
        self._unregister_5(key, ts)

    def _unregister_5(self, key: tuple[int, int], ts: int) -> None:
        g, m = key
        self.live.pop(key, None)
        self.unsure.discard(key)
        ids = self.addrs.get(g)
        if ids is None:
            return
        for bid in [bid for bid, mm in ids.items() if mm == m]:
            del ids[bid]
            self._mark_g(g, ts)
        if not ids:
            self._remove_group(g, ts)
        elif self.eam.get(g) and 0 not in ids:
            self._set_perms(g, ts, wipe=True)

    # ------------------------------------------------------------------ records

    def _register(self, ts: int, conn: str, g: int, m: int, bid: int, version: int, incremental: bool) -> None:
        key = (g, m)
        dv = self.p.scenario.lineages[g].versions[version].dv
        ent = self.live.get(key)
        if (ent is not None and ent.conn == conn and (ent.dv is dv or ent.dv == dv) and not ent.stuck
                and ts - ent.refreshed <= self.p.gap_ms and not self.delete_with_reg
                and (self.grid_known or (ts <= ent.refreshed + ent.timeout and key not in self.unsure))):
            # The periodic case: same connection, same DataVersion, id already in place. Nothing but the
            # live entry's refresh changes (no registerFirst, no topic work: the dv is unchanged and, on
            # 5.x, no QueueData of the group went missing since its last full topic check).
            ids = self.addrs.get(g)
            if ids is not None and ids.get(bid) == m and (not self.v5 or g not in self.dirty):
                for other, mm in ids.items():
                    if mm == m and other != bid:
                        break
                else:
                    ent.refreshed = ts
                    self.last_reg[key] = ts
                    return
        grp = self.p.world.groups[g]
        body = self.p.table(g, version, incremental)
        if key in self.unsure or self._ambiguous(key, ts):
            self.unsure.discard(key)
            self._resolve(key, bid, body, incremental)
        if ent is None or ent.conn != conn or ts - ent.refreshed > self.p.gap_ms:
            self._mark_g(g, ts)
        self.clusters.setdefault(grp.cluster, set()).add(g)
        ids = self.addrs.get(g)
        first = ids is None
        if ids is None:
            ids = self.addrs[g] = {}
            self.held.setdefault(g, set())
            self._mark_g(g, ts)
        if self.v5:
            self.eam[g] = grp.is_v5 and grp.acting_master
        for other in [i for i, mm in ids.items() if mm == m and i != bid]:
            del ids[other]
            self._mark_g(g, ts)
        if self.v5:
            holder = ids.get(bid)
            if holder is not None and holder != m:
                rival = self.live.get((g, holder))
                if rival is not None and rival.dv.state_version > dv.state_version:
                    self.live.pop(key, None)
                    self._mark_g(g, ts)
                    return
            if holder is None and len(body) == 1:
                self._mark_g(g, ts)  # "register broker failed": the BrokerData may stay empty
                return
        if ids.get(bid) != m:
            first = first or bid not in ids
            ids[bid] = m
            self._mark_g(g, ts)
        if self.v5:
            prime = bid != 0 and grp.is_v5 and bid == min(ids)
            if bid == 0 or prime:
                if self.delete_with_reg:
                    for topic in sorted(self.held.get(g, set()) - body.keys()):
                        self._drop_qd(topic, g, ts)
                changed = first or ent is None or ent.dv != dv
                clear = prime and self.eam.get(g, False)
                if changed or g in self.dirty:
                    for topic, qd in body.items():
                        if not changed:
                            current = self.topics.get(topic)
                            if current is not None and g in current:
                                continue
                        if clear:
                            qd = (qd[0], qd[1], qd[2] & ~2, qd[3])
                        self._put_qd(topic, g, qd, ts)
                    if not incremental:
                        self.dirty.discard(g)
        elif bid == 0 and (first or ent is None or (ent.dv.timestamp, ent.dv.counter) != (dv.timestamp, dv.counter)):
            for topic, qd in body.items():
                self._put_qd(topic, g, qd, ts)
        timeout = self.hb_timeout if (self.v5 and self.sends_timeout[g]) else _EXPIRY_MS_49
        new = _Live(ts, dv, conn, timeout)
        self.live[key] = new
        self._schedule(key, new)
        self.conn_owner[conn] = key
        self.last_reg[key] = ts

    def _resolve(self, key: tuple[int, int], bid: int, body: dict[str, QD], incremental: bool) -> None:
        """A registration of ``key`` that may or may not come after its live entry expired (unknown scan
        grid). The sweep goes on as if it had not expired; the group is tainted (never answered again in
        this incarnation of the NameServer) unless both ways provably end in the same state:

        * the master re-registering as id 0, with a full body equal to every QueueData of its group
          and no acting-master perm clearing (expired: removed, then registerFirst applies the same
          QueueData; not expired: nothing to apply);
        * a slave keeping its id while another member is the master (expired: removed and put back,
          no topic work either way)."""
        g, m = key
        ids = self.addrs.get(g) or {}
        own = [i for i, mm in ids.items() if mm == m]
        same = False
        if own == [bid]:
            if bid == 0:
                table = {t: self.topics[t][g] for t in self.held.get(g, ())}
                same = not incremental and table == body and not (self.v5 and self.eam.get(g, False))
            else:
                same = ids.get(0, m) != m
        if not same:
            self.tainted.add(g)

    def _unregister(self, ts: int, conn: str, g: int, m: int, bid: int) -> None:
        key = (g, m)
        self.conn_owner[conn] = key
        self._mark_g(g, ts)
        if self.v5:
            self._unregister_5(key, ts)
            return
        self.live.pop(key, None)
        self.unsure.discard(key)
        ids = self.addrs.get(g)
        if ids is not None and bid in ids:
            del ids[bid]
            if not ids:
                self._remove_group(g, ts)

    def _heartbeat(self, ts: int, conn: str, g: int, m: int, version: int | None) -> None:
        key = (g, m)
        self.conn_owner.setdefault(conn, key)
        if version is None and not self.v5:
            return  # BROKER_HEARTBEAT is not a 4.9 request
        ent = self.live.get(key)
        if ent is None:
            return
        if self._ambiguous(key, ts):
            # Expired (the request refreshes nothing, the broker is gone until it registers again) or
            # not: follow "not", and let its next registration decide whether the two ends differ.
            self.unsure.add(key)
            self._mark_g(g, ts)
        if version is not None and not self.v5:
            dv = self.p.scenario.lineages[g].versions[version].dv
            if (dv.timestamp, dv.counter) != (ent.dv.timestamp, ent.dv.counter):
                return
        self._refreshed(key, ent, ts)

    def _channel(self, ts: int, event: str, conn: str) -> None:
        if event == "CONNECT":
            return
        key = self.conn_owner.get(conn)
        if key is None:
            host = conn.partition(":")[0]
            if host in self.p.member_of_host:
                self._mark_g(self.p.member_of_host[host][0], ts)
            return
        self._mark_g(key[0], ts)
        ent = self.live.get(key)
        if ent is not None and ent.conn == conn:
            self._destroy(key, ts)

    def _admin(self, ts: int, code: int, ext_json: str) -> None:
        if code not in (205, 327, 216):
            return
        ext = orjson.loads(ext_json)
        if code == 216:
            topic = ext.get("topic", "")
            self._mark_t(topic, ts)
            cluster = ext.get("clusterName") or None
            if cluster is not None:
                for g in sorted(self.clusters.get(cluster, ())):
                    self._drop_qd(topic, g, ts)
            else:
                for g in sorted(self.topics.get(topic, {})):
                    self._drop_qd(topic, g, ts)
            return
        g = self.p.group_of_name.get(ext.get("brokerName", ""))
        if g is None:
            return
        self.perm_ops.add(g)
        self._mark_g(g, ts)
        self._set_perms(g, ts, wipe=code == 205)

    # ------------------------------------------------------------------ queries

    def _skip_reason(self, ts: int, topic: str) -> str | None:
        if self.order_enabled:
            return "order_topic_conf"
        since = ts - self.window
        if self.epoch_start >= since:
            return "namesrv_restart"
        if self.last_t.get(topic, -1 << 62) >= since:
            return "topic_transition"
        holders = self.topics.get(topic, {})
        groups = set(self.p.could_hold.get(topic, ())) | set(holders)
        world = self.p.world
        for g in sorted(groups):
            if self.last_g.get(g, -1 << 62) >= since:
                return "broker_transition"
            ids = self.addrs.get(g)
            for m in range(len(world.groups[g].members)):
                ent = self.live.get((g, m))
                if ent is not None and not ent.stuck and ent.refreshed + ent.timeout < ts + _EXPIRY_MARGIN_MS:
                    return "broker_transition"
            if g in self.tainted:
                return "unclear_history"
            grp = world.groups[g]
            if grp.is_v5 and grp.acting_master and ids is not None and 0 not in ids:
                return "acting_master_without_master"
            if not self._views_agree(g, topic, ts, ids, holders.get(g)):
                return "views_disagree"
        return None

    def _process_view(self, g: int, ts: int) -> tuple[dict[int, int], Any]:
        """The process view of group ``g``: ``{brokerId: member}`` of its processes that run, are not
        hidden from this NameServer and registered with its current incarnation, and the process whose
        table the NameServer should hold (the master, else the smallest id; None when none).

        Cached until the group's next transition: everything it depends on (process starts and ends,
        partitions, id changes, first registrations) marks one."""
        stamp = (self.last_g.get(g), self.epoch_start)
        hit = self._pv_cache.get(g)
        if hit is not None and hit[0] == stamp:
            return hit[1], hit[2]
        present: dict[int, tuple[int, Any]] = {}
        for member in self.p.world.groups[g].members:
            m = member.index
            proc = self.p.process_at(g, m, ts)
            if proc is None or any(lo <= ts < hi and self.ns in hidden for hidden, lo, hi in proc.partitions):
                continue
            if self.last_reg.get((g, m), -1) < max(proc.start_ms, self.epoch_start):
                continue
            present[proc.id_at(ts)] = (m, proc)
        ids = {bid: m for bid, (m, _p) in present.items()}
        holder = (present.get(0) or present[min(present)])[1] if present else None
        self._pv_cache[g] = (stamp, ids, holder)
        return ids, holder

    def _views_agree(self, g: int, topic: str, ts: int, ids: dict[int, int] | None, qd: QD | None) -> bool:
        """The NameServer view of group ``g`` against the process view (module docstring)."""
        if ids is not None and not ids:
            return False  # an empty BrokerData (5.x rejected registration): leave it alone
        pv_ids, holder = self._process_view(g, ts)
        if pv_ids != (ids or {}):
            return False
        if holder is None:
            return qd is None
        expected = self.p.table(g, holder.version_at(ts), False).get(topic)
        if expected is None or qd is None:
            return expected is None and qd is None
        if (qd[0], qd[1], qd[3]) != (expected[0], expected[1], expected[3]):
            return False
        return qd[2] == expected[2] or g in self.perm_ops

    def _answer(self, topic: str, legacy: bool) -> tuple[int, bytes]:
        """The response code and record tail of a route query for ``topic``. Cached until the topic or
        one of its groups changes (every change of a QueueData or a brokerAddrs marks one)."""
        holders = self.topics.get(topic)
        stamp = (self.epoch_start, self.last_t.get(topic), tuple(self.last_g.get(g) for g in holders or ()))
        hit = self._answer_cache.get((topic, legacy))
        if hit is not None and hit[0] == stamp:
            return hit[1], hit[2]
        code, tail = self._build_answer(topic, holders, legacy)
        self._answer_cache[(topic, legacy)] = (stamp, code, tail)
        return code, tail

    def _build_answer(self, topic: str, holders: dict[int, QD] | None, legacy: bool) -> tuple[int, bytes]:
        world = self.p.world
        named = sorted(holders, key=lambda g: world.groups[g].name) if holders else []
        with_data = [g for g in named if g in self.addrs]
        if not with_data:
            key: tuple[Any, ...] = ("17", self.v5, topic)
            return TOPIC_NOT_EXIST, self.p.answer_tail(
                key, lambda: b'"remark":' + orjson.dumps(not_exist_remark(topic, self.v5)) + b"}\n")
        broker_datas = []
        for g in with_data:
            grp = world.groups[g]
            addrs = tuple((bid, grp.members[m].addr) for bid, m in sorted(self.addrs[g].items()))
            broker_datas.append((grp.name, grp.cluster, addrs, self.eam.get(g, False) if self.v5 else None))
        queue_datas = [(world.groups[g].name, holders[g]) for g in named]  # type: ignore[index]
        key = ("0", legacy, tuple(broker_datas), tuple(queue_datas))

        def build() -> bytes:
            text = route_body(broker_datas, queue_datas, legacy=legacy).encode()
            if legacy:
                return b'"remark":null,"body_b64":"' + base64.b64encode(text) + b'"}\n'
            return b'"remark":null,"body":' + text + b"}\n"

        return SUCCESS, self.p.answer_tail(key, build)

    # ------------------------------------------------------------------ sweep

    def _room(self, planned: list[PlannedRecord], idx: int) -> int:
        """How many ms after the request at ``idx`` its response may come (at most 3): up to the next
        record's ``ts``, and strictly before it unless that record changes nothing (a read-only request,
        a CONNECT), so that the state at the response's ``ts`` is the state the query was answered from."""
        ts = planned[idx][0]
        if idx + 1 >= len(planned):
            return min(3, self.p.config.end_ms - 1 - ts)
        nxt_ts, _o, rtype, args = planned[idx + 1]
        inert = (rtype == REQUEST and args[0] in _READ_ONLY) or (rtype == CHANNEL and args[0] == "CONNECT")
        return min(3, nxt_ts - ts - (0 if inert else 1))

    def run(self, planned: list[PlannedRecord]) -> list[PlannedRecord]:
        p = self.p
        known = p._transitions[self.ns]
        k_idx, k_len = 0, len(known)
        out: list[PlannedRecord] = []
        append = out.append
        n = len(planned)
        queries = answered = 0
        for idx in range(n):
            rec = planned[idx]
            ts, _order, rtype, args = rec
            append(rec)
            while k_idx < k_len and known[k_idx][0] <= ts:
                kts, kind, key = known[k_idx]
                if kind == 0:
                    self._mark_g(key, kts)
                else:
                    self._mark_t(key, kts)
                k_idx += 1
            if rtype == START:
                self._reset(ts, grid_known=True)
                continue
            if self.heap and self.heap[0][0] < ts:
                self._expire_until(ts)
            if rtype == REGISTER:
                _op, conn, g, m, bid, version, incremental = args
                self._register(ts, conn, g, m, bid, version, incremental)
            elif rtype == REQUEST:
                code = args[0]
                if code != ROUTE_QUERY:
                    self._admin(ts, code, args[4])
                    continue
                queries += 1
                version, op, conn, ext_json = args[1], args[2], args[3], args[4]
                topic = orjson.loads(ext_json).get("topic", "")
                delay = self.rand.randint(1, 3)
                if p.fraction < 1.0 and self.rand.random() >= p.fraction:
                    reason: str | None = "sampled_out"
                else:
                    reason = self._skip_reason(ts, topic)
                room = self._room(planned, idx)
                if reason is None and room < 1:
                    reason = "no_room"
                if reason is not None:
                    self.stats[reason] += 1
                    continue
                legacy = version < STANDARD_JSON_MIN_VERSION
                code_out, tail = self._answer(topic, legacy)
                append((ts + min(delay, room), -1, RESPONSE, (op, conn, code_out, tail)))
                answered += 1
                p.stats.by_code[str(code_out)] += 1
                if code_out == SUCCESS:
                    p.stats.by_shape["legacy" if legacy else "json"] += 1
            elif rtype == CHANNEL:
                self._channel(ts, args[0], args[1])
            elif rtype == QUERY_DV:
                self._heartbeat(ts, args[1], args[2], args[3], args[5])
            elif rtype == HEARTBEAT:
                self._heartbeat(ts, args[1], args[2], args[3], None)
            elif rtype == UNREGISTER:
                self._unregister(ts, args[1], args[2], args[3], args[4])
            elif rtype == JUNK:
                pass
        st = p.stats
        st.queries += queries
        st.answered += answered
        st.skipped.update(self.stats)
        st.per_namesrv[self.addr] = {"route_queries": queries, "answered": answered}
        return out
