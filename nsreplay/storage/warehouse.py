"""The warehouse: every read and write of a table in this project goes through :class:`Warehouse`.

A thin API over a Delta engine whose docstrings are the contract. Two engines implement it:
delta-spark (``"delta-spark"``, when the ``io.delta`` classes are on the driver's classpath) and delta-rs
(``"delta-rs"``: Spark writes Parquet, delta-rs commits). Tables stay at Delta protocol 1/2, so either
engine — and any Delta reader — can read what the other wrote.

Example::

    wh = Warehouse("/data/warehouse", spark)              # backend "auto"
    wh.ensure(EVENTS)                                      # create if absent, else verify the schema
    v = wh.append(EVENTS, df, CommitInfo(run_id="2024-11-21T00", job="ingest"))
    wh.overwrite(EVENTS, fixed, CommitInfo(run_id="r7", job="repair"),
                 partitions={"namesrv": "10.0.0.1:9876", "date": "2024-11-21"})
    wh.read(EVENTS, version=v)                             # time travel
    wh.restore(EVENTS, v, CommitInfo(run_id="r8", job="undo"))  # latest reads as v again; no data copied
    wh.files(EVENTS)                                       # for Spark-free readers
    wh.vacuum(EVENTS, retention_hours=168, keep_versions=(v,), dry_run=False,
              commit=CommitInfo(run_id="vacuum-2024-11-28", job="vacuum"))
    wh.compact(EVENTS, groups, sort_by="ts",                       # each group (files of one partition) → one
               commit=CommitInfo(run_id="compact-2024-11-28", job="compact"))  # file, same rows
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import logging
import re
import urllib.parse
import uuid
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pyarrow.fs as pafs
from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql import types as T

from nsreplay.storage.backend import Backend, CompactRequest, RemoveRequest, RestoreRequest, TableLocation, VacuumRequest, WriteRequest, spark_of
from nsreplay.storage.errors import (
    BackendUnavailableError,
    PredicateViolationError,
    SchemaMismatchError,
    StorageError,
    TableNotFoundError,
    UnsupportedPathError,
    VersionNotFoundError,
)
from nsreplay.storage.native_backend import native_delta_available
from nsreplay.storage.filesystem import arrow_filesystem, canonical_uri
from nsreplay.storage.spec import COMPACTION_MODE, METADATA_MARKER, TXN_VERSION, ColumnRange, CommitInfo, CompactionResult, DataFile, FileStatistics, TableSpec, VacuumResult, bounds_by_partition, changes_rows, schema_differences

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, SparkSession

__all__ = ["Warehouse", "BACKENDS"]

log = logging.getLogger(__name__)

#: Accepted values of ``Warehouse(backend=...)``.
BACKENDS = ("auto", "delta-rs", "delta-spark")

_GUARD = "nsreplay-guard"
_GUARD_PATTERN = re.compile(_GUARD + r"\[(?P<kind>not-null|predicate)\]: (?P<message>.*?)(?: SQLSTATE: \w+)?(?:\n|$)")


class Warehouse:
    """The Delta tables below one root directory (local path or URI), read and written with Spark.

    ``root``: the warehouse directory; table ``a.b`` lives at ``<root>/a/b``. ``spark``: the session used
    to read and write DataFrames; may be ``None`` for Spark-free use of the delta-rs backend (metadata,
    ``ensure``, ``files`` — not ``read``/``append``/``overwrite``). ``backend``: ``"auto"`` (delta-spark
    if ``io.delta.tables.DeltaTable`` loads in the driver JVM, else delta-rs), ``"delta-rs"`` or
    ``"delta-spark"`` (``BackendUnavailableError`` if the jars are missing).

    Raises ``TypeError`` / ``ValueError`` for invalid arguments, :class:`UnsupportedPathError` for a
    ``root`` the backend cannot keep tables at (delta-rs: a local path holding ``%`` or ``\\``; with
    ``spark``, a URI whose scheme Spark has no Hadoop filesystem for, as ``s3a://`` without the
    hadoop-aws jars: Spark writes the data files of either backend). A URI's scheme is taken in
    lower case (``S3A://b/wh`` is ``s3a://b/wh``, :attr:`root`; ``filesystem.canonical_uri``).
    """

    def __init__(self, root: str, spark: "SparkSession | None", backend: str = "auto") -> None:
        if hasattr(root, "__fspath__"):
            root = str(root)
        if not isinstance(root, str) or not root.strip():
            raise ValueError(f"root must be a non-empty path or URI, got {root!r}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self.root = canonical_uri(root)  # S3A://b/wh is s3a://b/wh: Spark and pyarrow know the scheme in lower case only
        root = self.root
        self._spark = spark
        self._backend: Backend = self._make_backend(backend, spark)
        self.backend_name: str = self._backend.name
        location = TableLocation.of(root, ())
        self._backend.check_root(location)
        if spark is not None and not location.is_local:
            _check_spark_filesystem(spark, location)

    @staticmethod
    def _make_backend(backend: str, spark: "SparkSession | None") -> Backend:
        from nsreplay.storage.deltars_backend import DeltaRsBackend
        from nsreplay.storage.native_backend import NativeDeltaBackend

        if backend == "delta-rs":
            return DeltaRsBackend(spark)
        available = native_delta_available(spark)
        if backend == "delta-spark":
            if not available:
                raise BackendUnavailableError(
                    "backend 'delta-spark' needs the delta-spark jars (io.delta classes) on the driver classpath "
                    "and a SparkSession; start Spark with --packages io.delta:delta-spark_2.13:<version>"
                )
            return NativeDeltaBackend(spark)  # type: ignore[arg-type]
        return NativeDeltaBackend(spark) if available else DeltaRsBackend(spark)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"Warehouse(root={self.root!r}, backend={self.backend_name!r})"

    # -- locations & metadata -----------------------------------------------------------------------

    def path(self, spec_or_name: TableSpec | str) -> str:
        """The table's location: ``<root>/<name parts>`` (an absolute local path, or a URI).

        Accepts a :class:`TableSpec` or a dotted name (validated like ``TableSpec.name``).
        """
        return self._location(spec_or_name).uri

    def exists(self, spec: TableSpec | str) -> bool:
        """Whether the table exists (a Delta log is at its location)."""
        return self._backend.exists(self._location(spec))

    def ensure(self, spec: TableSpec) -> None:
        """Make sure the table exists with exactly ``spec``'s schema and partitioning.

        Creates the empty table (protocol 1/2, the spec's schema, partition columns and description) if
        absent; idempotent. If it exists, its schema must equal the spec — column names and types at every
        depth (top-level order aside), nullability where the backend reports it exactly (delta-rs), and the
        partition columns — else :class:`SchemaMismatchError` listing every difference. The one change
        made in place is the additive one: nullable top-level columns the spec has and the table lacks
        are added (one schema commit; older rows read them as null).
        """
        location = self._location(_check_spec(spec))
        if not self._backend.exists(location):
            self._backend.create(spec, location)
            log.info("created table %s at %s (%s)", spec.name, location.uri, self.backend_name)
        missing, differences = self._schema_check(spec, location)
        if missing and not differences:
            self._backend.add_columns(location, missing)
            log.info("added columns %s to table %s", ", ".join(f.name for f in missing), spec.name)
            missing, differences = self._schema_check(spec, location)
        if missing or differences:
            raise SchemaMismatchError(spec.name, differences or [f"no column {f.name}" for f in missing],
                                      subject=f"the existing table at {location.uri}")

    def check(self, spec: TableSpec) -> None:
        """Make sure the existing table has ``spec``'s schema and partitioning, changing nothing (for
        commands that only read or maintain a warehouse): as :meth:`ensure`, except that nullable
        top-level columns the table lacks are accepted (the next write adds them).
        :class:`TableNotFoundError` without the table, :class:`SchemaMismatchError` listing every
        other difference."""
        location = self._existing(_check_spec(spec))
        _, differences = self._schema_check(spec, location)
        if differences:
            raise SchemaMismatchError(spec.name, differences, subject=f"the existing table at {location.uri}")

    def _schema_check(self, spec: TableSpec, location: TableLocation) -> tuple[list[T.StructField], list[str]]:
        """(the nullable top-level columns of ``spec`` the table lacks, when adding them would make it
        match; every difference otherwise)."""
        schema, partition_columns = self._backend.table_schema(location)
        missing = [f for f in spec.schema.fields if f.name not in set(schema.fieldNames())]
        nullability = self._backend.exact_nullability
        if (
            missing
            and all(f.nullable for f in missing)
            and tuple(partition_columns) == spec.partition_by
            and not schema_differences(spec.schema, T.StructType(schema.fields + missing), nullability=nullability)
        ):
            return missing, []
        differences = schema_differences(spec.schema, schema, nullability=nullability)
        if tuple(partition_columns) != spec.partition_by:
            differences.append(f"partitioned by {list(partition_columns)}, the spec says {list(spec.partition_by)}")
        return [], differences

    def version(self, spec: TableSpec | str) -> int | None:
        """The table's latest version, or ``None`` if the table does not exist."""
        location = self._location(spec)
        if not self._backend.exists(location):
            return None
        return self._backend.version(location)

    def history(self, spec: TableSpec | str, limit: int | None = None) -> list[dict[str, Any]]:
        """The table's commits, **newest first** (as Delta lists them), at most ``limit`` of them.

        Each is a dict with ``version``, ``timestamp`` (commit time, epoch ms), ``operation`` (the engine's
        name, e.g. ``"WRITE"``, ``"CREATE TABLE"``), and from this module's commit metadata ``run_id``,
        ``job``, ``window_from``, ``window_to``, ``extra`` (dict), ``mode`` (``"append"``/``"overwrite"``),
        ``predicate`` (the overwrite's SQL predicate), ``app_id``; those are ``None`` (``extra``: ``{}``)
        for commits made by other writers. :class:`TableNotFoundError` if the table does not exist.
        """
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValueError(f"limit must be a positive int or None, got {limit!r}")
        location = self._existing(spec)
        return [_history_entry(raw) for raw in self._backend.history(location, limit)]

    def committed(self, spec: TableSpec | str, commit: CommitInfo) -> bool:
        """Whether this (job, run_id) has already been committed to the table (``False`` if no table).

        The delta-rs backend reads the table's app transactions (kept forever); the delta-spark backend
        searches the retained history for the run's app id.
        """
        _check_commit(commit)
        location = self._location(spec)
        return self._backend.exists(location) and self._backend.committed(location, commit.app_id)

    def files(self, spec: TableSpec, version: int | None = None, where: ColumnRange | None = None) -> list[DataFile]:
        """The data files of the table at ``version`` (``None``: latest), for readers without Spark.

        ``where``: only the files whose statistics say they may hold rows in that range (they may hold
        other rows too: filter the rows read). Files without statistics are always among them.

        Together with ``spec`` this is all a reader needs: see :class:`DataFile` and
        :func:`nsreplay.storage.arrow_types.dataset`. :class:`TableNotFoundError` /
        :class:`VersionNotFoundError` if the table or version does not exist.
        """
        _check_spec(spec)
        _check_version(version)
        if where is not None and not isinstance(where, ColumnRange):
            raise TypeError(f"where must be a ColumnRange, got {type(where).__name__}")
        return self._backend.files(spec, self._existing(spec), version, where)

    def file_uris(self, spec: TableSpec, version: int | None = None) -> list[str]:
        """The absolute paths of :meth:`files` (as on storage; local paths for a local warehouse)."""
        return [f.path for f in self.files(spec, version)]

    def column_bounds(self, spec: TableSpec, column: str, *, by: str | None = None, version: int | None = None) -> dict[str | None, tuple[int, int]] | None:
        """``MIN`` and ``MAX`` of the integer column ``column`` for each value of the partition column
        ``by`` (its Delta string form, ``None`` for NULL; ``by`` None: over the whole table, under the
        key ``None``), at ``version`` (``None``: latest), read from the
        data files' statistics in the Delta log: no data file is opened, so the cost follows the number
        of files, not of rows. ``None`` when some file has no usable statistics (written before they
        were kept, or by a writer that keeps none): read the data then. See
        :func:`nsreplay.storage.spec.bounds_by_partition`.
        """
        _check_spec(spec)
        _check_version(version)
        if by is not None and by not in spec.partition_by:
            raise ValueError(f"{by!r} is not a partition column of {spec.name} (partitioned by {list(spec.partition_by)})")
        if column not in spec.column_names or column in spec.partition_by:
            raise ValueError(f"{column!r} is not a data column of {spec.name}")
        return bounds_by_partition(self._backend.column_stats(spec, self._existing(spec), version, column), by)

    def files_written_by(self, spec: TableSpec, commit: CommitInfo, *, newest: int = 100) -> list[DataFile] | None:
        """The data files that the commit of ``commit``'s (job, run id) added to the table and that its
        latest version still holds, for a reader after one run's rows: they are found from the Delta
        log (the commit among the table's ``newest`` commits, and the files of its version and the
        one before), so the cost follows ``newest``, not the number of runs the table holds.

        ``None`` when no such commit is among the ``newest`` (an older run, or one written by another
        writer) or its log has expired: read the table with a filter then. ``[]`` when that commit's
        files were removed since (a RESTORE, an overwrite). :class:`TableNotFoundError` if the table
        does not exist.
        """
        _check_spec(spec)
        _check_commit(commit)
        if isinstance(newest, bool) or not isinstance(newest, int) or newest < 1:
            raise ValueError(f"newest must be a positive int, got {newest!r}")
        found = next((e["version"] for e in self.history(spec, limit=newest) if e["app_id"] == commit.app_id), None)
        if found is None:
            return None
        try:
            before = {f.path for f in self.files(spec, found - 1)} if found > 0 else set()
            written = self.files(spec, found)
        except VersionNotFoundError:  # its log expired (older than the log retention): not findable
            return None
        latest = {f.path for f in self.files(spec)}
        return [f for f in written if f.path not in before and f.path in latest]

    def file_statistics(self, spec: TableSpec, columns: Sequence[str], *, version: int | None = None) -> list[FileStatistics]:
        """Every data file of the table at ``version`` (``None``: latest), with the Delta log's
        statistics of the integer data ``columns`` (:class:`FileStatistics`): for a reader that keeps a
        version's file list and prunes it by several ranges per read (``all(f.may_hold(r) for r in
        ranges)``), without reopening the log. Files without statistics are never pruned."""
        _check_spec(spec)
        _check_version(version)
        columns = tuple(columns)
        for column in columns:
            if column not in spec.column_names or column in spec.partition_by:
                raise ValueError(f"{column!r} is not a data column of {spec.name}")
        return self._backend.file_statistics(spec, self._existing(spec), version, columns)

    # -- read ---------------------------------------------------------------------------------------

    def read(
        self,
        spec: TableSpec,
        *,
        version: int | None = None,
        timestamp: int | str | _dt.datetime | None = None,
        where: ColumnRange | None = None,
    ) -> DataFrame:
        """The table as a DataFrame: latest, or as of ``version`` or ``timestamp`` (not both).

        ``where``: only the rows in that :class:`ColumnRange`; with the delta-rs backend the data files
        whose statistics lie outside it are not opened (reading one window of a long history lists
        that window's files, not the history's).

        ``timestamp`` is epoch milliseconds, an ISO-8601 string or a ``datetime`` (naive means UTC); it
        selects the latest version committed at or before that instant, using the commit timestamps that
        :meth:`history` shows. The DataFrame has exactly ``spec.schema``'s columns and types, in spec order,
        partition columns included; an empty table gives an empty DataFrame with those columns. Columns
        come back nullable as Spark's file sources report them (compare with ``ignore_nullable``).

        :class:`TableNotFoundError` if there is no table; :class:`VersionNotFoundError` if the version does
        not exist or the timestamp precedes the table's first retained commit.
        """
        _check_spec(spec)
        spark_of(self._spark)
        _check_version(version)
        if version is not None and timestamp is not None:
            raise ValueError("give version or timestamp, not both")
        location = self._existing(spec)
        if timestamp is not None:
            version = self._version_at(spec, location, _timestamp_ms(timestamp))
        elif version is not None:
            latest = self._backend.version(location)
            if version > latest:
                raise VersionNotFoundError(f"table {spec.name!r} has no version {version} (latest is {latest})")
        if where is not None and not isinstance(where, ColumnRange):
            raise TypeError(f"where must be a ColumnRange or None, got {type(where).__name__}")
        return self._backend.read(spec, location, version, where)

    def _version_at(self, spec: TableSpec, location: TableLocation, timestamp_ms: int) -> int:
        commits = self._backend.history(location, None)
        eligible = [c["version"] for c in commits if c["timestamp"] <= timestamp_ms]
        if not eligible:
            first = min((c["timestamp"] for c in commits), default=None)
            raise VersionNotFoundError(
                f"table {spec.name!r} has no version at or before {_iso(timestamp_ms)} "
                f"(first retained commit: {_iso(first) if first is not None else 'none'})"
            )
        return max(eligible)

    # -- write --------------------------------------------------------------------------------------

    def append(self, spec: TableSpec, df: DataFrame, commit: CommitInfo) -> int | None:
        """Append ``df``'s rows to the table in one commit; the new version, or ``None`` if skipped.

        ``df`` must have the spec's columns (any order; names and types must match exactly, at every
        depth) — else :class:`SchemaMismatchError` listing every difference, raised before anything is
        written. Columns are reordered to the spec. NOT NULL columns (top level and inside structs) are
        checked on the data while writing: a NULL there raises :class:`SchemaMismatchError` and nothing is
        committed. The table is created first if absent (:meth:`ensure`).

        Idempotent per (``commit.job``, ``commit.run_id``): if the table already holds this run's app
        transaction, nothing is written and ``None`` is returned. The commit metadata carries ``commit``.
        :class:`ConcurrentCommitError` if a concurrent commit conflicts (nothing committed).
        """
        return self._write(spec, df, commit, mode="append", where=None, partitions=None, prune=None)

    def overwrite(
        self,
        spec: TableSpec,
        df: DataFrame,
        commit: CommitInfo,
        *,
        where: str | ColumnRange | None = None,
        partitions: Mapping[str, str | None | Sequence[str | None]] | None = None,
        written_since: int | None = None,
    ) -> int | None:
        """Atomically replace the rows selected by ``where`` and/or ``partitions`` with ``df``'s rows.

        ``where`` is a Spark SQL predicate over the spec's columns (rows for which it is *true* are
        replaced; false or NULL rows stay), or a :class:`ColumnRange` of an integer column: that range's
        predicate, and with the delta-rs backend the files whose statistics lie outside it are not even
        opened (the overwrite of a time window reads that window's files, not the history's).
        ``partitions`` maps partition columns to a value or a list of values, in Delta's string form
        (``'2024-11-21'``, ``'42'``, ``'true'``, ``None`` for NULL): rows whose partition values are among
        them are replaced. Both together: rows satisfying both. Neither: the whole table is replaced.
        Every row of ``df`` must satisfy the combined predicate, else :class:`PredicateViolationError`
        and nothing is committed.

        One commit removes the replaced data and adds the new; readers see the old or the new table,
        never a mix. With the delta-rs backend, files selected by ``partitions`` (all files if none) are
        rewritten when ``where`` is given, so give ``partitions`` too when the slice lies in known
        partitions. Schema checks, NOT NULL checks, table creation, idempotency, return value and
        concurrency are as for :meth:`append`.

        ``written_since`` (with ``where``): the caller knows that the rows ``where`` selects were all
        written at or after that version (the commits of the runs whose rows they are, say): data
        files never change, so only the files added since (by those commits or by rewrites after
        them) can hold them, and the delta-rs backend opens only those to find them, however long
        the table's history; a file of the table before that version is not read. When that version
        can no longer be read from the log, every file is looked at, as without it.
        """
        prune = where if isinstance(where, ColumnRange) else None
        if prune is not None:
            where = prune.sql()
        if where is not None and (not isinstance(where, str) or not where.strip()):
            raise ValueError(f"where must be a non-empty Spark SQL predicate, a ColumnRange or None, got {where!r}")
        if written_since is not None:
            if isinstance(written_since, bool) or not isinstance(written_since, int) or written_since < 0:
                raise ValueError(f"written_since must be an int >= 0 or None, got {written_since!r}")
            if where is None:
                raise ValueError("written_since goes with where (the rows it selects)")
        normalized = _normalize_partitions(_check_spec(spec), partitions)
        return self._write(spec, df, commit, mode="overwrite", where=where, partitions=normalized, prune=prune, written_since=written_since)

    def overwrite_counted(
        self,
        spec: TableSpec,
        df: DataFrame,
        commit: CommitInfo,
        *,
        where: str | ColumnRange | None = None,
        partitions: Mapping[str, str | None | Sequence[str | None]] | None = None,
    ) -> tuple[int | None, int]:
        """:meth:`overwrite`, also returning how many rows of ``df`` were written: ``(version, rows)``.

        With a backend that writes ``df`` in one Spark action, the rows are counted by that action
        (``DataFrame.observe``), so counting costs no pass of its own; otherwise ``df`` is cached and
        counted first. When the write is skipped (this run already committed), ``version`` is
        ``None`` and ``rows`` is ``df``'s row count."""
        if not self._backend.observes_writes:
            cached = df.persist(StorageLevel.MEMORY_AND_DISK)
            try:
                rows = cached.count()
                return self.overwrite(spec, cached, commit, where=where, partitions=partitions), rows
            finally:
                cached.unpersist()
        observation = Observation(f"nsreplay-rows-{uuid.uuid4().hex}")
        counted = df.observe(observation, F.count(F.lit(1)).alias("rows"))
        version = self.overwrite(spec, counted, commit, where=where, partitions=partitions)
        if version is None:  # skipped before anything ran: the observation never fires
            return None, df.count()
        return version, int(observation.get["rows"])

    def restore(self, spec: TableSpec, version: int, commit: CommitInfo) -> int | None:
        """Make the table's rows those of ``version`` again, in one commit that copies no data.

        Delta's RESTORE: the commit removes the files added since ``version`` and adds back the ones
        removed since, so its cost does not grow with the table. Readers of any version see what they
        saw before; the latest version reads as ``version`` did. The table's schema stays the spec's:
        columns :meth:`ensure` added after ``version`` are added again (one more commit), and rows of
        that version read them as NULL.

        Returns the new version, or ``None`` when nothing was committed: ``version`` is the latest
        already, or this (``commit.job``, ``commit.run_id``) was committed before (idempotent, as for
        :meth:`append`). The history shows the commit with ``mode`` ``"restore"`` and operation
        ``"RESTORE"``. :class:`TableNotFoundError` / :class:`VersionNotFoundError` if the table or
        version does not exist; :class:`StorageError` if a file of ``version`` is gone (vacuumed);
        :class:`ConcurrentCommitError` if a concurrent commit conflicts (nothing committed).
        """
        _check_spec(spec)
        _check_commit(commit)
        if version is None:
            raise ValueError("version must be a non-negative int, got None")
        _check_version(version)
        location = self._existing(spec)
        latest = self._backend.version(location)
        if version > latest:
            raise VersionNotFoundError(f"table {spec.name!r} has no version {version} (latest is {latest})")
        if version == latest:
            return None
        if self._backend.committed(location, commit.app_id):
            log.info("table %s: run %r of job %r already committed; skipping", spec.name, commit.run_id, commit.job)
            return None
        write_id = uuid.uuid4().hex
        metadata = commit.to_metadata()
        metadata.update({"mode": "restore", "predicate": None, "write_id": write_id, "restored_version": version})
        restored = self._backend.restore(
            RestoreRequest(
                location=location,
                version=version,
                app_id=commit.app_id,
                txn_version=TXN_VERSION,
                user_metadata=json.dumps(metadata, sort_keys=True, separators=(",", ":")),
                write_id=write_id,
            )
        )
        if restored is not None:
            log.info("table %s: restored version %d as version %d (run %r, job %r)", spec.name, version, restored, commit.run_id, commit.job)
            self.ensure(spec)  # RESTORE also brings back that version's schema
        return restored

    def row_commits_since(self, spec: TableSpec | str, version: int) -> list[dict[str, Any]]:
        """The commits of the table after ``version`` that may change its rows, newest first (as
        :meth:`history` lists them): every one but a vacuum's or a compaction's
        (:func:`~nsreplay.storage.spec.changes_rows`). ``[]`` when ``version`` is the latest or the
        table does not exist. Reads only the log entries after ``version``."""
        _check_version(version)
        latest = self.version(spec)
        if latest is None or latest <= version:
            return []
        return [c for c in self.history(spec, limit=latest - version) if changes_rows(c)]

    def compact(
        self, spec: TableSpec, groups: Sequence[Sequence[DataFile]], *, sort_by: str | Sequence[str], commit: CommitInfo,
        row_group_rows: int = 8_192, dry_run: bool = False,
    ) -> CompactionResult:
        """Rewrite each of ``groups`` (data files of the table's latest version, all of one partition,
        as :meth:`files` or :meth:`file_statistics` listed them) as one file whose rows are sorted by
        the data column ``sort_by``, or by several in turn (an integer column first keeps the row
        groups' statistics tight; a key first keeps a key's repeated values together), in
        Parquet row groups of at most ``row_group_rows`` rows, with the Delta statistics of every
        write. One commit for all groups; it changes no row: a
        reader of any version reads what it read before, and the commit's actions say ``dataChange``
        false. Its ``mode`` is ``"compact"`` (:data:`~nsreplay.storage.spec.COMPACTION_MODE`), so
        :meth:`row_commits_since` does not count it. Groups of fewer than two files are refused.

        Idempotent for ``commit``'s (job, run id), as :meth:`append`. A file no longer in the latest
        version (a concurrent write replaced it), or a concurrent commit that conflicts, raises
        :class:`ConcurrentCommitError` and commits nothing (the files it wrote are deleted). After
        a commit, the merged files stay on storage for the versions before it, until a vacuum
        deletes them. ``dry_run``: only check the groups and report. The delta-rs backend only
        (:class:`BackendUnavailableError` on delta-spark).
        """
        _check_spec(spec)
        groups = [tuple(g) for g in groups]
        for group in groups:
            if len(group) < 2 or not all(isinstance(f, DataFile) for f in group):
                raise ValueError("each group to compact must hold two or more DataFile")
            if len({tuple(sorted(f.partition_values.items(), key=lambda kv: kv[0])) for f in group}) != 1:
                raise ValueError(f"table {spec.name!r}: a group to compact holds files of several partitions")
        if len({f.path for g in groups for f in g}) != sum(len(g) for g in groups):
            raise ValueError("a file is in more than one group to compact")
        order = (sort_by,) if isinstance(sort_by, str) else tuple(sort_by)
        if not order:
            raise ValueError("sort_by names no column")
        for column in order:
            if not isinstance(column, str) or column not in spec.column_names or column in spec.partition_by:
                raise ValueError(f"{column!r} is not a data column of {spec.name}")
        if isinstance(row_group_rows, bool) or not isinstance(row_group_rows, int) or row_group_rows < 1:
            raise ValueError(f"row_group_rows must be a positive int, got {row_group_rows!r}")
        _check_commit(commit)
        location = self._existing(spec)
        removed = tuple(tuple(_relative_to(f.path, location) for f in g) for g in groups)
        before = sum(f.size for g in groups for f in g)
        rows = sum(f.num_records or 0 for g in groups for f in g)
        if dry_run or not groups:
            return CompactionResult(removed, (), rows, before, 0, None, dry_run)
        write_id = uuid.uuid4().hex
        metadata = commit.to_metadata()
        metadata.update({"mode": COMPACTION_MODE, "predicate": None, "write_id": write_id, "sort_by": list(order)})
        done = self._backend.compact(
            CompactRequest(
                spec=spec, location=location, groups=tuple(tuple(f.path for f in g) for g in groups), sort_by=order,
                row_group_rows=row_group_rows, app_id=commit.app_id, txn_version=TXN_VERSION,
                user_metadata=json.dumps(metadata, sort_keys=True, separators=(",", ":")), write_id=write_id,
            )
        )
        if done.version is None:
            log.info("table %s: compaction %r was already committed; skipped", spec.name, commit.run_id)
            return CompactionResult(removed, (), 0, before, 0, None, False)
        log.info("table %s: compacted %d files into %d (version %d)", spec.name, sum(len(g) for g in removed), len(done.added), done.version)
        return CompactionResult(removed, done.added, done.rows, before, done.bytes, done.version, False)

    def remove_files(self, spec: TableSpec, files: Sequence[DataFile], *, mode: str, commit: CommitInfo) -> int | None:
        """Remove whole data files from the table's latest version, in one commit that adds nothing:
        their rows leave the latest version; every earlier version still reads them until a vacuum
        deletes the files. ``files`` as :meth:`files` or :meth:`file_statistics` listed them; ``mode``
        is the commit's ``mode`` (e.g. :data:`~nsreplay.storage.spec.THINNING_MODE`, which
        :meth:`row_commits_since` does not count). The caller decides that no reader of the
        published versions needs those rows.

        Returns the version committed; ``None`` when ``files`` is empty or this (job, run id) removed
        them before (idempotent, as :meth:`append`). A file no longer in the latest version (a
        concurrent commit replaced it), or a conflicting concurrent commit, raises
        :class:`ConcurrentCommitError` and commits nothing. The delta-rs backend only
        (:class:`BackendUnavailableError` on delta-spark).
        """
        _check_spec(spec)
        files = list(files)
        if not all(isinstance(f, DataFile) for f in files):
            raise ValueError("files to remove must be DataFile")
        if len({f.path for f in files}) != len(files):
            raise ValueError("a file to remove is named twice")
        if not isinstance(mode, str) or not mode:
            raise ValueError(f"mode must be a non-empty string, got {mode!r}")
        _check_commit(commit)
        location = self._existing(spec)
        if not files:
            return None
        write_id = uuid.uuid4().hex
        metadata = commit.to_metadata()
        metadata.update({"mode": mode, "predicate": None, "write_id": write_id, "removed_files": len(files)})
        version = self._backend.remove(
            RemoveRequest(
                spec=spec, location=location, paths=tuple(f.path for f in files), app_id=commit.app_id, txn_version=TXN_VERSION,
                user_metadata=json.dumps(metadata, sort_keys=True, separators=(",", ":")), write_id=write_id,
            )
        )
        if version is None:
            log.info("table %s: removal %r was already committed; skipped", spec.name, commit.run_id)
        else:
            log.info("table %s: removed %d files (version %d, mode %s)", spec.name, len(files), version, mode)
        return version

    def vacuum(
        self, spec: TableSpec, *, retention_hours: int, keep_versions: Sequence[int] = (), dry_run: bool = True,
        commit: CommitInfo | None = None,
    ) -> VacuumResult:
        """Delete the files of the table that no reader can need any more; with ``dry_run`` (the
        default), only list them.

        A file goes when it was removed from the table (by an overwrite, a delete, a RESTORE) more than
        ``retention_hours`` ago and no version in ``keep_versions`` names it, or when no commit ever
        named it (a write killed before its commit, including its staging directory) and it is older
        than that. The latest version's files and the Delta log are never touched, so readers of the
        latest version and of every kept version read what they read before; a version whose files
        went can no longer be read or restored (:class:`StorageError`). A vacuum that deletes makes
        two commits that change no row (``VACUUM START``, ``VACUUM END``, see
        :data:`~nsreplay.storage.spec.MAINTENANCE_OPERATIONS`), with ``commit``'s run id and job in
        their metadata; one that finds nothing commits nothing.

        ``retention_hours`` must be >= 0; it must outlast the longest write (a write's files are not in
        the log until it commits). :class:`TableNotFoundError` / :class:`VersionNotFoundError` for an
        unknown table or kept version; :class:`ConcurrentCommitError` if a concurrent commit conflicts.
        """
        _check_spec(spec)
        if isinstance(retention_hours, bool) or not isinstance(retention_hours, int) or retention_hours < 0:
            raise ValueError(f"retention_hours must be an int >= 0, got {retention_hours!r}")
        kept = tuple(sorted(set(keep_versions)))
        for v in kept:
            _check_version(v)
        if not dry_run:
            commit = _check_commit(commit)
        location = self._existing(spec)
        latest = self._backend.version(location)
        if kept and kept[-1] > latest:
            raise VersionNotFoundError(f"table {spec.name!r} has no version {kept[-1]} (latest is {latest})")
        metadata = json.dumps({**commit.to_metadata(), "mode": "vacuum"} if commit else {}, sort_keys=True, separators=(",", ":"))
        request = VacuumRequest(location=location, retention_hours=retention_hours, keep_versions=kept, dry_run=True, user_metadata=metadata)
        sizes = _sizes(location, self._backend.vacuum(request))  # the log may still name files deleted before
        deleted = sorted(sizes)
        if not dry_run and deleted:
            deleted = [p for p in self._backend.vacuum(dataclasses.replace(request, dry_run=False)) if p in sizes]
            log.info("table %s: vacuumed %d files (retention %d h, kept versions %s)", spec.name, len(deleted), retention_hours, list(kept))
        return VacuumResult(
            files=tuple(deleted), bytes=sum(sizes[p] for p in deleted), retention_hours=retention_hours,
            kept_versions=kept, dry_run=dry_run,
        )

    def _write(
        self,
        spec: TableSpec,
        df: DataFrame,
        commit: CommitInfo,
        *,
        mode: str,
        where: str | None,
        partitions: dict[str, tuple[str | None, ...]] | None,
        prune: ColumnRange | None,
        written_since: int | None = None,
    ) -> int | None:
        _check_spec(spec)
        _check_commit(commit)
        if not isinstance(df, DataFrame):
            raise TypeError(f"df must be a pyspark DataFrame, got {type(df).__name__}")
        spark = spark_of(self._spark)
        differences = schema_differences(spec.schema, df.schema)
        if differences:
            raise SchemaMismatchError(spec.name, differences)
        predicate = _combine(_partition_predicate(partitions) if partitions else None, where)
        if predicate is not None:
            _check_predicate(spark, spec, predicate)
        location = self._location(spec)
        self.ensure(spec)
        if self._backend.committed(location, commit.app_id):
            log.info("table %s: run %r of job %r already committed; skipping", spec.name, commit.run_id, commit.job)
            return None
        ordered = df.select(*[F.col(_quote(n)) for n in spec.column_names])
        write_id = uuid.uuid4().hex
        metadata = commit.to_metadata()
        metadata.update({"mode": mode, "predicate": predicate, "write_id": write_id})
        request = WriteRequest(
            spec=spec,
            location=location,
            df=_guarded(spec, ordered, predicate),
            mode=mode,
            app_id=commit.app_id,
            txn_version=TXN_VERSION,
            user_metadata=json.dumps(metadata, sort_keys=True, separators=(",", ":")),
            write_id=write_id,
            predicate=predicate,
            where=where,
            partitions=partitions,
            prune=prune,
            written_since=written_since,
        )
        try:
            version = self._backend.write(request)
        except (StorageError, SchemaMismatchError, TableNotFoundError):
            raise
        except Exception as exc:  # noqa: BLE001 - engine errors: translate guards, wrap the rest
            guard = _GUARD_PATTERN.search(str(exc))
            if guard and guard.group("kind") == "not-null":
                raise SchemaMismatchError(spec.name, [guard.group("message")]) from None
            if guard:
                raise PredicateViolationError(guard.group("message")) from None
            raise StorageError(f"{mode} to table {spec.name!r} failed: {exc}") from exc
        if version is None:
            log.info("table %s: run %r of job %r was already committed; skipped", spec.name, commit.run_id, commit.job)
        else:
            log.info("table %s: %s committed version %d (run %r, job %r)", spec.name, mode, version, commit.run_id, commit.job)
        return version

    # -- helpers ------------------------------------------------------------------------------------

    def _location(self, spec_or_name: TableSpec | str) -> TableLocation:
        if isinstance(spec_or_name, TableSpec):
            parts = spec_or_name.path_parts
        elif isinstance(spec_or_name, str):
            parts = _check_name(spec_or_name)
        else:
            raise TypeError(f"expected a TableSpec or a dotted table name, got {type(spec_or_name).__name__}")
        return TableLocation.of(self.root, parts)

    def _existing(self, spec: TableSpec | str) -> TableLocation:
        location = self._location(spec)
        if not self._backend.exists(location):
            name = spec.name if isinstance(spec, TableSpec) else spec
            raise TableNotFoundError(f"table {name!r} does not exist (no Delta table at {location.uri})")
        return location


def _check_spark_filesystem(spark: "SparkSession", root: TableLocation) -> None:
    """Raise :class:`UnsupportedPathError` when the Hadoop of ``spark``'s driver has no filesystem for
    the scheme of the warehouse URI ``root`` (``s3a`` without the hadoop-aws jars, ``s3``, which is
    pyarrow's name, not Hadoop's): the first data file written there would fail, after the tables
    were created. A session without a JVM of its own (Spark Connect) is not asked."""
    jvm, jsc = getattr(spark, "_jvm", None), getattr(spark, "_jsc", None)
    if jvm is None or jsc is None:
        return
    from urllib.parse import urlparse

    from py4j.protocol import Py4JJavaError

    scheme = urlparse(root.spark_uri).scheme
    try:
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, jsc.hadoopConfiguration())
    except Py4JJavaError as exc:
        error = exc.java_exception
        while error.getCause() is not None and error.getClass().getName() == "java.lang.RuntimeException":
            error = error.getCause()  # Hadoop wraps "class not found" in a RuntimeException
        reason = (str(error.toString()).splitlines() or [""])[0]
        raise UnsupportedPathError(
            f"{root.uri.rstrip('/')}: Spark has no filesystem for {scheme}:// ({reason}); Spark writes the warehouse's "
            "data files through Hadoop: s3a:// needs the hadoop-aws jars on its class path, abfss:// "
            "hadoop-azure (docs/operations.md)"
        ) from None


