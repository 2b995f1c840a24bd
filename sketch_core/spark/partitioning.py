"""Computing range partitions on Spark (PBDS Sec. 4.4).

Equi-depth boundaries come from ``percentile_approx`` for numbers, dates and timestamps, and from
a sorted sample for strings. When a column has no more distinct values than the requested
fragments, every distinct value gets a fragment of its own.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sketch_core.partitions import RangePartition
from sketch_core.partitions.range_partition import PartitionError

# Strings have no percentile_approx; their quantiles come from a sample of about this many rows.
_STRING_SAMPLE_ROWS = 200_000
_ORDERED_TYPES = (T.NumericType, T.DateType, T.TimestampType, T.TimestampNTZType)


def compute_range_partition(
    df: DataFrame, table: str, attribute: str, fragments: int, *, seed: int = 0
) -> RangePartition:
    """Boundaries for about ``fragments`` ranges of ``df[attribute]`` (ties may give fewer)."""
    if fragments < 1:
        raise PartitionError(
            f"fragment count must be at least 1, got {fragments}", hint="use 1,000 to 10,000 fragments"
        )
    if attribute not in df.columns:
        raise PartitionError(
            f"{table} has no column {attribute!r}", hint=f"choose one of: {', '.join(df.columns)}"
        )
    column = F.col(f"`{attribute}`")
    kind = df.schema[attribute].dataType
    if not isinstance(kind, (*_ORDERED_TYPES, T.StringType)):
        raise PartitionError(
            f"cannot range-partition {table}.{attribute} of type {kind.simpleString()}",
            hint="choose a numeric, date, timestamp or string column",
        )
    values = df.select(column.alias("v")).where(F.col("v").isNotNull())
    few = values.distinct().limit(fragments + 1).collect()
    if len(few) <= fragments:
        return RangePartition.from_distinct_values(table, attribute, [row.v for row in few])
    probabilities = [i / fragments for i in range(1, fragments)]
    if isinstance(kind, _ORDERED_TYPES):
        accuracy = max(10_000, 20 * fragments)
        row = values.agg(F.percentile_approx("v", probabilities, accuracy).alias("q")).first()
        quantiles = list(row.q) if row is not None else []
        return RangePartition.from_quantiles(table, attribute, quantiles)
    total = values.count()
    sample = values.sample(fraction=min(1.0, _STRING_SAMPLE_ROWS / max(1, total)), seed=seed)
    ordered = sorted(row.v for row in sample.collect())
    quantiles = (
        [ordered[min(len(ordered) - 1, int(p * len(ordered)))] for p in probabilities] if ordered else []
    )
    return RangePartition.from_quantiles(table, attribute, quantiles)


def sampled_column(df: DataFrame, attribute: str, fraction: float, *, seed: int = 0) -> pa.ChunkedArray:
    """About ``fraction`` of ``df[attribute]``'s values, NULLs included (a seeded Bernoulli
    sample: one scan, and only the sample sent to the driver, as Arrow)."""
    sample = df.select(F.col(f"`{attribute}`")).sample(fraction=min(1.0, fraction), seed=seed)
    return sample.toArrow().column(0)
