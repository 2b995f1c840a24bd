"""The whole deltas a table service read last, for the restricted reads that follow them.

Validation reads each new commit's whole delta (every column, no filter); the maintenance run
that comes right after it asks for the same commits' delta restricted to the columns and rows
its query uses. Restricting the whole delta in memory answers it without pinning, listing and
reading the files again (~5 ms of a ~45 ms run after a Spark MERGE).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow.compute as pc

from sketch_core.lru import LruMap
from sketch_core.tables.deltas import TableDelta, bag_difference, restrict
from sketch_core.tables.pinned import PinnedSnapshot

# Whole deltas kept: the newest few, each only if small (a delta that is big is read once and
# reduced where it is read; keeping it would hold its rows for nothing).
KEPT = 4
MAX_ROWS = 100_000

_Key = tuple[str, int | None, int | None, int | None, int]


def _key(before: PinnedSnapshot | None, after: PinnedSnapshot) -> _Key:
    return (
        after.table,
        before.sequence if before is not None else None,
        before.snapshot_id if before is not None else None,
        after.snapshot_id,
        after.sequence,
    )


class RecentDeltas:
    """Whole deltas by the two pins they lie between."""

    def __init__(self, kept: int = KEPT, max_rows: int = MAX_ROWS) -> None:
        self.max_rows = max_rows
        self._deltas: LruMap[_Key, TableDelta] = LruMap(kept)

    def keep(self, before: PinnedSnapshot | None, after: PinnedSnapshot, whole: TableDelta) -> None:
        """Keep ``whole``, the delta from ``before`` to ``after`` with every column and row."""
        if whole.row_count > self.max_rows:
            return
        self._deltas.put(_key(before, after), whole)

    def restricted(
        self,
        before: PinnedSnapshot | None,
        after: PinnedSnapshot,
        columns: Sequence[str] | None,
        row_filter: pc.Expression | None,
    ) -> TableDelta | None:
        """The delta from ``before`` to ``after`` restricted to ``columns`` and ``row_filter``,
        from a kept whole one (None: none kept). Rows that differ only in the columns left out
        cancel, as they do when the restricted delta is read from the files."""
        whole = self._deltas.get(_key(before, after))
        if whole is None or not whole.inserted.schema.equals(after.schema):
            return None
        inserted = restrict(whole.inserted, after.schema, columns, row_filter)
        deleted = restrict(whole.deleted, after.schema, columns, row_filter)
        if columns is not None:
            inserted, deleted = bag_difference(inserted, deleted)
        return TableDelta(
            whole.table, whole.from_sequence, whole.to_sequence, inserted, deleted, whole.files_read
        )
