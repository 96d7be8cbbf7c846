"""Reading the published route history, without Spark.

    history = PublishedHistory("warehouse")
    history.coverage()                                  # what the warehouse covers, per NameServer
    snap = history.snapshot_at("10.0.0.10:9876", t)     # nsreplay.model.Snapshot: the five tables
    for t, snap in history.snapshots_at("10.0.0.10:9876", ticks): ...   # many instants, rows read once
    history.scan_ticks("10.0.0.10:9876")                # every scan tick: (tick_ts, profile, removals)
    answer = history.route_at("10.0.0.10:9876", "TBW102", t, request_version=401)

Only table versions named by the latest ``gold.publish_log`` row are read, so a run that has not
published (or failed half way) is invisible. "State at t" is the state after every record with
``ts <= t`` and every scan tick ``<= t``: the interval rows with ``valid_from <= t < valid_to``.
Answers are rendered by the reference model's renderer from that state, exactly as the NameServer
would have answered (standard or legacy JSON by ``request_version``).

The published versions' file lists and their files' ``valid_from`` / ``valid_to`` statistics are
read from the Delta log once, when the history is opened; a read then opens only the files of the
NameServer that may hold rows alive at its instants (:class:`nsreplay.storage.stored_table.StoredTable`),
so an instant costs the files around it, not the months of history before and after it.
"""

from __future__ import annotations

import os

from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence, Union

import pyarrow as pa
import pyarrow.dataset as pads

from nsreplay.model import Answer, BrokerData, BrokerLiveInfo, DataVersion, FrozenDict, NamesrvConfig, QueueData, Snapshot, route_info
from nsreplay.storage.stored_table import StoredTable
from nsreplay.storage import ColumnRange, TableSpec, Warehouse, dataset, range_filter
from schemas.gold import (
    BROKER_ADDR_INTERVALS,
    BROKER_LIVE_INTERVALS,
    CLUSTER_ADDR_INTERVALS,
    FILTER_SERVER_INTERVALS,
    NAMESRV_EPOCHS,
    ORDER_TOPIC_INTERVALS,
    PUBLISH_LOG,
    SCAN_TICKS,
    TOPIC_QUEUE_INTERVALS,
)

_TABLES = (TOPIC_QUEUE_INTERVALS, BROKER_ADDR_INTERVALS, CLUSTER_ADDR_INTERVALS, BROKER_LIVE_INTERVALS, FILTER_SERVER_INTERVALS, ORDER_TOPIC_INTERVALS, NAMESRV_EPOCHS)


class NotPublishedError(LookupError):
    """The warehouse has no published run yet."""


class OutsideCoverageError(LookupError):
    """The NameServer is unknown, or the instant is outside the covered range (message says which)."""


@dataclass(frozen=True)
class Coverage:
    namesrv: str
    from_ts: int
    to_ts: int
    profile: str


def newest_publish(warehouse: Warehouse) -> ColumnRange | None:
    """The ``gold.publish_log`` rows that can be the latest publish: those of the greatest
    ``published_ms``, found from the files' statistics, so a reader opens the file of the newest
    publish instead of one file per run ever published. ``None`` (every row) when a file has no
    statistics. The latest publish is the row of the greatest (``published_ms``, ``run_id``)."""
    bounds = warehouse.column_bounds(PUBLISH_LOG, "published_ms")
    if not bounds:
        return None
    return ColumnRange("published_ms", above=bounds[None][1] - 1)


def latest_publish_row(warehouse: Warehouse) -> dict[str, Any] | None:
    """The latest ``gold.publish_log`` row (the greatest (``published_ms``, ``run_id``)) as a dict,
    read without Spark from the file of the newest publish; ``None`` when nothing was published."""
    if not warehouse.exists(PUBLISH_LOG):
        return None
    newest = newest_publish(warehouse)
    log = dataset(PUBLISH_LOG, warehouse.files(PUBLISH_LOG, where=newest)).to_table(filter=range_filter(newest))
    return max(log.to_pylist(), key=lambda row: (row["published_ms"], row["run_id"]), default=None)


@dataclass(frozen=True)
class PublishedRun:
    """What the latest ``gold.publish_log`` row names: the run, the version of each table it
    published, and what it covers per NameServer."""

    run_id: str
    versions: Mapping[str, int]
    coverage: Mapping[str, Coverage]


def published_run(warehouse: Warehouse, root: str) -> PublishedRun:
    """The latest publish of the warehouse at ``root`` (``warehouse``), from the publish log alone: no
    other table's log is opened. Raises :class:`NotPublishedError` when nothing was published (or
    there is no such directory)."""
    latest = latest_publish_row(warehouse)
    if latest is None:
        if "://" not in root and not os.path.isdir(root):  # a relative path is read from the working directory
            raise NotPublishedError(f"{root}: no such directory (from {os.getcwd()})")
        raise NotPublishedError(f"{root}: nothing has been published yet (run jobs/rebuild_routes.py)")
    coverage = {c["namesrv"]: Coverage(c["namesrv"], c["from_ts"], c["to_ts"], c["profile"]) for c in latest["namesrvs"]}
    return PublishedRun(latest["run_id"], dict(latest["table_versions"]), coverage)


