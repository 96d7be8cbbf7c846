"""The native backend: delta-spark (``format("delta")``) when the ``io.delta`` classes are on the classpath.

Used on clusters started with the delta-spark jars (``spark-submit.sh --packages
io.delta:delta-spark_2.13:<v>``, session extension ``io.delta.sql.DeltaSparkSessionExtension`` and catalog
``org.apache.spark.sql.delta.catalog.DeltaCatalog``). This machine cannot download them: the backend's
tests skip here and run where ``NSREPLAY_DELTA=spark`` is set on a machine that can fetch the jars.

Mapping of the warehouse contract onto delta-spark:

* create: ``DeltaTable.createIfNotExists(...).location(path)`` with the spec's columns, partitioning and
  ``delta.minReaderVersion=1`` / ``delta.minWriterVersion=2``;
* append / overwrite: ``df.write.format("delta")`` with ``userMetadata``, ``txnAppId`` / ``txnVersion``
  (delta-spark itself skips a write whose app transaction is already in the table), ``replaceWhere`` for a
  predicate overwrite and ``partitionOverwriteMode=static`` (the project's Spark defaults set *dynamic*,
  which would turn a whole-table overwrite into a partial one);
* read: ``spark.read.format("delta")`` with ``versionAsOf``;
* history / version / committed: ``DeltaTable.forPath(...).history()`` (the ``userMetadata`` column holds
  the app id and the write id);
* files: delta-spark has no public file listing, so the (protocol 1/2) log is read with delta-rs;
* vacuum: ``VACUUM ... RETAIN n HOURS [DRY RUN]``. delta-spark cannot be told which versions to keep,
  so the retention is stretched back past the first commit after the oldest kept version
  (:func:`~nsreplay.storage.spec.retention_covering`), and what a vacuum deleted is the dry run's list
  taken just before it.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from nsreplay.storage.backend import Backend, CompactRequest, Compacted, RemoveRequest, RestoreRequest, TableLocation, VacuumRequest, WriteRequest, session_conf, spark_of
from nsreplay.storage.errors import BackendUnavailableError, TableNotFoundError
from nsreplay.storage.spec import ColumnRange, DataFile, FileColumnStats, FileStatistics, TableSpec, retention_covering

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["NativeDeltaBackend", "native_delta_available", "DELTA_CLASS"]

log = logging.getLogger(__name__)

#: The class whose presence in the driver JVM means delta-spark is usable.
DELTA_CLASS = "io.delta.tables.DeltaTable"


def native_delta_available(spark: "SparkSession | None") -> bool:
    """Whether the driver JVM of ``spark`` can load ``io.delta.tables.DeltaTable``.

    ``False`` for ``None``, for Spark Connect sessions (no driver JVM in this process) and whenever the
    class cannot be loaded; never raises.
    """
    if spark is None:
        return False
    try:
        jvm = spark._jvm  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - Spark Connect raises on _jvm
        return False
    if jvm is None:
        return False
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(DELTA_CLASS, False, loader)
        return True
    except Exception:  # noqa: BLE001 - ClassNotFoundException arrives as a Py4J error
        try:
            jvm.java.lang.Class.forName(DELTA_CLASS)
            return True
        except Exception:  # noqa: BLE001
            return False


class NativeDeltaBackend(Backend):
    """Delta tables through delta-spark; needs a SparkSession with the delta-spark jars."""

    name = "delta-spark"
    # Spark may report columns of a Delta relation as nullable; compare names and types only.
    exact_nullability = False

    def __init__(self, spark: "SparkSession") -> None:
        self._spark = spark_of(spark)

    @staticmethod
    def _tables() -> Any:
        from delta.tables import DeltaTable  # the delta-spark Python package; needs the jars at call time

        return DeltaTable

    def _for_path(self, location: TableLocation) -> Any:
        if not self.exists(location):
            raise TableNotFoundError(f"no Delta table at {location.spark_uri}")
        return self._tables().forPath(self._spark, location.spark_uri)

    # -- metadata -----------------------------------------------------------------------------------

    def exists(self, location: TableLocation) -> bool:
        return bool(self._tables().isDeltaTable(self._spark, location.spark_uri))

    def create(self, spec: TableSpec, location: TableLocation) -> None:
        builder = (
            self._tables()
            .createIfNotExists(self._spark)
            .location(location.spark_uri)
            .addColumns(spec.schema)
            .property("delta.minReaderVersion", "1")
            .property("delta.minWriterVersion", "2")
        )
        if spec.partition_by:
            builder = builder.partitionedBy(*spec.partition_by)
        if spec.description:
            builder = builder.comment(spec.description)
        builder.execute()

    def table_schema(self, location: TableLocation) -> tuple[T.StructType, tuple[str, ...]]:
        table = self._for_path(location)
        partition_columns = table.detail().select("partitionColumns").first()[0] or []
        return table.toDF().schema, tuple(partition_columns)

    def add_columns(self, location: TableLocation, fields: list[T.StructField]) -> None:
        columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in fields)
        self._spark.sql(f"ALTER TABLE delta.`{location.spark_uri}` ADD COLUMNS ({columns})")

    def version(self, location: TableLocation) -> int:
        return int(self._for_path(location).history(1).select("version").first()[0])

    def history(self, location: TableLocation, limit: int | None) -> list[dict[str, Any]]:
        frame = self._for_path(location).history(limit) if limit else self._for_path(location).history()
        rows = frame.select("version", "timestamp", "operation", "userMetadata").orderBy(F.desc("version")).collect()
        return [
            {
                "version": int(r["version"]),
                # a commit's time is a whole ms: rounded, as int() of the float could give the ms before
                "timestamp": round(r["timestamp"].timestamp() * 1000),
                "operation": r["operation"],
                "userMetadata": r["userMetadata"],
            }
            for r in rows
        ]

    def committed(self, location: TableLocation, app_id: str) -> bool:
        needle = json.dumps(app_id)  # as it appears inside the userMetadata JSON
        return self._find_in_history(location, needle) is not None

    def files(self, spec: TableSpec, location: TableLocation, version: int | None, where: ColumnRange | None = None) -> list[DataFile]:
        from nsreplay.storage.deltars_backend import DeltaRsBackend

        return DeltaRsBackend(None).files(spec, location, version, where)

    def file_statistics(self, spec: TableSpec, location: TableLocation, version: int | None, columns: tuple[str, ...]) -> list[FileStatistics]:
        from nsreplay.storage.deltars_backend import DeltaRsBackend

        return DeltaRsBackend(None).file_statistics(spec, location, version, columns)

    def column_stats(self, spec: TableSpec, location: TableLocation, version: int | None, column: str) -> list[FileColumnStats]:
        from nsreplay.storage.deltars_backend import DeltaRsBackend

        return DeltaRsBackend(None).column_stats(spec, location, version, column)  # delta-spark keeps Delta statistics too (of its first 32 columns by default)

    # -- read / write -------------------------------------------------------------------------------

    def read(self, spec: TableSpec, location: TableLocation, version: int | None, where: ColumnRange | None = None) -> "DataFrame":
        if not self.exists(location):
            raise TableNotFoundError(f"no Delta table at {location.spark_uri}")
        reader = self._spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", str(version))
        frame = reader.load(location.spark_uri)
        if where is not None:  # delta-spark skips files by its own statistics
            frame = frame.where(F.expr(where.sql()))
        return frame.select(*[F.col("`" + n.replace("`", "``") + "`") for n in spec.column_names])

    def write(self, request: WriteRequest) -> int | None:
        spec, location = request.spec, request.location
        writer = (
            request.df.write.format("delta")
            .mode("append" if request.mode == "append" else "overwrite")
            .option("userMetadata", request.user_metadata)
            .option("txnAppId", request.app_id)
            .option("txnVersion", str(request.txn_version))
        )
        if request.mode == "overwrite":
            writer = writer.option("partitionOverwriteMode", "static")
            if request.predicate is not None:
                writer = writer.option("replaceWhere", request.predicate)
        if spec.partition_by:
            writer = writer.partitionBy(*spec.partition_by)
        writer.save(location.spark_uri)
        # delta-spark skips silently when the txn is already there: our write id tells whether we committed.
        version = self._find_in_history(location, request.write_id)
        if version is None:
            log.info("table %s: write %s skipped by delta-spark (app id %s already committed)",
                     spec.name, request.write_id, request.app_id)
        return version

    def restore(self, request: RestoreRequest) -> int | None:
        table = self._for_path(request.location)
        # delta-spark's RESTORE takes no writer options: the commit metadata comes from the session
        with session_conf(self._spark, {"spark.databricks.delta.commitInfo.userMetadata": request.user_metadata}):
            table.restoreToVersion(request.version)
        return self._find_in_history(request.location, request.write_id)

    def compact(self, request: CompactRequest) -> Compacted:
        # delta-spark's OPTIMIZE bins whole partitions by size; it cannot be told which files to merge
        # (only the settled ones) nor to sort them. The tables are Delta 1/2: delta-rs compacts them.
        raise BackendUnavailableError(
            "compaction is done by the delta-rs backend (Warehouse(root, None, 'delta-rs'), as `nsreplay compact` does); "
            "the tables it writes stay readable by delta-spark"
        )

    def remove(self, request: RemoveRequest) -> int | None:
        # delta-spark removes rows by predicate (DELETE), not named files; `nsreplay thin-states`
        # commits with delta-rs, and the tables stay readable by delta-spark.
        raise BackendUnavailableError(
            "removing named files is done by the delta-rs backend (Warehouse(root, None, 'delta-rs'), as `nsreplay thin-states` does); "
            "the tables stay readable by delta-spark"
        )

    def vacuum(self, request: VacuumRequest) -> list[str]:
        location = request.location
        hours = request.retention_hours
        if request.keep_versions:
            after = [h for h in self.history(location, None) if h["version"] > min(request.keep_versions)]
            first_after = min(after, key=lambda h: h["version"])["timestamp"] if after else None
            hours = retention_covering(hours, first_after, int(time.time() * 1000))
        settings = {"spark.databricks.delta.retentionDurationCheck.enabled": "false",
                    "spark.databricks.delta.commitInfo.userMetadata": request.user_metadata}
        statement = f"VACUUM delta.`{location.spark_uri}` RETAIN {hours} HOURS"
        with session_conf(self._spark, settings):
            listed = [r[0] for r in self._spark.sql(statement + " DRY RUN").collect()]
            if not request.dry_run:
                self._spark.sql(statement).collect()
        return sorted(_relative(path, location) for path in listed)

    def _find_in_history(self, location: TableLocation, needle: str) -> int | None:
        if not self.exists(location):
            return None
        rows = (
            self._for_path(location)
            .history()
            .where(F.col("userMetadata").contains(needle))
            .select("version")
            .orderBy(F.desc("version"))
            .limit(1)
            .collect()
        )
        return int(rows[0][0]) if rows else None


def _relative(path: str, location: TableLocation) -> str:
    """A path delta-spark listed (absolute, in one of the table root's spellings) relative to the root."""
    for root in (location.spark_uri, location.uri, "file://" + location.uri, "file:" + location.uri):
        prefix = root.rstrip("/") + "/"
        if path.startswith(prefix):
            return path[len(prefix) :]
    return path
