"""What a table is (:class:`TableSpec`), what a write is (:class:`CommitInfo`), what a data file is
(:class:`DataFile`), and how a schema is compared with a spec (:func:`schema_differences`).

Pure values and pure functions: nothing here touches Spark sessions, files or Delta logs.
"""

from __future__ import annotations

import hashlib
import json
import re
import types
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from pyspark.sql import types as T

from nsreplay.storage.arrow_types import UnsupportedTypeError, to_arrow_type

__all__ = [
    "ColumnRange",
    "TableSpec",
    "CommitInfo",
    "DataFile",
    "FileColumnStats",
    "VacuumResult",
    "CompactionResult",
    "MAINTENANCE_OPERATIONS",
    "COMPACTION_MODE",
    "THINNING_MODE",
    "changes_rows",
    "bounds_by_partition",
    "retention_covering",
    "TXN_VERSION",
    "METADATA_MARKER",
    "app_transaction_id",
    "schema_differences",
    "nullable_schema",
]

#: The Delta ``txn`` version every write carries. Each (job, run_id) has its own app id, so one version
#: suffices: a table that already holds a ``txn`` for that app id has already received that run's write.
TXN_VERSION = 1

#: Key that marks commit metadata written by this module (inside the commit's ``userMetadata`` JSON).
METADATA_MARKER = "nsreplay"

#: Delta operations that change no row of the table: a reader of any version before or after them reads
#: the same rows (the files a vacuum deletes are those no retained version names).
MAINTENANCE_OPERATIONS = frozenset({"VACUUM START", "VACUUM END"})

#: The ``mode`` (commit metadata) of a compaction's commit: it rewrites files and changes no row.
COMPACTION_MODE = "compact"

#: The ``mode`` of a commit that thins ``gold.replay_state`` (``nsreplay thin-states``): it removes
#: whole files of window-end states that no run resumes from by default (a run that needs one resumes
#: from an earlier state kept and replays the range again). No reader of the published history reads
#: those rows, so, like a compaction, it is not taken for another run's writes.
THINNING_MODE = "thin-states"


def changes_rows(entry: Mapping[str, Any]) -> bool:
    """Whether a commit, as ``Warehouse.history`` lists it, may change the table's rows as a run or a
    reader of the published history sees them: every commit but a vacuum's
    (:data:`MAINTENANCE_OPERATIONS`), a compaction's (``mode`` :data:`COMPACTION_MODE`), which only
    delete or rewrite files, and a thinning of the replay states (:data:`THINNING_MODE`).

    >>> changes_rows({"operation": "WRITE", "mode": "overwrite"}), changes_rows({"operation": "VACUUM END", "mode": None})
    (True, False)
    """
    return entry.get("operation") not in MAINTENANCE_OPERATIONS and entry.get("mode") not in (COMPACTION_MODE, THINNING_MODE)

_NAME_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Characters Delta (without column mapping) and Parquet refuse in column names.
_BAD_COLUMN_CHARS = set(" ,;{}()\n\t=")
_PARTITION_TYPES = (T.StringType, T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DateType)


def app_transaction_id(job: str, run_id: str) -> str:
    """The Delta app id (``txn.appId`` / ``txnAppId``) of the writes of one run of one job.

    Stable across processes and Python versions: ``"nsreplay:<job>:<24 hex of sha256(job, run_id)>"``.
    The job name is kept in clear for whoever reads a Delta log by hand; the hash makes the id unique for
    the pair and bounded in length whatever the run id looks like.
    """
    if not isinstance(job, str) or not job:
        raise ValueError("job must be a non-empty string")
    if not isinstance(run_id, str) or not run_id:
        raise ValueError("run_id must be a non-empty string")
    digest = hashlib.sha256(json.dumps([job, run_id]).encode("utf-8")).hexdigest()[:24]
    return f"nsreplay:{job}:{digest}"


