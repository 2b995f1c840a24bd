"""A table pinned to one snapshot: exactly the data files a reader at that version sees."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
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


# Data files in these formats are refused (the project reads Parquet only).
OTHER_FORMATS = (".orc", ".avro")


def _path(info: DataFileInfo) -> str:
    return info.path


class DataFiles(tuple[DataFileInfo, ...]):
    """A snapshot's data files, sorted by path, with what every pin of the snapshot asks of
    them worked out once. A snapshot's list is planned once and shared (see
    :mod:`.snapshot_files`), but its sums were recomputed on every pin: on a table of 20,000
    files, the passes of a maintenance run (three pins, the new snapshot's list sorted again)
    took ~9.5 ms, ~1.4 ms with these (at 1,500 files, within a warm run's noise)."""

    @classmethod
    def sorted(cls, files: Iterable[DataFileInfo]) -> DataFiles:
        return cls(sorted(files, key=_path))

    def changed(self, removed: frozenset[str] | set[str], added: Iterable[DataFileInfo]) -> DataFiles:
        """These files less the ``removed`` paths, plus ``added``; still sorted by path, without
        sorting the ones kept again (a commit changes a few files of many)."""
        added = list(added)
        files, gone = list(self), []
        for path in removed:  # found by bisection: a pass over every file costs ~1 ms at 1,300
            at = bisect.bisect_left(files, path, key=_path)
            if at < len(files) and files[at].path == path:
                gone.append(files.pop(at))
        for info in added:
            bisect.insort(files, info, key=_path)
        after = DataFiles(files)
        # What is known of these files carries over, changed by the few files in and out (a
        # cached_property keeps its value in the instance's __dict__).
        known, derived = self.__dict__, after.__dict__
        if "record_count" in known:
            derived["record_count"] = (
                known["record_count"] - sum(f.record_count for f in gone) + sum(f.record_count for f in added)
            )
        if known.get("has_deletes") is False and not any(f.deletes for f in added):
            derived["has_deletes"] = False
        if "other_format" in known and known["other_format"] is None:
            derived["other_format"] = DataFiles.sorted(added).other_format  # the first by path
        return after

    @cached_property
    def record_count(self) -> int:
        return sum(f.record_count for f in self)

    @cached_property
    def has_deletes(self) -> bool:
        return any(f.deletes for f in self)

    @cached_property
    def paths(self) -> frozenset[str]:
        return frozenset(f.path for f in self)

    def with_paths(self, paths: Iterable[str]) -> list[DataFileInfo]:
        """The files at ``paths`` (those it holds), in path order: a search each, not a pass."""
        found = []
        for path in sorted(paths):
            at = bisect.bisect_left(self, path, key=_path)
            if at < len(self) and self[at].path == path:
                found.append(self[at])
        return found

    @cached_property
    def other_format(self) -> str | None:
        """The first file not in Parquet (see :data:`OTHER_FORMATS`), if any."""
        return next((f.path for f in self if f.path.endswith(OTHER_FORMATS)), None)


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
    files: DataFiles
    schema: pa.Schema
    catalog: str | None = None
    catalog_table: str | None = None
    # Where column names changed over the table's history (see schema_history): each column of
    # ``schema`` with its name in the snapshot's own schema (None: added since), which a read of
    # the snapshot through Iceberg's source returns. None: the names never changed.
    snapshot_names: Mapping[str, str | None] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.files, DataFiles):  # files listed by hand (tests, tools): sorted
            object.__setattr__(self, "files", DataFiles.sorted(self.files))

    @property
    def iceberg_name(self) -> str:
        """``namespace.table`` as Spark's Iceberg catalog finds it."""
        return self.catalog_table or self.table

    @property
    def record_count(self) -> int:
        return self.files.record_count

    @property
    def has_deletes(self) -> bool:
        """Whether some of its files have merge-on-read deletes."""
        return self.files.has_deletes

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
