"""The contract between :class:`~nsreplay.storage.Warehouse` and an engine (delta-rs or delta-spark).

The warehouse does everything that is the same for both engines — argument checks, schema checks and
column order, the NOT NULL / predicate guards, app-transaction ids, metadata, timestamp resolution — and
hands a backend fully prepared requests. A backend only talks to its engine.
"""

from __future__ import annotations

import abc
import contextlib
import os
import threading
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from nsreplay.storage.spec import ColumnRange, DataFile, FileColumnStats, FileStatistics, TableSpec

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import types as T

__all__ = ["TableLocation", "WriteRequest", "RestoreRequest", "VacuumRequest", "Backend"]


@dataclass(frozen=True)
class TableLocation:
    """Where a table lives, spelled for each consumer.

    ``uri`` is what delta-rs and pyarrow take: an absolute local path for local warehouses, the URI
    otherwise. ``spark_uri`` is what Spark (Hadoop filesystems) takes: ``file:///...`` for local tables, so
    a cluster whose default filesystem is HDFS still finds a local warehouse.
    """

    uri: str
    spark_uri: str
    is_local: bool

    @classmethod
    def of(cls, root: str, parts: tuple[str, ...]) -> "TableLocation":
        """The location of the table with name ``parts`` below warehouse ``root`` (path or URI)."""
        parsed = urllib.parse.urlparse(root)
        if parsed.scheme in ("", "file"):
            local_root = urllib.parse.unquote(parsed.path) if parsed.scheme == "file" else root
            base = os.path.join(os.path.abspath(os.path.expanduser(local_root)), *parts)
            return cls(uri=base, spark_uri="file://" + base, is_local=True)
        base = root.rstrip("/") + "/" + "/".join(parts)
        return cls(uri=base, spark_uri=base, is_local=False)

    def file_uri(self, relative: str) -> str:
        """Absolute delta-rs/pyarrow path of ``relative`` (an on-storage path below the table root): a
        local path, or a URI whose path pyarrow decodes to the file's name on storage (``relative``
        percent-encoded: ``namesrv=10.0.0.1%3A9876/...`` is ``namesrv=10.0.0.1%253A9876/...``)."""
        if self.is_local:
            return self.uri.rstrip("/") + "/" + relative
        from nsreplay.storage.filesystem import quote_uri_path

        return self.uri.rstrip("/") + "/" + quote_uri_path(relative)

    def spark_file_uri(self, relative: str) -> str:
        """Absolute Spark path of ``relative`` (an on-storage path below the table root)."""
        return self.spark_uri.rstrip("/") + "/" + relative

    def spark_read_uri(self, relative: str) -> str:
        """:meth:`spark_file_uri` for Spark to read: that one file, whatever characters the warehouse
        path holds (:func:`hadoop_literal`)."""
        return hadoop_literal(self.spark_file_uri(relative))


#: The characters Hadoop's glob gives a meaning (``FileSystem.globStatus``, which Spark applies to
#: every path it is given to read), the backslash that escapes them included.
HADOOP_GLOB_CHARACTERS = "\\*?[]{}"


def hadoop_literal(path: str) -> str:
    """``path`` (a Hadoop path or URI) with each of :data:`HADOOP_GLOB_CHARACTERS` escaped by a
    backslash, so that a Spark read names exactly that path. Unescaped, a warehouse at ``wh*`` or
    ``wh{1}`` reads the files of a copy beside it (``wh-copy``, ``wh1``), or fails on listing its
    parent directory. A path without them is returned unchanged."""
    return "".join("\\" + c if c in HADOOP_GLOB_CHARACTERS else c for c in path)


@dataclass(frozen=True)
class WriteRequest:
    """One prepared write: the data is checked, ordered like the spec and guarded.

    ``mode`` is ``"append"`` or ``"overwrite"``. For an overwrite, ``predicate`` is the full Spark SQL
    predicate of the rows to replace (``None``: the whole table), ``where`` its free-form part and
    ``partitions`` its partition part (column → allowed Delta partition strings / ``None`` for NULL); the
    delta-rs backend prunes files with ``partitions`` (and with ``prune``, the :class:`ColumnRange`
    ``where`` was made from, by the files' statistics) and filters rows with ``where``.
    ``user_metadata`` is the JSON stored as the commit's ``userMetadata``; ``write_id`` is unique to this
    call and contained in it, so the committed version can be found in the history afterwards.
    ``written_since``: the rows ``where`` selects lie only in data files added at or after that
    version; the delta-rs backend looks for them in those files only (others may ignore it).
    """

    spec: TableSpec
    location: TableLocation
    df: "DataFrame"
    mode: str
    app_id: str
    txn_version: int
    user_metadata: str
    write_id: str
    predicate: str | None = None
    where: str | None = None
    partitions: Mapping[str, tuple[str | None, ...]] | None = None
    prune: ColumnRange | None = None
    written_since: int | None = None


