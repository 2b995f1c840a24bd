"""Range partitions of small tables computed in-process, from one column's values.

A range partition on Spark costs two jobs (a distinct count, then ``percentile_approx``), about
a second each even on a table of a few thousand rows: a dimension table's partition then costs
more than the capture query itself. Below a size where one column fits in memory with room to
spare, the same partition comes from the column's values with exact quantiles: equi-depth cuts
at ranks ``n * i / fragments``, repeated cuts collapsed, and one fragment per value when there
are no more distinct values than fragments (as on Spark, PBDS Sec. 4.4).

Example: values 1..10, 4 fragments: cuts at ranks 2, 5, 7 -> ``(3, 6, 8)``, four ranges
``<3, [3,6), [6,8), >=8``.

Timestamps are left to Spark: their cut values must be the ones Spark's own conversion gives.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from sketch_core.partitions.range_partition import PartitionError, RangePartition


def range_partitionable(kind: pa.DataType) -> bool:
    """Whether a column of this type can be a sketch attribute: its values have an order a
    range partition cuts (not structs, lists, maps or binary: a table Spark wrote may hold
    them beside the columns a report reads; not booleans either: two values cut into two
    fragments at most skip nothing, and Spark's partitioning refuses them, so a report
    filtering on a flag failed its default capture)."""
    return partitions_locally(kind) or pa.types.is_timestamp(kind)


def partitions_locally(kind: pa.DataType) -> bool:
    """Whether a column of this type is partitioned in-process when its table is small."""
    return bool(
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_decimal(kind)
        or pa.types.is_date(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
    )


def local_range_partition(
    values: pa.ChunkedArray, table: str, attribute: str, fragments: int
) -> RangePartition:
    """Boundaries for about ``fragments`` ranges of ``values`` (ties may give fewer)."""
    if fragments < 1:
        raise PartitionError(
            f"fragment count must be at least 1, got {fragments}", hint="use 1,000 to 10,000 fragments"
        )
    if not partitions_locally(values.type):
        raise PartitionError(f"cannot range-partition {table}.{attribute} of type {values.type} in-process")
    present = pc.drop_null(values)
    if pa.types.is_floating(values.type):
        present = present.filter(pc.invert(pc.is_nan(present)))  # NaN orders after every number
    distinct = pc.unique(present)
    if len(distinct) <= fragments:
        return RangePartition.from_distinct_values(table, attribute, distinct.to_pylist())
    ordered = pc.sort_indices(present)
    count = len(present)
    ranks = pa.array([min(count - 1, count * i // fragments) for i in range(1, fragments)], pa.int64())
    quantiles = pc.take(present, pc.take(ordered, ranks)).to_pylist()
    return RangePartition.from_quantiles(table, attribute, quantiles)
