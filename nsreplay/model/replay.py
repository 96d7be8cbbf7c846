"""The replay driver: capture records in, the state of each NameServer at every scan tick out.

Contract (capture-format.md, semantics spec §4):

* Records are grouped by ``namesrv``. Within one NameServer they are **de-duplicated** (records equal
  in every field count once: equal as JSON values, so ``1``, ``1.0`` and ``true`` differ, and a field
  given as ``null`` is an absent one; fields whose name starts with ``_`` - bookkeeping such as
  ``_file`` and ``_line`` - are not compared) and **ordered** by ``(ts, seq)``; records without ``seq`` by
  ``(ts, _file, _line)`` when present, else by input order. At one ``ts``, records with a ``seq`` come
  before records without one.
* A ``namesrv_start`` record (re)starts the NameServer: profile from ``rocketmq_version`` ("4.x" ->
  rocketmq-4.9, "5.x" -> rocketmq-5), settings from its ``config`` (keys it lacks take the NameServer's
  own defaults, not ``default_config``), every table empty (the KV store is kept), tick grid restarted
  from its ``ts``. If a NameServer's first record is not a start record,
  ``default_profile``/``default_config`` apply and the tick grid starts at ``default_start_ts`` (or
  at that first record's ``ts`` when ``None``).
* Tick grid from the start time S: 4.9 ``S + 5000 + k*10000``; 5.x ``S + 5 + k*scanNotActiveBrokerInterval``.
  Records with ``ts`` equal to a tick are applied **before** that tick's scan. Ticks go on up to
  ``until`` even without records (default: the latest ``ts`` among all the records given, i.e. the
  capture's covered range). Records after ``until`` are not applied. A restart drops the old grid's
  ticks from its ``ts`` on (a tick of the old grid at exactly the restart's ``ts`` does not happen).
* "State at t" (:func:`state_at`) = after every record with ``ts <= t`` and every tick ``<= t``.
  :meth:`NamesrvReplay.steps` observes it at every instant in one pass: each record and each scan as a
  :class:`Step` with the state right after it; the steps flagged ``at_instant`` give the state at their
  ``ts``, which lasts until the next step's ``ts``.

``kind="response"`` records change nothing; records of any other unknown kind raise ValueError (the
ingest quarantines them before they get here).
"""

from __future__ import annotations

import gc
import json
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Hashable, Iterable, Iterator, Mapping, Sequence

from nsreplay.model.namesrv import NameServer
from nsreplay.model.tables import Outcome, Profile, Removal, Snapshot

__all__ = [
    "AppliedRecord",
    "TickState",
    "Step",
    "NamesrvReplay",
    "order_records",
    "group_by_namesrv",
    "replay",
    "state_at",
]


@dataclass(frozen=True)
class AppliedRecord:
    """One record as applied, with what it did."""

    ts: int
    seq: int | None
    kind: str
    code: int | None
    event: str | None
    conn: str | None
    outcome: Outcome


@dataclass(frozen=True)
class TickState:
    """The state of one NameServer right after the scan at ``tick``.

    ``applied``: the records applied since the previous tick (``ts`` in ``(previous tick, tick]``);
    ``removals``: what this tick's scan removed; ``changed``: whether ``snapshot`` differs from the
    previous tick's (or, for the first tick, from the empty start state).
    """

    namesrv: str
    tick: int
    profile: Profile
    snapshot: Snapshot
    applied: tuple[AppliedRecord, ...]
    removals: tuple[Removal, ...]
    changed: bool


@dataclass(frozen=True)
class Step:
    """One step of a NameServer's replay and its state right after it: a record applied (``record``
    is it, with its outcome; ``removals`` the outcome's) or the scan at tick ``ts`` (``record`` is
    None; ``removals`` what the scan removed).

    ``at_instant``: no later step has this ``ts``, so ``snapshot`` is the state *at* instant ``ts``
    (after every record with ts <= ``ts`` and every tick <= ``ts``, as :func:`state_at` gives it), and
    the state stays that until the next step's ``ts`` (exclusive). A step without it shows a state no
    instant has: a record followed by more records of its ``ts``, or by the scan of a tick at its ``ts``.

    ``next_tick``: the scan tick that runs next, on the grid in force after this step (a restart moves
    it): at or after ``ts`` after a record, after ``ts`` after a scan. It may be after ``until`` (then
    no step of the run reaches it).
    """

    namesrv: str
    ts: int
    record: AppliedRecord | None
    removals: tuple[Removal, ...]
    snapshot: Snapshot
    at_instant: bool
    next_tick: int


