"""Snapshots' planned data files, shared by every table service of the process.

A snapshot's files never change, so a list planned once holds for as long as the snapshot
lives. Sharing it matters where services come and go in one process: each Airflow task that
runs in the scheduler's process (``dag.test()``, the demo) or each request of the plugin's
page opens a service of its own, and planning a merge-on-read table reads all its manifests
again (~50 ms for the demo's table, twice per maintenance run: the sketch's version and the
new commit).

The key is the table's uuid (a table dropped and created again under its name is another
table), the snapshot, and the schema the bounds were decoded with.
"""

from __future__ import annotations

from sketch_core.lru import LruMap
from sketch_core.tables.pinned import DataFiles

Key = tuple[str, int, int]  # (table uuid, snapshot id, schema id)
# A snapshot's list is a few hundred bytes per file; a table with 100,000 files keeps ~50 MB
# per entry, so entries, not bytes, are what is bounded (most tables have far fewer files).
_ENTRIES = 256


class PlannedFiles(LruMap[Key, DataFiles]):
    """A bounded LRU map from a snapshot to its data files, safe across threads."""

    def __init__(self, entries: int = _ENTRIES) -> None:
        super().__init__(entries)


SHARED = PlannedFiles()
