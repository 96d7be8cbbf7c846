"""Discrete-event simulation: broker processes, clients and admin tools -> per-NameServer records.

Contract of :func:`simulate` (pure, seeded):

* Brokers register with EVERY NameServer: once at start, again after ``first_register_delay_ms``, then
  every ``register_period_ms`` on a fixed-rate grid with per-round jitter (and rare GC pauses); each
  NameServer receives a round after its own network delay. forceRegister=false brokers send
  QUERY_DATA_VERSION each period and register only when some NameServer does not hold their current
  DataVersion. Acting-master 5.x brokers also heartbeat (322 or 904) every ``heartbeat_interval_ms``.
* Each (broker process, NameServer) pair has at most one open connection. It opens (CONNECT, a few ms
  before the request that needs it) at the first delivered request, and again after the NameServer
  restarted, after the NameServer closed it for 120 s of silence (IDLE then CLOSE), or when the process
  restarts. Conn ids are ``host:port@connect_ts``.
* A request to a NameServer that is down, or hidden by a partition, is lost (no record).
* A crash shows, per its outcome: CLOSE shortly after; EXCEPTION then CLOSE; IDLE then CLOSE 120 s after
  the last traffic; or nothing. A graceful shutdown sends UNREGISTER_BROKER to every NameServer, then
  CLOSE. A NameServer restart shows only its new namesrv_start (the old instance logs nothing).
* Only records with ``start_ms <= ts < end_ms`` are kept. The result is one list per NameServer, sorted in
  processing order with ``seq`` assigned (strictly increasing, never reset, including junk slots and the
  ``response`` records that the ``respond`` hook inserts right after their requests).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable

import orjson

from .brokers import BrokerProcess
from .config import GeneratorConfig
from .records import CHANNEL, HEARTBEAT, QUERY_DV, REGISTER, REQUEST, START, UNREGISTER, PlannedRecord, Record
from .scenario import Scenario
from .world import World, rng

__all__ = ["NamesrvTimeline", "Emitter", "simulate"]


class NamesrvTimeline:
    """When one NameServer is up, and which incarnation (epoch) of it runs."""

    def __init__(self, downs: list[tuple[int, int]]) -> None:
        self.downs = sorted(downs)

    def epoch(self, ts: int) -> int:
        """Incarnation number at ``ts`` (0 = the initial one), or -1 while the NameServer is down."""
        epoch = 0
        for down, up in self.downs:
            if ts < down:
                break
            if ts < up:
                return -1
            epoch += 1
        return epoch


class Emitter:
    """Collects planned records per NameServer, keeping only those inside the window."""

    def __init__(self, namesrvs: int, start_ms: int, end_ms: int) -> None:
        self.out: list[list[tuple[int, int, int, tuple[Any, ...]]]] = [[] for _ in range(namesrvs)]
        self.start_ms = start_ms
        self.end_ms = end_ms
        self._order = itertools.count()

    def emit(self, ns: int, ts: int, rtype: int, args: tuple[Any, ...]) -> None:
        """Record ``rtype`` at NameServer ``ns``, processed at ``ts`` after everything emitted before."""
        if self.start_ms <= ts < self.end_ms:
            self.out[ns].append((ts, next(self._order), rtype, args))


@dataclass
class _Link:
    conn: str | None = None
    epoch: int = -1
    last: int = 0
    #: Table version the NameServer's live entry holds for this broker (None: no entry).
    known: int | None = None
    refreshed: int = 0


class _Peer:
    """One host's connections to every NameServer (a broker process, a client or an admin tool)."""

    def __init__(self, host: str, emitter: Emitter, timelines: list[NamesrvTimeline], r: Any, idle_ms: int) -> None:
        self.host = host
        self.emitter = emitter
        self.timelines = timelines
        self.r = r
        self.idle_ms = idle_ms
        self.links = [_Link() for _ in timelines]

    def _close(self, i: int, ts: int, events: tuple[str, ...]) -> None:
        link = self.links[i]
        assert link.conn is not None
        remote = link.conn.partition("@")[0]
        for event in events:
            self.emitter.emit(i, ts, CHANNEL, (event, link.conn, remote))
        link.conn = None
        link.known = None

    def send(self, i: int, ts: int, rtype: int, make_args: Callable[[str], tuple[Any, ...]]) -> int | None:
        """Deliver a request to NameServer ``i`` at about ``ts``; returns when it was processed, None when
        the NameServer is down. Requests on one connection are processed in sending order (ts is moved
        past the connection's previous record when needed)."""
        epoch = self.timelines[i].epoch(ts)
        if epoch < 0:
            return None
        link = self.links[i]
        if link.conn is not None and link.epoch == epoch and ts <= link.last:
            ts = link.last + 1
        if link.conn is not None:
            if link.epoch != epoch:
                link.conn, link.known = None, None
            elif ts - link.last > self.idle_ms:
                idle_ts = link.last + self.idle_ms + self.r.randint(1, 30)
                if idle_ts < ts:
                    self._close(i, idle_ts, ("IDLE", "CLOSE"))
        if link.conn is None:
            connect_ts = ts - self.r.randint(1, 3)
            port = self.r.randint(32768, 60999)
            link.conn = f"{self.host}:{port}@{connect_ts}"
            link.epoch = epoch
            link.known = None
            self.emitter.emit(i, connect_ts, CHANNEL, ("CONNECT", link.conn, f"{self.host}:{port}"))
        self.emitter.emit(i, ts, rtype, make_args(link.conn))
        link.last = ts
        return ts

    def close(self, i: int, ts: int, events: tuple[str, ...] = ("CLOSE",)) -> None:
        """The connection to NameServer ``i`` ends at ``ts`` (if it is open and that NameServer still runs)."""
        link = self.links[i]
        if link.conn is not None and self.timelines[i].epoch(ts) == link.epoch:
            self._close(i, ts, events)
        else:
            link.conn, link.known = None, None

    def close_idle(self, i: int, limit_ms: int) -> None:
        """Emit the NameServer's idle close for a connection silent since its last record, if before ``limit_ms``."""
        link = self.links[i]
        if link.conn is None:
            return
        ts = link.last + self.idle_ms + self.r.randint(1, 30)
        if ts < limit_ms and self.timelines[i].epoch(ts) == link.epoch:
            self._close(i, ts, ("IDLE", "CLOSE"))


