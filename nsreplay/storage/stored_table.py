"""A published table read from storage per request instead of held in memory (the shim's stored
tables, and :class:`nsreplay.history.PublishedHistory`).

    live = StoredTable(warehouse, BROKER_LIVE_INTERVALS, version, ("valid_from", "valid_to"))
    live.alive("10.0.0.10:9876", t, columns)          # rows with valid_from <= t < valid_to (or open)
    live.read("10.0.0.10:9876", [ColumnRange("valid_to", above=t0, at_most=t1)], columns, condition)
    changes.read_at("10.0.0.10:9876", "ts", [t1, t2, t3], columns)   # rows whose ts is one of these

Contract:

* The file list of the table at ``version`` (the version a publish names) and the Delta log's
  statistics of ``stat_columns`` are read once, at construction: no request reopens the log.
* A read opens only the files of the NameServer's partition whose statistics may hold a row in
  every one of the ranges (:meth:`files`), then filters the rows exactly: the answer is the rows of
  the whole table version that the ranges and ``condition`` select, whatever the pruning left out.
* :meth:`StoredTable.read_at` selects rows by a set of values of one column: it opens only the
  files whose statistics of that column may hold one of the values (one bisection per file), so a
  few instants spread over months of history open the files of those instants, not of the months.
* Memory is the file list (one entry per data file), not the rows: a table that grows with every
  heartbeat (``gold.broker_live_intervals``) costs the shim what a request reads, for as long as
  it answers it. A read streams the row groups one at a time and keeps only the rows it selects
  (``keep``: a filter applied to each batch as it is decoded).
* At most ``reads`` reads run at once (a semaphore, which the tables of one index share): a read
  decodes whole row groups, a few hundred MB at its peak on large files, and the HTTP front end
  runs requests on a pool of threads, so without a bound the peak memory would follow the number
  of requests in flight. A read over the bound waits for one to finish.
* A file that cannot be read (removed by a vacuum that did not keep the published versions, storage
  unreachable, damaged) raises :class:`StoredReadError`, which names the table and version: an
  operational fault the front ends answer 503, never a wrong answer.
* Immutable; safe to share between threads.
"""

from __future__ import annotations

import bisect
import threading
from typing import Iterable, Sequence

import pyarrow as pa
import pyarrow.dataset as pads

from nsreplay.storage.arrow_types import dataset, range_filter
from nsreplay.storage.spec import ColumnRange, DataFile, FileStatistics, TableSpec
from nsreplay.storage.warehouse import Warehouse


class StoredReadError(RuntimeError):
    """The published files of a table version cannot be read (the message names them and why)."""


def alive_at(t: int) -> list[ColumnRange]:
    """The interval rows valid at ``t`` (``valid_from <= t < valid_to``, ``valid_to`` NULL when still
    open) as two ranges, each of which prunes files: of the past by ``valid_to``, of the future by
    ``valid_from``."""
    return [ColumnRange("valid_from", at_most=t), ColumnRange("valid_to", above=t, or_null=True)]


#: Reads of published files that may run at once when the caller does not share a semaphore.
CONCURRENT_READS = 2


class StoredTable:
    """The files of one table version, pruned per read by partition and statistics (module docstring)."""

    def __init__(
        self, warehouse: Warehouse, spec: TableSpec, version: int, stat_columns: Sequence[str], *, reads: threading.Semaphore | None = None
    ) -> None:
        if spec.partition_by != ("namesrv",):
            raise ValueError(f"{spec.name} is not partitioned by namesrv alone (partition_by={list(spec.partition_by)})")
        self.spec = spec
        self.version = version
        self._reads = reads if reads is not None else threading.BoundedSemaphore(CONCURRENT_READS)
        self._lock = threading.Lock()
        self._running = 0
        #: The most reads that ran at once (for tests and benchmarks).
        self.most_concurrent = 0
        self._files: dict[str | None, list[FileStatistics]] = {}
        for f in warehouse.file_statistics(spec, stat_columns, version=version):
            self._files.setdefault(f.file.partition_values["namesrv"], []).append(f)

    @property
    def file_count(self) -> int:
        """Data files of the table version (every NameServer)."""
        return sum(len(files) for files in self._files.values())

    def files(self, namesrv: str, ranges: Sequence[ColumnRange]) -> list[DataFile]:
        """The files of ``namesrv`` that may hold a row in every one of ``ranges``."""
        return [f.file for f in self._files.get(namesrv, []) if all(f.may_hold(r) for r in ranges)]

    def read(self, namesrv: str, ranges: Sequence[ColumnRange], columns: Sequence[str], condition: pads.Expression | None = None) -> pa.Table:
        """``columns`` of the rows of ``namesrv`` in every one of ``ranges`` and satisfying
        ``condition``, from the files that may hold them."""
        files = self.files(namesrv, ranges)
        predicate = pads.field("namesrv") == namesrv
        for r in ranges:
            predicate = predicate & range_filter(r)
        if condition is not None:
            predicate = predicate & condition
        return self._scan(files, list(columns), predicate)

    def files_at(self, namesrv: str, column: str, values: Iterable[int]) -> list[DataFile]:
        """The files of ``namesrv`` whose statistics of ``column`` may hold one of ``values``."""
        wanted = sorted(set(values))
        if not wanted:
            return []
        out = []
        for f in self._files.get(namesrv, []):
            low = f.columns.get(column, (None, None, None))[1]
            i = 0 if low is None else bisect.bisect_left(wanted, low)  # the least value the file may hold
            if i < len(wanted) and f.may_hold(ColumnRange(column, above=wanted[i] - 1, at_most=wanted[i])):
                out.append(f.file)
        return out

    def read_at(
        self, namesrv: str, column: str, values: Iterable[int], columns: Sequence[str], condition: pads.Expression | None = None,
        *, keep: pads.Expression | None = None,
    ) -> pa.Table:
        """``columns`` of the rows of ``namesrv`` whose ``column`` is one of ``values`` and that satisfy
        ``condition`` and ``keep``, from the files that may hold them (:meth:`files_at`). ``condition``
        is part of the scan; ``keep`` is applied to each batch the scan yields (a test that would cost
        more inside the scan than on the rows it returns)."""
        wanted = sorted(set(values))
        predicate = (pads.field("namesrv") == namesrv) & pads.field(column).isin(wanted)
        if condition is not None:
            predicate = predicate & condition
        return self._scan(self.files_at(namesrv, column, wanted), list(columns), predicate, keep)

    def _scan(self, files: list[DataFile], columns: list[str], predicate: pads.Expression, keep: pads.Expression | None = None) -> pa.Table:
        with self._reads:
            with self._lock:
                self._running += 1
                self.most_concurrent = max(self.most_concurrent, self._running)
            try:
                scanner = dataset(self.spec, files).scanner(columns=columns, filter=predicate, batch_readahead=1, fragment_readahead=1)
                batches = [b if keep is None else b.filter(keep) for b in scanner.to_batches()]
                return pa.Table.from_batches(batches, schema=scanner.projected_schema)
            except (OSError, pa.ArrowException) as exc:
                raise StoredReadError(f"cannot read {self.spec.name} at version {self.version} (published files missing or unreadable: {exc})"[:500]) from exc
            finally:
                with self._lock:
                    self._running -= 1

    def alive(self, namesrv: str, t: int, columns: Sequence[str]) -> pa.Table:
        """``columns`` of the interval rows of ``namesrv`` valid at ``t`` (see :func:`alive_at`)."""
        return self.read(namesrv, alive_at(t), columns)


__all__ = ["CONCURRENT_READS", "StoredReadError", "StoredTable", "alive_at"]
