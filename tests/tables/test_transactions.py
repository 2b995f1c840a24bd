"""MemoizedTransaction: the staged metadata is computed once per change, and follows changes."""

from __future__ import annotations

from sketch_core.datasets import synthetic_table
from sketch_core.service import SketchService
from sketch_core.tables.catalog import PendingCommit, recording
from sketch_core.tables.transactions import transaction


def test_staged_metadata_is_reused_until_an_update_is_staged(svc: SketchService, ns: str) -> None:
    name = f"{ns}.t"
    svc.tables.create(name, synthetic_table(100, groups=5), sort_by=["key"])
    table = svc.catalog.load_table(name)
    txn = transaction(table)
    first = txn.table_metadata
    assert txn.table_metadata is first, "read again without a change: the same metadata"
    txn.set_properties({"sketch.test": "1"})
    staged = txn.table_metadata
    assert staged is not first and staged.properties["sketch.test"] == "1"
    assert "sketch.test" not in first.properties, "the earlier result was not changed in place"
    with recording(PendingCommit(name, "append", metadata_only=True)):
        txn.commit_transaction()
    assert svc.catalog.load_table(name).metadata.properties["sketch.test"] == "1"
    assert txn.table_metadata.properties["sketch.test"] == "1", "follows the committed base"