@dataclass(frozen=True)
class RestoreRequest:
    """One prepared restore: make the table at ``location`` hold the files of ``version`` again (a
    version before the latest), in one commit that writes no data. ``app_id``, ``txn_version``,
    ``user_metadata`` and ``write_id`` are as for :class:`WriteRequest`."""

    location: TableLocation
    version: int
    app_id: str
    txn_version: int
    user_metadata: str
    write_id: str


@dataclass(frozen=True)
class VacuumRequest:
    """One prepared vacuum of the table at ``location``: delete the files that no version needs whose
    files a reader may still open, i.e. files removed from the table more than ``retention_hours`` ago
    unless a version in ``keep_versions`` names them, and files the log never named (left by a write
    that never committed) older than that. ``dry_run``: list them, delete nothing. ``user_metadata`` is
    the JSON stored as ``userMetadata`` of the commits the engine makes for a vacuum that deletes."""

    location: TableLocation
    retention_hours: int
    keep_versions: tuple[int, ...]
    dry_run: bool
    user_metadata: str


@dataclass(frozen=True)
class CompactRequest:
    """One prepared compaction of the table at ``location``: each of ``groups`` names data files of
    the table's latest version (absolute paths, as :class:`~nsreplay.storage.spec.DataFile` gives
    them), all of one partition, to be rewritten as one file whose rows are sorted by the columns of
    ``sort_by`` in turn (Parquet row groups of at most ``row_group_rows`` rows). One commit for
    every group, that changes no row (``dataChange`` false); ``app_id``, ``txn_version``,
    ``user_metadata`` and ``write_id`` are as for :class:`WriteRequest`."""

    spec: TableSpec
    location: TableLocation
    groups: tuple[tuple[str, ...], ...]
    sort_by: tuple[str, ...]
    row_group_rows: int
    app_id: str
    txn_version: int
    user_metadata: str
    write_id: str


@dataclass(frozen=True)
class RemoveRequest:
    """One prepared removal of whole data files from the table at ``location``: ``paths`` (absolute,
    as :class:`~nsreplay.storage.spec.DataFile` gives them) must all be in the latest version; one
    commit that removes them and adds nothing. The files stay on storage for the versions before it
    until a vacuum. ``app_id``, ``txn_version``, ``user_metadata`` and ``write_id`` are as for
    :class:`WriteRequest`."""

    spec: TableSpec
    location: TableLocation
    paths: tuple[str, ...]
    app_id: str
    txn_version: int
    user_metadata: str
    write_id: str


@dataclass(frozen=True)
class Compacted:
    """What a backend's compaction committed: the version (``None``: ``app_id`` was there already,
    nothing written), the files written (relative to the table's root), their rows and bytes."""

    version: int | None
    added: tuple[str, ...]
    rows: int
    bytes: int


