"""Decoding Iceberg's per-file column statistics into Python values."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema
from pyiceberg.types import DateType, IcebergType, TimestampType, TimestamptzType

from sketch_core.lru import LruMap
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


class FieldNames:
    """A schema's columns by field id and by name, worked out once per schema: every file a pin
    describes needs them, and a commit that rewrote a hundred files described as many."""

    __slots__ = ("by_id", "by_name")

    def __init__(self, schema: Schema) -> None:
        self.by_id = {f.field_id: (f.name, f.field_type) for f in schema.fields}
        self.by_name = {f.name: (f.field_id, f.field_type) for f in schema.fields}


_NAMES_KEPT = 32
# By the schema's identity (a Schema is not hashable, and a table's loaded metadata keeps handing
# out the same one); the schema is held with its names, so its id is not reused while kept.
_names: LruMap[int, tuple[Schema, FieldNames]] = LruMap(_NAMES_KEPT)


def field_names(schema: Schema) -> FieldNames:
    """``schema``'s :class:`FieldNames`, kept for the few schemas in use."""
    kept = _names.get(id(schema))
    if kept is not None and kept[0] is schema:
        return kept[1]
    names = FieldNames(schema)
    _names.put(id(schema), (schema, names))
    return names


class _ByColumn(Mapping[str, Any]):
    """A file's per-column statistics by column name, from Iceberg's form keyed by field id;
    each value is converted the first time it is read.

    A pin describes every file it plans or derives, and a file of a wide table has statistics
    for each of its columns, but the readers (pruning, the attribute choice, delta filters) look
    at one or two of them. Converting them all when a file was described took up to a tenth of a
    warm maintenance run over a copy-on-write commit that rewrote dozens of small files; even
    re-keying them by name took 7 ms of a run whose commit rewrote 133 files.

    ``source`` is keyed by field id: as ints, with raw values (a manifest entry), or as text,
    with values as text (a commit's recorded form: hex bounds, see :mod:`.file_changes`).
    """

    __slots__ = ("_converted", "_names", "_source", "_text")

    def __init__(self, source: Mapping[Any, Any] | None, names: FieldNames, *, text: bool = False) -> None:
        self._source = source or {}
        self._names = names
        self._text = text
        self._converted: dict[str, Any] = {}

    def _convert(self, kind: IcebergType, value: Any) -> Any:
        raise NotImplementedError

    def __getitem__(self, column: str) -> Any:
        try:
            return self._converted[column]
        except KeyError:
            pass
        field = self._names.by_name.get(column)
        if field is None:
            raise KeyError(column)
        field_id, kind = field
        value = self._source.get(str(field_id) if self._text else field_id)
        if value is None:
            raise KeyError(column)
        converted = self._converted[column] = self._convert(kind, value)
        return converted

    def __iter__(self) -> Iterator[str]:
        by_id = self._names.by_id
        for key in self._source:
            named = by_id.get(int(key))
            if named is not None:  # a field the schema no longer has is left out
                yield named[0]

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return repr(dict(self))


class DecodedBounds(_ByColumn):
    """A file's lower or upper bounds by column name, as Python values."""

    __slots__ = ()

    def _convert(self, kind: IcebergType, value: Any) -> Any:
        return _python_value(kind, bytes.fromhex(value) if self._text else value)


class NullCounts(_ByColumn):
    """A file's NULL counts by column name."""

    __slots__ = ()

    def _convert(self, kind: IcebergType, value: Any) -> Any:
        return int(value)


def describe_bounds(
    path: str,
    record_count: int,
    size_bytes: int,
    lower_bounds: Mapping[Any, Any] | None,
    upper_bounds: Mapping[Any, Any] | None,
    null_counts: Mapping[Any, Any] | None,
    schema: Schema,
    *,
    recorded: bool = False,
) -> DataFileInfo:
    """A data file from its raw Iceberg statistics (bounds and null counts keyed by field id;
    ``recorded``: in a commit's recorded form, ids and values as text)."""
    names = field_names(schema)
    return DataFileInfo(
        path=path,
        record_count=record_count,
        size_bytes=size_bytes,
        lower=DecodedBounds(lower_bounds, names, text=recorded),
        upper=DecodedBounds(upper_bounds, names, text=recorded),
        null_counts=NullCounts(null_counts, names, text=recorded),
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