def _alive(t: int) -> pads.Expression:
    return _alive_between(t, t)


def _alive_between(first: int, last: int) -> pads.Expression:
    """Interval rows valid at some instant of ``[first, last]``."""
    return (pads.field("valid_from") <= last) & (pads.field("valid_to").is_null() | (pads.field("valid_to") > first))


class PublishedHistory:
    """The latest published history of a warehouse (see module docstring)."""

    def __init__(self, root: str) -> None:
        self._warehouse = Warehouse(root, None, "delta-rs")
        published = published_run(self._warehouse, root)
        self.run_id: str = published.run_id
        self.versions: dict[str, int] = dict(published.versions)
        self._coverage = dict(published.coverage)
        # each table's file list and its files' valid_from / valid_to statistics, read once: a read
        # opens the files of one NameServer that may hold rows alive then, not its whole history
        self._stored = {
            spec.name: StoredTable(self._warehouse, spec, self.versions[spec.name], () if spec is NAMESRV_EPOCHS else ("valid_from", "valid_to"))
            for spec in _TABLES
        }

    def coverage(self) -> list[Coverage]:
        return [self._coverage[n] for n in sorted(self._coverage)]

    def _check(self, namesrv: str, t: int) -> Coverage:
        cov = self._coverage.get(namesrv)
        if cov is None:
            raise OutsideCoverageError(f"unknown NameServer {namesrv!r}; known: {', '.join(sorted(self._coverage)) or 'none'}")
        if not cov.from_ts <= t <= cov.to_ts:
            raise OutsideCoverageError(f"{t} is outside the covered range of {namesrv}: [{cov.from_ts}, {cov.to_ts}]")
        return cov

    def _table(self, spec: TableSpec, namesrv: str, t: int | None = None, *, until: int | None = None) -> pa.Table:
        """``namesrv``'s rows of ``spec``: those alive at some instant of ``[t, until]`` (``until``
        None: at ``t``; ``t`` None: every row). Epochs are read whole."""
        ranges = []
        if t is not None and spec is not NAMESRV_EPOCHS:
            ranges = [ColumnRange("valid_from", at_most=t if until is None else until), ColumnRange("valid_to", above=t, or_null=True)]
        return self._stored[spec.name].read(namesrv, ranges, spec.column_names)

    def rows(self, spec: TableSpec, namesrv: str, t: int | None = None) -> list[dict[str, Any]]:
        """Rows of one published table for ``namesrv`` (alive at ``t`` when given)."""
        return self._table(spec, namesrv, t).to_pylist()

    def snapshot_at(self, namesrv: str, t: int) -> Snapshot:
        """The five tables of ``namesrv`` at ``t`` (raises OutsideCoverageError)."""
        self._check(namesrv, t)
        return build_snapshot({spec.name: self._table(spec, namesrv, t) for spec in _TABLES}, t)

    def profile_at(self, namesrv: str, t: int) -> str:
        """The semantics profile of ``namesrv``'s epoch at ``t`` (raises OutsideCoverageError); reads
        only its epochs."""
        self._check(namesrv, t)
        return _epoch_at(self.rows(NAMESRV_EPOCHS, namesrv), t)["profile"]

    def snapshots_at(self, namesrv: str, instants: Iterable[int]) -> Iterator[tuple[int, Snapshot]]:
        """(t, :meth:`snapshot_at` ``t``) for each of ``instants``, in their order. The NameServer's
        rows alive between the earliest and the latest instant are read once, and each instant's
        are picked from them in memory: for many instants (a sample of ticks, a walk over a day), not
        one. An instant outside the coverage raises OutsideCoverageError at the first step, before
        any row is read."""
        instants = list(instants)
        for t in instants:
            self._check(namesrv, t)
        if not instants:
            return
        # the rows alive at some instant between the first and the last, not the whole history
        tables = {spec.name: self._table(spec, namesrv, min(instants), until=max(instants)) for spec in _TABLES}
        for t in instants:
            alive = _alive(t)
            yield t, build_snapshot({name: table if name == NAMESRV_EPOCHS.name else table.filter(alive) for name, table in tables.items()}, t)

    def scan_ticks(self, namesrv: str) -> list[tuple[int, str, int]]:
        """Every published scan tick of ``namesrv`` as (tick_ts, profile, live entries its scan
        removed), in time order; [] for an unknown NameServer."""
        files = self._warehouse.files(SCAN_TICKS, self.versions[SCAN_TICKS.name])
        table = dataset(SCAN_TICKS, files).to_table(columns=["tick_ts", "profile", "removals"], filter=pads.field("namesrv") == namesrv)
        return sorted(zip(*(table.column(c).to_pylist() for c in ("tick_ts", "profile", "removals"))))

    def route_at(self, namesrv: str, topic: str, t: int, *, request_version: int = 401) -> Answer:
        """What GET_ROUTEINFO_BY_TOPIC for ``topic`` returned at ``t``."""
        return route_info(self.snapshot_at(namesrv, t), topic, request_version=request_version)