@contextmanager
def _records_out_of_gc() -> Iterator[None]:
    """Keep the (large, long-lived) input records out of the cyclic GC while replaying: a capture of
    100k register bodies is tens of millions of objects, and walking them on every full collection
    costs more than the replay itself. Only speed is affected; the GC is restored afterwards."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _comparable(record: Mapping[str, Any]) -> str:
    """What makes two records duplicates: their JSON value, as canonical text (sorted keys), without
    the ``_`` bookkeeping fields and without the fields given as ``null`` (a null member is an absent
    one, as for ``seq`` in :func:`_order_key`). Compared as text, JSON's types stay apart: ``1``,
    ``1.0`` and ``true`` are three values, though Python's ``==`` takes them for one."""
    fields = {k: v for k, v in record.items() if v is not None and not k.startswith("_")}
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)


_CHEAP_KEY_FIELDS = ("ts", "seq", "kind", "code", "conn", "opaque", "event")


def _cheap_key(record: Mapping[str, Any]) -> Hashable:
    """A fast pre-filter for duplicate detection (records with different keys are never equal)."""
    key = tuple(record.get(f) for f in _CHEAP_KEY_FIELDS)
    try:
        hash(key)
    except TypeError:  # a malformed field (e.g. a list): fall back to its text
        return repr(key)
    return key


def _order_key(indexed: tuple[int, Mapping[str, Any]]) -> tuple[Any, ...]:
    index, record = indexed
    seq = record.get("seq")
    if seq is not None:
        return (record["ts"], 0, seq, "", 0, index)
    return (record["ts"], 1, 0, str(record.get("_file", "")), int(record.get("_line", 0)), index)


