"""How many data files and row groups each report's sketch would read under a table layout
(pure: numpy over a sample of the table's rows).

A sketch skips a file when the file's bounds on the sketch's attribute overlap none of the
fragments it keeps. Those bounds depend on how the rows lie: sorted on the attribute, each file
holds a narrow range of it; sorted on another, each file holds nearly all of it. To compare
layouts without rewriting anything, the sample's rows are put in the order a layout would give
them and cut into as many equal runs as the table has files (and each run into its row
groups): a run's bounds are its rows' lowest and highest fragments, and it is read when a kept
fragment lies between them (or it holds NULLs and the sketch keeps the NULL fragment), as the
reader decides from the real files' statistics.

Rows are ordered by their fragment on each column's partition (equi-depth, so a fragment id is
a rank of the value to within the fragment): a ``sort`` layout orders by the columns in turn;
a ``zorder`` layout interleaves the bits of the columns' ranks (scaled to the same number of
bits), as Iceberg's Z-order rewrite does with the values' bytes, so that rows close in every
column lie close together.

Example: a sample of 8 rows whose fragments on ``customer`` are 0..7 in ``sale_id`` order
``[5, 2, 7, 0, 3, 6, 1, 4]``, two files, and a sketch keeping fragment 1: in this order the
runs hold fragments {5, 2, 7, 0} (bounds 0..7) and {3, 6, 1, 4} (1..6): both are read. Sorted
on ``customer`` the runs hold 0..3 and 4..7: one file is read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sketch_core.errors import ConfigurationError

LAYOUT_KINDS = ("sort", "zorder")
# Bits per column of a Z-order key: 16 columns' worth fits 64 bits for up to 4 columns.
ZORDER_BITS = 16


@dataclass(frozen=True)
class Layout:
    """A table's row order: sorted by ``columns`` in turn, or Z-ordered over them."""

    kind: str
    columns: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.kind not in LAYOUT_KINDS:
            raise ConfigurationError(
                f"unknown layout kind {self.kind!r}", hint=f"one of: {', '.join(LAYOUT_KINDS)}"
            )
        if not self.columns:
            raise ConfigurationError(
                "a layout needs at least one column", hint="name the columns to order by"
            )
        if self.kind == "zorder" and len(self.columns) > 64 // ZORDER_BITS:
            raise ConfigurationError(
                f"a Z-order covers at most {64 // ZORDER_BITS} columns, got {len(self.columns)}",
                hint="Z-order the columns the reports filter on most, or sort by them in turn",
            )

    @classmethod
    def parse(cls, text: str) -> Layout:
        """A layout as users write it: ``sort(a, b)``, ``zorder(a, b)``, or ``a, b`` (a sort)."""
        called = re.fullmatch(r"\s*(\w+)\s*\(([\w, ]*)\)\s*", text)
        kind, inside = (called.group(1).lower(), called.group(2)) if called else ("sort", text)
        columns = tuple(c.strip() for c in inside.split(","))
        if not all(re.fullmatch(r"\w+", c) for c in columns):
            raise ConfigurationError(
                f"cannot read the layout {text!r}",
                hint="write sort(col, ...) or zorder(col, ...), or the columns to sort by",
            )
        return cls(kind, columns)

    @property
    def sort_order(self) -> str:
        """The layout as Iceberg's ``rewrite_data_files`` takes it (``sort_order => ...``)."""
        if self.kind == "zorder":
            return f"zorder({', '.join(self.columns)})"
        return ", ".join(f"{c} ASC NULLS FIRST" for c in self.columns)

    def __str__(self) -> str:
        return self.sort_order if self.kind == "zorder" else f"sort({', '.join(self.columns)})"


@dataclass(frozen=True)
class SketchOnSample:
    """A report's sketch on one table, seen through the sample: each sample row's fragment on
    the sketch's partition (``null_fragment`` for NULLs) and the fragments the sketch keeps."""

    attribute: str
    fragments: np.ndarray
    null_fragment: int
    kept: frozenset[int]


