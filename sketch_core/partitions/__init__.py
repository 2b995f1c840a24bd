"""Range partitions F(R, a) (PBDS Def. 2): fragment lookup and sketch-to-predicate rendering."""

from sketch_core.partitions.range_partition import Interval, RangePartition

__all__ = ["Interval", "RangePartition"]
