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
    ``hi >= low`` and ``lo < high``. NULL rows are only in files whose null count is not zero.
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
        if wants_nulls and info.null_counts.get(attribute, 1) > 0:
            kept.append(info)
            continue
        if any(
            (interval.low is None or high >= interval.low) and (interval.high is None or low < interval.high)
            for interval in intervals
        ):
            kept.append(info)
    return kept
