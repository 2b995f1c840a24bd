"""Reading a data file's columns by the names the table gives them.

Iceberg's writers (Spark's and PyIceberg's alike) store a column whose name is not a valid Avro
name under an escaped one in the Parquet file: ``Event Id`` as ``Event_x20Id``, ``order-date``
as ``order_x2Ddate``, ``1st`` as ``_1st``. Iceberg's readers find columns by the field id each
file keeps beside the name; a read by the table's name finds nothing there, and a reader that
fills missing columns with NULLs (as a file written before a column was added needs) returned
NULLs for every row. So a table with such a name is read by field id: in-process with
:func:`read_named`, and in Spark through Iceberg's source (see :func:`stored_as_named`). So is a
table whose column names changed over its history (see :mod:`.schema_history`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

FIELD_ID = b"PARQUET:field_id"
# Schema metadata of a table whose column names changed over its history (a rename, a name
# given to a new column after a drop; see schema_history): its files are read by field id.
NAMES_CHANGED = b"sketch:names_changed"
# A name Iceberg's writers store unchanged (conservatively ASCII: a name outside it is read by
# field id, which is right whether or not a writer escaped it).
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def stored_as_named(schema: pa.Schema) -> bool:
    """Whether each column of ``schema``, nested fields included, is stored in data files under
    its own name, so that a read by name finds it."""
    return not names_changed_in(schema) and all(_plain(field) for field in schema)


def names_changed_in(schema: pa.Schema) -> bool:
    """Whether ``schema`` is of a table whose column names changed over its history."""
    return NAMES_CHANGED in (schema.metadata or {})


def _plain(field: pa.Field) -> bool:
    if not _PLAIN_NAME.match(field.name):
        return False
    kind = field.type
    if pa.types.is_struct(kind):
        return all(_plain(kind.field(i)) for i in range(kind.num_fields))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _plain(kind.value_field)
    if pa.types.is_map(kind):
        return _plain(kind.key_field) and _plain(kind.item_field)
    return True


def read_named(
    path: str,
    target: pa.Schema,
    names: Sequence[str],
    *,
    use_threads: bool = True,
    as_dictionaries: Sequence[str] = (),
) -> pa.Table:
    """``names`` (columns of ``target``) of the Parquet file at ``path``, named as ``target``
    names them: found by field id where both the file and ``target`` carry one, else by name.
    Columns the file lacks (written before they were added) are left out: a file with field ids
    lacks a column whose id it does not hold, whatever names it holds (a dropped column's name
    given to a new one). Those of ``as_dictionaries`` the file stores dictionary-encoded
    throughout (see :func:`dictionary_encoded`) come as dictionary arrays, not decoded."""
    file = pq.ParquetFile(path)
    stored = file.schema_arrow
    by_id = {f.metadata[FIELD_ID]: f.name for f in stored if f.metadata and FIELD_ID in f.metadata}
    found: dict[str, str] = {}
    for name in names:
        metadata = target.field(name).metadata or {}
        with_id = FIELD_ID in metadata and bool(by_id)
        in_file = by_id.get(metadata[FIELD_ID]) if with_id else None
        if not with_id and name in stored.names:
            in_file = name
        if in_file is not None:
            found[name] = in_file
    asked = [found[n] for n in as_dictionaries if n in found]
    encoded = dictionary_encoded(file.metadata, asked) if asked else []
    if encoded:
        file = pq.ParquetFile(path, metadata=file.metadata, read_dictionary=encoded)
    rows = file.read(columns=list(found.values()), use_threads=use_threads)
    return rows.select(list(found.values())).rename_columns(list(found))


# A column chunk whose pages all hold dictionary indices takes at most this many bytes per value,
# uncompressed, its dictionary page included (indices of up to 16 bits, and a dictionary no
# larger than Parquet's and Arrow's 1 MB limit spread over a row group's rows); one that fell
# back to plain pages stores each string's 4-byte length beside its bytes.
_DICTIONARY_BYTES_PER_VALUE = 4.0


def dictionary_encoded(metadata: pq.FileMetaData, names: Sequence[str]) -> list[str]:
    """Of the file's top-level string and binary columns ``names``, those every row group stores
    as dictionary indices (no page of theirs, or few, fell back to plain values).

    Such a column reads 3x to 4x faster as a dictionary array than decoded (TPC-H SF10
    ``lineitem``'s ``l_returnflag``, 40 files: 0.05 s against 0.15-0.18 s): only the indices are
    decoded. A column written plain reads 3x to 4x slower that way (``l_comment``: 1.6 s against
    0.4-0.6 s), as Arrow builds the dictionary as it goes; the encodings a file lists do not tell
    the two apart (Arrow's writer lists PLAIN, RLE and RLE_DICTIONARY for both), the chunk's
    size per value does. A chunk that fell back late reads as a dictionary, slower only by the
    few values it stores plain."""
    # (A dot would make the name a path into a struct for Arrow's reader.)
    wanted = {name for name in names if "." not in name}
    encoded = []
    for i in range(metadata.num_columns):
        column = metadata.schema.column(i)
        if column.path not in wanted or column.physical_type != "BYTE_ARRAY":
            continue
        chunks = [metadata.row_group(g).column(i) for g in range(metadata.num_row_groups)]
        if chunks and all(_indices_only(chunk) for chunk in chunks):
            encoded.append(column.path)
    return encoded


def _indices_only(chunk: pq.ColumnChunkMetaData) -> bool:
    """Whether the chunk's pages hold dictionary indices, not plain values (see above)."""
    per_value = chunk.total_uncompressed_size / max(1, chunk.num_values)
    return bool(chunk.has_dictionary_page) and per_value <= _DICTIONARY_BYTES_PER_VALUE
