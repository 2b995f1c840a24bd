"""File pruning with a sketch (pure): keep the files whose bounds meet the sketch's ranges."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sketch_core.partitions.range_partition import RangePartition
from sketch_core.tables.pinned import DataFileInfo


def prune_files(
    files: Sequence[DataFileInfo], partition: RangePartition, fragments: Iterable[int]
) -> list[DataFileInfo]:
    """The files that may hold rows of ``fragments``; a file with unknown statistics is kept.

    A file with bounds [lo, hi] on the partition attribute meets the interval [low, high) when
    ``hi >= low`` and ``lo < high``. NULL rows are only in files whose null count is not zero; the
    NULL fragment of a floating-point attribute also holds its NaNs, which no bound counts.
    """
    fragments = set(fragments)
    intervals = partition.intervals(fragments)
    wants_nulls = partition.null_fragment in fragments
    attribute = partition.attribute
    kept = []
    for info in files:
        low, high = info.lower.get(attribute), info.upper.get(attribute)
        if low is None or high is None:
            kept.append(info)  # no statistics: cannot rule the file out
            continue
        if wants_nulls and (partition.holds_nan or info.null_counts.get(attribute, 1) > 0):
            kept.append(info)
            continue
        if any(
            (interval.low is None or high >= interval.low) and (interval.high is None or low < interval.high)
            for interval in intervals
        ):
            kept.append(info)
    return kept


# Files with a page index (see :mod:`sketch_core.tables.page_index`) let Spark's Parquet reader
# skip every page whose bounds miss the pushed ranges, so there a sketch's own ranges are pushed,
# up to this many (a longer sketch gets as many coarsened ones): the rows left to evaluate the
# OR on are few. Measured at TPC-H SF10 (tables written by Spark, 20,000-row pages), sketched
# reports against the 4 coarsened ranges plus a search over the exact bounds: Q3 0.39 s ->
# 0.24-0.27 s, Q10 1.45-2.44 s -> 0.99-1.68 s, Q18 1.85-2.14 s -> 1.41-1.81 s; with the page
# index ignored by the reader, the exact ranges were slower than the coarsened ones.
PAGE_INDEX_MAX_INTERVALS = 128


def pushed_intervals(max_intervals: int, page_index: bool) -> int:
    """How many of a sketch's ranges its row condition tests as an OR that Spark pushes into
    Parquet: ``max_intervals`` (the setting) for plain files, at least
    :data:`PAGE_INDEX_MAX_INTERVALS` for files with a page index on the attribute."""
    return max(max_intervals, PAGE_INDEX_MAX_INTERVALS) if page_index else max_intervals


# A row condition costs a few comparisons per row read and can change Spark's join plans; it is
# only worth adding when it drops at least this share of the rows in the files that are read.
# (Measured on TPC-H SF1 with 10,000 fragments: Q5's and Q7's conditions, coarsened supersets
# keeping ~90% of lineitem and orders, made them 1.5x slower than the plain query.)
MIN_ROWS_DROPPED = 0.5


def row_condition_pays(predicate_share: float, rows_read: int, rows_total: int, *, feeds_join: bool) -> bool:
    """Whether the sketch's row condition is worth evaluating over the files that are read.

    ``predicate_share`` is the share of the table's rows the condition keeps (equi-depth
    fragments), ``rows_read`` the rows in the files kept by pruning, ``rows_total`` the table's;
    ``feeds_join``: whether a scan of the table sits below a join.
    Without it the query still reads only the pruned files, which is equally sound.

    Only rows dropped before a join pay for the condition: above a scan that feeds an
    aggregation directly, evaluating it (and Spark pushing it into every Parquet file read)
    costs about what aggregating the extra rows would. (Measured on the workload's 5U1Q delta-200
    table, 127 files read of 138, the condition dropping 65% of their rows: the sketched query
    took 0.255 s with it, 0.186 s without, the plain query 0.246 s.)
    """
    if rows_read <= 0 or not feeds_join:
        return False
    return predicate_share * rows_total <= (1 - MIN_ROWS_DROPPED) * rows_read
