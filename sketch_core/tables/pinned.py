"""A table pinned to one snapshot: exactly the data files a reader at that version sees."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa


@dataclass(frozen=True)
class DataFileInfo:
    """One Parquet data file with its column statistics from Iceberg metadata.

    ``lower``/``upper`` map column names to bounds as Python values (dates as ``date``,
    timestamps as naive UTC ``datetime``); a column missing from them has unknown bounds.
    ``deletes``: the merge-on-read delete files (position deletes or deletion vectors) that may
    remove rows of this file in its snapshot, sorted (see :mod:`.position_deletes`);
    ``record_count`` counts the file's rows before them.
    """

    path: str
    record_count: int
    size_bytes: int
    lower: Mapping[str, Any] = field(default_factory=dict)
    upper: Mapping[str, Any] = field(default_factory=dict)
    null_counts: Mapping[str, int] = field(default_factory=dict)
    deletes: tuple[str, ...] = ()


@dataclass(frozen=True)
class PinnedSnapshot:
    """``table`` as of global commit sequence ``sequence`` (its own last commit at or before).

    ``catalog``: the Spark catalog that reads the table through Iceberg's source (the one a
    pin with merge-on-read deletes is read from in Spark; None: not known).
    ``catalog_table``: the name as the Iceberg catalog spells it, where that is not ``table``
    (a table another engine created as ``Sales.DailyOrders``: this project's name for it is
    lower-case, and Spark finds it only as spelled).
    """

    table: str
    sequence: int
    snapshot_id: int | None
    files: tuple[DataFileInfo, ...]
    schema: pa.Schema
    catalog: str | None = None
    catalog_table: str | None = None
    # Where column names changed over the table's history (see schema_history): each column of
    # ``schema`` with its name in the snapshot's own schema (None: added since), which a read of
    # the snapshot through Iceberg's source returns. None: the names never changed.
    snapshot_names: Mapping[str, str | None] | None = None

    @property
    def iceberg_name(self) -> str:
        """``namespace.table`` as Spark's Iceberg catalog finds it."""
        return self.catalog_table or self.table

    @property
    def record_count(self) -> int:
        return sum(f.record_count for f in self.files)

    @property
    def has_deletes(self) -> bool:
        """Whether some of its files have merge-on-read deletes."""
        return any(f.deletes for f in self.files)

    @property
    def view_name(self) -> str:
        """A Spark temp-view name unique to this table and snapshot."""
        return f"{self.table.replace('.', '__')}__s{self.sequence}"

    def column_bounds(self) -> dict[str, tuple[Any, Any]]:
        """Per column, (min, max) over all files; only columns every file has bounds for.

        Files holding only NULLs in a column have no bounds for it, so the column is left out
        rather than given bounds that some value could break.
        """
        if not self.files:
            return {}
        bounds: dict[str, tuple[Any, Any]] = {}
        for name in self.schema.names:
            try:
                lows = [f.lower[name] for f in self.files]
                highs = [f.upper[name] for f in self.files]
                bounds[name] = (min(lows), max(highs))
            except (KeyError, TypeError):
                continue
        return bounds
