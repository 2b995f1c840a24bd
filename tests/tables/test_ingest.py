"""What another engine's commit did, read from its metadata (pure: no catalog, no Spark)."""

from __future__ import annotations

from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata, new_table_metadata
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import LongType, NestedField

from sketch_core.tables.file_changes import live_rows
from sketch_core.tables.ingest import commit_snapshots, describe_external, operation_of

SCHEMA = Schema(NestedField(1, "k", LongType(), required=False))


def _snapshot(snapshot_id: int, parent: int | None, operation: Operation, **summary: str) -> Snapshot:
    return Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent,
        sequence_number=snapshot_id,
        timestamp_ms=1_700_000_000_000 + snapshot_id,
        manifest_list=f"/m/{snapshot_id}.avro",
        summary=Summary(operation, **summary),
        schema_id=0,
    )


def _metadata(*snapshots: Snapshot) -> TableMetadata:
    base = new_table_metadata(SCHEMA, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, "/t", {})
    current = snapshots[-1].snapshot_id if snapshots else None
    return base.model_copy(update={"snapshots": list(snapshots), "current_snapshot_id": current})


APPEND = _snapshot(1, None, Operation.APPEND, **{"added-records": "100", "total-records": "100"})
DELETE_MOR = _snapshot(
    2,
    1,
    Operation.DELETE,
    **{"added-position-deletes": "7", "total-records": "100", "total-position-deletes": "7"},
)
REWRITE = _snapshot(
    4,
    3,
    Operation.REPLACE,
    **{"added-records": "93", "deleted-records": "100", "total-records": "93", "total-position-deletes": "0"},
)
COW_UPDATE = _snapshot(
    3,
    2,
    Operation.OVERWRITE,
    **{"added-records": "40", "deleted-records": "40", "total-records": "100", "total-position-deletes": "7"},
)


def test_live_rows_subtract_deleted_positions() -> None:
    assert live_rows(None) == 0
    assert live_rows(_metadata(APPEND)) == 100
    assert live_rows(_metadata(APPEND, DELETE_MOR)) == 93


def test_a_commit_s_snapshots_run_from_the_previous_current_one() -> None:
    before, after = _metadata(APPEND), _metadata(APPEND, DELETE_MOR, COW_UPDATE)
    assert [s.snapshot_id for s in commit_snapshots(before, after) or []] == [2, 3]
    assert [s.snapshot_id for s in commit_snapshots(None, after) or []] == [1, 2, 3]
    # A rollback: the new current snapshot does not descend from the previous one.
    assert commit_snapshots(_metadata(APPEND, DELETE_MOR, COW_UPDATE), _metadata(APPEND)) is None


def test_operations_and_rows_of_other_engines_commits() -> None:
    assert operation_of([APPEND]) == "append" and operation_of([DELETE_MOR]) == "delete"
    assert operation_of([DELETE_MOR, COW_UPDATE]) == "overwrite"

    appended = describe_external(None, _metadata(APPEND), None, create=True)
    assert (appended.operation, appended.added_rows, appended.deleted_rows, appended.total_rows) == (
        "create",
        100,
        0,
        100,
    )
    deleted = describe_external(_metadata(APPEND), _metadata(APPEND, DELETE_MOR), None, create=False)
    assert (deleted.operation, deleted.added_rows, deleted.deleted_rows, deleted.total_rows) == (
        "delete",
        0,
        7,
        93,
    )
    assert deleted.parent_snapshot_id == 1 and deleted.snapshot_id == 2
    # Copy-on-write: the rewritten rows count as added and deleted; the net is exact.
    updated = describe_external(
        _metadata(APPEND, DELETE_MOR), _metadata(APPEND, DELETE_MOR, COW_UPDATE), {"x": 1}, create=False
    )
    assert (updated.added_rows, updated.deleted_rows, updated.total_rows) == (40, 40, 93)
    assert updated.files == {"x": 1}
    rolled_back = describe_external(_metadata(APPEND, DELETE_MOR), _metadata(APPEND), {"x": 1}, create=False)
    assert (rolled_back.operation, rolled_back.added_rows, rolled_back.files) == ("overwrite", 7, None)


def test_a_rewrite_changes_no_rows() -> None:
    """A compaction or a sort (``rewrite_data_files``) is a replace: the rows it rewrote, and
    the deletes it applied, are the same rows; maintenance has nothing to do."""
    before = _metadata(APPEND, DELETE_MOR, COW_UPDATE)
    rewritten = describe_external(
        before, _metadata(APPEND, DELETE_MOR, COW_UPDATE, REWRITE), None, create=False
    )
    assert (rewritten.operation, rewritten.added_rows, rewritten.deleted_rows, rewritten.total_rows) == (
        "replace",
        0,
        0,
        93,
    )