class Backend(abc.ABC):
    """One Delta engine. Methods take prepared arguments; the warehouse validated them already."""

    #: ``"delta-rs"`` or ``"delta-spark"``.
    name: str
    #: Whether :meth:`table_schema` reports nullability exactly as stored in the Delta log.
    exact_nullability: bool
    #: Whether :meth:`write` runs the request's DataFrame as one Spark write whose observed metrics
    #: (``DataFrame.observe``) reach the caller; when not, row counts take a pass of their own.
    observes_writes: bool = False

    def check_root(self, root: TableLocation) -> None:
        """Raise :class:`~nsreplay.storage.errors.UnsupportedPathError` when this engine cannot keep
        tables below the warehouse ``root``; by default it can."""

    @abc.abstractmethod
    def exists(self, location: TableLocation) -> bool:
        """Whether a Delta table exists at ``location``."""

    @abc.abstractmethod
    def create(self, spec: TableSpec, location: TableLocation) -> None:
        """Create the empty table (protocol 1/2) if absent; a no-op if it exists (whatever its schema)."""

    @abc.abstractmethod
    def table_schema(self, location: TableLocation) -> tuple["T.StructType", tuple[str, ...]]:
        """The existing table's schema and partition columns."""

    @abc.abstractmethod
    def add_columns(self, location: TableLocation, fields: list["T.StructField"]) -> None:
        """Add nullable top-level columns to the existing table (one schema-change commit)."""

    @abc.abstractmethod
    def version(self, location: TableLocation) -> int:
        """The latest version of the existing table."""

    @abc.abstractmethod
    def history(self, location: TableLocation, limit: int | None) -> list[dict[str, Any]]:
        """Commits newest first, each ``{"version", "timestamp" (epoch ms), "operation", "userMetadata"}``."""

    @abc.abstractmethod
    def committed(self, location: TableLocation, app_id: str) -> bool:
        """Whether the existing table holds a ``txn`` (or a commit) of ``app_id``."""

    @abc.abstractmethod
    def write(self, request: WriteRequest) -> int | None:
        """Commit ``request`` as one transaction; the new version, or ``None`` if ``app_id`` was already there."""

    @abc.abstractmethod
    def restore(self, request: RestoreRequest) -> int | None:
        """Commit ``request`` (Delta's RESTORE: removes and re-adds files, copies no data); the new
        version, or ``None`` if ``app_id`` was already there."""

    @abc.abstractmethod
    def vacuum(self, request: VacuumRequest) -> list[str]:
        """Carry out ``request``; the paths (relative to the table's root) it deleted, or would delete
        for a dry run. Never deletes the Delta log, nor a file of the latest version."""

    @abc.abstractmethod
    def compact(self, request: CompactRequest) -> Compacted:
        """Carry out ``request`` (see :class:`CompactRequest`), or change nothing and raise."""

    @abc.abstractmethod
    def remove(self, request: RemoveRequest) -> int | None:
        """Carry out ``request`` (see :class:`RemoveRequest`): the version committed, ``None`` when
        ``app_id`` was there already; or change nothing and raise."""

    @abc.abstractmethod
    def read(self, spec: TableSpec, location: TableLocation, version: int | None, where: ColumnRange | None = None) -> "DataFrame":
        """The table at ``version`` (``None``: latest) with exactly ``spec``'s columns, in spec order;
        with ``where``, only its rows in that range (files outside it need not be opened)."""

    @abc.abstractmethod
    def files(self, spec: TableSpec, location: TableLocation, version: int | None, where: ColumnRange | None = None) -> list[DataFile]:
        """The data files of the table at ``version`` (``None``: latest); with ``where``, those whose
        statistics may hold rows in that range."""

    @abc.abstractmethod
    def file_statistics(self, spec: TableSpec, location: TableLocation, version: int | None, columns: tuple[str, ...]) -> list[FileStatistics]:
        """Every data file of the table at ``version`` (``None``: latest) with the Delta log's
        statistics of the integer ``columns``. Read from the log alone: no data file is opened."""

    @abc.abstractmethod
    def column_stats(self, spec: TableSpec, location: TableLocation, version: int | None, column: str) -> list[FileColumnStats]:
        """The Delta log's statistics of the integer column ``column`` in every data file of the table at
        ``version`` (``None``: latest). Read from the log alone: no data file is opened."""


def spark_of(spark: "SparkSession | None") -> "SparkSession":
    """``spark``, or a ``StorageError`` explaining that this operation needs a SparkSession."""
    from nsreplay.storage.errors import StorageError

    if spark is None:
        raise StorageError("this operation needs a SparkSession; the Warehouse was created with spark=None")
    return spark


_SESSION_CONF_LOCK = threading.Lock()


@contextlib.contextmanager
def session_conf(spark: "SparkSession", settings: dict[str, str]) -> Iterator[None]:
    """Set SQL confs for the duration of a write (or a restore), restoring the previous values afterwards.

    SQL confs are shared by the session's threads, so writes that need some are serialized (a
    process-wide lock); writes that need none do not wait."""
    if not settings:
        yield
        return
    with _SESSION_CONF_LOCK:
        previous: dict[str, str | None] = {}
        for key, value in settings.items():
            current = spark.conf.get(key, None)
            if current != value:
                previous[key] = current
                spark.conf.set(key, value)
        try:
            yield
        finally:
            for key, value in previous.items():
                if value is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, value)