class _Context:
    def __init__(self, config: GeneratorConfig, world: World, scenario: Scenario) -> None:
        self.config = config
        self.world = world
        self.scenario = scenario
        n = len(world.namesrvs)
        downs: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        for rs in scenario.namesrv_restarts:
            downs[rs.namesrv].append((rs.down_ms, rs.up_ms))
        self.timelines = [NamesrvTimeline(d) for d in downs]
        self.emitter = Emitter(n, config.timing.start_ms, config.end_ms)
        self._delays: dict[str, list[int]] = {}

    def delays(self, host: str) -> list[int]:
        """Base one-way network delay from ``host`` to each NameServer."""
        if host not in self._delays:
            lo, hi = self.config.timing.net_delay_ms
            self._delays[host] = [rng(self.config.seed, "net", host, i).randint(lo, hi)
                                  for i in range(len(self.world.namesrvs))]
        return self._delays[host]


# ------------------------------------------------------------------------------------------ brokers

_ROUND, _INCREMENT, _ROLE, _HEARTBEAT = 0, 1, 2, 3


def _broker_actions(ctx: _Context, proc: BrokerProcess, r: Any) -> list[tuple[int, int, int, int]]:
    timing = ctx.config.timing
    group = ctx.world.groups[proc.group]
    actions: list[tuple[int, int, int, int]] = [(proc.start_ms, 0, _ROUND, 1)]
    period = max(10_000, min(timing.register_period_ms, 60_000))
    k = 0
    rand = r.random
    while True:
        scheduled = proc.start_ms + timing.first_register_delay_ms + k * period
        if scheduled >= proc.end_ms:
            break
        jitter = int(rand() * (timing.jitter_ms + 1))
        if rand() < timing.gc_pause_probability:
            jitter += r.randint(100, max(100, timing.gc_pause_max_ms))
        if scheduled + jitter < proc.end_ms:
            actions.append((scheduled + jitter, 0, _ROUND, 0))
        k += 1
    for ts, index in proc.increments:
        if proc.start_ms <= ts < proc.end_ms:
            actions.append((ts, 1, _INCREMENT, index))
    for ts in proc.role_change_registers:
        if proc.start_ms <= ts < proc.end_ms:
            actions.append((ts, 1, _ROLE, 0))
    if group.acting_master:
        hb = max(100, ctx.config.topology.heartbeat_interval_ms)
        ts = proc.start_ms + 1000
        while ts < proc.end_ms:
            actions.append((ts + int(rand() * 4), 2, _HEARTBEAT, 0))
            ts += hb
    actions.sort()
    return actions