# -- argument checks ---------------------------------------------------------------------------------


def _relative_to(path: str, location: TableLocation) -> str:
    """A data file's path (as :class:`DataFile` names it) relative to its table's root."""
    prefix = location.file_uri("")
    if not path.startswith(prefix):
        return path
    relative = path[len(prefix):].lstrip("/")
    return relative if location.is_local else urllib.parse.unquote(relative)  # a URI's path is encoded (file_uri)


def _sizes(location: TableLocation, relatives: Sequence[str]) -> dict[str, int]:
    """The size of each of ``relatives`` (paths relative to the table's root) that exists."""
    if not relatives:
        return {}
    filesystem, root = arrow_filesystem(location.uri)
    infos = filesystem.get_file_info([f"{root.rstrip('/')}/{r}" for r in relatives])
    return {r: int(i.size) for r, i in zip(relatives, infos) if i.type == pafs.FileType.File and i.size is not None}


def _check_spec(spec: object) -> TableSpec:
    if not isinstance(spec, TableSpec):
        raise TypeError(f"expected a TableSpec, got {type(spec).__name__}")
    return spec


def _check_commit(commit: object) -> CommitInfo:
    if not isinstance(commit, CommitInfo):
        raise TypeError(f"expected a CommitInfo, got {type(commit).__name__}")
    return commit


