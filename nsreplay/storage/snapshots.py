"""Opened Delta tables kept between uses, so that opening a table again reads only its new commits.

Opening a Delta table (``deltalake.DeltaTable(uri)``) lists its log, reads the last checkpoint and
then every commit after it, and builds the snapshot: 3-4 ms a table here with the checkpoint a few
commits behind, and a LIST plus several GETs on object storage. A replay window asks for its
tables' latest versions ~165 times (docs/performance.md, "The Delta log's checkpoints", counts them
by caller), mostly for a version number, a schema or an app id. :class:`Snapshots` keeps each table
it opened and, when the latest version is asked for again, brings it up to date with
``update_incremental`` (a listing of the log and a read of the commits made since: 1.7–2.4 ms an
update in a replay window here, against 3–4 ms for an open and its checkpoint read).

Contract:

* ``with snapshots.latest(location) as table``: ``table`` is at the table's latest version when
  the block starts and is the caller's alone until the block ends: no other thread gets it, and the
  caller may commit through it. Then it is kept for the next caller.
* ``with snapshots.at(location, version) as table``: ``table`` is at exactly ``version`` and is the
  caller's alone likewise. A kept table at that version is used, else the version is opened.
* delta-rs does not refresh a table by its own commits: after a commit through ``table``, call
  :meth:`Snapshots.refresh` on it to see that commit (the next ``latest`` refreshes it too).
* At most :data:`KEEP_PER_TABLE` tables are kept per location, the newest versions; a table whose
  block raised is not kept (its state is unknown).
* A kept table whose version's commit file is gone from the log (the table was deleted and made
  again in its place) is dropped and the table opened afresh. One made again with as many commits
  as the kept one had is not noticed: after replacing tables under a running process, use a new
  :class:`~nsreplay.storage.Warehouse` (each holds its own :class:`Snapshots`).
* Errors are those of :func:`open_table`. Thread-safe: the kept tables are guarded by a lock, and
  blocks of different threads hold different tables.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Iterator

import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError
from deltalake.exceptions import TableNotFoundError as _DeltaTableNotFound

from nsreplay.storage.backend import TableLocation
from nsreplay.storage.errors import StorageError, TableNotFoundError, VersionNotFoundError
from nsreplay.storage.filesystem import arrow_filesystem

__all__ = ["KEEP_PER_TABLE", "Snapshots", "open_table"]

#: Tables kept per location. Two cover a write (its read snapshot) and a concurrent reader of the
#: same table, or a read of the version before the latest; each holds the table's file list.
KEEP_PER_TABLE = 2


def open_table(location: TableLocation, version: int | None = None) -> DeltaTable:
    """The table at ``location``, at ``version`` (``None``: the latest), read from its log afresh.
    :class:`TableNotFoundError` without a table there, :class:`VersionNotFoundError` without that
    version, :class:`StorageError` for any other failure to read the log."""
    try:
        return DeltaTable(location.uri, version=version)
    except _DeltaTableNotFound as exc:
        raise TableNotFoundError(f"no Delta table at {location.uri}") from exc
    except DeltaError as exc:
        if version is not None:
            raise VersionNotFoundError(f"table at {location.uri} has no version {version} ({exc})") from exc
        raise StorageError(f"cannot open the Delta table at {location.uri}: {exc}") from exc


class Snapshots:
    """The Delta tables one backend opened, kept per location between uses (see the module)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[str, list[DeltaTable]] = {}
        self._remote: dict[str, tuple[pafs.FileSystem, str]] = {}  # pyarrow filesystem and path of remote logs

    @contextlib.contextmanager
    def latest(self, location: TableLocation) -> Iterator[DeltaTable]:
        """The table at its latest version, the caller's alone within the block."""
        table = self._take(location, None)
        table = open_table(location) if table is None else self.refresh(table, location)
        yield from self._lend(location, table)

    @contextlib.contextmanager
    def at(self, location: TableLocation, version: int) -> Iterator[DeltaTable]:
        """The table at exactly ``version``, the caller's alone within the block."""
        table = self._take(location, version)
        if table is None:
            table = open_table(location, version)
        yield from self._lend(location, table)

    def refresh(self, table: DeltaTable, location: TableLocation) -> DeltaTable:
        """``table`` brought up to the latest version of the log at ``location``, or that version
        opened afresh when ``table`` cannot follow the log (its own version's commit is gone: the
        table was made again in its place; or the log cannot be read from where ``table`` stands)."""
        try:
            table.update_incremental()
            if self.has_commit(location, table.version()):
                return table
        except (DeltaError, OSError):
            pass
        return open_table(location)

    def has_commit(self, location: TableLocation, version: int) -> bool:
        """Whether the log at ``location`` holds the commit of ``version`` (the latest commit's file
        is never removed by log clean-up)."""
        name = f"_delta_log/{version:020d}.json"
        if location.is_local:
            return os.path.isfile(os.path.join(location.uri, name))
        with self._lock:
            remote = self._remote.get(location.uri)
        if remote is None:  # made once per location: for S3 it may resolve the bucket's region
            remote = arrow_filesystem(location.uri)
            with self._lock:
                self._remote[location.uri] = remote
        filesystem, root = remote
        return filesystem.get_file_info(f"{root.rstrip('/')}/{name}").type != pafs.FileType.NotFound

    def _lend(self, location: TableLocation, table: DeltaTable) -> Iterator[DeltaTable]:
        yield table  # a block that raises does not come back here: the table is not kept
        self._keep(location, table)

    def _take(self, location: TableLocation, version: int | None) -> DeltaTable | None:
        """A kept table of ``location`` (removed from the kept ones): at ``version``, or with
        ``None`` the newest kept one; ``None`` when there is none."""
        with self._lock:
            kept = self._kept.get(location.uri)
            if not kept:
                return None
            versions = [t.version() for t in kept]
            if version is None:
                return kept.pop(versions.index(max(versions)))
            return kept.pop(versions.index(version)) if version in versions else None

    def _keep(self, location: TableLocation, table: DeltaTable) -> None:
        with self._lock:
            kept = self._kept.setdefault(location.uri, [])
            kept.append(table)
            if len(kept) > KEEP_PER_TABLE:
                kept.sort(key=lambda t: t.version())
                del kept[: len(kept) - KEEP_PER_TABLE]
