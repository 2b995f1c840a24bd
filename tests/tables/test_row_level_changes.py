"""Deriving a merge-on-read commit's files from its parent's: where it is refused."""

from __future__ import annotations

from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from sketch_core.tables.pinned import DataFileInfo
from sketch_core.tables.row_level_changes import RowLevelChanges, apply_row_level_changes, referenced_path

SCHEMA = Schema(NestedField(1, "key", LongType(), required=False))
PATH_FIELD = 2147483546


def delete_file(
    path: str, content: DataFileContent = DataFileContent.POSITION_DELETES, **bounds: bytes
) -> DataFile:
    return DataFile.from_args(
        content=content,
        file_path=path,
        file_format=FileFormat.PARQUET,
        record_count=1,
        file_size_in_bytes=10,
        lower_bounds={PATH_FIELD: bounds["lower"]} if "lower" in bounds else None,
        upper_bounds={PATH_FIELD: bounds["upper"]} if "upper" in bounds else None,
    )


def changes(
    *deletes: DataFile, removed_deletes: frozenset[str] = frozenset(), own: bool = True
) -> RowLevelChanges:
    return RowLevelChanges((), frozenset(), deletes, removed_deletes, own)


PARENT = (
    DataFileInfo("a.parquet", 10, 100, deletes=("d0.parquet",)),
    DataFileInfo("b.parquet", 10, 100),
)


def test_a_file_scoped_delete_goes_to_its_file_and_a_removed_one_goes_away() -> None:
    scoped = delete_file("d1.parquet", lower=b"b.parquet", upper=b"b.parquet")
    assert referenced_path(scoped) == "b.parquet"
    derived = apply_row_level_changes(
        PARENT, changes(scoped, removed_deletes=frozenset({"d0.parquet"})), SCHEMA
    )
    assert derived == (
        DataFileInfo("a.parquet", 10, 100),
        DataFileInfo("b.parquet", 10, 100, deletes=("d1.parquet",)),
    )


def test_deletes_that_may_span_files_equality_deletes_and_older_sequences_are_planned() -> None:
    spanning = delete_file("d1.parquet", lower=b"a.parquet", upper=b"b.parquet")
    unbounded = delete_file("d2.parquet")
    equality = delete_file(
        "d3.parquet", DataFileContent.EQUALITY_DELETES, lower=b"a.parquet", upper=b"a.parquet"
    )
    for refused in (spanning, unbounded, equality):
        assert referenced_path(refused) is None
        assert apply_row_level_changes(PARENT, changes(refused), SCHEMA) is None
    assert apply_row_level_changes(PARENT, changes(own=False), SCHEMA) is None
    assert apply_row_level_changes(PARENT, changes(), SCHEMA) == PARENT
