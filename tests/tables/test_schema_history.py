"""Which tables' column names changed over their schema history (then read by field id)."""

from __future__ import annotations

from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType, StructType

from sketch_core.tables.schema_history import names_changed, names_in


def _schema(schema_id: int, *fields: NestedField) -> Schema:
    return Schema(*fields, schema_id=schema_id)


ID, V, NOTE = (
    NestedField(1, "id", LongType()),
    NestedField(2, "v", LongType()),
    NestedField(3, "note", StringType()),
)


def test_added_and_dropped_columns_change_no_names() -> None:
    first = _schema(0, ID, V)
    added = _schema(1, ID, V, NOTE)
    assert not names_changed(added, [first, added])
    dropped = _schema(2, ID, NOTE)
    assert not names_changed(dropped, [first, added, dropped])


def test_a_rename_and_a_reused_name_change_names() -> None:
    first = _schema(0, ID, V, NOTE)
    renamed = _schema(1, ID, NestedField(2, "amount", LongType()), NOTE)
    assert names_changed(renamed, [first, renamed])
    assert names_in(first, renamed) == {"id": "id", "amount": "v", "note": "note"}
    reused = _schema(2, ID, V, NestedField(4, "note", StringType()))  # dropped, then added again
    assert names_changed(reused, [first, reused])
    assert names_in(first, reused) == {"id": "id", "v": "v", "note": None}


def test_a_renamed_nested_field_changes_names() -> None:
    inner = NestedField(5, "s", StructType(NestedField(6, "a", LongType())))
    renamed = NestedField(5, "s", StructType(NestedField(6, "b", LongType())))
    assert names_changed(_schema(1, ID, renamed), [_schema(0, ID, inner), _schema(1, ID, renamed)])
