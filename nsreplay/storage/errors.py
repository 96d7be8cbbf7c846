"""Named exceptions of the storage module.

Every failure a caller can act on has its own class; the bases are chosen so that code which does not
import this module can still catch them sensibly (a schema mismatch *is* a ``ValueError``, a missing table
*is* a ``LookupError``, an engine or commit failure *is* a ``RuntimeError``).
"""

from __future__ import annotations

from typing import Iterable

__all__ = [
    "StorageError",
    "SchemaMismatchError",
    "TableNotFoundError",
    "VersionNotFoundError",
    "ConcurrentCommitError",
    "PredicateViolationError",
    "BackendUnavailableError",
    "UnsupportedPathError",
]


class StorageError(RuntimeError):
    """A table operation failed: I/O, the commit, the engine, or a misuse of the table's current state."""


class SchemaMismatchError(ValueError):
    """Data (or an existing table) does not match the :class:`~nsreplay.storage.TableSpec`.

    Raised before anything is committed. ``differences`` lists every difference found, one sentence each
    (missing / extra columns, type differences, NULLs in NOT NULL columns, partitioning); the message joins
    them all, so a single failed run shows everything that has to be fixed.
    """

    def __init__(self, table: str, differences: Iterable[str], *, subject: str = "the DataFrame") -> None:
        self.table = table
        self.differences: tuple[str, ...] = tuple(differences)
        listed = "\n".join(f"  - {d}" for d in self.differences)
        super().__init__(f"{subject} does not match the schema of table {table!r}:\n{listed}")


class TableNotFoundError(LookupError):
    """The table does not exist (no Delta log at its location)."""


class VersionNotFoundError(TableNotFoundError):
    """The table exists, but not at the requested version or timestamp (too new, too old, or cleaned up)."""


class ConcurrentCommitError(StorageError):
    """Another writer committed a conflicting change to the table between our read and our commit.

    Nothing of this write was committed; re-running the write (same ``run_id``) is safe.
    """


class PredicateViolationError(StorageError):
    """An overwrite's DataFrame holds rows outside the overwrite predicate (``where`` / ``partitions``).

    Nothing was committed. Replacing a slice of a table with rows that belong elsewhere would silently
    duplicate or lose data, so it is refused, as delta-spark's ``replaceWhere`` does.
    """


class BackendUnavailableError(StorageError):
    """The requested storage backend cannot run in this process (e.g. delta-spark jars not on the classpath)."""


class UnsupportedPathError(StorageError):
    """The backend cannot keep tables at this warehouse path (a limit of its engine, named in the
    message). Raised when the :class:`~nsreplay.storage.Warehouse` is made, before anything is written."""