def _simulate_process(ctx: _Context, proc: BrokerProcess) -> None:
    config, world = ctx.config, ctx.world
    group = world.groups[proc.group]
    member = group.members[proc.member]
    r = rng(config.seed, "proc", proc.group, proc.member, proc.start_ms)
    n = len(world.namesrvs)
    delays = ctx.delays(member.host)
    peer = _Peer(member.host, ctx.emitter, ctx.timelines, r, config.timing.idle_timeout_ms)
    links = peer.links
    g, m = proc.group, proc.member
    sends_timeout = group.is_v5 and (group.acting_master or config.topology.v5_always_send_heartbeat_timeout)
    live_timeout = [
        (config.topology.broker_not_active_timeout_ms if sends_timeout and world.namesrvs[i].is_v5 else 120_000)
        for i in range(n)
    ]
    chatter = 40 if proc.initial_id != 0 else 8
    opaque = r.randint(1, 500)
    rand = r.random
    partitions = proc.partitions

    def hidden(i: int, tau: int) -> bool:
        for ns_set, lo, hi in partitions:
            if lo <= tau < hi and i in ns_set:
                return True
        return False

    def expire(link: _Link, i: int, ts: int) -> None:
        if link.known is not None and ts - link.refreshed > live_timeout[i]:
            link.known = None

    def deliver(i: int, tau: int, rtype: int, tail: tuple[Any, ...]) -> int | None:
        nonlocal opaque
        op = opaque
        opaque += 1
        ts = tau + delays[i] + int(rand() * 3)
        if hidden(i, tau):
            return None
        return peer.send(i, ts, rtype, lambda conn: (op, conn) + tail)

    def register_all(tau: int, version: int, incremental: bool) -> None:
        broker_id = proc.id_at(tau)
        tail = (g, m, broker_id, version, incremental)
        for i in range(n):
            ts = deliver(i, tau, REGISTER, tail)
            if ts is not None:
                links[i].known = version
                links[i].refreshed = ts

    def query_all(tau: int, version: int) -> bool:
        """QUERY_DATA_VERSION to every NameServer; True when one of them would answer 'changed'."""
        broker_id = proc.id_at(tau)
        changed = False
        for i in range(n):
            ts = deliver(i, tau, QUERY_DV, (g, m, broker_id, version))
            if ts is None:
                continue
            link = links[i]
            expire(link, i, ts)
            if link.known != version:
                changed = True
            if link.known is not None and (world.namesrvs[i].is_v5 or link.known == version):
                link.refreshed = ts
        return changed

    def heartbeat_all(tau: int) -> None:
        broker_id = proc.id_at(tau)
        for i in range(n):
            ts = deliver(i, tau, HEARTBEAT, (g, m, broker_id))
            if ts is None:
                continue
            link = links[i]
            expire(link, i, ts)
            if link.known is not None and world.namesrvs[i].is_v5:
                link.refreshed = ts

    for tau, _prio, kind, extra in _broker_actions(ctx, proc, r):
        opaque += int(rand() * (chatter + 1))
        if kind == _ROUND:
            version = proc.version_at(tau)
            if extra == 1 or group.force_register:
                register_all(tau, version, False)
            elif query_all(tau, version):
                register_all(tau + r.randint(3, 12), version, False)
        elif kind == _INCREMENT:
            register_all(tau, extra, True)
        elif kind == _ROLE:
            register_all(tau, proc.version_at(tau), False)
        else:
            if group.heartbeat_code == 904:
                heartbeat_all(tau)
            else:
                query_all(tau, proc.version_at(tau))

    end = proc.end_ms
    if proc.end_reason == "shutdown":
        broker_id = proc.id_at(end - 1)
        arrivals = [deliver(i, end, UNREGISTER, (g, m, broker_id)) for i in range(n)]
        for i in range(n):
            base = arrivals[i] if arrivals[i] is not None else end + delays[i]
            peer.close(i, base + r.randint(2, 30))
    elif proc.end_reason == "crash":
        for i in range(n):
            outcome = proc.crash_outcome or "silent"
            if hidden(i, end):
                outcome = "idle"
            if outcome in ("close", "exception"):
                events = ("EXCEPTION", "CLOSE") if outcome == "exception" else ("CLOSE",)
                peer.close(i, end + delays[i] + r.randint(0, 3), events)
            elif outcome == "idle":
                peer.close_idle(i, config.end_ms)
    else:
        for i in range(n):
            peer.close_idle(i, config.end_ms)


