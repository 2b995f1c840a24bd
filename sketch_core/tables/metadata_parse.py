"""Parsing Iceberg table metadata files incrementally.

A metadata file repeats every snapshot and log entry the table still has, so it grows with
each commit; PyIceberg validates all of it with pydantic on every parse (about 14 ms for 600
snapshots, on each commit's first load). A table's next metadata file differs from the last
one by a snapshot or two, so this parser validates only what it has not seen for that table
(matched by table UUID) and reuses the rest, already validated and immutable.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil
from pyiceberg.table.snapshots import MetadataLogEntry, Snapshot, SnapshotLogEntry

_SNAPSHOTS = "snapshots"
_SNAPSHOT_LOG = "snapshot-log"
_METADATA_LOG = "metadata-log"


class _TableParts:
    """The validated parts of one table's most recently parsed metadata file."""

    def __init__(self) -> None:
        self.snapshots: dict[int, Snapshot] = {}
        self.snapshot_log: dict[tuple[int, int], SnapshotLogEntry] = {}
        self.metadata_log: dict[tuple[str, int], MetadataLogEntry] = {}


class MetadataParser:
    """Turns metadata file contents into ``TableMetadata`` equal to PyIceberg's own parse."""

    def __init__(self) -> None:
        self._tables: dict[str, _TableParts] = {}
        self._lock = threading.Lock()

    def parse(self, content: bytes) -> TableMetadata:
        raw = json.loads(content)
        uuid = raw.get("table-uuid")
        if not isinstance(uuid, str):  # not a shape this parser knows: PyIceberg decides
            return TableMetadataUtil.parse_raw(content)
        with self._lock:
            known = self._tables.get(uuid) or _TableParts()
        parts = _TableParts()
        parts.snapshots = {
            s["snapshot-id"]: known.snapshots.get(s["snapshot-id"]) or Snapshot.model_validate(s)
            for s in raw.get(_SNAPSHOTS, [])
        }
        parts.snapshot_log = _entries(
            raw.get(_SNAPSHOT_LOG, []), known.snapshot_log, "snapshot-id", SnapshotLogEntry
        )
        parts.metadata_log = _entries(
            raw.get(_METADATA_LOG, []), known.metadata_log, "metadata-file", MetadataLogEntry
        )
        # The rest (schemas, specs, refs, properties) is small: PyIceberg validates it as usual.
        trimmed = {**raw, _SNAPSHOTS: [], _SNAPSHOT_LOG: [], _METADATA_LOG: []}
        metadata = TableMetadataUtil.parse_obj(trimmed)
        metadata = metadata.model_copy(
            update={
                "snapshots": list(parts.snapshots.values()),
                "snapshot_log": list(parts.snapshot_log.values()),
                "metadata_log": list(parts.metadata_log.values()),
            }
        )
        with self._lock:
            self._tables[uuid] = parts  # only what this file still lists: expired entries go
        return metadata


def _entries(raw: list[dict[str, Any]], known: dict[Any, Any], key: str, model: Any) -> dict[Any, Any]:
    entries: dict[Any, Any] = {}
    for item in raw:
        ident = (item[key], item["timestamp-ms"])
        entries[ident] = known.get(ident) or model.model_validate(item)
    return entries
