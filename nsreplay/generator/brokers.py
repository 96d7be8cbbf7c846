"""Broker-side state over time: topic-table lineages (DataVersions) and broker processes.

Contract:

* A group's topic table evolves along one linear :class:`Lineage`: version 0 is the initial table; each
  bump (topic created/changed/deleted on the master, or a 5.x promotion) makes a new version with
  ``counter + 1`` and ``timestamp = the bump's time`` (5.x promotion also ``stateVersion + 1``).
* A :class:`BrokerProcess` is one JVM run of one member host: ``[start_ms, end_ms)``, its broker id over
  time, the table version it holds over time (a step function), its partitions and the immediate
  registrations it makes (incremental after a topic change, full after a 5.x role change).
* The master applies a bump at the bump's instant; a slave adopts the master's latest version at its
  next SlaveSynchronize tick (every 10 s); a restarted process starts with the version it held when it
  stopped (topics.json on disk).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from nsreplay.protocol.register_body import DataVersion, TopicConfig

__all__ = ["TableVersion", "Lineage", "BrokerProcess", "SYNC_PERIOD_MS"]

SYNC_PERIOD_MS = 10_000


@dataclass(frozen=True)
class TableVersion:
    """One version of a group's topic table."""

    index: int
    dv: DataVersion
    topics: tuple[TopicConfig, ...]
    created_ms: int
    #: Topics created or changed by the bump that made this version (sent in the incremental register).
    changed: tuple[TopicConfig, ...] = ()


class Lineage:
    """The linear history of one group's topic table."""

    def __init__(self, group: int, topics: tuple[TopicConfig, ...], dv: DataVersion) -> None:
        self.group = group
        self.versions: list[TableVersion] = [TableVersion(0, dv, topics, dv.timestamp)]
        self._times: list[int] = [-(1 << 62)]

    @property
    def latest(self) -> TableVersion:
        """The newest version."""
        return self.versions[-1]

    def bump(
        self,
        ts: int,
        *,
        upsert: tuple[TopicConfig, ...] = (),
        remove: tuple[str, ...] = (),
        state_version_delta: int = 0,
    ) -> TableVersion:
        """Apply a change at ``ts`` (must not precede the last bump) and return the new version."""
        if ts < self._times[-1]:
            raise ValueError("lineage bumps must be applied in time order")
        prev = self.latest
        table = {c.topic_name: c for c in prev.topics}
        for name in remove:
            table.pop(name, None)
        for cfg in upsert:
            table[cfg.topic_name] = cfg
        dv = DataVersion(
            state_version=prev.dv.state_version + state_version_delta,
            timestamp=ts,
            counter=prev.dv.counter + 1,
        )
        version = TableVersion(len(self.versions), dv, tuple(table.values()), ts, tuple(upsert))
        self.versions.append(version)
        self._times.append(ts)
        return version

    def version_at(self, ts: int) -> int:
        """Index of the latest version made at or before ``ts``."""
        return bisect.bisect_right(self._times, ts) - 1

    def bumps(self) -> list[tuple[int, int]]:
        """Every bump as (ts, version index), in time order."""
        return [(v.created_ms, v.index) for v in self.versions[1:]]


@dataclass
class BrokerProcess:
    """One run of a broker JVM on one member host."""

    group: int
    member: int
    start_ms: int
    end_ms: int
    #: "crash", "shutdown" or "window" (still running at the end of the window).
    end_reason: str = "window"
    #: For crashes: "close", "exception", "idle" or "silent" (what the NameServers see).
    crash_outcome: str | None = None
    initial_id: int = 0
    id_changes: list[tuple[int, int]] = field(default_factory=list)
    #: (NameServer indexes hidden, from_ms, to_ms): sends in [from, to) to those NameServers are lost.
    partitions: list[tuple[frozenset[int], int, int]] = field(default_factory=list)
    #: Step function (ts, version index) of the table version held; the first entry is at start_ms.
    versions: list[tuple[int, int]] = field(default_factory=list)
    #: Immediate incremental registrations (ts, version index) after a topic create/update.
    increments: list[tuple[int, int]] = field(default_factory=list)
    #: Immediate full registrations (ts) after a 5.x role change.
    role_change_registers: list[int] = field(default_factory=list)
    #: Offset of this process's SlaveSynchronize grid after its start.
    sync_offset_ms: int = 3000
    _times: list[int] = field(default_factory=list, repr=False, compare=False)
    _times_of: object = field(default=None, repr=False, compare=False)

    def id_at(self, ts: int) -> int:
        """The broker id at ``ts`` (role changes take effect at their own instant)."""
        current = self.initial_id
        for when, new_id in self.id_changes:
            if when <= ts:
                current = new_id
        return current

    def alive_at(self, ts: int) -> bool:
        """True when the process runs at ``ts``."""
        return self.start_ms <= ts < self.end_ms

    def version_at(self, ts: int) -> int:
        """The table version held at ``ts``."""
        versions = self.versions
        if len(versions) == 1:
            return versions[0][1]
        if self._times_of is not versions:
            self._times = [t for t, _ in versions]
            self._times_of = versions
        i = bisect.bisect_right(self._times, ts) - 1
        return versions[max(i, 0)][1]

    def next_sync_tick(self, ts: int) -> int:
        """The first SlaveSynchronize tick at or after ``ts``."""
        origin = self.start_ms + self.sync_offset_ms
        if ts <= origin:
            return origin
        k = -(-(ts - origin) // SYNC_PERIOD_MS)
        return origin + k * SYNC_PERIOD_MS
