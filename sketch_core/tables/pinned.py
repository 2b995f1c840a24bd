"""A table pinned to one snapshot: exactly the data files a reader at that version sees."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True)
class DataFileInfo:
    path: str
    record_count: int
    size_bytes: int


@dataclass(frozen=True)
class PinnedSnapshot:
    """``table`` as of global commit sequence ``sequence`` (its own last commit at or before)."""

    table: str
    sequence: int
    snapshot_id: int | None
    files: tuple[DataFileInfo, ...]
    schema: pa.Schema

    @property
    def record_count(self) -> int:
        return sum(f.record_count for f in self.files)

    @property
    def view_name(self) -> str:
        """A Spark temp-view name unique to this table and snapshot."""
        return f"{self.table.replace('.', '__')}__s{self.sequence}"