@dataclass(frozen=True)
class TableSpec:
    """A table: its dotted name, its explicit Spark schema, its partition columns.

    ``name`` is dotted (``"silver.events"``); the table lives at ``<warehouse root>/silver/events``. Each
    part is an identifier (letters, digits, ``_``, not starting with a digit).

    ``schema`` is the table's schema, created exactly like this (column order, types, nullability). Allowed
    types are listed in :mod:`nsreplay.storage.arrow_types`; ``timestamp_ntz``, char/varchar, collated
    strings, intervals and variants are refused because they need Delta table features beyond protocol
    1/2. Column names must be unique (case-insensitively, as Spark resolves them) and free of
    ``" ,;{}()\\n\\t="``.

    ``partition_by`` names columns of ``schema`` (in directory order). Partition columns must be string,
    boolean, integral or date columns, and at least one column must remain a data column.

    ``distinct_columns`` names top-level data columns whose values are (nearly) all different within
    a data file (ids, event times, JSON values). They are written without a Parquet dictionary: the
    writer would hash every value into one and then find it useless (:meth:`parquet_options`).

    Raises ``ValueError`` (or ``TypeError`` for wrong argument types) when any of this does not hold.

    >>> TableSpec("silver.events", T.StructType([T.StructField("namesrv", T.StringType()),
    ...     T.StructField("id", T.LongType())]), partition_by=("namesrv",)).path_parts
    ('silver', 'events')
    """

    name: str
    schema: T.StructType
    partition_by: tuple[str, ...] = ()
    description: str = ""
    distinct_columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"TableSpec.name must be a str, got {type(self.name).__name__}")
        parts = self.name.split(".")
        if not self.name or not all(_NAME_PART.match(p) for p in parts):
            raise ValueError(f"invalid table name {self.name!r}: expected dotted identifiers like 'silver.events'")
        if not isinstance(self.schema, T.StructType):
            raise TypeError(f"TableSpec.schema must be a pyspark StructType, got {type(self.schema).__name__}")
        if not self.schema.fields:
            raise ValueError(f"table {self.name!r}: the schema has no columns")
        if isinstance(self.partition_by, str):
            raise TypeError("TableSpec.partition_by must be a sequence of column names, not a str")
        object.__setattr__(self, "partition_by", tuple(self.partition_by))
        if not isinstance(self.description, str):
            raise TypeError("TableSpec.description must be a str")
        _check_struct_names(self.name, self.schema, path="")
        for f in self.schema.fields:
            _check_supported(self.name, f.name, f.dataType)
        names = self.schema.fieldNames()
        for column in self.partition_by:
            if not isinstance(column, str) or column not in names:
                raise ValueError(f"table {self.name!r}: partition column {column!r} is not a column of the schema")
            data_type = self.schema[column].dataType
            if not isinstance(data_type, _PARTITION_TYPES):
                raise ValueError(
                    f"table {self.name!r}: partition column {column!r} has type {data_type.simpleString()}; "
                    "partition columns must be string, boolean, integral or date"
                )
        if len(set(self.partition_by)) != len(self.partition_by):
            raise ValueError(f"table {self.name!r}: duplicate partition columns {list(self.partition_by)}")
        if len(self.partition_by) == len(names):
            raise ValueError(f"table {self.name!r}: every column is a partition column; keep at least one data column")
        if isinstance(self.distinct_columns, str):
            raise TypeError("TableSpec.distinct_columns must be a sequence of column names, not a str")
        object.__setattr__(self, "distinct_columns", tuple(self.distinct_columns))
        for column in self.distinct_columns:
            if column not in names or column in self.partition_by:
                raise ValueError(f"table {self.name!r}: distinct column {column!r} is not a data column of the schema")
        if len(set(self.distinct_columns)) != len(self.distinct_columns):
            raise ValueError(f"table {self.name!r}: duplicate distinct columns {list(self.distinct_columns)}")

    @property
    def path_parts(self) -> tuple[str, ...]:
        """The name's parts, i.e. the table's directory below the warehouse root."""
        return tuple(self.name.split("."))

    @property
    def column_names(self) -> tuple[str, ...]:
        """All columns, in schema order."""
        return tuple(self.schema.fieldNames())

    @property
    def data_columns(self) -> tuple[str, ...]:
        """The non-partition columns, in schema order."""
        return tuple(n for n in self.schema.fieldNames() if n not in self.partition_by)

    def parquet_options(self) -> dict[str, str]:
        """Parquet writer options of this table: no dictionary for the :attr:`distinct_columns`."""
        return {f"parquet.enable.dictionary#{column}": "false" for column in self.distinct_columns}