def _check_name(name: str) -> tuple[str, ...]:
    parts = tuple(name.split("."))
    if not name or not all(re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", p) for p in parts):
        raise ValueError(f"invalid table name {name!r}: expected dotted identifiers like 'silver.events'")
    return parts


def _check_version(version: object) -> None:
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
        raise ValueError(f"version must be a non-negative int or None, got {version!r}")


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_MS = _dt.timedelta(milliseconds=1)


def _timestamp_ms(timestamp: object) -> int:
    """Epoch ms of an int (ms), ISO-8601 string or datetime; naive values are UTC. Exact: a datetime
    is floored to its millisecond by integer arithmetic (through a float, ``.766`` could come out as
    ``.765``, and a time travel to the instant of a commit land on the commit before it)."""
    if isinstance(timestamp, bool):
        raise TypeError("timestamp must be epoch ms, an ISO-8601 string or a datetime, not a bool")
    if isinstance(timestamp, int):
        return timestamp
    if isinstance(timestamp, str):
        text = timestamp.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            timestamp = _dt.datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"timestamp {timestamp!r} is not ISO-8601") from None
    if isinstance(timestamp, _dt.datetime):
        if timestamp.tzinfo is None:
            timestamp = timestamp.replace(tzinfo=_dt.timezone.utc)
        return (timestamp - _EPOCH) // _MS
    raise TypeError(f"timestamp must be epoch ms, an ISO-8601 string or a datetime, got {type(timestamp).__name__}")


