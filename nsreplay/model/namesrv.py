"""One NameServer: its five route tables and how each captured record changes them.

This module is the semantics spec (``nameserver-semantics.md``) §2-§6 written as code. A
:class:`NameServer` is created for one semantics profile (``"rocketmq-4.9"`` or ``"rocketmq-5"``),
then fed the NameServer's records one by one, in processing order, with :meth:`NameServer.apply`,
and scanned at every tick of its scan grid with :meth:`NameServer.scan`. :meth:`NameServer.snapshot`
gives the immutable canonical state (see :mod:`nsreplay.model.tables`).

Rules of thumb the code follows everywhere:

* A request the real NameServer rejects before touching the tables (missing or malformed header,
  CRC mismatch, undecodable body) is answered ``SYSTEM_ERROR`` and changes nothing.
* Where a rule takes "the first" entry of a table, the table is a :class:`JavaMap`, which iterates
  in the real Java map's order.
* Each mutation goes through one small ``_table_...`` method that records whether anything really
  changed, so :class:`Outcome` ``.changed`` is exact and snapshots are rebuilt incrementally.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Mapping, NamedTuple, TypeVar

from nsreplay.model.javamap import JavaMap, java_string_hash
from nsreplay.model.requests import (
    BodyCache,
    Registration,
    RegisterHeader,
    Rejected,
    Request,
    header,
    long_header,
    queue_data_from_json,
    registration,
)
from nsreplay.model.tables import (
    PROFILE_49,
    PROFILE_5,
    PROFILES,
    BrokerData,
    BrokerLiveInfo,
    Cause,
    DataVersion,
    FrozenDict,
    LiveKey,
    NamesrvConfig,
    Outcome,
    Profile,
    QueueData,
    Removal,
    ResponseCode,
    Snapshot,
)
from nsreplay.protocol.java_numbers import wrap_long
from nsreplay.protocol.register_body import BodyDecodeError, RegisterBody, TopicConfig, decode_data_version

__all__ = [
    "NameServer",
    "RequestCode",
    "MASTER_ID",
    "BROKER_CHANNEL_EXPIRED_TIME",
    "ORDER_TOPIC_CONFIG",
    "PERM_READ",
    "PERM_WRITE",
    "profile_for_version",
    "check_profile",
]

MASTER_ID = 0
BROKER_CHANNEL_EXPIRED_TIME = 120_000  # ms; 4.9 fixed, 5.x default heartbeatTimeoutMillis
PERM_WRITE = 2
PERM_READ = 4
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # KV namespace feeding orderTopicConf
DESTROYING_EVENTS = frozenset({"CLOSE", "IDLE", "EXCEPTION"})


def _deadline(info: BrokerLiveInfo) -> int:
    """``lastUpdateTimestamp + heartbeatTimeoutMillis`` as the scan computes it: a sum of two Java
    ``long`` values, which wraps around past ``Long.MAX_VALUE``. So a 5.x broker that sends a timeout
    near ``Long.MAX_VALUE`` (meaning "never") gets a negative deadline and expires at the first scan
    tick after it registers, as it does in the NameServer."""
    return wrap_long(info.lastUpdateTimestamp + info.heartbeatTimeoutMillis)


class RequestCode:
    """Request codes the model knows (semantics spec §2-§7)."""

    PUT_KV_CONFIG = 100
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_TOPIC_IN_NAMESRV = 216
    REGISTER_TOPIC_IN_NAMESRV = 217
    QUERY_DATA_VERSION = 322
    ADD_WRITE_PERM_OF_BROKER = 327
    BROKER_HEARTBEAT = 904


_V = TypeVar("_V")

# Table flavour and initial table sizes per profile (spec §1): addrs, clusters, live.
_TABLE_LAYOUT: dict[str, tuple[str, int, int, int]] = {
    PROFILE_49: ("HashMap", 128, 32, 256),
    PROFILE_5: ("ConcurrentHashMap", 256, 64, 512),
}


def check_profile(profile: str) -> Profile:
    """Return ``profile`` if it is a known semantics profile, else raise ValueError."""
    if profile not in PROFILES:
        raise ValueError(f"unknown semantics profile {profile!r} (expected one of {PROFILES})")
    return profile  # type: ignore[return-value]


def profile_for_version(rocketmq_version: str) -> Profile:
    """The profile of a start record's ``rocketmq_version``: "4.x" -> rocketmq-4.9, "5.x" -> rocketmq-5."""
    major = str(rocketmq_version).strip().split(".", 1)[0]
    if major == "4":
        return PROFILE_49
    if major == "5":
        return PROFILE_5
    raise ValueError(f"unsupported rocketmq_version {rocketmq_version!r}")


def _live_key_hash(key: LiveKey) -> int:
    """Java hashCode of a live-table key: the address (4.9) or ``cluster + "_" + addr`` (5.x)."""
    if isinstance(key, tuple):
        return java_string_hash(f"{key[0]}_{key[1]}")
    return java_string_hash(key)


class _Reply(NamedTuple):
    code: int = ResponseCode.SUCCESS
    remark: str | None = None
    removals: tuple[Removal, ...] = ()


