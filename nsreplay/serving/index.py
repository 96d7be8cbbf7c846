"""The serving shim's point-in-time index: the latest published run in memory, answered in O(log n).

    index = RouteIndex.load("warehouse")              # the run named by the latest gold.publish_log row
    index.route("10.0.0.10:9876", "orders", t, request_version=401)   # an Answer, like HistorySource
    index.cluster(ns, t, request_version=401, shape="standard")
    index.table_rows(ns, "brokerLiveTable", t)        # (instant, tick the state reflects, rows alive at it)
    index.route_history(ns, "orders", t0, t1)         # instants where the route answer changed
    index.route_history_page(ns, "orders", t0, t1, max_changes=100, max_examined=1000)   # a bounded part of them

Contract:

* It reads exactly what :class:`nsreplay.history.PublishedHistory` reads (the table versions named
  by the latest publish row; the publish row's coverage), with delta-rs metadata and pyarrow only.
* It answers exactly like :class:`nsreplay.serving.source.HistorySource` (same renderer: the
  answers are :func:`nsreplay.model.route_info` / ``cluster_info`` / ``topic_list`` of the state at
  ``t``), raising :class:`~nsreplay.history.OutsideCoverageError` (subclasses
  :class:`UnknownNamesrvError`, :class:`OutsideRangeError`) and
  :class:`~nsreplay.history.NotPublishedError` like it. ``t=None`` is the end of the covered range.
* The tables a route, cluster or topic-list answer is made of (:data:`RESIDENT`: topicQueueTable,
  brokerAddrTable, clusterAddrTable, filterServerTable, orderTopicConf) are held in memory,
  columnar, sorted by ``(namesrv, key, valid_from)``; a lookup is one ``searchsorted`` over a
  composite ``key_id << 40 | (valid_from - base)`` array per key set, so O(k log n) for k keys.
  Per row only that array, ``valid_to``, the code of the file it was read from and the columns that
  are not the key are held (strings dictionary-encoded; a QueueData's four numbers as an index into
  their distinct values): the keys are held once per key, and the gold columns are put back
  together when a row is returned (``_Intervals.columns``). About 1.7 MB a day of bench-day's history.
* A reload (``RouteIndex.load(root, previous=index)``, what ``nsreplay serve`` does when a new
  publish appears) reads only the files of the published versions that the previous index did not
  read, keeps its rows of the files that are still part of them (by their file codes: 2 bytes a
  row) and drops the others, and merges the two without decoding a held row again
  (:meth:`_Intervals.merged`). What is held does not depend on the order rows were read in
  (dictionaries and distinct values sorted), so the result is the index a full load builds, array
  for array. A table most of whose files changed (a compaction), or that cannot be merged, is read
  whole (:func:`_resident_table`); the previous index is left as it was.
* The broker-live table is not held: a row per broker per heartbeat, it is 87 % of the interval
  rows of a day (bench-day: 1.1 M rows, 227 of 262 MB), and only full snapshots and
  ``/v1/tables`` need it. Those read the live rows of an instant from the published files whose
  Delta statistics may hold it (:class:`~nsreplay.storage.stored_table.StoredTable`): tens of
  milliseconds a lookup, while the route, cluster and topic-list lookups never touch it.
* ``gold.route_changes`` is not held either: only route history shows its rows, and a route
  history reads them once per request, from the files whose statistics may hold one of the
  instants at which the answer changed. So what the index holds is the route tables' intervals,
  and a route history request costs one read of a few files on top of its rendering. At most
  ``stored_reads`` reads of published files (both tables) run at once, whatever the requests in
  flight: each decodes whole row groups.
* A topic's route answer can only change at the instants where one of the rows it is made of
  starts or ends (:meth:`RouteIndex._route_instants`); rendered answers are cached per (NameServer,
  topic, shape, segment between two such instants), which keeps the cache exact, so a repeated
  lookup costs one bisection.
* A route history's work is bounded by what it is asked for, not by the window's length
  (:meth:`RouteIndex.route_history_page`): it renders the answer at the instants where it may change
  in the window, in time order, and stops after ``max_examined`` of them or when it finds a change
  beyond ``max_changes``; only then does it read the change rows, of the changes it returns. Which
  instants are changes does not depend on the window (the answer at ``ts`` differs from the answer at
  ``ts - 1``), so a window split anywhere gives the same changes, none lost or repeated: the pages
  of a window are the answers of consecutive windows.
* Immutable after :meth:`RouteIndex.load`; safe to share between threads and event loops (a merge
  only reads the previous index).
"""

from __future__ import annotations

import bisect
import json
import re
import threading
import time
from collections import OrderedDict, deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from nsreplay.history import Coverage, NotPublishedError, OutsideCoverageError, published_run
from nsreplay.model import (
    Answer,
    BrokerData,
    BrokerLiveInfo,
    DataVersion,
    FrozenDict,
    NamesrvConfig,
    QueueData,
    Snapshot,
    cluster_info,
    route_info,
    topic_list,
)
from nsreplay.model.render import ROUTE_TABLES, STANDARD_JSON_MIN_VERSION, Shape
from nsreplay.runtime import format_ms
from nsreplay.storage.stored_table import CONCURRENT_READS, StoredTable
from nsreplay.storage import DataFile, TableSpec, Warehouse, dataset
from schemas.gold import (
    INTERVAL_KEYS,
    INTERVAL_TABLES,
    NAMESRV_EPOCHS,
    ROUTE_CHANGES,
)

__all__ = [
    "HistoryPage",
    "HistoryTooLongError",
    "IndexBuildError",
    "OutsideRangeError",
    "RESIDENT",
    "RouteChange",
    "RouteIndex",
    "STOPPED_BY_CHANGES",
    "STOPPED_BY_EXAMINED",
    "TABLES",
    "TableLoad",
    "UnknownNamesrvError",
    "UnknownTableError",
]

_SHIFT = 40  # composite = key_id << 40 | (valid_from - base): 2**40 ms is ~34 years of history
_LOW = (1 << _SHIFT) - 1  # the valid_from bits of a composite
_OPEN = np.iinfo(np.int64).max  # valid_to of a row still valid at the end of the covered range
_EMPTY = np.empty(0, dtype=np.int64)

#: The tables /v1/tables serves: API name → gold interval table (the five route tables + order conf).
TABLES: dict[str, TableSpec] = INTERVAL_TABLES
_KEYS: dict[str, tuple[str, ...]] = {name: INTERVAL_KEYS[spec.name] for name, spec in TABLES.items()}
_STORED = "brokerLiveTable"  # read per request (see the module docstring)
#: The tables held in memory: every table of TABLES but the broker-live table.
RESIDENT: dict[str, TableSpec] = {name: spec for name, spec in TABLES.items() if name != _STORED}
_CHANGE_COLUMNS = ["ts", "tick_ts", "phase", "record_rank", "table", "key", "op", "before", "after", "cause"]
#: The four numbers of a QueueData, in its constructor's order (held as distinct rows: ``_Intervals``).
QUEUE_NUMBERS = ("read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag")
_LIVE_COLUMNS = ["cluster", "broker_addr", "last_update_ts", "heartbeat_timeout_ms", "dv_state_version", "dv_timestamp", "dv_counter", "conn", "ha_server_addr"]


class UnknownNamesrvError(OutsideCoverageError):
    """The NameServer is not covered by the published run (message lists the known ones)."""


class OutsideRangeError(OutsideCoverageError):
    """The instant is outside the NameServer's covered range (message names the range)."""


class UnknownTableError(KeyError):
    """A table name that /v1/tables does not serve."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown table"


class IndexBuildError(RuntimeError):
    """The published tables cannot be indexed (e.g. a history spanning more than 34 years)."""


#: Why a route history stopped before the end of its window (:attr:`HistoryPage.stopped_by`).
STOPPED_BY_CHANGES = "changes"
STOPPED_BY_EXAMINED = "examined"


class HistoryTooLongError(ValueError):
    """A route history window asked for whole cannot be answered within its bounds
    (:meth:`RouteIndex.route_history_page` with ``whole=True``). Nothing was read from storage.

    ``start``/``end``: the window; ``through``: the end of its longest head that can be answered
    whole (``[start, through]``); ``stopped_by``: :data:`STOPPED_BY_CHANGES` (a change beyond
    ``limit`` follows) or :data:`STOPPED_BY_EXAMINED` (``limit`` instants examined)."""

    def __init__(self, namesrv: str, topic: str, start: int, end: int, through: int, stopped_by: str, limit: int) -> None:
        self.namesrv, self.topic = namesrv, topic
        self.start, self.end, self.through = start, end, through
        self.stopped_by, self.limit = stopped_by, limit
        what = "route changes" if stopped_by == STOPPED_BY_CHANGES else "instants at which the route may change"
        super().__init__(f"the window [{start}, {end}] of {topic!r} on {namesrv} needs more than {limit} {what}; [{start}, {through}] does not")


@dataclass(frozen=True)
class _Epoch:
    start_ts: int
    end_ts: int
    profile: str
    config: NamesrvConfig
    first_tick: int
    tick_interval: int

    def tick_at(self, t: int) -> int | None:
        """The last scan tick <= t of this epoch's grid (None before its first tick)."""
        if t < self.first_tick:
            return None
        return self.first_tick + (t - self.first_tick) // self.tick_interval * self.tick_interval


