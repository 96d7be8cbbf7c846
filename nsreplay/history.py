"""Reading the published route history, without Spark.

    history = PublishedHistory("warehouse")
    history.coverage()                                  # what the warehouse covers, per NameServer
    snap = history.snapshot_at("10.0.0.10:9876", t)     # nsreplay.model.Snapshot: the five tables
    answer = history.route_at("10.0.0.10:9876", "TBW102", t, request_version=401)

Only table versions named by the latest ``gold.publish_log`` row are read, so a run that has not
published (or failed half way) is invisible. "State at t" is the state after every record with
``ts <= t`` and every scan tick ``<= t``: the interval rows with ``valid_from <= t < valid_to``.
Answers are rendered by the reference model's renderer from that state, exactly as the NameServer
would have answered (standard or legacy JSON by ``request_version``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import pyarrow.dataset as pads

from nsreplay.model import Answer, BrokerData, BrokerLiveInfo, DataVersion, FrozenDict, NamesrvConfig, QueueData, Snapshot, route_info
from nsreplay.storage import ColumnRange, TableSpec, Warehouse, dataset, range_filter
from schemas.gold import (
    BROKER_ADDR_INTERVALS,
    BROKER_LIVE_INTERVALS,
    CLUSTER_ADDR_INTERVALS,
    FILTER_SERVER_INTERVALS,
    NAMESRV_EPOCHS,
    ORDER_TOPIC_INTERVALS,
    PUBLISH_LOG,
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


def _alive(t: int) -> pads.Expression:
    return (pads.field("valid_from") <= t) & (pads.field("valid_to").is_null() | (pads.field("valid_to") > t))


class PublishedHistory:
    """The latest published history of a warehouse (see module docstring)."""

    def __init__(self, root: str) -> None:
        self._warehouse = Warehouse(root, None, "delta-rs")
        latest = latest_publish_row(self._warehouse)
        if latest is None:
            raise NotPublishedError(f"{root}: nothing has been published yet (run jobs/rebuild_routes.py)")
        self.run_id: str = latest["run_id"]
        self.versions: dict[str, int] = dict(latest["table_versions"])
        self._coverage = {c["namesrv"]: Coverage(c["namesrv"], c["from_ts"], c["to_ts"], c["profile"]) for c in latest["namesrvs"]}
        self._datasets = {spec.name: dataset(spec, self._warehouse.files(spec, self.versions[spec.name])) for spec in _TABLES}

    def coverage(self) -> list[Coverage]:
        return [self._coverage[n] for n in sorted(self._coverage)]

    def _check(self, namesrv: str, t: int) -> Coverage:
        cov = self._coverage.get(namesrv)
        if cov is None:
            raise OutsideCoverageError(f"unknown NameServer {namesrv!r}; known: {', '.join(sorted(self._coverage)) or 'none'}")
        if not cov.from_ts <= t <= cov.to_ts:
            raise OutsideCoverageError(f"{t} is outside the covered range of {namesrv}: [{cov.from_ts}, {cov.to_ts}]")
        return cov

    def rows(self, spec: TableSpec, namesrv: str, t: int | None = None) -> list[dict[str, Any]]:
        """Rows of one published table for ``namesrv`` (alive at ``t`` when given)."""
        condition = pads.field("namesrv") == namesrv
        if t is not None and spec is not NAMESRV_EPOCHS:
            condition = condition & _alive(t)
        return self._datasets[spec.name].to_table(filter=condition).to_pylist()

    def snapshot_at(self, namesrv: str, t: int) -> Snapshot:
        """The five tables of ``namesrv`` at ``t`` (raises OutsideCoverageError)."""
        self._check(namesrv, t)
        return build_snapshot({spec.name: self.rows(spec, namesrv, t) for spec in _TABLES}, t)

    def route_at(self, namesrv: str, topic: str, t: int, *, request_version: int = 401) -> Answer:
        """What GET_ROUTEINFO_BY_TOPIC for ``topic`` returned at ``t``."""
        return route_info(self.snapshot_at(namesrv, t), topic, request_version=request_version)


def _epoch_at(epochs: Iterable[dict[str, Any]], t: int) -> dict[str, Any]:
    candidates = [e for e in epochs if e["start_ts"] <= t < e["end_ts"]] or [e for e in epochs if e["start_ts"] <= t]
    return max(candidates, key=lambda e: e["start_ts"]) if candidates else min(epochs, key=lambda e: e["start_ts"])


def _live_key(row: dict[str, Any]) -> Any:
    return row["broker_addr"] if row["cluster"] is None else (row["cluster"], row["broker_addr"])


def build_snapshot(rows: dict[str, list[dict[str, Any]]], t: int) -> Snapshot:
    """A model Snapshot from the interval rows alive at ``t`` (and the NameServer's epochs)."""
    epoch = _epoch_at(rows[NAMESRV_EPOCHS.name], t)
    topics: dict[str, dict[str, QueueData]] = {}
    for r in rows[TOPIC_QUEUE_INTERVALS.name]:
        topics.setdefault(r["topic"], {})[r["broker_name"]] = QueueData(r["broker_name"], r["read_queue_nums"], r["write_queue_nums"], r["perm"], r["topic_sys_flag"])
    groups = {
        r["broker_name"]: BrokerData(
            r["cluster"], r["broker_name"], FrozenDict(dict(r["broker_addrs"])), bool(r["enable_acting_master"]), r["zone_name"]
        )
        for r in rows[BROKER_ADDR_INTERVALS.name]
    }
    clusters: dict[str, set[str]] = {}
    for r in rows[CLUSTER_ADDR_INTERVALS.name]:
        clusters.setdefault(r["cluster"], set()).add(r["broker_name"])
    live = {
        _live_key(r): BrokerLiveInfo(
            r["last_update_ts"], r["heartbeat_timeout_ms"], DataVersion(r["dv_state_version"], r["dv_timestamp"], r["dv_counter"]), r["conn"], r["ha_server_addr"]
        )
        for r in rows[BROKER_LIVE_INTERVALS.name]
    }
    filters = {_live_key(r): tuple(r["filter_servers"]) for r in rows[FILTER_SERVER_INTERVALS.name]}
    order = {r["topic"]: r["order_conf"] for r in rows[ORDER_TOPIC_INTERVALS.name]}
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


__all__ = ["Coverage", "NotPublishedError", "OutsideCoverageError", "PublishedHistory", "build_snapshot"]