# ------------------------------------------------------------------------------------------ clients


def _json(obj: Any) -> str:
    return orjson.dumps(obj).decode()


def _simulate_client(ctx: _Context, index: int) -> None:
    config, world = ctx.config, ctx.world
    traffic = config.traffic
    r = rng(config.seed, "client", index)
    host = f"10.0.{20 + index // 200}.{10 + index % 200}"
    versions = sorted(traffic.client_versions, key=int)
    version = int(r.choices(versions, [traffic.client_versions[v] for v in versions])[0])
    names = [t.config.topic_name for t in world.topics] or ["TBW102"]
    topics = r.sample(names, min(traffic.topics_per_client, len(names)))
    acl = version == 63 and r.random() < 0.5
    access_key = f"LTAI{r.getrandbits(64):016x}"
    n = len(world.namesrvs)
    ns = r.randrange(n)
    delays = ctx.delays(host)
    peer = _Peer(host, ctx.emitter, ctx.timelines, r, config.timing.idle_timeout_ms)
    opaque = r.randint(1, 100)
    tau = config.timing.start_ms + r.randint(40_000, 90_000)
    while tau < config.end_ms:
        for j, topic in enumerate(topics):
            if r.random() < traffic.unknown_topic_query_fraction:
                topic = f"{topic}-missing"
            ext: dict[str, str] = {"topic": topic}
            if acl:
                ext = {"AccessKey": access_key, "OnsChannel": "ALIYUN",
                       "Signature": f"{r.getrandbits(160):040x}", "topic": topic}
            ext_json = _json(ext)
            op = opaque
            opaque += 1
            ts = tau + j * 2 + r.randint(0, 1) + delays[ns]
            if peer.send(ns, ts, REQUEST, lambda conn: (105, version, op, conn, ext_json, None)) is None:
                ns = (ns + 1) % n  # fail over to the next NameServer for the next request
        tau += config.timing.client_poll_ms + r.randint(0, 20)
    for i in range(n):
        peer.close_idle(i, config.end_ms)


def _simulate_dashboard(ctx: _Context, index: int) -> None:
    config = ctx.config
    r = rng(config.seed, "dashboard", index)
    host = f"10.0.8.{10 + index}"
    n = len(ctx.world.namesrvs)
    ns = index % n
    delays = ctx.delays(host)
    peer = _Peer(host, ctx.emitter, ctx.timelines, r, config.timing.idle_timeout_ms)
    version = r.choice((401, 475))
    opaque = r.randint(1, 100)
    tau = config.timing.start_ms + r.randint(60_000, 120_000)
    poll = max(1000, config.traffic.dashboard_poll_ms)
    while tau < config.end_ms:
        for k, code in enumerate((106, 206)):
            op = opaque
            opaque += 1
            ts = tau + delays[ns] + 4 * k + r.randint(0, 3)
            if peer.send(ns, ts, REQUEST, lambda conn: (code, version, op, conn, "{}", None)) is None:
                ns = (ns + 1) % n
        tau += poll + r.randint(0, 50)
    for i in range(n):
        peer.close_idle(i, config.end_ms)


# ------------------------------------------------------------------------------------------ admin