def _check_struct_names(table: str, struct: T.StructType, path: str) -> None:
    seen: dict[str, str] = {}
    for f in struct.fields:
        full = f"{path}{f.name}"
        if not f.name or _BAD_COLUMN_CHARS & set(f.name):
            raise ValueError(f"table {table!r}: invalid column name {full!r} (empty or contains one of ' ,;{{}}()\\n\\t=')")
        lowered = f.name.lower()
        if lowered in seen:
            raise ValueError(f"table {table!r}: columns {path}{seen[lowered]!r} and {full!r} differ only in case")
        seen[lowered] = f.name
        for nested, prefix in _nested_structs(f.dataType, full):
            _check_struct_names(table, nested, prefix)


def _nested_structs(data_type: T.DataType, path: str) -> list[tuple[T.StructType, str]]:
    if isinstance(data_type, T.StructType):
        return [(data_type, path + ".")]
    if isinstance(data_type, T.ArrayType):
        return _nested_structs(data_type.elementType, path + "[]")
    if isinstance(data_type, T.MapType):
        return _nested_structs(data_type.keyType, path + "{key}") + _nested_structs(data_type.valueType, path + "{value}")
    return []


def _check_supported(table: str, column: str, data_type: T.DataType) -> None:
    try:
        to_arrow_type(data_type)
    except UnsupportedTypeError as exc:
        raise ValueError(f"table {table!r}, column {column!r}: {exc}") from None
    if _contains(data_type, T.TimestampNTZType):
        raise ValueError(
            f"table {table!r}, column {column!r}: timestamp_ntz needs Delta writer features (protocol 3/7); "
            "use timestamp (UTC) so the table stays readable at protocol 1/2"
        )


def _contains(data_type: T.DataType, wanted: type) -> bool:
    if isinstance(data_type, wanted):
        return True
    if isinstance(data_type, T.StructType):
        return any(_contains(f.dataType, wanted) for f in data_type.fields)
    if isinstance(data_type, T.ArrayType):
        return _contains(data_type.elementType, wanted)
    if isinstance(data_type, T.MapType):
        return _contains(data_type.keyType, wanted) or _contains(data_type.valueType, wanted)
    return False


def contains_timestamp(schema: T.StructType) -> bool:
    """Whether any column (at any depth) is a ``timestamp``."""
    return _contains(schema, T.TimestampType)


@dataclass(frozen=True)
class ColumnRange:
    """Rows whose integer column ``column`` is in ``(above, at_most]`` (a bound of ``None`` is open),
    or NULL when ``or_null``: the ``where`` of an overwrite or a read that data files can be pruned by.

    :meth:`sql` is the predicate itself. Because the predicate is this range and nothing else, a data
    file whose statistics put every value of ``column`` outside it (and that holds no NULL there, when
    NULLs count) cannot hold a selected row, and the delta-rs backend does not open it
    (:meth:`may_hold`). So a window's overwrite reads the files of its window, not the whole history.
    """

    column: str
    above: int | None = None
    at_most: int | None = None
    or_null: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column:
            raise ValueError(f"column must be a non-empty string, got {self.column!r}")
        for name in ("above", "at_most"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"{name} must be an int or None, got {value!r}")

    def sql(self) -> str:
        """The Spark SQL predicate of the range (``true`` when it selects every row)."""
        quoted = "`" + self.column.replace("`", "``") + "`"
        bounds = []
        if self.above is not None:
            bounds.append(f"{quoted} > {self.above}")
        if self.at_most is not None:
            bounds.append(f"{quoted} <= {self.at_most}")
        if not bounds:
            return "true" if self.or_null else f"{quoted} IS NOT NULL"
        values = " AND ".join(bounds)
        return f"({quoted} IS NULL OR ({values}))" if self.or_null else values

    def may_hold(self, num_records: int | None, nulls: int | None, low: int | None, high: int | None) -> bool:
        """Whether a data file with these statistics of ``column`` (its row count, NULL count, minimum
        and maximum; ``None`` where unknown) may hold a row in the range. Unknown statistics never
        prune: only a file proven to lie outside is left out."""
        if nulls is None or num_records is None:
            return True
        if self.or_null and nulls > 0:
            return True
        if nulls >= num_records:  # NULLs only
            return False
        if low is None or high is None:
            return True
        return not ((self.above is not None and high <= self.above) or (self.at_most is not None and low > self.at_most))


