"""The data files one commit added and removed, recorded with the commit.

A reader that already knows a snapshot's parent's files gets the snapshot's own by applying
the commit's changes: no Iceberg manifest is read. Reading the two Avro files a commit writes
(its manifest list and its new manifest) costs a few milliseconds, which is most of what pinning
a new snapshot costs, and incremental maintenance pins one per run. The writer reads them once,
at commit time, and the commit row carries the result (``sketch.table_commits.files``).

The recorded form keeps Iceberg's raw column bounds (hex of the single-value serialization)
under field ids, so it is decoded with the same code, and the same schema, as a manifest entry.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    DataFile,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    read_manifest_list,
)
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import (
    ADDED_DATA_FILES,
    ADDED_DELETE_FILES,
    DELETED_DATA_FILES,
    TOTAL_DATA_FILES,
    TOTAL_DELETE_FILES,
    Snapshot,
)

from sketch_core.tables.pinned import DataFileInfo, DataFiles
from sketch_core.tables.statistics import describe_bounds, describe_file

# A commit touching more files than this is not recorded: its row would carry a large document
# to every reader of the commit log, and pinning after such a commit is rare enough to plan.
RECORDED_FILES_MAX = 1000
# Version of the recorded form, so a later change can tell old rows from new ones.
_FORMAT = 1


class RowLevelDeletes(Exception):
    """The snapshot wrote delete files (position or equality deletes): not a plain file change."""

    def __init__(self, snapshot_id: int) -> None:
        super().__init__(f"snapshot {snapshot_id} has row-level delete files")
        self.snapshot_id = snapshot_id


@dataclass(frozen=True)
class SnapshotFiles:
    """The data files one snapshot added, and the paths of those it removed."""

    added: tuple[DataFile, ...]
    removed: frozenset[str]


def summary_count(snapshot: Snapshot | None, key: str) -> int:
    """A count from the snapshot's summary (0 when there is no snapshot or no such count)."""
    # Summaries leave out counts that are zero.
    if snapshot is None or snapshot.summary is None:
        return 0
    return int(snapshot.summary.get(key) or 0)


def live_rows(metadata: TableMetadata | None) -> int:
    """The table's rows at its current snapshot: data files' rows less deleted positions (and
    equality-deleted rows, which the summary counts as written)."""
    if metadata is None or metadata.current_snapshot_id is None:
        return 0
    snapshot = metadata.snapshot_by_id(metadata.current_snapshot_id)
    return (
        summary_count(snapshot, "total-records")
        - summary_count(snapshot, "total-position-deletes")
        - summary_count(snapshot, "total-equality-deletes")
    )


def rows_deleted(operation: str, live_before: int, added: int, live_after: int) -> int:
    """The rows a commit deleted, from the live rows before and after it and those it added. A
    rewrite (``replace``) deletes none, whatever the totals say: a compaction of a merge-on-read
    table drops the deleted rows from the files it writes, while the position deletes that
    pointed at them stay counted until they are removed (rewrite_position_delete_files)."""
    return 0 if operation == "replace" else max(0, live_before + added - live_after)


def read_snapshot_files(io: FileIO, snapshot: Snapshot) -> SnapshotFiles:
    """The files ``snapshot`` added and removed, from the manifests it wrote.

    The summary counts the snapshot's added and removed files: once all are found the rest of
    the manifest list (one entry per earlier commit's manifest) is not read.
    """
    # A snapshot with live delete files (added by it or before it) is not a plain file change,
    # even when it adds no data file (a merge-on-read DELETE adds only delete files, so the
    # manifests below would never be reached).
    if summary_count(snapshot, TOTAL_DELETE_FILES) or summary_count(snapshot, ADDED_DELETE_FILES):
        raise RowLevelDeletes(snapshot.snapshot_id)
    added: list[DataFile] = []
    removed: set[str] = set()
    wanted_added = summary_count(snapshot, ADDED_DATA_FILES)
    wanted_removed = summary_count(snapshot, DELETED_DATA_FILES)
    for manifest in snapshot_manifests(io, snapshot):
        if len(added) >= wanted_added and len(removed) >= wanted_removed:
            break
        if manifest.content != ManifestContent.DATA:
            raise RowLevelDeletes(snapshot.snapshot_id)
        for entry in snapshot_entries(io, manifest, snapshot):
            if entry.status == ManifestEntryStatus.ADDED:
                added.append(entry.data_file)
            elif entry.status == ManifestEntryStatus.DELETED:
                removed.add(entry.data_file.file_path)
    return SnapshotFiles(tuple(added), frozenset(removed))