class _AdminTool:
    """One mqadmin invocation: fresh JVM (opaques from 0), a connection per NameServer, closed at exit."""

    def __init__(self, ctx: _Context, key: str, ts: int, version: int) -> None:
        self.r = rng(ctx.config.seed, "admin", key, ts)
        self.host = f"10.0.9.{10 + self.r.randint(0, 40)}"
        self.ctx = ctx
        self.version = version
        self.opaque = self.r.randint(0, 3)
        self.delays = ctx.delays(self.host)
        self.peer = _Peer(self.host, ctx.emitter, ctx.timelines, self.r, ctx.config.timing.idle_timeout_ms)
        self.last = ts

    def request(self, i: int, ts: int, code: int, ext: dict[str, str]) -> None:
        op = self.opaque
        self.opaque += 1
        ext_json = _json(ext)
        at = self.peer.send(i, ts + self.delays[i], REQUEST, lambda conn: (code, self.version, op, conn, ext_json, None))
        self.last = max(self.last, at if at is not None else ts)

    def exit(self) -> None:
        ts = self.last + self.r.randint(30, 250)
        for i in range(len(self.ctx.world.namesrvs)):
            self.peer.close(i, ts)


def _simulate_admin(ctx: _Context) -> None:
    world, sc = ctx.world, ctx.scenario
    n = len(world.namesrvs)
    for tc in sc.topic_changes:
        tool = _AdminTool(ctx, f"topic-{tc.kind}-{tc.topic.topic_name}", tc.ts, tc.admin_version)
        tool.request(tc.admin_namesrv, tc.ts, 106, {})
        if tc.kind == "delete":
            ext = {"topic": tc.topic.topic_name}
            if tc.with_cluster:
                ext["clusterName"] = tc.cluster
            for i in range(n):
                tool.request(i, tc.ts + 300 + 25 * i, 216, ext)
        else:
            tool.last = tc.ts + 200 + 20 * len(tc.groups)
        tool.exit()
    for pw in sc.perm_wipes:
        name = world.groups[pw.group].name
        for code, ts in ((205, pw.wipe_ms), (327, pw.add_ms)):
            tool = _AdminTool(ctx, f"perm-{code}-{name}", ts, pw.admin_version)
            for i in range(n):
                tool.request(i, ts + 20 * i, code, {"brokerName": name})
            tool.exit()
    for kv in sc.kv_changes:
        tool = _AdminTool(ctx, f"kv-{kv.kind}-{kv.topic}", kv.ts, kv.admin_version)
        for i in range(n):
            if kv.kind == "put":
                tool.request(i, kv.ts + 20 * i, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": kv.topic,
                                                       "value": kv.value})
            else:
                tool.request(i, kv.ts + 20 * i, 102, {"namespace": "ORDER_TOPIC_CONFIG", "key": kv.topic})
        tool.exit()


# ------------------------------------------------------------------------------------------ entry


def simulate(
    config: GeneratorConfig,
    world: World,
    scenario: Scenario,
    extra: Callable[[Emitter, list[NamesrvTimeline]], None] | None = None,
    respond: Callable[[int, list[PlannedRecord]], list[PlannedRecord]] | None = None,
) -> list[list[Record]]:
    """Run the simulation; ``extra`` may emit more records (junk) before sequencing; ``respond`` gets each
    NameServer's records in processing order and returns them with response records inserted (each right
    after its request, so it takes the next ``seq``)."""
    ctx = _Context(config, world, scenario)
    for ns in world.namesrvs:
        if ns.has_initial_start_record:
            ctx.emitter.emit(ns.index, config.timing.start_ms, START, ())
    for rs in scenario.namesrv_restarts:
        ctx.emitter.emit(rs.namesrv, rs.up_ms, START, ())
    for proc in scenario.all_processes():
        _simulate_process(ctx, proc)
    for c in range(config.traffic.clients):
        _simulate_client(ctx, c)
    for d in range(config.traffic.dashboards):
        _simulate_dashboard(ctx, d)
    _simulate_admin(ctx)
    if extra is not None:
        extra(ctx.emitter, ctx.timelines)
    result: list[list[Record]] = []
    for i, planned in enumerate(ctx.emitter.out):
        planned.sort(key=lambda p: (p[0], p[1]))
        if respond is not None:
            planned = respond(i, planned)
        seq0 = rng(config.seed, "seq", i).randint(1, 1_000_000)
        result.append([(i, ts, seq0 + k, rtype, args) for k, (ts, _order, rtype, args) in enumerate(planned)])
        ctx.emitter.out[i] = []
    return result
