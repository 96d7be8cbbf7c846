"""What the Python side of a Spark task does around the pure code it runs.

:func:`gc_paused` — Python's cyclic garbage collector paused while a task's Python work runs. The
capture parser and the unit replay allocate millions of short-lived dicts, tuples and strings that
reference counting frees at once; the collector, triggered by allocation counts, would still walk
every live object each time it runs its oldest generation (the parser's cache of decoded register
bodies, the model's tables, the worker's modules) and find nothing to free. Measured on bench-day,
alternating A/B: the read-and-parse stage (48 files) 66.0/61.1 s -> 59.8/56.4 s; the replay-units
stage 42.9/40.9 s -> 38.9/36.4 s. Objects caught in reference cycles meanwhile (a finished unit's
state holds ~6,000) are freed when the collector runs again, after the block.

:func:`table_rows` — an Arrow table as Python row dicts, as ``Table.to_pylist()`` gives them except
that a map value is a dict: pyarrow turns each map into a list of (key, value) tuples one entry at a
time, which made ``ext_fields`` most of the conversion's cost in the replay (0.071 s of 0.135 s for
three units); here a map column's keys and values are converted once and cut by its offsets.

:func:`steady_archive_imports` — a worker process stops re-reading unchanged zip archives on its
path at every task. pyspark's worker calls ``importlib.invalidate_caches()`` when each task starts,
and Python 3.11's ``zipimporter`` answers by reading its archive's whole directory again, in Python.
Spark 4 puts three archives on a worker's path: ``pyspark.zip`` (1,220 entries), py4j's zip and
spark-core's jar (5,261 entries, no Python in it), so every task started with ~65 ms of that (400
tasks of an identity ``mapInArrow`` on ``local[2]``: 28.0/27.9 s -> 11.9/12.1 s). Once called in
a worker, an archive's directory is read again only when the archive changed (size, mtime, inode).
"""

from __future__ import annotations

import gc
import os
import sys
import zipimport
from contextlib import contextmanager
from typing import Any, Iterator

import pyarrow as pa


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic garbage collector for the block; restore its previous state after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _map_values(array: pa.MapArray) -> list[dict[Any, Any] | None]:
    """The maps of ``array`` as dicts (None where null); ``array`` may be a slice."""
    offsets = array.offsets.to_pylist()  # len(array) + 1 of them, even for an empty array
    start, end = offsets[0], offsets[-1]
    keys = array.keys.slice(start, end - start).to_pylist()
    items = array.items.slice(start, end - start).to_pylist()
    valid = array.is_valid().to_pylist()
    return [
        dict(zip(keys[offsets[i] - start : offsets[i + 1] - start], items[offsets[i] - start : offsets[i + 1] - start])) if valid[i] else None
        for i in range(len(array))
    ]


def _column_values(column: pa.ChunkedArray) -> list[Any]:
    if not pa.types.is_map(column.type):
        return column.to_pylist()
    values: list[Any] = []
    for chunk in column.chunks:
        values += _map_values(chunk)
    return values


def table_rows(table: pa.Table) -> list[dict[str, Any]]:
    """The rows of ``table`` as dicts (column name → value); map values as dicts, not pair lists."""
    names = table.column_names
    return [dict(zip(names, row)) for row in zip(*(_column_values(c) for c in table.columns))]


def _archive_stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


class _SteadyArchiveImporter(zipimport.zipimporter):
    """A zipimporter whose ``invalidate_caches`` reads the archive's directory again only when the
    archive changed since this importer last read it there (the first call always reads it)."""

    _read_stamp: tuple[int, int, int] | None = None

    def invalidate_caches(self) -> None:
        stamp = _archive_stamp(self.archive)
        if stamp is not None and stamp == self._read_stamp:
            return
        self._read_stamp = stamp  # taken before the read: a change during it is seen next time
        super().invalidate_caches()


def steady_archive_imports() -> None:
    """Give every zip archive on this process's import path a :class:`_SteadyArchiveImporter`
    (idempotent, microseconds once done). Called by the Python side of the project's Spark tasks:
    the process is reused for later tasks, which then start without re-reading the archives."""
    for path, finder in list(sys.path_importer_cache.items()):
        if type(finder) is zipimport.zipimporter:
            try:
                sys.path_importer_cache[path] = _SteadyArchiveImporter(path)
            except zipimport.ZipImportError:  # the archive is gone: leave the old finder alone
                continue


__all__ = ["gc_paused", "steady_archive_imports", "table_rows"]
