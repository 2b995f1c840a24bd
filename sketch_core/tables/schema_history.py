"""Column names across a table's schema history.

Iceberg identifies a column by its field id; its name may change (``ALTER TABLE ... RENAME
COLUMN``), and a dropped column's name may be given to a new one. Data files keep the name each
column had when they were written (and the field id beside it), so a read by the current name
finds nothing in a file written before a rename (NULLs, where a reader fills missing columns)
and, after a drop and an add under the same name, finds the dropped column's values. A table
whose names changed so is read by field id (see :mod:`sketch_core.tables.file_columns`).
"""

from __future__ import annotations

from collections.abc import Iterable

from pyiceberg.schema import Schema, index_name_by_id


def names_changed(current_schema: Schema, schemas: Iterable[Schema]) -> bool:
    """Whether some column of ``current_schema`` (nested fields included) had another name in
    one of ``schemas`` (the table's history), or some current name belonged to another column."""
    current = index_name_by_id(current_schema)
    for schema in schemas:
        names = index_name_by_id(schema)
        ids = {name: field_id for field_id, name in names.items()}
        for field_id, name in current.items():
            if names.get(field_id, name) != name or ids.get(name, field_id) != field_id:
                return True
    return False


def names_in(schema: Schema, current: Schema) -> dict[str, str | None]:
    """Each top-level column of ``current``, by its name there, with its name in ``schema``
    (an older one, a snapshot's), or None where ``schema`` lacks it (added since)."""
    older = {field.field_id: field.name for field in schema.fields}
    return {field.name: older.get(field.field_id) for field in current.fields}