@dataclass(frozen=True)
class CommitInfo:
    """Who writes, for which run and which time window: stored with the commit, and the idempotency key.

    Every write with a ``CommitInfo`` carries the Delta app transaction
    ``(app_transaction_id(job, run_id), TXN_VERSION)``. A table that already holds that transaction has
    already received this run's write of this job, and a repeated write is skipped (returns ``None``).
    Consequence: **one write per (job, run_id) per table**. A job that writes one table twice in a run
    must use two job names (e.g. ``"replay/intervals"`` and ``"replay/keyframes"``).

    ``window_from`` / ``window_to`` are epoch milliseconds (``window_from <= window_to`` when both are
    given); ``extra`` holds any further string pairs to keep in the commit metadata.
    """

    run_id: str
    job: str
    window_from: int | None = None
    window_to: int | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for attr in ("run_id", "job"):
            value = getattr(self, attr)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"CommitInfo.{attr} must be a non-empty string, got {value!r}")
        for attr in ("window_from", "window_to"):
            value = getattr(self, attr)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"CommitInfo.{attr} must be epoch milliseconds (int) or None, got {value!r}")
        if self.window_from is not None and self.window_to is not None and self.window_from > self.window_to:
            raise ValueError(f"CommitInfo window is reversed: {self.window_from} > {self.window_to}")
        if not isinstance(self.extra, Mapping):
            raise TypeError("CommitInfo.extra must be a mapping of str to str")
        for key, value in self.extra.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError(f"CommitInfo.extra must map str to str, got {key!r}: {value!r}")
        object.__setattr__(self, "extra", types.MappingProxyType(dict(self.extra)))

    def __hash__(self) -> int:
        return hash((self.run_id, self.job, self.window_from, self.window_to, tuple(sorted(self.extra.items()))))

    @property
    def app_id(self) -> str:
        """The Delta app transaction id of this (job, run_id): :func:`app_transaction_id`."""
        return app_transaction_id(self.job, self.run_id)

    def to_metadata(self) -> dict[str, Any]:
        """The JSON-able dict stored (with write details added) as the commit's ``userMetadata``."""
        return {
            METADATA_MARKER: 1,
            "run_id": self.run_id,
            "job": self.job,
            "window_from": self.window_from,
            "window_to": self.window_to,
            "extra": dict(self.extra),
            "app_id": self.app_id,
        }


@dataclass(frozen=True)
class DataFile:
    """One data file of one table version, for readers that do not use Spark.

    ``path`` is absolute and names the file as it is on storage: for a local warehouse a local path
    (already URI-decoded: ``namesrv=10.0.0.1%3A9876/...`` on disk stays exactly that), otherwise a URI
    whose path pyarrow decodes to that name (the name below the table percent-encoded:
    ``s3a://b/wh/gold/t/namesrv=10.0.0.1%253A9876/...``).
    ``partition_values`` maps every partition column to its Delta string form (``'2024-11-21'``,
    ``'10.0.0.1:9876'``, ``'42'``, ``'true'``) or ``None`` for NULL; turn them into typed values with
    :func:`nsreplay.storage.arrow_types.partition_value`. ``num_records`` comes from the file's Delta
    statistics (``None`` when the writer stored none).
    """

    path: str
    size: int
    partition_values: Mapping[str, str | None]
    num_records: int | None

    def __hash__(self) -> int:
        return hash((self.path, self.size, tuple(sorted(self.partition_values.items(), key=lambda kv: kv[0])), self.num_records))


@dataclass(frozen=True)
class FileColumnStats:
    """What the Delta log says of one integer column in one data file: the file's partition values
    (Delta string forms, as in :class:`DataFile`), its row count, and the column's NULL count, minimum
    and maximum; ``None`` where the writer stored none."""

    partition_values: Mapping[str, str | None]
    num_records: int | None
    nulls: int | None
    low: int | None
    high: int | None


@dataclass(frozen=True)
class FileStatistics:
    """One data file with what the Delta log says of some of its integer columns: for each column, its
    (NULL count, minimum, maximum), ``None`` where the writer stored none. Lets a reader that keeps
    a table version's file list prune it by several ranges at once, without reopening the log."""

    file: DataFile
    columns: Mapping[str, tuple[int | None, int | None, int | None]]

    def may_hold(self, where: ColumnRange) -> bool:
        """Whether this file may hold a row in ``where`` (see :meth:`ColumnRange.may_hold`); a column
        whose statistics were not asked for never prunes."""
        return where.may_hold(self.file.num_records, *self.columns.get(where.column, (None, None, None)))


