"""Decoding Iceberg's per-file column statistics into Python values."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema
from pyiceberg.types import DateType, IcebergType, TimestampType, TimestamptzType

from sketch_core.tables.pinned import DataFileInfo

_EPOCH = dt.datetime(1970, 1, 1)


def _python_value(kind: IcebergType, raw: bytes) -> Any:
    value = from_bytes(kind, raw)
    # Iceberg stores dates as days and timestamps as microseconds since the epoch; compare them
    # as the values Spark returns (date, and naive UTC datetime for session time zone UTC).
    if isinstance(kind, DateType):
        return dt.date(1970, 1, 1) + dt.timedelta(days=int(value))
    if isinstance(kind, TimestampType | TimestamptzType):
        return _EPOCH + dt.timedelta(microseconds=int(value))
    return value


def describe_bounds(
    path: str,
    record_count: int,
    size_bytes: int,
    lower_bounds: Mapping[int, bytes] | None,
    upper_bounds: Mapping[int, bytes] | None,
    null_counts: Mapping[int, int] | None,
    schema: Schema,
) -> DataFileInfo:
    """A data file from its raw Iceberg statistics (bounds and null counts keyed by field id)."""
    names = {f.field_id: (f.name, f.field_type) for f in schema.fields}

    def decode(bounds: Mapping[int, bytes] | None) -> dict[str, Any]:
        decoded = {}
        for field_id, raw in (bounds or {}).items():
            if field_id in names:
                name, kind = names[field_id]
                decoded[name] = _python_value(kind, raw)
        return decoded

    nulls = {names[i][0]: int(n) for i, n in dict(null_counts or {}).items() if i in names}
    return DataFileInfo(
        path=path,
        record_count=record_count,
        size_bytes=size_bytes,
        lower=decode(lower_bounds),
        upper=decode(upper_bounds),
        null_counts=nulls,
    )


def describe_file(data_file: DataFile, schema: Schema, deletes: tuple[str, ...] = ()) -> DataFileInfo:
    described = describe_bounds(
        data_file.file_path,
        data_file.record_count,
        data_file.file_size_in_bytes,
        data_file.lower_bounds,
        data_file.upper_bounds,
        data_file.null_value_counts,
        schema,
    )
    return replace(described, deletes=deletes) if deletes else described
