"""Spark schemas as Arrow schemas, and Arrow datasets over a table's data files (no Spark needed).

Used by the delta-rs backend (delta-rs takes Arrow schemas) and by Spark-free readers such as the serving
shim, which read a table version as ``files()`` + :func:`dataset`.

Type mapping (the only types a :class:`~nsreplay.storage.TableSpec` may use):

============================  ====================================  ==================
Spark                         Arrow                                 Delta
============================  ====================================  ==================
BooleanType                   bool                                  boolean
ByteType / ShortType          int8 / int16                          byte / short
IntegerType / LongType        int32 / int64                         integer / long
FloatType / DoubleType        float32 / float64                     float / double
DecimalType(p, s)             decimal128(p, s)                      decimal(p,s)
StringType (UTF8_BINARY)      string                                string
BinaryType                    binary                                binary
DateType                      date32                                date
TimestampType                 timestamp[us, tz=UTC]                 timestamp
TimestampNTZType              timestamp[us]                         timestamp_ntz (*)
ArrayType(e, containsNull)    list<element: e>                      array
MapType(k, v, valueNull)      map<key: k not null, value: v>        map
StructType                    struct                                struct
============================  ====================================  ==================

(*) mapped here for completeness, but refused by ``TableSpec``: it needs Delta writer features (protocol
3/7), and tables must stay at protocol 1/2 so every engine can read them.

Nullability is carried over (``nullable``, ``containsNull``, ``valueContainsNull``); field metadata is not.
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Iterable, Mapping

import pyarrow as pa
from pyspark.sql import types as T

if TYPE_CHECKING:  # pragma: no cover - typing only (spec imports this module)
    import pyarrow.dataset as pads
    import pyarrow.fs as pafs

    from nsreplay.storage.spec import ColumnRange, DataFile, TableSpec

__all__ = [
    "UnsupportedTypeError",
    "to_arrow_type",
    "to_arrow_field",
    "to_arrow_schema",
    "partition_value",
    "dataset",
    "range_filter",
]


class UnsupportedTypeError(ValueError):
    """The Spark type has no mapping to Arrow / Delta (protocol 1/2) that this project supports."""


_ATOMIC: dict[type, pa.DataType] = {
    T.BooleanType: pa.bool_(),
    T.ByteType: pa.int8(),
    T.ShortType: pa.int16(),
    T.IntegerType: pa.int32(),
    T.LongType: pa.int64(),
    T.FloatType: pa.float32(),
    T.DoubleType: pa.float64(),
    T.BinaryType: pa.binary(),
    T.DateType: pa.date32(),
    T.TimestampType: pa.timestamp("us", tz="UTC"),
    T.TimestampNTZType: pa.timestamp("us"),
}


def to_arrow_type(data_type: T.DataType) -> pa.DataType:
    """The Arrow type of a Spark type (see the module table); :class:`UnsupportedTypeError` otherwise.

    >>> to_arrow_type(T.ArrayType(T.LongType(), containsNull=False))
    ListType(list<element: int64 not null>)
    """
    if not isinstance(data_type, T.DataType):
        raise TypeError(f"expected a pyspark.sql.types.DataType, got {type(data_type).__name__}")
    # CharType / VarcharType subclass StringType in some Spark versions: check them first.
    if isinstance(data_type, (T.CharType, T.VarcharType)):
        raise UnsupportedTypeError(f"{data_type.simpleString()} is not supported: use string")
    if isinstance(data_type, T.StringType):
        collation = getattr(data_type, "collation", "UTF8_BINARY")
        if collation != "UTF8_BINARY":
            raise UnsupportedTypeError(f"string collation {collation} is not supported (needs a Delta table feature)")
        return pa.string()
    if isinstance(data_type, T.DecimalType):
        return pa.decimal128(data_type.precision, data_type.scale)
    if isinstance(data_type, T.ArrayType):
        return pa.list_(pa.field("element", to_arrow_type(data_type.elementType), nullable=data_type.containsNull))
    if isinstance(data_type, T.MapType):
        return pa.map_(
            pa.field("key", to_arrow_type(data_type.keyType), nullable=False),
            pa.field("value", to_arrow_type(data_type.valueType), nullable=data_type.valueContainsNull),
        )
    if isinstance(data_type, T.StructType):
        return pa.struct([to_arrow_field(f) for f in data_type.fields])
    arrow = _ATOMIC.get(type(data_type))
    if arrow is None:
        raise UnsupportedTypeError(f"Spark type {data_type.simpleString()} has no supported Arrow/Delta mapping")
    return arrow


def to_arrow_field(field: T.StructField) -> pa.Field:
    """The Arrow field of a Spark ``StructField`` (same name, mapped type, same nullability)."""
    if not isinstance(field, T.StructField):
        raise TypeError(f"expected a pyspark.sql.types.StructField, got {type(field).__name__}")
    return pa.field(field.name, to_arrow_type(field.dataType), nullable=field.nullable)


def to_arrow_schema(schema: T.StructType) -> pa.Schema:
    """The Arrow schema of a Spark ``StructType``, field for field, in the same order."""
    if not isinstance(schema, T.StructType):
        raise TypeError(f"expected a pyspark.sql.types.StructType, got {type(schema).__name__}")
    return pa.schema([to_arrow_field(f) for f in schema.fields])


def partition_value(text: str | None, data_type: T.DataType) -> object:
    """A Delta partition value (the string stored in the log, ``None`` for NULL) as a typed Python value.

    Partition columns are limited to string, boolean, integral and date columns (see ``TableSpec``), whose
    Delta string forms are ``'abc'``, ``'true'``/``'false'``, ``'42'`` and ``'2024-11-21'``.
    """
    if text is None:
        return None
    if isinstance(data_type, T.StringType):
        return text
    if isinstance(data_type, T.BooleanType):
        lowered = text.lower()
        if lowered not in ("true", "false"):
            raise ValueError(f"not a boolean partition value: {text!r}")
        return lowered == "true"
    if isinstance(data_type, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return int(text)
    if isinstance(data_type, T.DateType):
        return _dt.date.fromisoformat(text)
    raise UnsupportedTypeError(f"partition columns of type {data_type.simpleString()} are not supported")


def range_filter(where: "ColumnRange | None") -> "pads.Expression | None":
    """``where`` as a ``pyarrow.dataset`` filter (``None``: no filter): the rows of the files that
    ``Warehouse.files(spec, where=where)`` gave which are in the range, as :meth:`ColumnRange.sql` is
    for Spark."""
    import pyarrow.dataset as pads

    if where is None:
        return None
    column = pads.field(where.column)
    kept = column.is_valid()
    if where.above is not None:
        kept = kept & (column > where.above)
    if where.at_most is not None:
        kept = kept & (column <= where.at_most)
    return column.is_null() | kept if where.or_null else kept


def dataset(
    spec: "TableSpec",
    files: Iterable["DataFile"],
    *,
    filesystem: "pafs.FileSystem | None" = None,
) -> "pads.Dataset":
    """A ``pyarrow.dataset.Dataset`` over the given data files of ``spec``'s table, with all spec columns.

    Partition columns are filled in from each file's ``partition_values`` (the Delta log), never parsed
    from directory names. ``files`` is what ``Warehouse.files(spec, version)`` returned; ``filesystem``
    defaults to the one inferred from the first path (local paths → local filesystem).

    Example (no Spark involved)::

        ds = dataset(spec, warehouse.files(spec))
        table = ds.to_table(filter=pyarrow.dataset.field("namesrv") == "10.0.0.1:9876")
    """
    import pyarrow.dataset as pads
    import pyarrow.fs as pafs

    from nsreplay.storage.filesystem import arrow_filesystem

    files = list(files)
    schema = to_arrow_schema(spec.schema)
    if not files:
        return pads.dataset(pa.Table.from_batches([], schema=schema))
    if filesystem is None:
        filesystem, _ = arrow_filesystem(files[0].path) if "://" in files[0].path else (pafs.LocalFileSystem(), None)
    paths: list[str] = []
    expressions: list[pads.Expression] = []
    for data_file in files:
        paths.append(_fs_path(data_file.path))
        expressions.append(_partition_expression(spec, data_file.partition_values))
    return pads.FileSystemDataset.from_paths(
        paths, schema=schema, format=pads.ParquetFileFormat(), filesystem=filesystem, partitions=expressions
    )


def _fs_path(path: str) -> str:
    """A path as a pyarrow filesystem expects it (URIs lose their scheme, local paths stay)."""
    if "://" not in path:
        return path
    from nsreplay.storage.filesystem import arrow_filesystem

    _, fs_path = arrow_filesystem(path)
    return fs_path


def _partition_expression(spec: "TableSpec", values: Mapping[str, str | None]) -> "pads.Expression":
    import pyarrow.dataset as pads

    expression: pads.Expression = pads.scalar(True)
    for name in spec.partition_by:
        data_type = spec.schema[name].dataType
        value = partition_value(values.get(name), data_type)
        if value is None:
            term = pads.field(name).is_null()
        else:
            term = pads.field(name) == pa.scalar(value, to_arrow_type(data_type))
        expression = expression & term
    return expression