def _epoch_at(epochs: Iterable[dict[str, Any]], t: int) -> dict[str, Any]:
    candidates = [e for e in epochs if e["start_ts"] <= t < e["end_ts"]] or [e for e in epochs if e["start_ts"] <= t]
    return max(candidates, key=lambda e: e["start_ts"]) if candidates else min(epochs, key=lambda e: e["start_ts"])


def _live_key(cluster: str | None, broker_addr: str) -> Any:
    return broker_addr if cluster is None else (cluster, broker_addr)


Rows = Union[pa.Table, Sequence[Mapping[str, Any]]]


def _fields(rows: Rows, *names: str) -> Iterable[tuple[Any, ...]]:
    """The named fields of each row, as tuples: an arrow table column by column (no dict per row:
    a day's snapshot holds ~17,000 queue rows), rows given as mappings row by row."""
    if isinstance(rows, pa.Table):
        return zip(*(rows.column(name).to_pylist() for name in names))
    return (tuple(row[name] for name in names) for row in rows)


def build_snapshot(rows: Mapping[str, Rows], t: int) -> Snapshot:
    """A model Snapshot from the interval rows alive at ``t`` (and the NameServer's epochs), each
    table's rows as an arrow table or as mappings."""
    epochs = rows[NAMESRV_EPOCHS.name]
    epoch = _epoch_at(epochs.to_pylist() if isinstance(epochs, pa.Table) else epochs, t)
    topics: dict[str, dict[str, QueueData]] = {}
    queue_fields = ("topic", "broker_name", "read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag")
    queues: dict[tuple[Any, ...], QueueData] = {}  # one object per distinct value: most topics share theirs
    for topic, *queue in _fields(rows[TOPIC_QUEUE_INTERVALS.name], *queue_fields):
        key = tuple(queue)
        data = queues.get(key)
        if data is None:
            data = queues[key] = QueueData(*key)
        topics.setdefault(topic, {})[queue[0]] = data
    groups = {
        broker_name: BrokerData(cluster, broker_name, FrozenDict(dict(addrs)), bool(acting), zone)
        for cluster, broker_name, addrs, acting, zone in _fields(
            rows[BROKER_ADDR_INTERVALS.name], "cluster", "broker_name", "broker_addrs", "enable_acting_master", "zone_name"
        )
    }
    clusters: dict[str, set[str]] = {}
    for cluster, broker_name in _fields(rows[CLUSTER_ADDR_INTERVALS.name], "cluster", "broker_name"):
        clusters.setdefault(cluster, set()).add(broker_name)
    live_fields = ("cluster", "broker_addr", "last_update_ts", "heartbeat_timeout_ms", "dv_state_version", "dv_timestamp", "dv_counter", "conn", "ha_server_addr")
    live = {
        _live_key(cluster, addr): BrokerLiveInfo(last_update, timeout, DataVersion(state_version, dv_ts, counter), conn, ha)
        for cluster, addr, last_update, timeout, state_version, dv_ts, counter, conn, ha in _fields(rows[BROKER_LIVE_INTERVALS.name], *live_fields)
    }
    filters = {
        _live_key(cluster, addr): tuple(servers)
        for cluster, addr, servers in _fields(rows[FILTER_SERVER_INTERVALS.name], "cluster", "broker_addr", "filter_servers")
    }
    order = dict(_fields(rows[ORDER_TOPIC_INTERVALS.name], "topic", "order_conf"))
    return Snapshot(
        profile=epoch["profile"],
        topicQueueTable=FrozenDict({k: FrozenDict(v) for k, v in topics.items()}),
        brokerAddrTable=FrozenDict(groups),
        clusterAddrTable=FrozenDict({c: frozenset(n) for c, n in clusters.items()}),
        brokerLiveTable=FrozenDict(live),
        filterServerTable=FrozenDict(filters),
        orderTopicConf=FrozenDict(order),
        config=NamesrvConfig.from_mapping(dict(epoch["config"])),  # arrow maps come back as (key, value) pairs
    )


__all__ = ["Coverage", "NotPublishedError", "OutsideCoverageError", "PublishedHistory", "PublishedRun", "build_snapshot", "published_run"]

