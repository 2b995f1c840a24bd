"""Columns a data file stores under escaped names (as Iceberg's writers store names that are
not Avro names) are found by field id and named as the table names them."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sketch_core.tables.file_columns import (
    FIELD_ID,
    NAMES_CHANGED,
    dictionary_encoded,
    read_named,
    stored_as_named,
)


def _field(name: str, field_id: int) -> pa.Field:
    return pa.field(name, pa.int64(), metadata={FIELD_ID: str(field_id).encode()})


def test_columns_are_found_by_field_id_and_by_name_without_one(tmp_path: Path) -> None:
    path = str(tmp_path / "part.parquet")
    stored = pa.schema([_field("Event_x20Id", 1), _field("plain", 2), pa.field("no_id", pa.int64())])
    pq.write_table(pa.table([[1, 2], [3, 4], [5, 6]], schema=stored), path)
    table = pa.schema(
        [_field("Event Id", 1), _field("plain", 2), pa.field("no_id", pa.int64()), _field("added", 9)]
    )
    rows = read_named(path, table, ["no_id", "Event Id", "added", "plain"])
    assert rows.column_names == ["no_id", "Event Id", "plain"]  # a column added later: absent
    assert rows.to_pydict() == {"no_id": [5, 6], "Event Id": [1, 2], "plain": [3, 4]}


def test_names_a_reader_finds_by_name() -> None:
    assert stored_as_named(pa.schema([_field("a_1", 1), _field("_b", 2)]))
    for name in ("Event Id", "order-date", "1st", "Ünïcode"):
        assert not stored_as_named(pa.schema([_field("a", 1), _field(name, 2)]))
    nested = pa.struct([pa.field("ok", pa.int64()), pa.field("not ok", pa.int64())])
    assert not stored_as_named(pa.schema([pa.field("s", nested)]))
    assert not stored_as_named(pa.schema([pa.field("l", pa.list_(pa.field("x y", pa.int64())))]))
    assert stored_as_named(pa.schema([pa.field("m", pa.map_(pa.string(), pa.int64()))]))


def test_a_renamed_column_is_found_and_a_reused_name_is_not(tmp_path: Path) -> None:
    # Written as (v: 2, note: 3); since then v was renamed amount, and note dropped and added
    # again (a new field id): the new note is not in the file, whatever name it holds.
    path = str(tmp_path / "part.parquet")
    pq.write_table(
        pa.table(
            [[1, 2], [10, 20], [7, 8]], schema=pa.schema([_field("id", 1), _field("v", 2), _field("note", 3)])
        ),
        path,
    )
    table = pa.schema(
        [_field("id", 1), _field("amount", 2), _field("note", 4)], metadata={NAMES_CHANGED: b"1"}
    )
    rows = read_named(path, table, ["id", "amount", "note"])
    assert rows.to_pydict() == {"id": [1, 2], "amount": [10, 20]}
    assert not stored_as_named(table), "a table whose names changed is read by field id"


def test_only_string_columns_every_row_group_keeps_in_a_small_dictionary_read_as_dictionaries(
    tmp_path: Path,
) -> None:
    """A flag column (three values) is dictionary-encoded in every row group; a note column of
    distinct strings outgrows the writer's dictionary page and falls back to plain pages (read as
    a dictionary it would be rebuilt value by value); a column written without a dictionary, an
    integer column and a flag that falls back in one row group only are read decoded."""
    count = 30_000
    flags = [("A", "N", "R")[i % 3] for i in range(count)]
    table = pa.table(
        {
            "flag": flags,
            "note": [f"a note that says nothing much, number {i}" for i in range(count)],
            "undictionaried": flags,
            "number": pa.array([i % 5 for i in range(count)], pa.int64()),
            # Distinct strings in the last row group only: its dictionary overflows there.
            "late": [flags[i] if i < 20_000 else f"late value {i:>40}" for i in range(count)],
        }
    )
    path = str(tmp_path / "part.parquet")
    pq.write_table(
        table,
        path,
        row_group_size=10_000,
        use_dictionary=["flag", "note", "number", "late"],
        dictionary_pagesize_limit=64 * 1024,
    )
    metadata = pq.ParquetFile(path).metadata
    assert dictionary_encoded(metadata, table.column_names) == ["flag"]

    read = read_named(path, table.schema, table.column_names, as_dictionaries=table.column_names)
    assert [name for name in read.column_names if pa.types.is_dictionary(read.schema.field(name).type)] == [
        "flag"
    ]
    assert read.column("flag").cast(pa.string()).to_pylist() == flags
    assert read.drop_columns(["flag"]).equals(table.drop_columns(["flag"]))


def test_a_name_with_a_dot_is_read_decoded(tmp_path: Path) -> None:
    """Arrow's reader would take ``a.b`` for a path into a struct: such a column is decoded."""
    path = str(tmp_path / "part.parquet")
    table = pa.table({"a.b": [("x", "y")[i % 2] for i in range(1_000)]})
    pq.write_table(table, path)
    assert dictionary_encoded(pq.ParquetFile(path).metadata, ["a.b"]) == []
    assert read_named(path, table.schema, ["a.b"], as_dictionaries=["a.b"]).equals(table)