@dataclass(frozen=True)
class VacuumResult:
    """What a vacuum of one table removed, or would remove (``dry_run``).

    ``files``: paths relative to the table's root, sorted: data files no retained version names, and
    what writes that never committed left behind. ``bytes``: their total size, as listed just before
    the removal (files already gone are not listed). ``retention_hours``: the retention applied;
    ``kept_versions``: the versions whose files were kept whatever their age."""

    files: tuple[str, ...]
    bytes: int
    retention_hours: int
    kept_versions: tuple[int, ...]
    dry_run: bool


@dataclass(frozen=True)
class CompactionResult:
    """What a compaction of one table rewrote, or would rewrite (``dry_run``).

    ``removed``: the merged files, paths relative to the table's root, one tuple per group (each group
    became one file); ``added``: the files written (empty for a dry run); ``rows``: the rows of the
    merged files, all in the files written; ``bytes_before`` / ``bytes_after``: their sizes (``bytes_after``
    0 for a dry run); ``version``: the commit (``None`` for a dry run, or when this run's compaction was
    committed before)."""

    removed: tuple[tuple[str, ...], ...]
    added: tuple[str, ...]
    rows: int
    bytes_before: int
    bytes_after: int
    version: int | None
    dry_run: bool


def retention_covering(retention_hours: int, first_commit_after_kept_ms: int | None, now_ms: int) -> int:
    """The retention, in whole hours, that keeps every file of a kept version when the engine cannot be
    told which versions to keep (delta-spark): a file of version ``k`` that a later commit removed was
    removed at or after the first commit after ``k``, so a retention reaching back past that commit
    keeps it. ``retention_hours`` when no commit follows the kept version, or when it reaches back
    further; otherwise the age of that commit rounded up, plus one hour for the clocks of the writer
    and of the vacuum.

    >>> retention_covering(168, None, 10**12)
    168
    >>> retention_covering(1, 10**12 - 30 * 3_600_000 - 1, 10**12)  # that commit is 30 h old
    32
    """
    if retention_hours < 0:
        raise ValueError(f"retention_hours must be >= 0, got {retention_hours}")
    if first_commit_after_kept_ms is None:
        return retention_hours
    age_ms = max(0, now_ms - first_commit_after_kept_ms)
    return max(retention_hours, -(-age_ms // 3_600_000) + 1)


def bounds_by_partition(files: Iterable[FileColumnStats], by: str | None) -> dict[str | None, tuple[int, int]] | None:
    """For each value of the partition column ``by``: the least minimum and the greatest maximum of the
    column over its files, i.e. ``MIN`` and ``MAX`` of the column grouped by ``by``, from statistics
    alone (``by`` None: one group, under the key ``None``, unless no file holds a value). A file of
    NULLs only (or of no rows) adds nothing, and a partition of such files is absent, as a group
    whose ``MIN`` is NULL would be. ``None`` when some file's statistics cannot tell (no row
    or NULL count, or values without bounds): then the data must be read instead."""
    bounds: dict[str | None, tuple[int, int]] = {}
    for f in files:
        if f.num_records is None or f.nulls is None:
            return None
        if f.nulls >= f.num_records:
            continue
        if f.low is None or f.high is None:
            return None
        key = None if by is None else f.partition_values[by]
        low, high = bounds.get(key, (f.low, f.high))
        bounds[key] = (min(low, f.low), max(high, f.high))
    return bounds


def nullable_schema(schema: T.StructType) -> T.StructType:
    """``schema`` with every field, element and map value nullable (how Spark file sources report data)."""
    return T.StructType([T.StructField(f.name, _nullable_type(f.dataType), True, f.metadata) for f in schema.fields])


def _nullable_type(data_type: T.DataType) -> T.DataType:
    if isinstance(data_type, T.StructType):
        return nullable_schema(data_type)
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(_nullable_type(data_type.elementType), True)
    if isinstance(data_type, T.MapType):
        return T.MapType(_nullable_type(data_type.keyType), _nullable_type(data_type.valueType), True)
    return data_type


def schema_differences(expected: T.StructType, actual: T.StructType, *, nullability: bool = False) -> list[str]:
    """Every difference between ``actual`` and the ``expected`` schema, one sentence each; ``[]`` if none.

    Top-level columns are matched by name, in any order (a writer reorders them to the spec's order).
    Nested struct fields must match by name *and* order (Spark casts structs by position, so a silent
    reorder would swap values). Types are compared recursively through structs, arrays and maps.
    Nullability (``nullable``, ``containsNull``, ``valueContainsNull``) is only compared when
    ``nullability`` is true: Spark infers nullable columns almost everywhere, so for DataFrames NOT NULL is
    checked on the data instead.

    >>> schema_differences(T.StructType([T.StructField("a", T.IntegerType())]),
    ...                    T.StructType([T.StructField("a", T.StringType()), T.StructField("b", T.LongType())]))
    ["extra column 'b' (bigint)", "column 'a': expected int, got string"]
    """
    differences: list[str] = []
    actual_by_name: dict[str, T.StructField] = {}
    for f in actual.fields:
        if f.name in actual_by_name:
            differences.append(f"duplicate column {f.name!r}")
        actual_by_name[f.name] = f
    expected_by_name = {f.name: f for f in expected.fields}
    for f in expected.fields:
        if f.name not in actual_by_name:
            hint = [n for n in actual_by_name if n.lower() == f.name.lower()]
            suffix = f" (found {hint[0]!r}: names are case-sensitive)" if hint else ""
            differences.append(f"missing column {f.name!r} ({f.dataType.simpleString()}){suffix}")
    for f in actual.fields:
        if f.name not in expected_by_name and not any(n.lower() == f.name.lower() for n in expected_by_name):
            differences.append(f"extra column {f.name!r} ({f.dataType.simpleString()})")
    for f in expected.fields:
        other = actual_by_name.get(f.name)
        if other is None:
            continue
        if nullability and f.nullable != other.nullable:
            differences.append(_nullability_message(f.name, f.nullable, other.nullable))
        _type_differences(f.name, f.dataType, other.dataType, nullability, differences)
    return differences


def _nullability_message(path: str, expected_nullable: bool, actual_nullable: bool) -> str:
    def word(nullable: bool) -> str:
        return "nullable" if nullable else "NOT NULL"

    return f"column {path!r}: expected {word(expected_nullable)}, got {word(actual_nullable)}"


def _type_differences(path: str, expected: T.DataType, actual: T.DataType, nullability: bool, out: list[str]) -> None:
    if isinstance(expected, T.StructType) and isinstance(actual, T.StructType):
        expected_names = expected.fieldNames()
        actual_names = actual.fieldNames()
        missing = [n for n in expected_names if n not in actual_names]
        extra = [n for n in actual_names if n not in expected_names]
        for name in missing:
            out.append(f"missing field {path}.{name} ({expected[name].dataType.simpleString()})")
        for name in extra:
            out.append(f"extra field {path}.{name} ({actual[name].dataType.simpleString()})")
        common_expected = [n for n in expected_names if n in actual_names]
        common_actual = [n for n in actual_names if n in expected_names]
        if common_expected != common_actual:
            out.append(f"column {path!r}: struct fields in a different order (expected {common_expected}, got {common_actual})")
        for name in common_expected:
            e, a = expected[name], actual[name]
            if nullability and e.nullable != a.nullable:
                out.append(_nullability_message(f"{path}.{name}", e.nullable, a.nullable))
            _type_differences(f"{path}.{name}", e.dataType, a.dataType, nullability, out)
        return
    if isinstance(expected, T.ArrayType) and isinstance(actual, T.ArrayType):
        if nullability and expected.containsNull != actual.containsNull:
            out.append(f"column {path!r}: expected containsNull={expected.containsNull}, got {actual.containsNull}")
        _type_differences(f"{path}[]", expected.elementType, actual.elementType, nullability, out)
        return
    if isinstance(expected, T.MapType) and isinstance(actual, T.MapType):
        if nullability and expected.valueContainsNull != actual.valueContainsNull:
            out.append(
                f"column {path!r}: expected valueContainsNull={expected.valueContainsNull}, got {actual.valueContainsNull}"
            )
        _type_differences(f"{path}{{key}}", expected.keyType, actual.keyType, nullability, out)
        _type_differences(f"{path}{{value}}", expected.valueType, actual.valueType, nullability, out)
        return
    if type(expected) is not type(actual) or expected != actual:
        out.append(f"column {path!r}: expected {expected.simpleString()}, got {actual.simpleString()}")