def _iso(timestamp_ms: int) -> str:
    return (_EPOCH + timestamp_ms * _MS).isoformat(timespec="milliseconds")


def _normalize_partitions(
    spec: TableSpec, partitions: Mapping[str, str | None | Sequence[str | None]] | None
) -> dict[str, tuple[str | None, ...]] | None:
    if partitions is None:
        return None
    if not isinstance(partitions, Mapping) or not partitions:
        raise ValueError("partitions must be a non-empty mapping of partition column to value(s), or None")
    normalized: dict[str, tuple[str | None, ...]] = {}
    for column, values in partitions.items():
        if column not in spec.partition_by:
            raise ValueError(f"{column!r} is not a partition column of {spec.name!r} (those are {list(spec.partition_by)})")
        items = tuple(values) if isinstance(values, (list, tuple, set, frozenset)) else (values,)
        if not items:
            raise ValueError(f"partitions[{column!r}] is empty")
        for item in items:
            if item is not None and not isinstance(item, str):
                raise TypeError(
                    f"partitions[{column!r}] values must be Delta partition strings (e.g. '2024-11-21', '42') "
                    f"or None, got {item!r}"
                )
        normalized[column] = tuple(dict.fromkeys(items))
    return normalized


# -- predicates and guards ---------------------------------------------------------------------------


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def sql_string(value: str) -> str:
    """``value`` as a Spark SQL string literal, for the ``where`` predicates callers pass in."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _partition_predicate(partitions: Mapping[str, tuple[str | None, ...]]) -> str:
    """Spark SQL selecting rows whose partition values (in Delta's string form) are in ``partitions``."""
    conjuncts = []
    for column, values in partitions.items():
        terms = []
        strings = [v for v in values if v is not None]
        if strings:
            terms.append(f"CAST({_quote(column)} AS STRING) IN ({', '.join(sql_string(v) for v in strings)})")
        if None in values:
            terms.append(f"{_quote(column)} IS NULL")
        conjuncts.append("(" + " OR ".join(terms) + ")")
    return " AND ".join(conjuncts)


def _combine(partition_predicate: str | None, where: str | None) -> str | None:
    if partition_predicate and where:
        return f"({partition_predicate}) AND ({where})"
    return partition_predicate or (f"({where})" if where else None)


def _check_predicate(spark: "SparkSession", spec: TableSpec, predicate: str) -> None:
    """Parse and resolve ``predicate`` against the spec's columns (no Spark job runs)."""
    try:
        spark.createDataFrame([], spec.schema).where(F.expr(predicate)).schema  # noqa: B018 - forces analysis
    except Exception as exc:  # noqa: BLE001 - parse / analysis errors of the user's predicate
        raise ValueError(f"invalid overwrite predicate for table {spec.name!r}: {predicate} ({exc})") from None


def _not_null_checks(spec: TableSpec) -> list[tuple["Column", str]]:
    """(violation condition, path) for every NOT NULL field reachable through structs only."""
    checks: list[tuple[Column, str]] = []

    def visit(struct: T.StructType, parent: "Column | None", prefix: str) -> None:
        for f in struct.fields:
            column = F.col(_quote(f.name)) if parent is None else parent.getField(f.name)
            path = prefix + f.name
            if not f.nullable:
                condition = column.isNull() if parent is None else (parent.isNotNull() & column.isNull())
                checks.append((condition, path))
            if isinstance(f.dataType, T.StructType):
                visit(f.dataType, column, path + ".")

    visit(spec.schema, None, "")
    return checks


def _guarded(spec: TableSpec, df: DataFrame, predicate: str | None) -> DataFrame:
    """``df`` with a row-level check that fails the write on NULLs in NOT NULL fields or rows outside
    ``predicate``. Evaluated in the same pass as the write (no extra Spark job), wrapped around the first
    column; the raised message carries a marker that :meth:`Warehouse._write` turns into a named error."""
    cases: list[tuple[Column, str]] = [
        (condition, f"{_GUARD}[not-null]: column {path!r} is NOT NULL in the spec but the DataFrame has a NULL there")
        for condition, path in _not_null_checks(spec)
    ]
    if predicate is not None:
        cases.append(
            (
                ~F.coalesce(F.expr(predicate), F.lit(False)),
                f"{_GUARD}[predicate]: the DataFrame has rows outside the overwrite predicate of table "
                f"{spec.name!r}: {predicate}",
            )
        )
    if not cases:
        return df
    first = spec.column_names[0]
    expression = None
    for condition, message in cases:
        raised = F.raise_error(F.lit(message))
        expression = F.when(condition, raised) if expression is None else expression.when(condition, raised)
    guarded_first = expression.otherwise(F.col(_quote(first))).alias(first)  # type: ignore[union-attr]
    return df.select(guarded_first, *[F.col(_quote(n)) for n in spec.column_names[1:]])


def _history_entry(raw: Mapping[str, Any]) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    text = raw.get("userMetadata")
    if text:
        try:
            parsed = json.loads(text)
        except (TypeError, ValueError):
            parsed = None
        if isinstance(parsed, dict) and parsed.get(METADATA_MARKER) == 1:
            metadata = parsed
    return {
        "version": raw["version"],
        "timestamp": raw["timestamp"],
        "operation": raw.get("operation"),
        "run_id": metadata.get("run_id"),
        "job": metadata.get("job"),
        "window_from": metadata.get("window_from"),
        "window_to": metadata.get("window_to"),
        "extra": dict(metadata.get("extra") or {}),
        "mode": metadata.get("mode"),
        "predicate": metadata.get("predicate"),
        "app_id": metadata.get("app_id"),
    }