def snapshot_manifests(io: FileIO, snapshot: Snapshot) -> Iterator[ManifestFile]:
    """The manifests ``snapshot`` wrote: the others carry earlier snapshots' files over, with
    nothing new in them."""
    for manifest in read_manifest_list(io.new_input(snapshot.manifest_list)):
        if manifest.added_snapshot_id == snapshot.snapshot_id:
            yield manifest


def snapshot_entries(io: FileIO, manifest: ManifestFile, snapshot: Snapshot) -> Iterator[ManifestEntry]:
    """The entries of ``manifest`` that ``snapshot`` made (its manifests may also carry existing
    files rewritten into them), removed files' included."""
    for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
        if entry.snapshot_id == snapshot.snapshot_id:
            yield entry


def apply_snapshot_files(parent: Iterable[DataFileInfo], changes: SnapshotFiles, schema: Schema) -> DataFiles:
    """The files after ``changes``, sorted by path (the order pins list them in)."""
    return _after(parent, changes.removed, [describe_file(d, schema) for d in changes.added])


def _after(
    parent: Iterable[DataFileInfo], removed: frozenset[str] | set[str], added: list[DataFileInfo]
) -> DataFiles:
    if isinstance(parent, DataFiles):  # sorted already
        return parent.changed(removed, added)
    return DataFiles.sorted([*(f for f in parent if f.path not in removed), *added])


def _hex_bounds(bounds: Mapping[int, bytes] | None) -> dict[str, str]:
    return {str(field_id): bytes(raw).hex() for field_id, raw in (bounds or {}).items()}


def _recorded_file(data_file: DataFile) -> dict[str, Any]:
    return {
        "path": data_file.file_path,
        "records": int(data_file.record_count),
        "bytes": int(data_file.file_size_in_bytes),
        "lower": _hex_bounds(data_file.lower_bounds),
        "upper": _hex_bounds(data_file.upper_bounds),
        "nulls": {str(i): int(n) for i, n in dict(data_file.null_value_counts or {}).items()},
    }


def record_commit_files(io: FileIO, snapshots: list[Snapshot]) -> dict[str, Any] | None:
    """The net file changes of a commit that wrote ``snapshots`` (oldest first; an overwrite
    writes a delete and an append snapshot), in the form stored with the commit. None when the
    commit is too big to record, or is not a plain file change (row-level deletes)."""
    last = snapshots[-1].summary if snapshots else None
    if last is None or TOTAL_DATA_FILES not in last:
        return None  # nothing to check a reader's result against
    added: dict[str, DataFile] = {}
    removed: set[str] = set()
    try:
        for snapshot in snapshots:
            step = read_snapshot_files(io, snapshot)
            for path in step.removed:
                if added.pop(path, None) is None:  # a file added earlier in this commit just vanishes
                    removed.add(path)
            added.update((d.file_path, d) for d in step.added)
            if len(added) + len(removed) > RECORDED_FILES_MAX:
                return None
    except RowLevelDeletes:
        return None
    return {
        "format": _FORMAT,
        "added": [_recorded_file(d) for d in added.values()],
        "removed": sorted(removed),
        "total": summary_count(snapshots[-1], TOTAL_DATA_FILES),
    }


def recorded_added_paths(recorded: Mapping[str, Any] | None) -> list[str] | None:
    """The paths of the data files a commit added, from its recorded form (None: not recorded)."""
    if recorded is None or recorded.get("format") != _FORMAT:
        return None
    return [entry["path"] for entry in recorded["added"]]


def apply_recorded(
    parent: Iterable[DataFileInfo], recorded: Mapping[str, Any], schema: Schema
) -> DataFiles | None:
    """The files after a commit whose parent snapshot had ``parent``, from the recorded form;
    None when the result does not add up to the commit's file count, or the form is unknown."""
    if recorded.get("format") != _FORMAT:
        return None
    added = [
        describe_bounds(
            entry["path"],
            entry["records"],
            entry["bytes"],
            entry["lower"],
            entry["upper"],
            entry["nulls"],
            schema,
            recorded=True,
        )
        for entry in recorded["added"]
    ]
    files = _after(parent, set(recorded["removed"]), added)
    return files if len(files) == recorded["total"] else None