def order_records(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """One NameServer's records de-duplicated and in processing order (see module docstring)."""
    ordered = [record for _, record in sorted(enumerate(records), key=_order_key)]
    kept: list[Mapping[str, Any]] = []
    seen: dict[Hashable, list[Mapping[str, Any]]] = {}  # the records kept, by cheap key
    texts: dict[int, str] = {}  # id(record) -> _comparable(record), made only when a cheap key repeats

    def text_of(record: Mapping[str, Any]) -> str:
        text = texts.get(id(record))
        if text is None:
            text = texts[id(record)] = _comparable(record)
        return text

    for record in ordered:
        same_key = seen.setdefault(_cheap_key(record), [])
        if not same_key or text_of(record) not in {text_of(other) for other in same_key}:
            same_key.append(record)
            kept.append(record)
    return kept


def group_by_namesrv(records: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Records by their ``namesrv`` field (input order kept). Raises ValueError for a record without
    ``namesrv`` or ``ts``."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        if "namesrv" not in record or "ts" not in record:
            raise ValueError(f"record without namesrv or ts: {record!r:.200}")
        groups.setdefault(str(record["namesrv"]), []).append(record)
    return groups


class NamesrvReplay:
    """Replays the records of one NameServer (any order, duplicates allowed) tick by tick.

    Each :meth:`run` starts from scratch; once consumed, :attr:`nameserver` holds the state at ``until``.
    """

    def __init__(
        self,
        namesrv: str,
        records: Iterable[Mapping[str, Any]],
        *,
        default_profile: str,
        default_start_ts: int | None = None,
        default_config: Mapping[str, object] | None = None,
    ) -> None:
        self.namesrv = namesrv
        with _records_out_of_gc():
            self.records: Sequence[Mapping[str, Any]] = order_records(records)
        first = self.records[0] if self.records else None
        if first is not None and first.get("kind") == "namesrv_start":
            origin: int | None = int(first["ts"])
        else:
            origin = default_start_ts if default_start_ts is not None else (None if first is None else int(first["ts"]))
        self.origin = origin
        self._defaults = (default_profile, default_config)
        self.nameserver = self._fresh_nameserver()

    def _fresh_nameserver(self) -> NameServer:
        profile, config = self._defaults
        return NameServer(profile, config, self.origin if self.origin is not None else 0)

    def last_ts(self) -> int | None:
        """The ``ts`` of the last record, if any."""
        return int(self.records[-1]["ts"]) if self.records else None

    def run(self, until: int | None = None) -> Iterator[TickState]:
        """Apply the records with ``ts <= until`` and run every tick ``<= until``, yielding the state
        after each tick. ``until`` defaults to the last record's ``ts``."""
        applied: list[AppliedRecord] = []
        previous = self._fresh_nameserver().snapshot()
        for ts, record, removals, _ in self._walk(until):
            if record is not None:
                applied.append(record)
                continue
            snapshot = self.nameserver.snapshot()
            changed = snapshot is not previous and snapshot != previous
            yield TickState(self.namesrv, ts, self.nameserver.profile, snapshot, tuple(applied), removals, changed)
            applied, previous = [], snapshot

    def steps(self, until: int | None = None) -> Iterator[Step]:
        """Every step of :meth:`run` in processing order, each with the state right after it (see
        :class:`Step`): each record with ``ts <= until`` as applied, and the scan of each tick
        ``<= until`` (records at a tick's ``ts`` before its scan; a restart restarts the grid). The
        scans' states and removals are :meth:`run`'s ticks, and the records between two scans a tick's
        ``applied``. ``until`` defaults to the last record's ``ts``.

        The finest view of one replay: the state at every instant (the steps ``at_instant``) and what
        each record or scan changed (consecutive snapshots), in one pass instead of one
        :func:`state_at` per instant. It takes a snapshot after every step, :meth:`run` one per tick."""
        previous: Step | None = None  # held back until the next step tells whether its ts has more
        for step in self._steps(until):
            if previous is not None:
                yield previous if previous.ts != step.ts else replace(previous, at_instant=False)
            previous = step
        if previous is not None:
            yield previous

    def _steps(self, until: int | None) -> Iterator[Step]:
        """:meth:`steps`, each flagged ``at_instant`` (the caller clears it)."""
        for ts, record, removals, next_tick in self._walk(until):
            yield Step(self.namesrv, ts, record, removals, self.nameserver.snapshot(), True, next_tick)

    def _walk(self, until: int | None) -> Iterator[tuple[int, AppliedRecord | None, tuple[Removal, ...], int]]:
        """The replay itself, in processing order: (ts, the record as applied, its removals, the next
        tick) for each record with ``ts <= until``, and (tick, None, the scan's removals, the next
        tick) for each tick ``<= until``; records at a tick's ``ts`` come before its scan, and a
        restart restarts the grid. :attr:`nameserver` holds the state after each item."""
        if until is None:
            until = self.last_ts()
        if until is None or self.origin is None:
            return
        ns = self.nameserver = self._fresh_nameserver()
        next_tick = ns.first_tick
        with _records_out_of_gc():
            for record in self.records:
                ts = int(record["ts"])
                if ts > until:
                    break
                while next_tick < ts:
                    tick, removals = next_tick, tuple(ns.scan(next_tick))
                    next_tick += ns.tick_interval
                    yield tick, None, removals, next_tick
                applied = _applied(record, ns.apply(record))
                if record.get("kind") == "namesrv_start":
                    next_tick = ns.first_tick
                yield ts, applied, applied.outcome.removals, next_tick
            while next_tick <= until:
                tick, removals = next_tick, tuple(ns.scan(next_tick))
                next_tick += ns.tick_interval
                yield tick, None, removals, next_tick


def _applied(record: Mapping[str, Any], outcome: Outcome) -> AppliedRecord:
    return AppliedRecord(
        ts=int(record["ts"]),
        seq=record.get("seq"),
        kind=str(record.get("kind")),
        code=record.get("code"),
        event=record.get("event"),
        conn=record.get("conn"),
        outcome=outcome,
    )


def replay(
    records: Iterable[Mapping[str, Any]],
    *,
    default_profile: str,
    default_start_ts: int | None = None,
    default_config: Mapping[str, object] | None = None,
    until: int | None = None,
) -> Iterator[TickState]:
    """Every tick of every NameServer in ``records``: NameServers in name order, ticks in time
    order. ``until`` defaults to the latest ``ts`` of all the records (the covered range)."""
    groups = group_by_namesrv(records)
    if until is None and groups:
        until = max(int(r["ts"]) for group in groups.values() for r in group)
    for namesrv in sorted(groups):
        yield from NamesrvReplay(
            namesrv,
            groups[namesrv],
            default_profile=default_profile,
            default_start_ts=default_start_ts,
            default_config=default_config,
        ).run(until)


def state_at(
    records: Iterable[Mapping[str, Any]],
    namesrv: str,
    t: int,
    *,
    default_profile: str,
    default_start_ts: int | None = None,
    default_config: Mapping[str, object] | None = None,
) -> Snapshot:
    """The state of ``namesrv`` at ``t``: after every record with ``ts <= t`` and every tick ``<= t``."""
    own = [r for r in records if r.get("namesrv") == namesrv]
    run = NamesrvReplay(
        namesrv, own, default_profile=default_profile, default_start_ts=default_start_ts,
        default_config=default_config,
    )
    for _ in run.run(until=t):
        pass
    return run.nameserver.snapshot()