@dataclass(frozen=True)
class UnitsRead:
    """Of a table's ``files`` (and ``row_groups``), how many a sketch reads under a layout."""

    files: int
    files_total: int
    row_groups: int
    row_groups_total: int

    @property
    def file_share(self) -> float:
        return self.files / self.files_total if self.files_total else 1.0


def row_order(layout: Layout, ranks: Mapping[str, np.ndarray]) -> np.ndarray:
    """The permutation of the sample's rows that ``layout`` gives them. ``ranks``: per column,
    each row's rank-like key (its fragment on an equi-depth partition of the column; NULLs
    first, as ``NULLS FIRST`` sorts them, by a key below every value)."""
    keys = [np.asarray(ranks[c], dtype=np.int64) for c in layout.columns]
    if layout.kind == "sort":
        return np.lexsort(tuple(reversed(keys)))  # lexsort's last key is the primary one
    return np.argsort(zorder_keys(keys), kind="stable")


def zorder_keys(keys: Sequence[np.ndarray]) -> np.ndarray:
    """Each row's Z-value: the bits of its columns' keys (each scaled to ``ZORDER_BITS``)
    interleaved, most significant first."""
    scaled = []
    for key in keys:
        low, high = (int(key.min()), int(key.max())) if len(key) else (0, 0)
        span = max(1, high - low)
        scaled.append(((key - low) * ((1 << ZORDER_BITS) - 1) // span).astype(np.uint64))
    z = np.zeros(len(keys[0]) if keys else 0, dtype=np.uint64)
    width = len(scaled)
    for bit in range(ZORDER_BITS):
        for position, value in enumerate(scaled):
            taken = (value >> np.uint64(bit)) & np.uint64(1)
            z |= taken << np.uint64(bit * width + (width - 1 - position))
    return z


def units_read(order: np.ndarray, sketch: SketchOnSample, files: int, row_groups_per_file: int) -> UnitsRead:
    """How many of ``files`` equal runs of the rows in ``order`` (and of their
    ``row_groups_per_file`` row groups each) ``sketch`` reads."""
    files = max(1, files)
    groups = max(1, row_groups_per_file)
    fragments = np.asarray(sketch.fragments, dtype=np.int64)[order]
    group_read = _runs_read(fragments, files * groups, sketch)
    file_read = group_read.reshape(files, groups).any(axis=1) if len(group_read) else group_read
    return UnitsRead(int(file_read.sum()), files, int(group_read.sum()), files * groups)


def _runs_read(fragments: np.ndarray, runs: int, sketch: SketchOnSample) -> np.ndarray:
    """Per run of ``fragments`` cut into ``runs`` equal runs: whether the sketch reads it."""
    if len(fragments) == 0:
        return np.zeros(runs, dtype=bool)
    if len(fragments) < runs:  # fewer sample rows than runs: each row stands for several
        fragments = np.repeat(fragments, -(-runs // len(fragments)))
    starts = np.linspace(0, len(fragments), runs + 1).astype(np.int64)[:-1]
    is_null = fragments == sketch.null_fragment
    lows = np.minimum.reduceat(np.where(is_null, np.iinfo(np.int64).max, fragments), starts)
    highs = np.maximum.reduceat(np.where(is_null, -1, fragments), starts)
    # Running counts of kept fragments: fragments low..high hold a kept one when the count grows.
    kept = np.zeros(sketch.null_fragment + 1, dtype=np.int64)
    kept[[f for f in sketch.kept if 0 <= f < sketch.null_fragment]] = 1
    kept_before = np.concatenate(([0], np.cumsum(kept)))
    present = highs >= 0
    read = np.zeros(runs, dtype=bool)
    read[present] = kept_before[highs[present] + 1] - kept_before[lows[present]] > 0
    if sketch.null_fragment in sketch.kept:
        read |= np.logical_or.reduceat(is_null, starts)
    return read