@dataclass(frozen=True)
class RouteChange:
    """One instant at which a topic's route answer changed (see :meth:`RouteIndex.route_history`)."""

    ts: int
    tick_ts: int | None
    answer: Answer
    changes: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class HistoryPage:
    """The route changes of the window ``[start, end]`` that lie in ``[start, through]``: exactly what
    :meth:`RouteIndex.route_history` answers for the window ``[start, through]``.

    ``through == end`` (``stopped_by`` None) when the whole window is answered; otherwise the rest is
    the window ``[through + 1, end]`` and ``stopped_by`` says which bound ended this part."""

    start: int
    end: int
    through: int
    stopped_by: str | None
    changes: list[RouteChange]

    @property
    def complete(self) -> bool:
        """Whether the page answers the whole window."""
        return self.stopped_by is None


class _Intervals:
    """One interval table: rows sorted by (namesrv, key, valid_from), looked up per key by bisection.

    What is held per row is what a lookup needs: the composite ``comp`` array (key id and
    ``valid_from``) and ``valid_to``, for the bisection, and the table's other columns (``values``:
    strings dictionary-encoded with the narrowest index type; the int32 columns named in
    ``distinct_rows`` as an index into their distinct combinations, ``row_values``). The key columns
    are held once per key (``key_values``), not per row; :meth:`columns` puts any rows' gold columns
    back together."""

    def __init__(self, parts: Iterable[tuple[pa.Table, np.ndarray]], schema: pa.Schema, key_cols: Sequence[str], horizon: int,
                 distinct_rows: Sequence[str] = (), files: Sequence[str] = ()) -> None:
        """Index the rows of ``parts`` (the table's columns, ``schema``; each part with its rows' codes
        into ``files``, the sorted paths of the files they were read from), one part at a time.

        Each part is reduced to what is held before the next is decoded: its rows' key ids,
        ``valid_from`` and ``valid_to``, file codes, and per value column a code into the distinct
        values of every part so far (strings; the ``distinct_rows`` columns together) or, for other
        types, the column itself. So the peak of a load is what is held plus one part and one sort of
        the bisection arrays, not the decoded table and its sorted copy.

        What is held depends on the rows only, not on the order of the files or parts: dictionaries
        and distinct rows are sorted, file codes index the sorted ``files`` (so an index merged by
        :meth:`merged` equals one built from the same files, array for array)."""
        self.schema = schema
        self.files: tuple[str, ...] = tuple(files)
        self.key_cols: tuple[str, ...] = ("namesrv", *key_cols)
        self.key_types = {c: schema.field(c).type for c in self.key_cols}
        value_names = [f.name for f in schema if f.name not in self.key_types and f.name not in ("valid_from", "valid_to")]
        self.row_columns: tuple[str, ...] = tuple(distinct_rows)
        strings = [c for c in value_names if _is_string(schema.field(c).type) and c not in self.row_columns]
        others = [c for c in value_names if c not in strings and c not in self.row_columns]
        keys, rows = _Book(), _Book()
        books = {c: _Book() for c in strings}
        kept: dict[str, list[pa.ChunkedArray]] = {c: [] for c in others}
        starts_at, ends_at, file_codes = [], [], []
        for part, codes in parts:
            if not part.num_rows:
                continue
            file_codes.append(codes)
            keys.add(*_distinct_keys([part.column(c) for c in self.key_cols]))
            for c, book in books.items():
                book.add(*_distinct_keys([part.column(c)]))
            if self.row_columns:
                values, index = _distinct_rows([part.column(c) for c in self.row_columns])
                rows.add([tuple(r) for r in values.tolist()], index)
            for c in others:
                kept[c].append(part.column(c))
            starts_at.append(part.column("valid_from").to_numpy().astype(np.int64))
            ends_at.append(pc.fill_null(part.column("valid_to"), _OPEN).to_numpy().astype(np.int64))
            del part
            pa.default_memory_pool().release_unused()  # the decoded part's buffers, before the next is read
        key_list = list(keys.values)
        # keys in (namesrv, key) order, NULL last as Arrow sorts, then each key's rows by valid_from
        by_key = _key_order(key_list, [self.key_types[c] for c in self.key_cols])
        rank = np.empty(len(key_list), dtype=np.int64)
        rank[by_key] = np.arange(len(key_list), dtype=np.int64)
        comp = rank[keys.codes()]  # each row's key id, then (in place) the composite array
        valid_from = np.concatenate(starts_at) if starts_at else np.empty(0, dtype=np.int64)  # written in place below
        del starts_at
        self.n = n = len(comp)
        self.n_keys = len(key_list)
        self.key_values: list[tuple[Any, ...]] = [key_list[k] for k in by_key]
        self.base = int(valid_from.min()) if n else 0
        if n and (max(horizon, int(valid_from.max())) - self.base >= 1 << _SHIFT or self.n_keys >= 1 << (62 - _SHIFT)):
            raise IndexBuildError(f"cannot index {n} rows / {self.n_keys} keys spanning more than 2**{_SHIFT} ms")
        # key_id << _SHIFT | (valid_from - base) orders rows by key, then valid_from; one stable sort
        np.subtract(valid_from, self.base, out=valid_from)
        np.left_shift(comp, _SHIFT, out=comp)
        np.bitwise_or(comp, valid_from, out=comp)
        del valid_from
        order = np.argsort(comp, kind="stable")
        self.comp = comp[order]
        del comp
        self.valid_to = np.concatenate(ends_at)[order] if ends_at else _EMPTY
        del ends_at
        self.file_code = _narrow(np.concatenate(file_codes)[order] if file_codes else _EMPTY, len(self.files))
        del file_codes
        #: A merged table's rows' indices in the held table they were kept from, -1 for a row read
        #: (:meth:`merged` with ``origin=True``); None otherwise.
        self.origin: np.ndarray | None = None
        self._index_keys()
        taken = pa.array(order, type=pa.int64())
        columns: dict[str, pa.Array] = {}
        for c in value_names:
            if c in books:
                columns[c] = _dictionary_column(books[c], order, schema.field(c).type)
            elif c in kept:
                columns[c] = pa.chunked_array(kept.pop(c), type=schema.field(c).type).take(taken).combine_chunks()
        self.values = pa.table(columns, schema=pa.schema([pa.field(c, a.type) for c, a in columns.items()]))
        distinct = np.array(list(rows.values), dtype=np.int32).reshape(len(rows.values), len(self.row_columns))
        self.row_values, self.row_index = _sorted_rows(distinct, rows.codes()[order] if self.row_columns else _EMPTY)
        self.row_types = [schema.field(c).type for c in self.row_columns]

    def _index_keys(self, held: "_Intervals | None" = None) -> None:
        """``key_start`` and ``ns_keys`` from ``comp`` and ``key_values`` (``ns_keys`` is ``held``'s
        when the key list is ``held``'s)."""
        # a key's first row: the first composite at or above key_id << _SHIFT
        self.key_start = np.searchsorted(self.comp, np.arange(self.n_keys + 1, dtype=np.int64) << _SHIFT).astype(np.int64)
        if held is not None and self.key_values is held.key_values:
            self.ns_keys = held.ns_keys
            return
        self.ns_keys: dict[str, tuple[int, int]] = {}
        for k, key in enumerate(self.key_values):
            lo, _ = self.ns_keys.get(key[0], (k, k))
            self.ns_keys[key[0]] = (lo, k + 1)

    @classmethod
    def merged(cls, held: "_Intervals", rows: np.ndarray, added: "_Intervals", files: Sequence[str], horizon: int,
               origin: bool = False) -> "_Intervals":
        """The table of the rows ``rows`` of ``held`` (ascending row indices) and every row of
        ``added`` (the same table's columns; ``files``: the sorted paths of the files of both), equal
        array for array to the table built from those rows' files by the constructor. When its keys
        are ``held``'s, its ``key_values`` and ``ns_keys`` are ``held``'s objects (what is derived
        from them may be reused: :meth:`RouteIndex._load_topic_columns`); with ``origin``, its
        :attr:`origin` says which held row each row is (the objects made of a held row may be reused).

        No row is decoded again: the held rows' arrays are re-keyed (key ids into the union of the
        keys that keep a row, ``valid_from`` against the new base) and the two sorted runs merged by
        one stable sort (O(n) on two runs), dictionaries and distinct rows re-coded and pruned to
        what the rows use. Raises :class:`_NotReusable` when two rows share a key and ``valid_from``
        (their order would be the files' order, which only a full load reproduces), IndexBuildError
        like the constructor."""
        if held.schema != added.schema or held.key_cols != added.key_cols or held.row_columns != added.row_columns:
            raise _NotReusable("the table's columns changed")
        out = cls.__new__(cls)
        out.schema, out.files, out.key_cols, out.key_types = added.schema, tuple(files), held.key_cols, held.key_types
        out.row_columns, out.row_types = held.row_columns, held.row_types
        rows = np.asarray(rows, dtype=np.int64)
        row_key = np.searchsorted(held.key_start, rows, side="right") - 1  # non-decreasing: rows ascend
        first = np.ones(len(row_key), dtype=bool)
        first[1:] = row_key[1:] != row_key[:-1]
        kept_keys = row_key[first]
        # the keys that keep a row, then the added rows' keys not among them, sorted together
        union = [held.key_values[k] for k in kept_keys.tolist()]
        where = dict(zip(union, range(len(union))))
        added_at = np.array([where.setdefault(key, len(where)) for key in added.key_values], dtype=np.int64)
        if len(where) == len(union):  # no key added: the kept keys are in key order, as held
            by_key = list(range(len(union)))
            out.key_values = held.key_values if len(union) == held.n_keys else union  # the usual reload: no key gained or lost
        else:
            union.extend(list(where)[len(union):])
            by_key = _key_order(union, [held.key_types[c] for c in held.key_cols])
            out.key_values = [union[k] for k in by_key]
            if out.key_values == held.key_values:  # keys whose only rows were read again
                out.key_values = held.key_values
        out.n_keys = len(out.key_values)
        rank = np.empty(len(union), dtype=np.int64)
        rank[by_key] = np.arange(len(union), dtype=np.int64)
        held_rank = np.full(held.n_keys, -1, dtype=np.int64)
        held_rank[kept_keys] = rank[:len(kept_keys)]
        added_rank = rank[added_at]
        starts = [(held.comp[rows] & _LOW) + held.base, (added.comp & _LOW) + added.base]
        out.n = n = len(rows) + added.n
        out.base = min((int(s.min()) for s in starts if len(s)), default=0)
        if n and (max([horizon, *(int(s.max()) for s in starts if len(s))]) - out.base >= 1 << _SHIFT or out.n_keys >= 1 << (62 - _SHIFT)):
            raise IndexBuildError(f"cannot index {n} rows / {out.n_keys} keys spanning more than 2**{_SHIFT} ms")
        comp = np.concatenate([
            (held_rank[row_key] << _SHIFT) | (starts[0] - out.base),
            (added_rank[added.comp >> _SHIFT] << _SHIFT) | (starts[1] - out.base),
        ])
        del starts, row_key
        order = np.argsort(comp, kind="stable")  # two sorted runs: a merge
        out.comp = comp[order]
        del comp
        out.origin = np.concatenate([rows, np.full(added.n, -1, dtype=np.int64)])[order] if origin else None
        if n > 1 and bool(np.any(out.comp[1:] == out.comp[:-1])):
            raise _NotReusable("two rows share a key and valid_from")
        out.valid_to = np.concatenate([held.valid_to[rows], added.valid_to])[order]
        position = {path: i for i, path in enumerate(out.files)}
        held_files = np.array([position.get(p, -1) for p in held.files], dtype=np.int64)
        added_files = np.array([position[p] for p in added.files], dtype=np.int64)
        out.file_code = _narrow(np.concatenate([held_files[held.file_code[rows]], added_files[added.file_code]])[order], len(out.files))
        if n and int(out.file_code.min()) < 0:
            raise ValueError("a held row kept from a file that is not in the new version")
        out._index_keys(held)
        taken, order_taken = pa.array(rows, type=pa.int64()), pa.array(order, type=pa.int64())
        columns: dict[str, pa.Array] = {}
        for c in held.values.column_names:
            a, b = held.values.column(c).combine_chunks(), added.values.column(c).combine_chunks()
            if pa.types.is_dictionary(a.type):
                columns[c] = _merged_dictionary_array(a, rows, b, order)
            else:
                columns[c] = pa.chunked_array([a.take(taken), b], type=a.type).take(order_taken).combine_chunks()  # as the constructor builds it
        out.values = pa.table(columns, schema=pa.schema([pa.field(c, a.type) for c, a in columns.items()]))
        codes = _EMPTY
        if out.row_columns:
            codes = np.concatenate([held.row_index[rows].astype(np.int64), added.row_index.astype(np.int64) + len(held.row_values)])[order]
        out.row_values, out.row_index = _sorted_rows(np.concatenate([held.row_values, added.row_values]), codes)
        return out

    def alive_with_keys(self, keys: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray]:
        """(row indices, their key ids) of the rows of ``keys`` valid at ``t``, in ``keys`` order.

        Per key: the last row with ``valid_from <= t`` (one bisection of the composite array), kept
        when it belongs to that key and ``t < valid_to``."""
        if not len(keys) or t < self.base:
            return _EMPTY, _EMPTY
        idx = np.searchsorted(self.comp, (keys << _SHIFT) | (t - self.base), side="right") - 1
        ok = (idx >= self.key_start[keys]) & (self.valid_to[idx] > t)
        return idx[ok], keys[ok]

    def alive(self, keys: np.ndarray, t: int) -> np.ndarray:
        """Row indices of the rows of ``keys`` valid at ``t`` (see :meth:`alive_with_keys`)."""
        return self.alive_with_keys(keys, t)[0]

    def alive_ns(self, namesrv: str, t: int) -> np.ndarray:
        """Rows of every key of ``namesrv`` valid at ``t``, in key order."""
        return self.alive_ns_with_keys(namesrv, t)[0]

    def alive_ns_with_keys(self, namesrv: str, t: int) -> tuple[np.ndarray, list[tuple[Any, ...]]]:
        """(rows, their key values) of every key of ``namesrv`` valid at ``t``, in key order."""
        lo, hi = self.ns_keys.get(namesrv, (0, 0))
        rows, keys = self.alive_with_keys(np.arange(lo, hi, dtype=np.int64), t)
        return rows, [self.key_values[k] for k in keys.tolist()]

    def boundaries(self, keys: Iterable[int]) -> np.ndarray:
        """Every valid_from / valid_to of the rows of ``keys`` (instants where they can change)."""
        parts = []
        for k in keys:
            lo, hi = int(self.key_start[k]), int(self.key_start[k + 1])
            parts.append((self.comp[lo:hi] & ((1 << _SHIFT) - 1)) + self.base)
            parts.append(self.valid_to[lo:hi])
        return np.concatenate(parts) if parts else _EMPTY

    def columns(self, rows: np.ndarray | None, names: Sequence[str]) -> pa.Table:
        """The gold columns ``names`` of the rows at ``rows`` (every row when None), in that order:
        a key column from each row's key, ``valid_from`` and ``valid_to`` (NULL while open) from the
        bisection arrays, the others from ``values``."""
        rows = np.arange(self.n, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
        taken = pa.array(rows, type=pa.int64())
        key_ids: list[int] | None = None
        out: dict[str, pa.Array] = {}
        for name in names:
            if name in self.key_types:
                if key_ids is None:
                    key_ids = (np.searchsorted(self.key_start, rows, side="right") - 1).tolist()
                pos = self.key_cols.index(name)
                out[name] = pa.array([self.key_values[k][pos] for k in key_ids], type=self.key_types[name])
            elif name == "valid_from":
                out[name] = pa.array((self.comp[rows] & ((1 << _SHIFT) - 1)) + self.base, type=pa.int64())
            elif name == "valid_to":
                ends = self.valid_to[rows]
                out[name] = pa.array(ends, type=pa.int64(), mask=ends == _OPEN)
            elif name in self.row_columns:
                j = self.row_columns.index(name)
                out[name] = pa.array(self.row_values[self.row_index[rows], j], type=self.row_types[j])
            else:
                out[name] = self.values.column(name).take(taken)
        return pa.table(out)

    def nbytes(self) -> int:
        """Bytes held: the value columns, the bisection arrays, the key boundaries and the rows' file
        codes (the key tuples and file paths, one per key and file, are Python objects and not
        counted)."""
        return (self.values.nbytes + self.comp.nbytes + self.valid_to.nbytes + self.key_start.nbytes + self.row_values.nbytes
                + self.row_index.nbytes + self.file_code.nbytes)


def _distinct_rows(columns: Sequence[pa.ChunkedArray]) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows, each row's index into them) of equal-length int32 columns without nulls.
    Hash-based (each column dictionary-encoded, then the combination of the codes), so O(rows): a
    sort of the rows (``np.unique(axis=0)``) took 1.1 s for 1.2 M rows."""
    n = len(columns[0]) if columns else 0
    if n == 0:
        return np.empty((0, len(columns)), dtype=np.int32), np.empty(0, dtype=np.int64)
    encoded = [_chunk(c).dictionary_encode() for c in columns]
    combined = _combined_codes(encoded)
    if combined is None:  # the combined code would overflow: sort instead
        values, index = np.unique(np.stack([c.to_numpy().astype(np.int32) for c in columns], axis=1), axis=0, return_inverse=True)
        return values, index.reshape(-1)
    distinct, index = combined
    values = np.empty((len(distinct[0]), len(columns)), dtype=np.int32)
    for j, digits in enumerate(distinct):
        values[:, j] = encoded[j].dictionary.to_numpy()[digits]
    return values, index


def _distinct_keys(columns: Sequence[pa.Array | pa.ChunkedArray]) -> tuple[list[tuple[Any, ...]], np.ndarray]:
    """(distinct rows as tuples, each row's index into them) of equal-length columns of any type,
    NULL a value of its own; hash-based like :func:`_distinct_rows`."""
    encoded = [_chunk(c).dictionary_encode(null_encoding="encode") for c in columns]
    combined = _combined_codes(encoded)
    if combined is None:
        rows = list(zip(*(c.to_pylist() for c in columns)))
        first: dict[tuple[Any, ...], int] = {}
        index = np.array([first.setdefault(r, len(first)) for r in rows], dtype=np.int64)
        return list(first), index
    distinct, index = combined
    names = [e.dictionary.to_pylist() for e in encoded]
    return list(zip(*([names[j][d] for d in digits.tolist()] for j, digits in enumerate(distinct)))), index


def _chunk(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _combined_codes(encoded: Sequence[pa.DictionaryArray]) -> tuple[list[np.ndarray], np.ndarray] | None:
    """The distinct combinations of the dictionary codes of ``encoded`` (per column, each
    combination's code) and each row's index into them; None when a combined code would not fit in
    62 bits."""
    sizes = [max(len(e.dictionary), 1) for e in encoded]
    if float(np.prod([float(x) for x in sizes])) >= 2.0**62:
        return None
    code = np.zeros(len(encoded[0]), dtype=np.int64)
    for e, size in zip(encoded, sizes):
        code = code * size + e.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    combined = pa.array(code).dictionary_encode()
    rest = combined.dictionary.to_numpy().copy()
    digits: list[np.ndarray] = [np.empty(0)] * len(encoded)
    for j in range(len(encoded) - 1, -1, -1):
        rest, digits[j] = np.divmod(rest, sizes[j])
    return digits, combined.indices.to_numpy().astype(np.int64)


def _is_string(type_: pa.DataType) -> bool:
    return pa.types.is_string(type_) or pa.types.is_large_string(type_)


class _Book:
    """The distinct values of a column (or of a tuple of columns) across the parts of a load, in
    order of first sight, and each row's int32 code into them, part by part."""

    def __init__(self) -> None:
        self.values: dict[Any, int] = {}
        self._codes: list[np.ndarray] = []

    def add(self, distinct: Sequence[Any], index: np.ndarray) -> None:
        """A part: its distinct values and each of its rows' index into them."""
        first = np.array([self.values.setdefault(v, len(self.values)) for v in distinct], dtype=np.int32)
        self._codes.append(first[index])

    def codes(self) -> np.ndarray:
        """Every row's code, parts in the order they were added."""
        return np.concatenate(self._codes) if self._codes else np.empty(0, dtype=np.int32)


def _dictionary_column(book: _Book, order: np.ndarray, value_type: pa.DataType) -> pa.DictionaryArray:
    """The string column whose distinct values (1-tuples, NULL one of them) and row codes ``book``
    holds, rows in ``order`` (see :func:`_dictionary_array`)."""
    return _dictionary_array(pa.array([v for (v,) in book.values], type=value_type), book.codes()[order].astype(np.int64))


def _dictionary_array(values: pa.Array, codes: np.ndarray) -> pa.DictionaryArray:
    """The column whose rows are ``values[codes]`` (a code < 0 or naming a NULL value: NULL),
    dictionary-encoded: the distinct values the rows use, sorted, with the narrowest index type their
    number allows. A fraction of the memory when values repeat (a cause, a zone, an order conf per
    row), and the same arrays whatever order or duplicates ``values`` has."""
    distinct = values.unique().drop_null() if values.null_count else values.unique()
    entries = pc.fill_null(pc.index_in(values, value_set=distinct), -1).to_numpy().astype(np.int64)
    codes = np.where(codes < 0, -1, entries[np.maximum(codes, 0)]) if len(entries) else np.full(len(codes), -1, dtype=np.int64)
    used = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(distinct)))
    dictionary = distinct.take(pa.array(used, type=pa.int64()))
    by_value = pc.sort_indices(dictionary).to_numpy()
    new_code = np.full(len(distinct), -1, dtype=np.int64)
    new_code[used[by_value]] = np.arange(len(used), dtype=np.int64)
    mask = codes < 0
    codes = np.where(mask, 0, new_code[np.maximum(codes, 0)]) if len(new_code) else np.zeros(len(codes), dtype=np.int64)
    size = len(used)
    index = pa.int8() if size < 1 << 7 else pa.int16() if size < 1 << 15 else pa.int32()
    indices = pa.array(codes.astype(index.to_pandas_dtype()), type=index, mask=mask if mask.any() else None)
    return pa.DictionaryArray.from_arrays(indices, dictionary.take(pa.array(by_value, type=pa.int64())))


def _merged_dictionary_array(held: pa.DictionaryArray, rows: np.ndarray, added: pa.DictionaryArray, order: np.ndarray) -> pa.DictionaryArray:
    """:func:`_dictionary_array` of the rows ``rows`` of ``held`` followed by every row of ``added``
    (two columns that function made: dictionaries sorted, distinct, without NULL), in ``order``.

    The same array, made with the row codes in their narrow type and re-coded through a table of
    each dictionary's entries (one gather a row) instead of int64 codes into the concatenated
    dictionaries, re-coded twice: at 32 days of bench-day (2.36 M topic rows), 0.04 s of a reload's
    merge instead of 0.18 s (cProfile)."""
    kept_codes, kept_used = _entry_codes(held, rows)
    added_codes, added_used = _entry_codes(added, None)
    used = pa.concat_arrays([held.dictionary.filter(pa.array(kept_used)), added.dictionary.filter(pa.array(added_used))]).unique()
    dictionary = used.take(pc.sort_indices(used))
    size = len(dictionary)
    index = pa.int8() if size < 1 << 7 else pa.int16() if size < 1 << 15 else pa.int32()
    dtype = index.to_pandas_dtype()

    def table(column: pa.DictionaryArray, used: np.ndarray) -> np.ndarray:  # entry (and NULL, last) -> new code, -1 for NULL
        new = np.full(len(column.dictionary) + 1, -1, dtype=dtype)
        new[:-1][used] = pc.index_in(column.dictionary.filter(pa.array(used)), value_set=dictionary).to_numpy()
        return new

    codes = np.concatenate([table(held, kept_used)[kept_codes], table(added, added_used)[added_codes]])[order]
    mask = codes < 0
    if mask.any():
        codes[mask] = 0
    return pa.DictionaryArray.from_arrays(pa.array(codes, type=index, mask=mask if mask.any() else None), dictionary)


def _entry_codes(column: pa.DictionaryArray, rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(the codes of ``column``'s rows ``rows`` (every row when None) in its index type, NULL as one
    past the last entry; which entries they use)."""
    size = len(column.dictionary)
    codes = pc.fill_null(column.indices, pa.scalar(size, column.indices.type)).to_numpy(zero_copy_only=False)
    if rows is not None:
        codes = codes[rows]
    return codes, np.bincount(codes, minlength=size + 1)[:size] > 0


def _sorted_rows(distinct: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the rows of ``distinct`` that ``codes`` use, distinct and sorted; each code's index into
    them, int16 when they are fewer than 2**15): the same arrays whatever order or duplicates
    ``distinct`` has."""
    used = np.flatnonzero(np.bincount(codes, minlength=len(distinct))) if len(codes) else np.empty(0, dtype=np.int64)
    values, inverse = np.unique(distinct[used], axis=0, return_inverse=True) if len(used) else (distinct[:0], np.empty(0, dtype=np.int64))
    new_code = np.zeros(len(distinct), dtype=np.int64)
    new_code[used] = inverse.reshape(-1)
    index_type = np.int32 if len(values) >= 1 << 15 else np.int16
    return values.astype(np.int32), new_code[codes].astype(index_type) if len(codes) else np.empty(0, dtype=index_type)


def _narrow(codes: np.ndarray, size: int) -> np.ndarray:
    """File codes (into ``size`` files) as int16, or int32 from 2**15 files on."""
    return codes.astype(np.int16 if size < 1 << 15 else np.int32)


def _key_order(keys: Sequence[tuple[Any, ...]], types: Sequence[pa.DataType]) -> list[int]:
    """The indices of distinct ``keys`` (tuples of values of ``types``) in key order: by their first
    value, then the next, NULL after every value; strings by code point (their UTF-8 bytes). One
    Arrow sort: a Python sort of 51,648 keys by a key function took 0.2–1.0 s, this 0.11–0.15 s."""
    if not keys:
        return []
    columns = {f"k{j}": pa.array([key[j] for key in keys], type=t) for j, t in enumerate(types)}
    return pc.sort_indices(pa.table(columns), sort_keys=[(c, "ascending", "at_end") for c in columns]).to_numpy().tolist()


class _NotReusable(Exception):
    """An index cannot be merged from a held one (the message says why): it is loaded whole."""


#: Rows of a table version decoded at once while the index is built (see :func:`_parts`).
PART_ROWS = 1 << 18
#: Files of a table version read ahead of the one being indexed (see :func:`_parts`).
FILES_AHEAD = 2


def _parts(spec: TableSpec, files: Sequence[DataFile], columns: list[str]) -> tuple[Iterator[tuple[pa.Table, np.ndarray]], pa.Schema, tuple[str, ...]]:
    """The ``columns`` of ``files`` (files of a version of ``spec``'s table) as tables of about
    :data:`PART_ROWS` rows (whole files, gathered so that the per-part work is not paid per file),
    each with its rows' codes into the files' sorted paths; their schema; those paths.

    The files are read by a few threads, at most :data:`FILES_AHEAD` files ahead of the part being
    indexed: the reads overlap each file's latency (object storage), and the decoded data waiting
    is a few files whatever the history. (A dataset scan reads ahead of a slow consumer up to
    Arrow's back-pressure threshold, not its ``*_readahead`` arguments: it held ~80 MB of decoded
    batches in a 16-day history's load, and that grew with the history.)"""
    data = dataset(spec, files)
    paths = tuple(sorted(f.path for f in files))
    code = {path: np.int32(i) for i, path in enumerate(paths)}
    by_fragment = list(zip(data.get_fragments(), files)) if files else []

    def read(item: tuple[pads.Fragment, DataFile]) -> tuple[pa.Table, np.ndarray]:
        fragment, data_file = item
        table = fragment.to_table(columns=columns, schema=data.schema, use_threads=False)
        return table, np.full(table.num_rows, code[data_file.path], dtype=np.int32)

    pending: list[tuple[pa.Table, np.ndarray]] = []

    def handed_over() -> tuple[pa.Table, np.ndarray]:  # the part, no longer referenced here while the caller works on it
        nonlocal pending
        taken, pending = pending, []
        return pa.concat_tables([t for t, _ in taken]), np.concatenate([c for _, c in taken])

    def gathered() -> Iterator[tuple[pa.Table, np.ndarray]]:
        rows = 0
        for table, codes in _in_order(by_fragment, read, FILES_AHEAD):
            pending.append((table, codes))
            rows += table.num_rows
            del table, codes
            if rows >= PART_ROWS:
                rows = 0
                yield handed_over()
        if pending:
            yield handed_over()

    return gathered(), pa.schema([data.schema.field(c) for c in columns]), paths


def _in_order(items: Iterable[Any], read: Callable[[Any], Any], ahead: int) -> Iterator[Any]:
    """``read(item)`` of each item, in order, by ``ahead`` threads: at most ``ahead`` reads run or
    wait to be taken beyond the one just returned. Closing the iterator waits for the reads in
    flight and drops their results."""
    with ThreadPoolExecutor(max_workers=ahead, thread_name_prefix="nsreplay-index-read") as pool:
        started: deque[Future[Any]] = deque()
        try:
            for item in items:
                started.append(pool.submit(read, item))
                if len(started) > ahead:
                    yield started.popleft().result()
            while started:
                yield started.popleft().result()
        finally:
            for future in started:
                future.cancel()


#: The tables whose rows the index makes a Python object of, one per row (a BrokerData): their merge
#: records the held row each row is (:attr:`_Intervals.origin`), so a reload reuses those objects.
_RENDERED_PER_ROW = ("brokerAddrTable",)

#: A table is merged from the previous index when the files to read hold at most this many times the
#: rows it keeps; otherwise it is read whole (:func:`_resident_table`).
MERGE_SHARE = 1.0


@dataclass(frozen=True)
class TableLoad:
    """How one resident table of an index was built (:attr:`RouteIndex.loads`).

    ``files_read``: the files decoded (sorted paths); ``files_kept``: the files whose rows were taken
    from the previous index, ``rows_kept`` of them; ``full``: read whole (no previous index, or
    ``reason`` says why it could not be reused)."""

    files_read: tuple[str, ...]
    files_kept: int
    rows_kept: int
    full: bool
    reason: str | None = None


def _resident_table(name: str, spec: TableSpec, files: Sequence[DataFile], horizon: int,
                    previous: _Intervals | None, why_not: str | None) -> tuple[_Intervals, TableLoad]:
    """The held table ``name`` (gold ``spec``) of the version whose files are ``files``, and how it was built.

    With ``previous`` (the same table of the index served, from the same warehouse) the rows of its
    files that are still in ``files`` are kept and only the other files are read
    (:meth:`_Intervals.merged`): the files a window's commit added; the rows of the files it removed
    (an overwrite of a window's slice, a compaction, a re-run of an old window) are dropped. It is
    read whole when there is no ``previous`` (``why_not`` says why, when there was one), when the
    files to read hold more than :data:`MERGE_SHARE` times the rows kept (most of the table
    replaced: a merge would cost about a load), or when the merge is refused (:class:`_NotReusable`).

    The files added and removed are those of the version against the files the held rows came from
    (``previous.files``), not the Delta log's actions between the two versions: the same set for a
    newer version, and right too for an older one (a publish that goes back) without reading a
    commit of the log, which a vacuum or a checkpoint may have made unreadable."""
    columns = _interval_columns(spec)
    distinct_rows = QUEUE_NUMBERS if name == "topicQueueTable" else ()

    def whole(reason: str | None) -> tuple[_Intervals, TableLoad]:
        parts, schema, paths = _parts(spec, files, columns)
        return _Intervals(parts, schema, _KEYS[name], horizon, distinct_rows, paths), TableLoad(paths, 0, 0, True, reason)

    if previous is None:
        return whole(why_not)
    paths = {f.path for f in files}
    held = set(previous.files)
    added = [f for f in files if f.path not in held]
    still = np.array([p in paths for p in previous.files], dtype=bool)
    rows = np.flatnonzero(still[previous.file_code]) if len(still) else _EMPTY
    to_read = sum(f.num_records if f.num_records is not None else 1 << 62 for f in added)
    if to_read > MERGE_SHARE * len(rows):
        return whole(f"{len(added)} of {len(files)} files to read ({to_read if to_read < 1 << 62 else 'unknown'} rows) for {len(rows)} kept")
    parts, schema, added_paths = _parts(spec, added, columns)
    try:
        merged = _Intervals.merged(previous, rows, _Intervals(parts, schema, _KEYS[name], horizon, distinct_rows, added_paths), sorted(paths), horizon,
                                   origin=name in _RENDERED_PER_ROW)
    except _NotReusable as exc:
        return whole(str(exc))
    return merged, TableLoad(added_paths, int(still.sum()), len(rows), False)


def _read(warehouse: Warehouse, spec: TableSpec, version: int, columns: list[str]) -> pa.Table:
    return dataset(spec, warehouse.files(spec, version)).to_table(columns=columns)


def _interval_columns(spec: TableSpec) -> list[str]:
    return [f for f in spec.schema.fieldNames() if f != "run_id"]


class _LRU:
    """A small thread-safe LRU of rendered answers."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._data: OrderedDict[tuple[Any, ...], Answer] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> Answer | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: tuple[Any, ...], value: Answer) -> None:
        with self._lock:
            self._data[key] = value
            if len(self._data) > self._size:
                self._data.popitem(last=False)


class RouteIndex:
    """The latest published run of a warehouse, indexed for point-in-time lookups (module docstring)."""

    def __init__(self, root: str, *, cache_size: int = 20_000, stored_reads: int = CONCURRENT_READS,
                 previous: "RouteIndex | None" = None) -> None:
        started = time.perf_counter()
        warehouse = Warehouse(root, None, "delta-rs")
        # the publish log alone (raises NotPublishedError): each table's log is then opened once, by
        # this warehouse, for what the index reads (a PublishedHistory would open every table's log
        # and parse its files' statistics first: 0.15 s of a 1.3 s reload at 32 days of bench-day)
        published = published_run(warehouse, root)
        self.root = root
        self.run_id: str = published.run_id
        self.versions: dict[str, int] = dict(published.versions)
        self._coverage: dict[str, Coverage] = {n: published.coverage[n] for n in sorted(published.coverage)}
        horizon = max((c.to_ts for c in self._coverage.values()), default=0)
        self.warehouse_root: str = warehouse.root

        why_not = None
        if previous is not None and previous.warehouse_root != warehouse.root:
            why_not, previous = f"the previous index is of another warehouse ({previous.warehouse_root})", None
        self._tables: dict[str, _Intervals] = {}
        #: How each resident table was built (read whole, or merged from ``previous``): :class:`TableLoad`.
        self.loads: dict[str, TableLoad] = {}
        for name, spec in RESIDENT.items():
            files = warehouse.files(spec, self.versions[spec.name])
            held = previous._tables.get(name) if previous is not None else None
            self._tables[name], self.loads[name] = _resident_table(name, spec, files, horizon, held, why_not)
        live = TABLES[_STORED]
        reads = threading.BoundedSemaphore(stored_reads)  # shared: bounds the memory of the reads in flight
        self._live = StoredTable(warehouse, live, self.versions[live.name], ("valid_from", "valid_to"), reads=reads)
        self._load_epochs(warehouse)
        self._load_topic_columns(previous)
        self._changes = StoredTable(warehouse, ROUTE_CHANGES, self.versions[ROUTE_CHANGES.name], ("ts",), reads=reads)
        self._cache = _LRU(cache_size)
        self._instants: dict[tuple[str, str], list[int]] = {}
        pa.default_memory_pool().release_unused()  # give back the read/sort buffers
        self.build_seconds = time.perf_counter() - started

    @classmethod
    def load(cls, root: str, *, previous: "RouteIndex | None" = None, **kwargs: Any) -> "RouteIndex":
        """Index the latest published run of the warehouse at ``root``.

        With ``previous`` (the index served until now; left unchanged, it may keep serving meanwhile)
        the rows it holds from files that are still part of the published table versions are reused
        and only the other files are read: a reload after one more window costs about what the
        window's files cost, not the history. The index is the same, array for array, as one
        loaded without ``previous``; a table is read whole when reuse is impossible or not worth it
        (:func:`_resident_table`; :attr:`loads` says how each table was built)."""
        return cls(root, previous=previous, **kwargs)

    # -- loading --------------------------------------------------------------------------------------

    def _load_epochs(self, warehouse: Warehouse) -> None:
        rows = _read(warehouse, NAMESRV_EPOCHS, self.versions[NAMESRV_EPOCHS.name], _interval_columns(NAMESRV_EPOCHS)).to_pylist()
        self._epochs: dict[str, list[_Epoch]] = {}
        # an epoch that never ran (a start followed by another at the same ts: end_ts == start_ts) is
        # never the current one; kept, it would tie with the epoch that ran in the bisection below
        for r in sorted((r for r in rows if r["end_ts"] > r["start_ts"]), key=lambda r: (r["namesrv"], r["start_ts"])):
            self._epochs.setdefault(r["namesrv"], []).append(
                _Epoch(r["start_ts"], r["end_ts"], r["profile"], NamesrvConfig.from_mapping(dict(r["config"])), r["first_tick"], r["tick_interval"])
            )
        self._epoch_starts = {ns: [e.start_ts for e in es] for ns, es in self._epochs.items()}

    def _load_topic_columns(self, previous: "RouteIndex | None") -> None:
        """The Python maps the lookups use, from the held tables. With ``previous`` (the index merged
        from), a map made of key lists that are ``previous``'s objects (:meth:`_Intervals.merged`: no
        key gained or lost) is ``previous``'s, and the BrokerData of a broker row kept from it is its
        object: a reload builds only what its new rows and keys need (at 32 days of bench-day, the
        maps of 51,648 topic keys and the BrokerData of 19,968 broker rows took ~0.2 s). Never
        mutated after: shared by both indexes."""
        topics = self._tables["topicQueueTable"]
        brokers = self._tables["brokerAddrTable"]
        order = self._tables["orderTopicConf"]
        held = previous._tables if previous is not None else {}

        def same_keys(name: str) -> bool:
            return name in held and self._tables[name].key_values is held[name].key_values

        # a QueueData's four numbers, held by the table once per distinct value (a few hundred a
        # day: most topics have the same) with a row's index into them; here as tuples to render
        self._tq_values, self._tq_index = topics.row_values, topics.row_index
        self._tq_queues: list[tuple[int, int, int, int]] = [tuple(map(int, v)) for v in self._tq_values]
        if previous is not None and same_keys("topicQueueTable"):
            self._topic_keys: dict[tuple[str, str], tuple[int, int]] = previous._topic_keys
        else:
            self._topic_keys = {}
            for k, (ns, topic, _name) in enumerate(topics.key_values):
                lo, _ = self._topic_keys.get((ns, topic), (k, k))
                self._topic_keys[(ns, topic)] = (lo, k + 1)
        if previous is not None and same_keys("brokerAddrTable"):
            self._broker_key: dict[tuple[str, str], int] = previous._broker_key
        else:
            self._broker_key = {(ns, name): k for k, (ns, name) in enumerate(brokers.key_values)}
        self._broker_rows = self._broker_data(brokers, previous._broker_rows if previous is not None else None)
        brokers.origin = None  # used: not held
        if previous is not None and same_keys("orderTopicConf"):
            self._order_key: dict[tuple[str, str], int] = previous._order_key
        else:
            self._order_key = {(ns, topic): k for k, (ns, topic) in enumerate(order.key_values)}
        self._order_conf: list[str] = order.values.column("order_conf").to_pylist()
        # brokerNames a topic ever had, per NameServer: the brokers whose changes can change its route
        if previous is not None and same_keys("topicQueueTable") and same_keys("brokerAddrTable"):
            self._topic_brokers: dict[tuple[str, str], list[int]] = previous._topic_brokers
        else:
            self._topic_brokers = {}
            for k, (ns, topic, name) in enumerate(topics.key_values):
                bk = self._broker_key.get((ns, name))
                if bk is not None:
                    self._topic_brokers.setdefault((ns, topic), []).append(bk)

    @staticmethod
    def _broker_data(brokers: _Intervals, held: "list[BrokerData] | None") -> "list[BrokerData]":
        """The BrokerData of each row of ``brokers``: ``held[i]`` for a row that is row ``i`` of the
        table merged from (:attr:`_Intervals.origin`, with ``held`` that table's BrokerData), made
        from the row's columns otherwise."""
        origin = brokers.origin if held is not None else None
        made = np.arange(brokers.n, dtype=np.int64) if origin is None else np.flatnonzero(origin < 0)
        columns = ["cluster", "broker_name", "broker_addrs", "enable_acting_master", "zone_name"]
        new = [
            BrokerData(r["cluster"], r["broker_name"], FrozenDict(dict(r["broker_addrs"])), bool(r["enable_acting_master"]), r["zone_name"])
            for r in brokers.columns(made, columns).to_pylist()
        ] if len(made) else []
        if origin is None:
            return new
        assert held is not None
        out: list[Any] = [held[i] if i >= 0 else None for i in origin.tolist()]
        for r, data in zip(made.tolist(), new):
            out[r] = data
        return out

    def _queue_data(self, broker_name: str, row: int) -> QueueData:
        return QueueData(broker_name, *self._tq_queues[self._tq_index[row]])

    # -- coverage -------------------------------------------------------------------------------------

    def coverage(self) -> list[Coverage]:
        return [self._coverage[n] for n in sorted(self._coverage)]

    def topic_names(self, namesrv: str) -> list[str]:
        """Every topic ``namesrv`` ever had a QueueData for in this run, sorted."""
        return sorted({topic for ns, topic in self._topic_keys if ns == namesrv})

    def check(self, namesrv: str, t: int | None) -> int:
        """The instant to answer for: ``t`` (checked against the covered range) or, when None, the end
        of ``namesrv``'s covered range. Raises UnknownNamesrvError / OutsideRangeError."""
        cov = self._coverage.get(namesrv)
        if cov is None:
            known = ", ".join(sorted(self._coverage)) or "none"
            raise UnknownNamesrvError(f"unknown NameServer {namesrv!r}; known: {known}")
        if t is None:
            return cov.to_ts
        if not cov.from_ts <= t <= cov.to_ts:
            raise OutsideRangeError(
                f"{t} ({_iso(t)}) is outside the covered range of {namesrv}: "
                f"[{cov.from_ts}, {cov.to_ts}] ({format_ms(cov.from_ts)} .. {format_ms(cov.to_ts)})"
            )
        return t

    instant = check

    def _epoch(self, namesrv: str, t: int) -> _Epoch:
        epochs = self._epochs.get(namesrv)
        if not epochs:
            raise IndexBuildError(f"no gold.namesrv_epochs row for {namesrv} in run {self.run_id}")
        i = bisect.bisect_right(self._epoch_starts[namesrv], t) - 1
        return epochs[max(i, 0)]  # like PublishedHistory: before the first start, the first epoch

    def tick_at(self, namesrv: str, t: int) -> int | None:
        """The last scan tick <= ``t`` of ``namesrv``'s current epoch grid: the tick the state at ``t``
        reflects (None when no tick happened since the NameServer (re)started)."""
        return self._epoch(namesrv, self.check(namesrv, t)).tick_at(t)

    # -- RouteSource ----------------------------------------------------------------------------------

    def profile(self, namesrv: str, t: int | None) -> str:
        """The semantics profile of ``namesrv``'s epoch at ``t`` (HistorySource.profile)."""
        return self._epoch(namesrv, self.check(namesrv, t)).profile

    def route(self, namesrv: str, topic: str | None, t: int | None, *, request_version: int, shape: Shape = "auto") -> Answer:
        """GET_ROUTEINFO_BY_TOPIC at ``t`` (HistorySource.route, faster).

        The answer only changes at the instants of :meth:`_route_instants` (where a row it is made of
        starts or ends); between two of them it is rendered once and cached."""
        t = self.check(namesrv, t)
        if (namesrv, topic) not in self._topic_keys:  # never had a route: not cached (any string may come)
            return route_info(_empty_snapshot(self._epoch(namesrv, t)), topic, request_version=request_version, shape=shape)
        instants = self._instants_of(namesrv, topic)
        legacy = request_version < STANDARD_JSON_MIN_VERSION if shape == "auto" else shape == "legacy"
        cache_key = (namesrv, topic, legacy, bisect.bisect_right(instants, t))
        answer = self._cache.get(cache_key)
        if answer is None:
            answer = self._render_route(namesrv, topic, t, request_version=request_version, shape=shape)
            self._cache.put(cache_key, answer)
        return answer

    def _route_instants(self, namesrv: str, topic: str) -> np.ndarray:
        """Sorted instants at which a row that ``topic``'s route answer is made of may start or end:
        its QueueDatas and order conf, the BrokerData of every brokerName it ever had, the
        NameServer's filter servers, and its (re)starts (profile and config)."""
        topics = self._tables["topicQueueTable"]
        lo, hi = self._topic_keys.get((namesrv, topic), (0, 0))
        parts = [topics.boundaries(range(lo, hi)), self._tables["brokerAddrTable"].boundaries(self._topic_brokers.get((namesrv, topic), []))]
        if (namesrv, topic) in self._order_key:
            parts.append(self._tables["orderTopicConf"].boundaries([self._order_key[(namesrv, topic)]]))
        flo, fhi = self._tables["filterServerTable"].ns_keys.get(namesrv, (0, 0))
        parts.append(self._tables["filterServerTable"].boundaries(range(flo, fhi)))
        parts.append(np.array([e.start_ts for e in self._epochs.get(namesrv, [])], dtype=np.int64))
        instants = np.unique(np.concatenate(parts))
        return instants[instants != _OPEN]

    def _render_route(self, namesrv: str, topic: str, t: int, *, request_version: int, shape: Shape) -> Answer:
        """The route answer rendered from the rows valid at ``t`` (a partial Snapshot holding exactly
        what route_info reads: the topic's QueueDatas, their BrokerDatas, the filter servers, the
        topic's order conf, profile and config)."""
        topics = self._tables["topicQueueTable"]
        lo, hi = self._topic_keys.get((namesrv, topic), (0, 0))
        topic_rows, topic_keys = topics.alive_with_keys(np.arange(lo, hi, dtype=np.int64), t)
        epoch = self._epoch(namesrv, t)
        if not len(topic_rows):
            return route_info(_empty_snapshot(epoch), topic, request_version=request_version, shape=shape)
        names = [topics.key_values[k][2] for k in topic_keys.tolist()]
        broker_keys = np.array([self._broker_key[(namesrv, n)] for n in names if (namesrv, n) in self._broker_key], dtype=np.int64)
        broker_rows = self._tables["brokerAddrTable"].alive(broker_keys, t)
        filters = self._tables["filterServerTable"]
        filter_rows = filters.alive_ns(namesrv, t) if namesrv in filters.ns_keys else _EMPTY
        order_rows = _EMPTY
        if epoch.config.orderMessageEnable and (namesrv, topic) in self._order_key:
            order_rows = self._tables["orderTopicConf"].alive(np.array([self._order_key[(namesrv, topic)]], dtype=np.int64), t)
        by_name = {names[i]: self._queue_data(names[i], r) for i, r in enumerate(topic_rows)}
        groups = {self._broker_rows[r].brokerName: self._broker_rows[r] for r in broker_rows}
        snap = Snapshot(
            profile=epoch.profile,
            topicQueueTable=FrozenDict({topic: FrozenDict(by_name)}),
            brokerAddrTable=FrozenDict(groups),
            clusterAddrTable=FrozenDict(),
            brokerLiveTable=FrozenDict(),
            filterServerTable=FrozenDict(self._filter_entries(filter_rows)),
            orderTopicConf=FrozenDict({topic: self._order_conf[int(r)] for r in order_rows}),
            config=epoch.config,
        )
        return route_info(snap, topic, request_version=request_version, shape=shape)

    def cluster(self, namesrv: str, t: int | None, *, request_version: int, shape: Shape = "auto") -> Answer:
        """GET_BROKER_CLUSTER_INFO at ``t`` (legacy shape unless ``shape="standard"``)."""
        t = self.check(namesrv, t)
        epoch = self._epoch(namesrv, t)
        groups = {self._broker_rows[r].brokerName: self._broker_rows[r] for r in self._tables["brokerAddrTable"].alive_ns(namesrv, t)}
        table = self._tables["clusterAddrTable"]
        clusters: dict[str, set[str]] = {}
        for _, cluster, name in table.alive_ns_with_keys(namesrv, t)[1]:
            clusters.setdefault(cluster, set()).add(name)
        snap = _empty_snapshot(epoch, brokerAddrTable=FrozenDict(groups), clusterAddrTable=FrozenDict({c: frozenset(n) for c, n in clusters.items()}))
        return cluster_info(snap, request_version=request_version, shape=shape)

    def topics(self, namesrv: str, t: int | None, *, request_version: int, shape: Shape = "auto") -> Answer:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER at ``t``."""
        t = self.check(namesrv, t)
        table = self._tables["topicQueueTable"]
        names = {topic for _, topic, _ in table.alive_ns_with_keys(namesrv, t)[1]}
        snap = _empty_snapshot(self._epoch(namesrv, t), topicQueueTable=FrozenDict({n: FrozenDict() for n in names}))
        return topic_list(snap, request_version=request_version, shape=shape)

    # -- tables and history ---------------------------------------------------------------------------

    def table_rows(self, namesrv: str, table: str, t: int | None) -> tuple[int, int | None, list[dict[str, Any]]]:
        """(instant, tick the state reflects, rows of ``table`` valid at it) for /v1/tables.

        Rows carry the gold interval columns except ``namesrv`` and ``run_id``, in key order;
        ``broker_addrs`` maps broker id (as a string) to address."""
        spec = TABLES.get(table)
        if spec is None:
            raise UnknownTableError(f"unknown table {table!r}; one of: {', '.join(TABLES)}")
        t = self.check(namesrv, t)
        columns = [c for c in _interval_columns(spec) if c != "namesrv"]
        if table == _STORED:
            out = self._live_rows(namesrv, t, columns)
        else:
            rows = self._tables[table].alive_ns(namesrv, t)
            out = self._tables[table].columns(rows, columns).to_pylist() if len(rows) else []
        if table == "brokerAddrTable":
            for r in out:
                r["broker_addrs"] = {str(i): a for i, a in sorted(r["broker_addrs"])}
        return t, self._epoch(namesrv, t).tick_at(t), out

    def snapshot(self, namesrv: str, t: int | None) -> Snapshot:
        """The full model Snapshot at ``t`` (what HistorySource.snapshot returns)."""
        t = self.check(namesrv, t)
        epoch = self._epoch(namesrv, t)
        topics = self._tables["topicQueueTable"]
        by_topic: dict[str, dict[str, QueueData]] = {}
        for r, (_, topic, name) in zip(*topics.alive_ns_with_keys(namesrv, t)):
            by_topic.setdefault(topic, {})[name] = self._queue_data(name, r)
        groups = {self._broker_rows[r].brokerName: self._broker_rows[r] for r in self._tables["brokerAddrTable"].alive_ns(namesrv, t)}
        ctable = self._tables["clusterAddrTable"]
        clusters: dict[str, set[str]] = {}
        for _, c, name in ctable.alive_ns_with_keys(namesrv, t)[1]:
            clusters.setdefault(c, set()).add(name)
        live = {}
        for r in self._live_rows(namesrv, t, _LIVE_COLUMNS):
            live[_live_key(r)] = BrokerLiveInfo(
                r["last_update_ts"], r["heartbeat_timeout_ms"], DataVersion(r["dv_state_version"], r["dv_timestamp"], r["dv_counter"]), r["conn"], r["ha_server_addr"]
            )
        order_rows, order_keys = self._tables["orderTopicConf"].alive_ns_with_keys(namesrv, t)
        return Snapshot(
            profile=epoch.profile,
            topicQueueTable=FrozenDict({k: FrozenDict(v) for k, v in by_topic.items()}),
            brokerAddrTable=FrozenDict(groups),
            clusterAddrTable=FrozenDict({c: frozenset(n) for c, n in clusters.items()}),
            brokerLiveTable=FrozenDict(live),
            filterServerTable=FrozenDict(self._filter_entries(self._tables["filterServerTable"].alive_ns(namesrv, t))),
            orderTopicConf=FrozenDict({key[1]: self._order_conf[int(r)] for r, key in zip(order_rows, order_keys)}),
            config=epoch.config,
        )

    def route_history(self, namesrv: str, topic: str, t_from: int | None, t_to: int | None) -> list[RouteChange]:
        """Every instant ``ts`` in ``[t_from, t_to]`` at which the answer to GET_ROUTEINFO_BY_TOPIC
        (standard JSON) for ``topic`` differs from the answer just before (``ts - 1``; before the first
        record of the NameServer its tables are empty, so the topic does not exist), in time order,
        with the route after the change and the ``gold.route_changes`` rows of that instant that
        touch the topic (its QueueDatas and order conf, the BrokerData of its brokerNames, filter
        servers), in (ts, phase, record_rank, table, key) order. ``None`` bounds are the covered
        range's ends. Unbounded: the shim's HTTP API asks :meth:`route_history_page` instead. Raises
        :class:`~nsreplay.storage.stored_table.StoredReadError` when the published files of
        ``gold.route_changes`` cannot be read."""
        return self.route_history_page(namesrv, topic, t_from, t_to).changes

    def route_history_page(
        self, namesrv: str, topic: str, t_from: int | None, t_to: int | None, *,
        max_changes: int | None = None, max_examined: int | None = None, whole: bool = False,
    ) -> HistoryPage:
        """The changes of :meth:`route_history` for the window ``[t_from, t_to]``, from its start, at
        most ``max_changes`` of them and found by examining at most ``max_examined`` instants at which
        the route may change (None: no bound), in a :class:`HistoryPage` that says up to which instant
        the window is answered. Each bound, when given, must be >= 1, so a page always answers at
        least its first instant and the next page (``t_from = through + 1``) starts later.

        The work is the examined instants' renders plus one read of the change rows of the changes
        returned. With ``whole=True`` a window that cannot be answered whole within the bounds raises
        :class:`HistoryTooLongError` before anything is read from storage. Raises
        :class:`~nsreplay.history.OutsideCoverageError` (unknown NameServer, bound outside the covered
        range), ValueError (``t_from`` after ``t_to``, a bound < 1) and
        :class:`~nsreplay.storage.stored_table.StoredReadError` like :meth:`route_history`."""
        for name, bound in (("max_changes", max_changes), ("max_examined", max_examined)):
            if bound is not None and bound < 1:
                raise ValueError(f"{name} must be >= 1, not {bound}")
        start, end = self._window(namesrv, t_from, t_to)
        changed, through, stopped_by = self._changed_answers(namesrv, topic, start, end, max_changes, max_examined)
        if whole and stopped_by is not None:
            limit = max_changes if stopped_by == STOPPED_BY_CHANGES else max_examined
            assert limit is not None
            raise HistoryTooLongError(namesrv, topic, start, end, through, stopped_by, limit)
        rows = self._changes_at(namesrv, topic, [ts for ts, _ in changed])
        changes = [RouteChange(ts, self._epoch(namesrv, ts).tick_at(ts), answer, rows.get(ts, ())) for ts, answer in changed]
        return HistoryPage(start, end, through, stopped_by, changes)

    def _window(self, namesrv: str, t_from: int | None, t_to: int | None) -> tuple[int, int]:
        """``[t_from, t_to]`` checked against ``namesrv``'s covered range, ``None`` ends being its ends."""
        cov = self._coverage.get(namesrv)
        start = self.check(namesrv, t_from if t_from is not None else (cov.from_ts if cov else None))
        end = self.check(namesrv, t_to)
        if start > end:
            raise ValueError(f"from ({start}) is after to ({end})")
        return start, end

    def _changed_answers(
        self, namesrv: str, topic: str, start: int, end: int, max_changes: int | None, max_examined: int | None
    ) -> tuple[list[tuple[int, Answer]], int, str | None]:
        """(the instants in ``[start, through]`` at which the route answer changed, with the answer from
        then on; ``through``; why it is before ``end``, or None). Examines the instants at which the
        answer may change in time order and stops before the first one beyond ``max_examined``, or at
        a change beyond ``max_changes``; ``through`` is then the instant before that one."""
        instants = self._instants_of(namesrv, topic)
        lo, hi = bisect.bisect_left(instants, start), bisect.bisect_right(instants, end)
        previous = self._route_or_missing(namesrv, topic, start - 1)
        changed: list[tuple[int, Answer]] = []
        for i in range(lo, hi):  # indices, not a slice: no copy of the window's instants
            ts = instants[i]
            if max_examined is not None and i - lo >= max_examined:
                return changed, ts - 1, STOPPED_BY_EXAMINED
            answer = self.route(namesrv, topic, ts, request_version=401, shape="standard")
            if answer != previous:
                if max_changes is not None and len(changed) >= max_changes:
                    return changed, ts - 1, STOPPED_BY_CHANGES
                changed.append((ts, answer))
            previous = answer
        return changed, end, None

    def _instants_of(self, namesrv: str, topic: str) -> list[int]:
        """:meth:`_route_instants` as a sorted list, kept for the topics the NameServer had (any
        string may be asked: another topic's are computed per request, never kept)."""
        if (namesrv, topic) not in self._topic_keys:
            return self._route_instants(namesrv, topic).tolist()
        instants = self._instants.get((namesrv, topic))
        if instants is None:
            instants = self._instants[(namesrv, topic)] = self._route_instants(namesrv, topic).tolist()
        return instants

    # -- helpers --------------------------------------------------------------------------------------

    def _route_or_missing(self, namesrv: str, topic: str, t: int) -> Answer:
        cov = self._coverage[namesrv]
        if t < cov.from_ts:
            return route_info(_empty_snapshot(self._epoch(namesrv, cov.from_ts)), topic, request_version=401, shape="standard")
        return self.route(namesrv, topic, t, request_version=401, shape="standard")

    def _live_rows(self, namesrv: str, t: int, columns: Sequence[str]) -> list[dict[str, Any]]:
        """``columns`` of the broker-live rows of ``namesrv`` valid at ``t``, in key order (read from
        the published files that may hold them)."""
        keys = [c for c in _KEYS[_STORED] if c not in columns]
        table = self._live.alive(namesrv, t, [*columns, *keys])
        table = table.sort_by([(c, "ascending") for c in _KEYS[_STORED]])
        return table.drop_columns(keys).to_pylist() if keys else table.to_pylist()

    def _changes_at(self, namesrv: str, topic: str, instants: Sequence[int]) -> dict[int, tuple[dict[str, Any], ...]]:
        """The ``gold.route_changes`` rows of ``namesrv`` at ``instants`` that touch ``topic``'s route
        (its QueueDatas and order conf, the BrokerData of every brokerName it ever had, the filter
        servers), per instant, read in one pass over the files that may hold them."""
        if not instants:
            return {}
        brokers = self._tables["brokerAddrTable"]
        names = {brokers.key_values[k][1] for k in self._topic_brokers.get((namesrv, topic), [])}
        table = self._changes.read_at(namesrv, "ts", instants, _CHANGE_COLUMNS, pads.field("table").isin(list(ROUTE_TABLES)), keep=_touching(topic, names))
        if not table.num_rows:
            return {}

        def touches(entry: str) -> bool:
            name, _, key_text = entry.partition("\x00")
            if name == "filterServerTable":  # every route of the NameServer carries its filter servers
                return True
            key = json.loads(key_text)
            return key[0] == topic if name in ("topicQueueTable", "orderTopicConf") else key[0] in names

        # the exact test, once per distinct (table, key): the read's condition only narrowed the rows
        entries = pc.dictionary_encode(pc.binary_join_element_wise(table.column("table"), table.column("key"), "\x00")).combine_chunks()
        wanted = np.array([touches(e) for e in entries.dictionary.to_pylist()], dtype=bool)
        table = table.filter(pa.array(wanted[entries.indices.to_numpy()]))
        table = table.sort_by([(c, "ascending") for c in ("ts", "phase", "record_rank", "table", "key")])
        out: dict[int, list[dict[str, Any]]] = {}
        for r in table.to_pylist():
            out.setdefault(r["ts"], []).append({
                "table": r["table"],
                "key": json.loads(r["key"]),
                "op": r["op"],
                "before": None if r["before"] is None else json.loads(r["before"]),
                "after": None if r["after"] is None else json.loads(r["after"]),
                "cause": r["cause"],
                "phase": "tick" if r["phase"] == 1 else "record",
                "tick_ts": r["tick_ts"],
            })
        return {ts: tuple(rows) for ts, rows in out.items()}

    def _filter_entries(self, rows: np.ndarray) -> dict[Any, tuple[str, ...]]:
        if not len(rows):
            return {}
        table = self._tables["filterServerTable"].columns(rows, ["cluster", "broker_addr", "filter_servers"])
        return {_live_key(r): tuple(r["filter_servers"]) for r in table.to_pylist()}

    def memory_bytes(self) -> int:
        """Bytes held in memory: the resident tables (Arrow buffers and numpy arrays)."""
        return sum(t.nbytes() for t in self._tables.values())

    def describe(self) -> str:
        """One line: run id and what it covers."""
        parts = [f"{c.namesrv} [{format_ms(c.from_ts)} .. {format_ms(c.to_ts)}] ({c.profile})" for c in self.coverage()]
        return f"run {self.run_id}: " + "; ".join(parts)


#: Characters that every JSON encoder writes as they are (never as an escape): a name made of them
#: appears verbatim in the JSON text of any key that holds it.
_VERBATIM_IN_JSON = re.compile(r"[A-Za-z0-9_%|.:-]+")


def _touching(topic: str, broker_names: Iterable[str]) -> pads.Expression:
    """A condition on ``gold.route_changes`` rows that keeps every row of the route tables that may
    touch ``topic``'s route (see :meth:`RouteIndex._changes_at`) and drops most others: a topic or
    brokerName made of :data:`_VERBATIM_IN_JSON` characters must appear in the key's text. A
    superset of the rows wanted: the caller decides on the decoded keys."""
    table, key = pads.field("table"), pads.field("key")

    def contains_any(names: list[str]) -> pads.Expression:
        if not all(_VERBATIM_IN_JSON.fullmatch(n) for n in names):
            return pads.scalar(True)
        found = pads.scalar(False)
        for name in names:
            found = found | pc.match_substring(key, name)
        return found

    return (
        (table == "filterServerTable")
        | (table.isin(["topicQueueTable", "orderTopicConf"]) & contains_any([topic]))
        | ((table == "brokerAddrTable") & contains_any(sorted(broker_names)))
    )


def _live_key(row: Mapping[str, Any]) -> Any:
    return row["broker_addr"] if row["cluster"] is None else (row["cluster"], row["broker_addr"])


def _empty_snapshot(epoch: _Epoch, **tables: Any) -> Snapshot:
    empty: FrozenDict[Any, Any] = FrozenDict()
    values = {name: empty for name in ("topicQueueTable", "brokerAddrTable", "clusterAddrTable", "brokerLiveTable", "filterServerTable", "orderTopicConf")}
    values.update(tables)
    return Snapshot(profile=epoch.profile, config=epoch.config, **values)


def _iso(t: int) -> str:
    try:
        return format_ms(t)
    except (OverflowError, ValueError, OSError):
        return "not a representable date"


__all__ += ["NotPublishedError", "OutsideCoverageError"]
