"""Turning user data into Arrow tables that fit an Iceberg table (pure Arrow, no catalog)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from sketch_core.errors import InvalidDataError, SchemaMismatchError

# Arrow types Iceberg has no equal for, or that break PyIceberg (string_view breaks deletes),
# mapped to the closest safe type.
_PORTABLE_TYPES: dict[pa.DataType, pa.DataType] = {
    pa.string_view(): pa.string(),
    pa.large_string(): pa.string(),
    pa.binary_view(): pa.binary(),
    pa.large_binary(): pa.binary(),
    pa.uint8(): pa.int32(),
    pa.uint16(): pa.int32(),
    pa.uint32(): pa.int64(),
    pa.uint64(): pa.int64(),
    pa.int8(): pa.int32(),
    pa.int16(): pa.int32(),
}


# Column type changes Iceberg allows in a schema evolution (and Parquet readers cast), by Arrow
# type name: int to long, float to double; and a decimal's precision raised at the same scale.
TYPE_WIDENINGS = frozenset({("int32", "int64"), ("float", "double")})
_DECIMAL = re.compile(r"decimal(?:128|256)\((\d+), (\d+)\)")


def is_type_widening(old: str, new: str) -> bool:
    """Whether a column may go from Arrow type ``old`` to ``new`` (by name) in a schema
    evolution: Iceberg allows it (Spark's ``ALTER COLUMN ... TYPE``), and the files written
    before read as the new type."""
    if (old, new) in TYPE_WIDENINGS:
        return True
    before, after = _DECIMAL.fullmatch(old), _DECIMAL.fullmatch(new)
    return (
        before is not None and after is not None and before[2] == after[2] and int(after[1]) > int(before[1])
    )


def to_arrow(data: Any) -> pa.Table:
    """Accept a pyarrow Table/RecordBatchReader, a Spark or pandas DataFrame, or a Parquet path."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if isinstance(data, str | os.PathLike):
        return _read_parquet(Path(data))
    if hasattr(data, "toArrow") and hasattr(data, "sparkSession"):  # pyspark DataFrame
        return data.toArrow()
    if type(data).__module__.startswith("pandas") and hasattr(data, "to_records"):
        return pa.Table.from_pandas(data, preserve_index=False)
    raise InvalidDataError(
        f"cannot use data of type {type(data).__name__}",
        hint="pass a pyarrow.Table, a Spark or pandas DataFrame, or a path to Parquet files",
    )


def _read_parquet(path: Path) -> pa.Table:
    if not path.exists():
        raise InvalidDataError(f"no such file or directory: {path}", hint="check the Parquet path")
    try:
        return pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InvalidDataError(f"cannot read Parquet from {path}: {exc}", hint="is it Parquet?") from exc


def _portable_type(kind: pa.DataType) -> pa.DataType:
    if kind in _PORTABLE_TYPES:
        return _PORTABLE_TYPES[kind]
    if pa.types.is_timestamp(kind) and kind.unit == "ns":
        return pa.timestamp("us", tz=kind.tz)
    if pa.types.is_dictionary(kind):
        return _portable_type(kind.value_type)
    return kind


def portable(table: pa.Table) -> pa.Table:
    """Cast columns to types Iceberg stores faithfully (for creating a table)."""
    if table.num_columns == 0:
        raise InvalidDataError("the data has no columns", hint="a table needs at least one column")
    names = [field.name for field in table.schema]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InvalidDataError(f"duplicate column names: {', '.join(duplicates)}")
    target = pa.schema([pa.field(f.name, _portable_type(f.type), nullable=True) for f in table.schema])
    return table.cast(target, safe=False) if target != table.schema else table


def conform(table: pa.Table, target: pa.Schema, table_name: str) -> pa.Table:
    """Reorder and cast ``table`` to ``target``; every mismatch is named in one error."""
    problems: list[str] = []
    given = {field.name: field for field in table.schema}
    expected = {field.name for field in target}
    missing = [f.name for f in target if f.name not in given]
    extra = [name for name in given if name not in expected]
    if missing:
        problems.append("missing columns " + ", ".join(missing))
    if extra:
        problems.append("unexpected columns " + ", ".join(extra))
    columns = []
    for field in target:
        if field.name not in given:
            continue
        column = table.column(field.name)
        try:
            columns.append(column.cast(field.type, safe=True))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            problems.append(f"column {field.name} is {column.type}, table has {field.type}")
            continue
        if not field.nullable and column.null_count:
            problems.append(f"column {field.name} has {column.null_count} NULLs but is required")
    if problems:
        raise SchemaMismatchError(table_name, problems)
    return pa.Table.from_arrays(columns, schema=target)


def sort_rows(table: pa.Table, sort_by: tuple[str, ...]) -> pa.Table:
    if not sort_by or table.num_rows < 2:
        return table
    return table.sort_by([(name, "ascending") for name in sort_by])
