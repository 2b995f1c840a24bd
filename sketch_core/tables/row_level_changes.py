"""A merge-on-read commit's files from its parent's, without planning the table.

A commit of a merge-on-read table (Spark's ``DELETE``, ``UPDATE`` or ``MERGE``) adds data files
and position-delete files, and may remove delete files (Spark merges a data file's old deletes
into the new delete file it writes for it). Its snapshot's files are then the parent's, less
the data files it removed, each with the delete files that applied to it less those removed,
plus the new data files, with each new delete file attached to the data file it names.
Planning the snapshot in full reads every manifest of the table (~20 ms for the demo's table,
on every maintenance run after a load); this reads only the manifests the commit wrote.

Iceberg applies a position-delete file to a data file when the delete's data sequence number is
at least the data file's. Derived only where that is decided without a plan, else None (the
caller plans in full):

- the table has never been partitioned (a delete file applies within its partition only);
- every file the commit added carries the commit's own sequence number: a new delete file then
  applies to every live data file it names, and no older delete file applies to a new data file
  (a compaction that keeps older sequence numbers is planned);
- every new delete file is a position-delete file scoped to one data file: its
  ``referenced_data_file``, or equal lower and upper bounds on its ``file_path`` column (what
  Spark writes).

A removed delete file no longer applies to anything, and a removed data file is gone with its
deletes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntryStatus,
)
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from sketch_core.tables.file_changes import snapshot_entries, snapshot_manifests
from sketch_core.tables.pinned import DataFileInfo, DataFiles
from sketch_core.tables.statistics import describe_file

# The field id of a position-delete file's ``file_path`` column (Iceberg's reserved id).
_PATH_FIELD_ID = 2147483546


@dataclass(frozen=True)
class RowLevelChanges:
    """The data and delete files one snapshot added, and the paths of those it removed.
    ``own_sequence``: every added file carries the snapshot's own data sequence number."""

    added: tuple[DataFile, ...]
    removed: frozenset[str]
    added_deletes: tuple[DataFile, ...]
    removed_deletes: frozenset[str]
    own_sequence: bool


def read_row_level_changes(io: FileIO, snapshot: Snapshot) -> RowLevelChanges:
    """The files ``snapshot`` added and removed, from the manifests it wrote (data and delete)."""
    added: list[DataFile] = []
    added_deletes: list[DataFile] = []
    removed: set[str] = set()
    removed_deletes: set[str] = set()
    own_sequence = True
    for manifest in snapshot_manifests(io, snapshot):
        deletes = manifest.content == ManifestContent.DELETES
        for entry in snapshot_entries(io, manifest, snapshot):
            if entry.status == ManifestEntryStatus.ADDED:
                (added_deletes if deletes else added).append(entry.data_file)
                own_sequence = own_sequence and entry.sequence_number == snapshot.sequence_number
            elif entry.status == ManifestEntryStatus.DELETED:
                (removed_deletes if deletes else removed).add(entry.data_file.file_path)
    return RowLevelChanges(
        tuple(added), frozenset(removed), tuple(added_deletes), frozenset(removed_deletes), own_sequence
    )


def never_partitioned(table: Table) -> bool:
    return all(spec.is_unpartitioned() for spec in table.metadata.partition_specs)


def referenced_path(delete_file: DataFile) -> str | None:
    """The one data file a position-delete file applies to, when it names one (None: it may
    apply to several, or it is not a position-delete file)."""
    if delete_file.content != DataFileContent.POSITION_DELETES:
        return None
    referenced = getattr(delete_file, "referenced_data_file", None)
    if referenced:
        return str(referenced)
    lower = (delete_file.lower_bounds or {}).get(_PATH_FIELD_ID)
    upper = (delete_file.upper_bounds or {}).get(_PATH_FIELD_ID)
    if lower is None or lower != upper:
        return None
    try:
        return bytes(lower).decode("utf-8")
    except UnicodeDecodeError:
        return None


def apply_row_level_changes(
    parent: Iterable[DataFileInfo], changes: RowLevelChanges, schema: Schema
) -> DataFiles | None:
    """The files after ``changes``, sorted by path, each with its delete files; None where
    that cannot be told without a plan (see the module docstring)."""
    if not changes.own_sequence:
        return None
    new_deletes: dict[str, set[str]] = {}
    for delete_file in changes.added_deletes:
        path = referenced_path(delete_file)
        if path is None:
            return None
        new_deletes.setdefault(path, set()).add(delete_file.file_path)
    kept = (f for f in parent if f.path not in changes.removed)
    derived = []
    for info in (*kept, *(describe_file(d, schema) for d in changes.added)):
        deletes = {d for d in info.deletes if d not in changes.removed_deletes} | new_deletes.get(
            info.path, set()
        )
        if deletes != set(info.deletes):
            info = replace(info, deletes=tuple(sorted(deletes)))
        derived.append(info)
    return DataFiles.sorted(derived)
