"""Storage: the only code in nsreplay that reads or writes tables (Delta Lake).

Public API::

    TableSpec(name, schema, partition_by=(), description="")     what a table is
    CommitInfo(run_id, job, window_from=None, window_to=None, extra={})   who writes (idempotency key)
    ColumnRange(column, above=None, at_most=None, or_null=False)  an overwrite's prunable ``where``
    Warehouse(root, spark, backend="auto")                         path / exists / ensure / append /
                                                                   overwrite / overwrite_counted / restore / read /
                                                                   version / history /
                                                                   committed / files / file_uris /
                                                                   column_bounds / file_statistics / files_written_by /
                                                                   row_commits_since / vacuum / compact /
                                                                   remove_files
    DataFile(path, size, partition_values, num_records)           a data file, for Spark-free readers
    FileStatistics(file, columns).may_hold(column_range)          a data file and its columns' statistics
    SchemaMismatchError, TableNotFoundError, StorageError (+ VersionNotFoundError, ConcurrentCommitError,
    PredicateViolationError, BackendUnavailableError)
    changes_rows(history_entry): whether a commit may change rows (not a vacuum's, a compaction's nor a thinning's)
    native_delta_available(spark), schema_differences(expected, actual), arrow_types.dataset(spec, files),
    arrow_types.range_filter(column_range)
    stored_table.StoredTable(warehouse, spec, version, stat_columns)   a table version read per request,
                                                                   pruned by partition and statistics

Backends: delta-spark where its jars are on the classpath, delta-rs (``deltalake``) elsewhere — including
this project's CI. See :mod:`nsreplay.storage.warehouse` for the contract.
"""

from nsreplay.storage.arrow_types import UnsupportedTypeError, dataset, partition_value, range_filter, to_arrow_schema
from nsreplay.storage.errors import (
    BackendUnavailableError,
    ConcurrentCommitError,
    PredicateViolationError,
    SchemaMismatchError,
    StorageError,
    TableNotFoundError,
    UnsupportedPathError,
    VersionNotFoundError,
)
from nsreplay.storage.native_backend import native_delta_available
from nsreplay.storage.spec import COMPACTION_MODE, MAINTENANCE_OPERATIONS, THINNING_MODE, ColumnRange, CommitInfo, CompactionResult, DataFile, FileStatistics, TableSpec, VacuumResult, app_transaction_id, changes_rows, schema_differences
from nsreplay.storage.warehouse import BACKENDS, Warehouse, sql_string

__all__ = [
    "BACKENDS",
    "BackendUnavailableError",
    "COMPACTION_MODE",
    "ColumnRange",
    "CommitInfo",
    "CompactionResult",
    "ConcurrentCommitError",
    "DataFile",
    "FileStatistics",
    "MAINTENANCE_OPERATIONS",
    "PredicateViolationError",
    "SchemaMismatchError",
    "StorageError",
    "TableNotFoundError",
    "TableSpec",
    "THINNING_MODE",
    "UnsupportedPathError",
    "UnsupportedTypeError",
    "VacuumResult",
    "VersionNotFoundError",
    "Warehouse",
    "app_transaction_id",
    "changes_rows",
    "dataset",
    "native_delta_available",
    "partition_value",
    "range_filter",
    "schema_differences",
    "sql_string",
    "to_arrow_schema",
]