def _restart_removal(ts: int, key: LiveKey) -> Removal:
    """The removal a restart reports for one live entry (every table is emptied)."""
    cluster, addr = key if isinstance(key, tuple) else (None, key)
    return Removal(ts, "namesrv_restart", cluster, addr, None, (), False, True)


def _queue_data(broker_name: str, config: TopicConfig, *, wipe_write: bool = False) -> QueueData:
    """The QueueData a broker's TopicConfig produces (write bit cleared for an acting master)."""
    perm = config.perm & ~PERM_WRITE if wipe_write else config.perm
    return QueueData(broker_name, config.read_queue_nums, config.write_queue_nums, perm, config.topic_sys_flag)


# ------------------------------------------------------------------------------------ NameServer


@dataclass
class _Group:
    """A mutable BrokerData (the model's working copy; snapshots hold :class:`BrokerData`)."""

    cluster: str
    brokerName: str
    brokerAddrs: dict[int, str]
    enableActingMaster: bool = False
    zoneName: str | None = None

    def frozen(self) -> BrokerData:
        return BrokerData(
            self.cluster, self.brokerName, FrozenDict(self.brokerAddrs), self.enableActingMaster, self.zoneName
        )


class NameServer:
    """The route tables of one NameServer and the rules that change them (spec §2-§6).

    ``NameServer(profile, config, start_ts)``: ``profile`` is ``"rocketmq-4.9"`` or ``"rocketmq-5"``,
    ``config`` the NameServer settings (see :class:`NamesrvConfig`), ``start_ts`` its start time (the
    origin of the scan-tick grid). The orderTopicConf KV store is the only state that survives
    :meth:`restart`.
    """

    def __init__(self, profile: str, config: Mapping[str, object] | None = None, start_ts: int = 0) -> None:
        self._order_topic_conf: dict[str, str] = {}
        self._bodies = BodyCache()
        self._version = 0
        self._start(start_ts, profile, config)

    # ---------------------------------------------------------------------------- public API

    @property
    def profile(self) -> Profile:
        return self._profile

    @property
    def config(self) -> NamesrvConfig:
        return self._config

    @property
    def start_ts(self) -> int:
        return self._start_ts

    @property
    def version(self) -> int:
        """Counts real changes to the tables (and orderTopicConf); equal versions = equal state."""
        return self._version

    @property
    def first_tick(self) -> int:
        """The first scan tick: S + 5 s (4.9) or S + 5 ms (5.x)."""
        return self._start_ts + (5_000 if self._profile == PROFILE_49 else 5)

    @property
    def tick_interval(self) -> int:
        """Scan period: 10 s (4.9) or scanNotActiveBrokerInterval read at start (5.x)."""
        return 10_000 if self._profile == PROFILE_49 else self._config.scanNotActiveBrokerInterval

    def ticks(self, until: int) -> Iterable[int]:
        """The scan-tick grid from :attr:`first_tick` up to ``until`` (inclusive)."""
        return range(self.first_tick, until + 1, self.tick_interval)

    def apply(self, record: Mapping[str, Any], *, body_id: str | None = None, decoded_body: RegisterBody | None = None) -> Outcome:
        """Apply one capture record (``request``, ``channel``; ``namesrv_start`` restarts; ``response``
        is ignored) and report what happened. Raises ValueError for a record of an unknown kind.

        ``body_id``, when the caller has one, is a content id of the record's body: equal ids promise
        equal bodies (the ingest's ``body_id`` does), so a resent body is recognised without being
        compared. It changes nothing else.

        ``decoded_body`` (with a ``body_id``): the record's REGISTER_BROKER body as
        :mod:`nsreplay.protocol.register_body` decodes it from the captured bytes (or JSON) and the
        record's version, its CRC already checked against the header, as the ingest does. The record
        then needs neither ``body`` nor ``body_b64``; given them, it is this body that counts.

        The returned :class:`Outcome`'s ``changed`` is true exactly when the five route tables or
        orderTopicConf differ from what they were before the record (what :attr:`version` counts):
        a snapshot's ``profile`` and ``config`` are not part of it. So a ``namesrv_start`` that finds
        every route table empty reports ``changed=False`` even when it switches the profile (4.9 <->
        5.x), the config or the tick grid; compare snapshots to see that (``TickState.changed`` does)."""
        kind = record.get("kind")
        if kind == "request":
            req = Request.from_record(record)
            if decoded_body is not None:
                if body_id is None:
                    raise ValueError("a decoded body needs its body_id")
                return self._apply_request(req._replace(body_id=body_id, decoded_body=decoded_body))
            return self._apply_request(req if body_id is None else req._replace(body_id=body_id))
        if kind == "channel":
            event = record.get("event")
            cause: Cause = "channel_closed" if event in DESTROYING_EVENTS else "none"
            return self._outcome(cause, self._channel_event, int(record["ts"]), event, record.get("conn"))
        if kind == "namesrv_start":
            version = record.get("rocketmq_version")
            profile = self._profile if version is None else profile_for_version(str(version))
            return self.restart(int(record["ts"]), profile, record.get("config") or {})
        if kind == "response":
            return Outcome(ResponseCode.SUCCESS, None, False, "none")
        raise ValueError(f"unknown record kind {kind!r}")

    def scan(self, tick_ts: int) -> list[Removal]:
        """The scan at tick ``tick_ts`` (spec §4): every live entry with ``last + timeout < tick_ts``
        is removed like an unregister of its address, in live-table (Java) order. The sum is Java's
        ``long`` addition (:func:`_deadline`)."""
        if not any(_deadline(i) < tick_ts for i in self._live.unordered_values()):
            return []  # nothing expires: the usual tick, decided without walking the map in Java order
        removals = []
        for key in list(self._live):
            info = self._live.get(key)
            if info is not None and _deadline(info) < tick_ts:
                removal = self._destroy(tick_ts, "expired", key)
                if removal is not None:
                    removals.append(removal)
        return removals

    def expiry_horizon(self) -> int | None:
        """The smallest ``last + timeout`` of the live entries (None without any): a scan at a tick
        not after it removes nothing and changes nothing, so a caller may skip such ticks."""
        return min((_deadline(i) for i in self._live.unordered_values()), default=None)

    def restart(self, ts: int, profile: str, config: Mapping[str, object] | None = None) -> Outcome:
        """A (re)start at ``ts`` (spec §4): every route table empty, tick grid from ``ts``, KV kept.
        ``changed`` is whether a route table held anything (see :meth:`apply`), whatever the profile."""
        removals = tuple(_restart_removal(ts, key) for key in self._live)
        had_state = bool(self._topics or self._addrs or self._clusters or self._live or self._filters)
        self._start(ts, profile, config)
        if had_state:
            self._version += 1
        return Outcome(ResponseCode.SUCCESS, None, had_state, "namesrv_restart", removals)

    def snapshot(self) -> Snapshot:
        """The current state in canonical form (cheap when little changed since the last call)."""
        if self._snapshot is not None and self._snapshot_version == self._version:
            return self._snapshot
        base = self._snapshot
        self._snapshot = Snapshot(
            profile=self._profile,
            topicQueueTable=self._frozen_topics(base),
            brokerAddrTable=self._frozen_groups(base),
            clusterAddrTable=self._table_or(base, "clusterAddrTable", lambda: FrozenDict({c: frozenset(n) for c, n in self._clusters.ordered_items()})),
            brokerLiveTable=self._table_or(base, "brokerLiveTable", lambda: FrozenDict(self._live.ordered_items())),
            filterServerTable=self._table_or(base, "filterServerTable", lambda: FrozenDict(self._filters)),
            orderTopicConf=self._table_or(base, "orderTopicConf", lambda: FrozenDict(self._order_topic_conf)),
            config=self._config,
        )
        self._snapshot_version = self._version
        self._dirty_topics.clear()
        self._dirty_groups.clear()
        self._dirty_tables.clear()
        return self._snapshot

    def changed_topics_since(self, snapshot: Snapshot) -> frozenset[str] | None:
        """The topics whose QueueData may differ between ``snapshot`` and the next :meth:`snapshot`,
        when ``snapshot`` is the last one this NameServer handed out; None otherwise (then any
        topic may differ). Lets a caller diff two snapshots without visiting every topic."""
        if snapshot is not self._snapshot:
            return None
        return frozenset(self._dirty_topics)

    def live_key(self, cluster: str, addr: str) -> LiveKey:
        """The live/filter table key of a broker address in this profile."""
        return addr if self._profile == PROFILE_49 else (cluster, addr)

    # ---------------------------------------------------------------------------- dispatch

    def _start(self, ts: int, profile: str, config: Mapping[str, object] | None) -> None:
        self._profile = check_profile(profile)
        self._config = NamesrvConfig.from_mapping(config)
        self._start_ts = ts
        flavour, addrs_size, clusters_size, live_size = _TABLE_LAYOUT[self._profile]
        self._topics: dict[str, dict[str, QueueData]] = {}
        self._topics_by_broker: dict[str, set[str]] = {}  # index: brokerName -> topics holding its QueueData
        self._addrs: JavaMap[str, _Group] = JavaMap(flavour, addrs_size, java_string_hash)  # type: ignore[arg-type]
        self._clusters: JavaMap[str, set[str]] = JavaMap(flavour, clusters_size, java_string_hash)  # type: ignore[arg-type]
        self._live: JavaMap[LiveKey, BrokerLiveInfo] = JavaMap(flavour, live_size, _live_key_hash)  # type: ignore[arg-type]
        self._filters: dict[LiveKey, tuple[str, ...]] = {}
        self._snapshot: Snapshot | None = None
        self._snapshot_version = -1
        self._dirty_topics: set[str] = set()
        self._dirty_groups: set[str] = set()
        self._dirty_tables: set[str] = set()  # the other tables changed since the last snapshot
        self._handlers = self._handlers_for_profile()

    def _apply_request(self, req: Request) -> Outcome:
        handler, cause = self._handlers.get(req.code, (None, "none"))
        if handler is not None:
            return self._outcome(cause, handler, req)
        if req.code in _READ_ONLY_CODES:
            return Outcome(ResponseCode.SUCCESS, None, False, "none")
        remark = f"request type {req.code} not supported"
        return Outcome(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark, False, "none")

    def _handlers_for_profile(self) -> dict[int, tuple[Callable[[Request], _Reply], Cause]]:
        """Request code -> (handler, cause) for the codes that can change a table in this profile."""
        handlers: dict[int, tuple[Callable[[Request], _Reply], Cause]] = {
            RequestCode.REGISTER_BROKER: (self._register_broker, "registered"),
            RequestCode.UNREGISTER_BROKER: (self._unregister_broker, "unregistered"),
            RequestCode.QUERY_DATA_VERSION: (self._query_data_version, "heartbeat"),
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: (self._wipe_write_perm, "admin"),
            RequestCode.ADD_WRITE_PERM_OF_BROKER: (self._add_write_perm, "admin"),
            RequestCode.DELETE_TOPIC_IN_NAMESRV: (self._delete_topic, "admin"),
            RequestCode.PUT_KV_CONFIG: (self._put_kv_config, "admin"),
            RequestCode.DELETE_KV_CONFIG: (self._delete_kv_config, "admin"),
        }
        if self._profile == PROFILE_5:
            handlers[RequestCode.BROKER_HEARTBEAT] = (self._broker_heartbeat, "heartbeat")
            handlers[RequestCode.REGISTER_TOPIC_IN_NAMESRV] = (self._register_topic, "admin")
        return handlers

    def _outcome(self, cause: Cause, handler: Callable[..., _Reply], *args: Any) -> Outcome:
        """Run a handler; a rejection is SYSTEM_ERROR with nothing changed."""
        before = self._version
        try:
            reply = handler(*args)
        except Rejected as exc:
            if self._version != before:  # pragma: no cover - a handler must validate before mutating
                raise AssertionError("a rejected request changed the tables") from exc
            return Outcome(ResponseCode.SYSTEM_ERROR, str(exc), False, cause)
        return Outcome(reply.code, reply.remark, self._version != before, cause, reply.removals)

    # ---------------------------------------------------------------------------- REGISTER_BROKER (103)

    def _register_broker(self, req: Request) -> _Reply:
        """Spec §2: header, CRC and body first (a rejection changes nothing), then the profile's steps."""
        hdr = RegisterHeader.parse(req.ext, self._profile)
        reg = registration(self._bodies.decode(req, hdr), req, hdr, self._profile)
        if self._profile == PROFILE_49:
            return self._register_broker_49(req, hdr, reg)
        return self._register_broker_5(req, hdr, reg)

    def _register_broker_49(self, req: Request, hdr: RegisterHeader, reg: Registration) -> _Reply:
        """Spec §2 "4.9, in order", steps 1-7 (step 8 is only in the reply)."""
        name, addr, broker_id = hdr.brokerName, hdr.brokerAddr, hdr.brokerId
        self._table_add_to_cluster(hdr.clusterName, name)  # 1
        group, register_first = self._table_get_or_create_group(hdr.clusterName, name)  # 2
        self._table_remove_ids(group, self._ids_holding(group, addr, other_than=broker_id))  # 3
        previous = self._table_put_broker_addr(group, broker_id, addr)  # 4
        register_first = register_first or previous is None
        if broker_id == MASTER_ID:  # 5
            if register_first or self._broker_dv_changed(addr, reg.dataVersion):
                for config in reg.topics:
                    self._table_put_queue_data(config.topic_name, _queue_data(name, config))
        live = BrokerLiveInfo(req.ts, BROKER_CHANNEL_EXPIRED_TIME, reg.dataVersion, req.conn, hdr.haServerAddr)
        self._table_put_live(addr, live)  # 6
        self._update_filter_servers(addr, reg.filterServers)  # 7
        return _Reply()

    def _register_broker_5(self, req: Request, hdr: RegisterHeader, reg: Registration) -> _Reply:
        """Spec §2 "5.x, in order", steps 1-9 (step 10 is only in the reply)."""
        cluster, name, addr, broker_id = hdr.clusterName, hdr.brokerName, hdr.brokerAddr, hdr.brokerId
        key = (cluster, addr)
        self._table_add_to_cluster(cluster, name)  # 1
        group, register_first = self._table_get_or_create_group(cluster, name)
        self._table_set_group_flags(group, hdr.enableActingMaster is True, hdr.zoneName)
        self._table_remove_ids(group, self._ids_holding(group, addr, other_than=broker_id))  # 3 (2 is notify-only)
        if self._loses_state_version_conflict(group, hdr, reg):  # 4
            self._table_remove_live(key)
            return _Reply()
        if broker_id not in group.brokerAddrs and len(reg.topicKeys) == 1:  # 5
            return _Reply(ResponseCode.SYSTEM_ERROR, "register broker failed")
        previous = self._table_put_broker_addr(group, broker_id, addr)  # 6
        register_first = register_first or not previous
        is_master = broker_id == MASTER_ID
        is_prime_slave = (
            hdr.enableActingMaster is not None and not is_master and broker_id == min(group.brokerAddrs)
        )
        if is_master or is_prime_slave:  # 7
            if self._config.deleteTopicWithBrokerRegistration and not reg.staticMappings:
                self._remove_unlisted_topics(name, reg.topicKeys)  # 7a
            dv_changed = self._broker_dv_changed(key, reg.dataVersion)
            wipe_write = is_prime_slave and group.enableActingMaster
            for config in self._candidate_topics(reg, name, register_first or dv_changed):  # 7b
                if register_first or dv_changed or not self._has_queue_data(config.topic_name, name):
                    qd = _queue_data(name, config, wipe_write=wipe_write)
                    self._table_put_queue_data(config.topic_name, qd)
        timeout = BROKER_CHANNEL_EXPIRED_TIME if hdr.heartbeatTimeoutMillis is None else hdr.heartbeatTimeoutMillis
        self._table_put_live(key, BrokerLiveInfo(req.ts, timeout, reg.dataVersion, req.conn, hdr.haServerAddr))  # 8
        self._update_filter_servers(key, reg.filterServers)  # 9
        return _Reply()

    def _loses_state_version_conflict(self, group: _Group, hdr: RegisterHeader, reg: Registration) -> bool:
        """5.x step 4: the id holds another address whose live entry has a larger stateVersion."""
        old_addr = group.brokerAddrs.get(hdr.brokerId)
        if old_addr is None or old_addr == hdr.brokerAddr:
            return False
        old_live = self._live.get((hdr.clusterName, old_addr))
        return old_live is not None and old_live.dataVersion.stateVersion > reg.dataVersion.stateVersion

    def _broker_dv_changed(self, key: LiveKey, dv: DataVersion) -> bool:
        """``isBrokerTopicConfigChanged``: no live entry, or its dv differs from ``dv``."""
        live = self._live.get(key)
        return live is None or not live.dataVersion.same_as(dv, self._profile)

    def _has_queue_data(self, topic: str, broker_name: str) -> bool:
        return topic in self._topics_by_broker.get(broker_name, ())

    def _topics_of(self, broker_name: str) -> list[str]:
        """The topics holding a QueueData of ``broker_name`` (a copy: safe to change the tables)."""
        return list(self._topics_by_broker.get(broker_name, ()))

    def _candidate_topics(self, reg: Registration, broker_name: str, all_topics: bool) -> tuple[TopicConfig, ...]:
        """5.x step 7b shortcut: without registerFirst or a dv change, nothing is applied when every
        topic of the body already has this brokerName's QueueData (the common periodic case)."""
        if all_topics or not reg.topicNames <= self._topics_by_broker.get(broker_name, set()):
            return reg.topics
        return ()

    def _remove_unlisted_topics(self, broker_name: str, listed: frozenset[str]) -> None:
        """5.x step 7a: drop this brokerName's QueueData from every topic not among the keys of the
        body's topicConfigTable (``listed``)."""
        for topic in self._topics_of(broker_name):
            if topic not in listed:
                self._table_remove_queue_data(topic, broker_name)

    def _update_filter_servers(self, key: LiveKey, filters: tuple[str, ...] | None) -> None:
        """4.9 step 7 / 5.x step 9: empty list removes, non-empty stores, ``None`` leaves untouched."""
        if filters is None:
            return
        if filters:
            self._table_put_filters(key, filters)
        else:
            self._table_remove_filters(key)

    # ---------------------------------------------------------------------------- UNREGISTER and removal paths

    def _unregister_broker(self, req: Request) -> _Reply:
        """UNREGISTER_BROKER (104): spec §5, by id (4.9) or by address (5.x)."""
        cluster = header(req.ext, "clusterName")
        addr = header(req.ext, "brokerAddr")
        name = header(req.ext, "brokerName")
        broker_id = long_header(req.ext, "brokerId")
        if self._profile == PROFILE_49:
            removal = self._unregister_by_id_49(req.ts, "unregistered", cluster, addr, name, broker_id)
        else:
            removal = self._unregister_5(req.ts, "unregistered", cluster, addr, name)
        return _Reply(removals=(removal,))

    def _destroy(self, ts: int, cause: Cause, key: LiveKey) -> Removal | None:
        """Expiry and channel destroy of one live entry (spec §5); ``None`` when nothing was removed."""
        if isinstance(key, tuple):
            return self._destroy_5(ts, cause, key)
        return self._destroy_by_address_49(ts, cause, key)

    def _unregister_by_id_49(self, ts: int, cause: Cause, cluster: str, addr: str, name: str, broker_id: int
                             ) -> Removal:
        """Spec §5 "4.9 unregister": live/filters by address, the BrokerData entry by id."""
        live_removed = self._table_remove_live(addr)  # 1
        self._table_remove_filters(addr)
        group = self._addrs.get(name)
        removed_ids: tuple[int, ...] = ()
        group_removed = False
        if group is not None:
            if broker_id in group.brokerAddrs:  # 2
                removed_ids = (broker_id,)
                self._table_remove_ids(group, removed_ids)
            if not group.brokerAddrs:  # 3
                self._remove_empty_group(name, lambda: self._table_remove_from_cluster(cluster, name))
                group_removed = True
        return Removal(ts, cause, cluster, addr, None if group is None else name, removed_ids, group_removed,
                       live_removed)

    def _destroy_by_address_49(self, ts: int, cause: Cause, addr: str) -> Removal:
        """Spec §5 "4.9 expiry / channel destroy": the first BrokerData holding the address loses it."""
        live_removed = self._table_remove_live(addr)  # 1
        self._table_remove_filters(addr)
        for name, group in self._addrs.items():  # 2: Java order
            ids = self._ids_holding(group, addr)
            if not ids:
                continue
            self._table_remove_ids(group, ids[:1])
            group_removed = not group.brokerAddrs
            if group_removed:
                self._remove_empty_group(name, lambda: self._table_remove_from_first_cluster(name))
            return Removal(ts, cause, group.cluster, addr, name, ids[:1], group_removed, live_removed)
        return Removal(ts, cause, None, addr, None, (), False, live_removed)

    def _destroy_5(self, ts: int, cause: Cause, key: tuple[str, str]) -> Removal | None:
        """Spec §4/§5 5.x: find the first BrokerData of the cluster holding the address, then
        unregister it; if there is none, nothing is removed and the live entry stays."""
        cluster, addr = key
        for name, group in self._addrs.items():  # Java order
            if group.cluster == cluster and self._ids_holding(group, addr):
                return self._unregister_5(ts, cause, cluster, addr, name)
        return None

    def _unregister_5(self, ts: int, cause: Cause, cluster: str, addr: str, name: str) -> Removal:
        """Spec §5 "5.x unregister, expiry and channel destroy" steps 1-4."""
        live_removed = self._table_remove_live((cluster, addr))  # 1
        self._table_remove_filters((cluster, addr))
        group = self._addrs.get(name)
        removed_ids: tuple[int, ...] = ()
        group_removed = False
        if group is not None:
            removed_ids = self._ids_holding(group, addr)  # 2
            self._table_remove_ids(group, removed_ids)
            if not group.brokerAddrs:  # 3
                self._remove_empty_group(name, lambda: self._table_remove_from_cluster(cluster, name))
                group_removed = True
            elif group.enableActingMaster and min(group.brokerAddrs) > MASTER_ID:  # 4: no master left
                self._wipe_write_perm_of(name)
        return Removal(ts, cause, cluster, addr, None if group is None else name, removed_ids, group_removed,
                       live_removed)

    def _remove_empty_group(self, name: str, remove_from_clusters: Callable[[], None]) -> None:
        """A group left empty: drop its BrokerData, its cluster membership and its QueueData."""
        self._table_remove_group(name)
        remove_from_clusters()
        for topic in self._topics_of(name):
            self._table_remove_queue_data(topic, name)

    @staticmethod
    def _ids_holding(group: _Group, addr: str, other_than: int | None = None) -> tuple[int, ...]:
        """Ids of ``group`` whose address is ``addr`` (optionally except one id)."""
        return tuple(i for i, a in group.brokerAddrs.items() if a == addr and i != other_than)

    # ---------------------------------------------------------------------------- channel events

    def _channel_event(self, ts: int, event: object, conn: object) -> _Reply:
        """Spec §5 "Channel events": CLOSE/IDLE/EXCEPTION of the connection stored in a live entry
        (the first such entry in Java order) destroys that broker; anything else changes nothing."""
        if event not in DESTROYING_EVENTS or conn is None:
            return _Reply()
        key = next((k for k, info in self._live.items() if info.conn == conn), None)
        if key is None:
            return _Reply()
        removal = self._destroy(ts, "channel_closed", key)
        return _Reply(removals=() if removal is None else (removal,))

    # ---------------------------------------------------------------------------- heartbeats

    def _broker_heartbeat(self, req: Request) -> _Reply:
        """BROKER_HEARTBEAT (904, 5.x): refresh lastUpdateTimestamp of an existing live entry."""
        cluster = header(req.ext, "clusterName")
        addr = header(req.ext, "brokerAddr")
        header(req.ext, "brokerName")
        self._refresh_live((cluster, addr), req.ts)
        return _Reply()

    def _query_data_version(self, req: Request) -> _Reply:
        """QUERY_DATA_VERSION (322): 4.9 refreshes only when the dv is equal, 5.x always."""
        cluster = header(req.ext, "clusterName")
        addr = header(req.ext, "brokerAddr")
        header(req.ext, "brokerName")
        long_header(req.ext, "brokerId")
        obj = req.json_body()
        if obj is None and self._profile == PROFILE_49:
            raise Rejected("QUERY_DATA_VERSION without a body")
        try:
            body_dv = None if obj is None else decode_data_version(obj)
        except BodyDecodeError as exc:
            raise Rejected(f"undecodable DataVersion: {exc}") from exc
        if self._profile == PROFILE_5:
            self._refresh_live((cluster, addr), req.ts)
            return _Reply()
        live = self._live.get(addr)
        if live is not None and body_dv is not None:
            dv = DataVersion(0, body_dv.timestamp, body_dv.counter)
            if live.dataVersion.same_as(dv, self._profile):
                self._refresh_live(addr, req.ts)
        return _Reply()

    def _refresh_live(self, key: LiveKey, ts: int) -> None:
        live = self._live.get(key)
        if live is not None:
            self._table_put_live(key, replace(live, lastUpdateTimestamp=ts))

    # ---------------------------------------------------------------------------- other route requests (§6)

    def _wipe_write_perm(self, req: Request) -> _Reply:
        """WIPE_WRITE_PERM_OF_BROKER (205): perm &= ~WRITE for every QueueData of the brokerName."""
        self._wipe_write_perm_of(header(req.ext, "brokerName"))
        return _Reply()

    def _wipe_write_perm_of(self, name: str) -> None:
        for topic in self._topics_of(name):
            qd = self._topics[topic][name]
            self._table_put_queue_data(topic, replace(qd, perm=qd.perm & ~PERM_WRITE))

    def _add_write_perm(self, req: Request) -> _Reply:
        """ADD_WRITE_PERM_OF_BROKER (327): perm = READ|WRITE (6) for every QueueData of the brokerName."""
        name = header(req.ext, "brokerName")
        for topic in self._topics_of(name):
            qd = self._topics[topic][name]
            self._table_put_queue_data(topic, replace(qd, perm=PERM_READ | PERM_WRITE))
        return _Reply()

    def _delete_topic(self, req: Request) -> _Reply:
        """DELETE_TOPIC_IN_NAMESRV (216): the topic, or only the cluster's brokerNames' QueueData."""
        topic = header(req.ext, "topic")
        cluster = req.ext.get("clusterName")
        if cluster is None or str(cluster) == "":
            self._table_remove_topic(topic)
            return _Reply()
        for name in list(self._clusters.get(str(cluster), ())):
            self._table_remove_queue_data(topic, name)
        return _Reply()

    def _register_topic(self, req: Request) -> _Reply:
        """REGISTER_TOPIC_IN_NAMESRV (217, 5.x): store each QueueData as given; a brokerName unknown
        to brokerAddrTable aborts the rest (all of it for a new topic)."""
        topic = header(req.ext, "topic")
        body = req.json_body()
        if body is None:
            return _Reply()
        if not isinstance(body, Mapping):
            raise Rejected("TopicRouteData is not an object")
        entries = body.get("queueDatas") or []
        if not isinstance(entries, list):
            raise Rejected("queueDatas is not a list")
        queue_datas = [queue_data_from_json(e) for e in entries]
        accepted = []
        for qd in queue_datas:
            if qd is None or qd.brokerName not in self._addrs:
                if topic not in self._topics:
                    return _Reply()
                break
            accepted.append(qd)
        for qd in accepted:
            self._table_put_queue_data(topic, qd)
        return _Reply()

    def _put_kv_config(self, req: Request) -> _Reply:
        """PUT_KV_CONFIG (100): only the ORDER_TOPIC_CONFIG namespace matters to routes."""
        namespace = header(req.ext, "namespace")
        key = header(req.ext, "key")
        value = header(req.ext, "value")
        if namespace == ORDER_TOPIC_CONFIG and self._order_topic_conf.get(key) != value:
            self._order_topic_conf[key] = value
            self._changed("orderTopicConf")
        return _Reply()

    def _delete_kv_config(self, req: Request) -> _Reply:
        """DELETE_KV_CONFIG (102)."""
        namespace = header(req.ext, "namespace")
        key = header(req.ext, "key")
        if namespace == ORDER_TOPIC_CONFIG and key in self._order_topic_conf:
            del self._order_topic_conf[key]
            self._changed("orderTopicConf")
        return _Reply()

    # ---------------------------------------------------------------------------- table mutators
    # Every change to a table goes through one of these; each bumps the version only on a real change.

    def _changed(self, table: str | None = None) -> None:
        """A real change; ``table`` names the changed table when it is not tracked by a finer dirty set
        (topics and groups are), so :meth:`snapshot` rebuilds only what changed."""
        if table is not None:
            self._dirty_tables.add(table)
        self._version += 1

    def _table_add_to_cluster(self, cluster: str, name: str) -> None:
        names = self._clusters.get(cluster)
        if names is None:
            names = set()
            self._clusters[cluster] = names
        if name not in names:
            names.add(name)
            self._changed("clusterAddrTable")

    def _table_remove_from_cluster(self, cluster: str, name: str) -> None:
        """Remove ``name`` from that cluster's set, dropping the cluster if it becomes empty."""
        names = self._clusters.get(cluster)
        if names is None:
            return
        if name in names:
            names.discard(name)
            self._changed("clusterAddrTable")
        if not names:
            del self._clusters[cluster]
            self._changed("clusterAddrTable")

    def _table_remove_from_first_cluster(self, name: str) -> None:
        """4.9 destroy: remove ``name`` from the first cluster set (Java order) that contains it."""
        for cluster, names in self._clusters.items():
            if name in names:
                self._table_remove_from_cluster(cluster, name)
                return

    def _table_get_or_create_group(self, cluster: str, name: str) -> tuple[_Group, bool]:
        group = self._addrs.get(name)
        if group is not None:
            return group, False
        group = _Group(cluster, name, {})
        self._addrs[name] = group
        self._dirty_groups.add(name)
        self._changed()
        return group, True

    def _table_set_group_flags(self, group: _Group, enable_acting_master: bool, zone_name: str | None) -> None:
        if (group.enableActingMaster, group.zoneName) != (enable_acting_master, zone_name):
            group.enableActingMaster, group.zoneName = enable_acting_master, zone_name
            self._dirty_groups.add(group.brokerName)
            self._changed()

    def _table_put_broker_addr(self, group: _Group, broker_id: int, addr: str) -> str | None:
        previous = group.brokerAddrs.get(broker_id)
        if previous != addr:
            group.brokerAddrs[broker_id] = addr
            self._dirty_groups.add(group.brokerName)
            self._changed()
        return previous

    def _table_remove_ids(self, group: _Group, ids: Iterable[int]) -> None:
        for broker_id in ids:
            if group.brokerAddrs.pop(broker_id, None) is not None:
                self._dirty_groups.add(group.brokerName)
                self._changed()

    def _table_remove_group(self, name: str) -> None:
        if self._addrs.pop(name, None) is not None:
            self._dirty_groups.add(name)
            self._changed()

    def _table_put_queue_data(self, topic: str, qd: QueueData) -> None:
        by_name = self._topics.setdefault(topic, {})
        if by_name.get(qd.brokerName) != qd:
            by_name[qd.brokerName] = qd
            self._topics_by_broker.setdefault(qd.brokerName, set()).add(topic)
            self._dirty_topics.add(topic)
            self._changed()

    def _table_remove_queue_data(self, topic: str, name: str) -> None:
        """Remove one QueueData, dropping the topic when it becomes empty."""
        by_name = self._topics.get(topic)
        if by_name is None or name not in by_name:
            return
        del by_name[name]
        self._unindex(topic, name)
        if not by_name:
            del self._topics[topic]
        self._dirty_topics.add(topic)
        self._changed()

    def _table_remove_topic(self, topic: str) -> None:
        by_name = self._topics.pop(topic, None)
        if by_name is not None:
            for name in by_name:
                self._unindex(topic, name)
            self._dirty_topics.add(topic)
            self._changed()

    def _unindex(self, topic: str, name: str) -> None:
        topics = self._topics_by_broker[name]
        topics.discard(topic)
        if not topics:
            del self._topics_by_broker[name]

    def _table_put_live(self, key: LiveKey, info: BrokerLiveInfo) -> None:
        if self._live.get(key) != info:
            self._live[key] = info
            self._changed("brokerLiveTable")

    def _table_remove_live(self, key: LiveKey) -> bool:
        if self._live.pop(key, None) is None:
            return False
        self._changed("brokerLiveTable")
        return True

    def _table_put_filters(self, key: LiveKey, filters: tuple[str, ...]) -> None:
        if self._filters.get(key) != filters:
            self._filters[key] = filters
            self._changed("filterServerTable")

    def _table_remove_filters(self, key: LiveKey) -> None:
        if self._filters.pop(key, None) is not None:
            self._changed("filterServerTable")

    # ---------------------------------------------------------------------------- snapshot helpers

    def _table_or(self, base: Snapshot | None, table: str, build: Callable[[], _V]) -> _V:
        """``base``'s copy of ``table`` when nothing changed that table since (shared, not copied),
        else ``build()``."""
        if base is not None and table not in self._dirty_tables:
            return getattr(base, table)  # type: ignore[no-any-return]
        return build()

    def _frozen_topics(self, base: Snapshot | None) -> FrozenDict[str, FrozenDict[str, QueueData]]:
        if base is None:
            return FrozenDict({t: FrozenDict(m) for t, m in self._topics.items()})
        if not self._dirty_topics:
            return base.topicQueueTable
        table = dict(base.topicQueueTable)
        for topic in self._dirty_topics:
            if topic in self._topics:
                table[topic] = FrozenDict(self._topics[topic])
            else:
                table.pop(topic, None)
        return FrozenDict(table)

    def _frozen_groups(self, base: Snapshot | None) -> FrozenDict[str, BrokerData]:
        if base is None:
            return FrozenDict({name: group.frozen() for name, group in self._addrs.items()})
        if not self._dirty_groups:
            return base.brokerAddrTable
        table = dict(base.brokerAddrTable)
        for name in self._dirty_groups:
            group = self._addrs.get(name)
            if group is not None:
                table[name] = group.frozen()
            else:
                table.pop(name, None)
        return FrozenDict(table)


_READ_ONLY_CODES = frozenset({
    RequestCode.GET_ROUTEINFO_BY_TOPIC,
    RequestCode.GET_BROKER_CLUSTER_INFO,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
})
