"""Annotating rows with their fragment id on Spark (PBDS Sec. 4.1, INIT with binary search).

Spark has no binary search over a sorted array, and a Python UDF would ship every row to
Python. Numbers, dates and timestamps therefore go through Spark ML's ``Bucketizer`` (a binary
search in the JVM) on a double image of the value, followed by an exact one-step correction
against the true cut points. Rounding to double is monotonic, so whenever the cuts stay strictly
increasing as doubles, a value can land at most one bucket off, and comparing it with the two
neighbouring exact cuts repairs that. Otherwise (cuts that collide as doubles, strings) a
balanced ``CASE WHEN a < cut`` tree of depth log2(n) gives the exact answer, more slowly.
NULLs get :attr:`RangePartition.null_fragment`, as in the pure lookup.
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from sqlglot import exp

from sketch_core.algebra.dialect import SPARK
from sketch_core.partitions import RangePartition
from sketch_core.partitions.range_partition import sql_literal
from sketch_core.rewrites.capture import FRAGMENT_COLUMN

_EPOCH = dt.datetime(1970, 1, 1)


# Integers up to this magnitude are exact as doubles: below it the double image of a value
# orders exactly like the value, and no correction is needed.
_EXACT_LIMIT = float(2**53)


def _double_image(value: Any, kind: T.DataType) -> float:
    """The double image of a cut point, matching :func:`_double_column` for the column."""
    if isinstance(value, dt.datetime):
        return float((value - _EPOCH) // dt.timedelta(microseconds=1))
    if isinstance(value, dt.date):
        return float((value - dt.date(1970, 1, 1)).days)
    if isinstance(kind, T.DecimalType):
        return float(int(Decimal(value).scaleb(kind.scale).to_integral_value()))
    return float(value)


def _double_column(column: Column, kind: T.DataType) -> Column:
    """An order-preserving double image of the column: integral wherever that is possible."""
    if isinstance(kind, T.DateType):
        return F.unix_date(column).cast("double")
    if isinstance(kind, T.TimestampType | T.TimestampNTZType):
        return F.unix_micros(column.cast("timestamp")).cast("double")
    if isinstance(kind, T.DecimalType):  # the unscaled integer, exact below 2**53
        return (column * F.lit(10**kind.scale)).cast("double")
    return column.cast("double")


def _always_exact(kind: T.DataType) -> bool:
    """Types whose double image is exact for every value (floats are their own image)."""
    return isinstance(
        kind, T.FloatType | T.DoubleType | T.DateType | T.ByteType | T.ShortType | T.IntegerType
    )


# Large expressions are handed to Spark as one SQL string: built from Column objects, every
# literal would be a separate py4j call (seconds of driver time for 10,000 fragments).


def _binary_search(column: exp.Expr, cuts: tuple[Any, ...]) -> str:
    """The fragment of ``column`` (not NULL) among ``cuts``, found by a binary search that Spark
    runs per row as a loop (``aggregate`` over ``ceil(log2(n))`` steps): an expression of fixed
    size. A tree of nested IFs has 2n nodes; at 10,000 fragments its generated code outgrew the
    JVM's method limit, Spark logged the failed compilation and evaluated the tree interpreted
    (30 s for 2M rows, where this takes 14 s)."""
    n = len(cuts) + 1
    array = exp.Array(expressions=[sql_literal(c) for c in cuts]).sql(dialect=SPARK)
    # Fragment f holds [cuts[f - 1], cuts[f]): the first fragment of the upper half, middle,
    # starts at cuts[middle - 1], which element_at (1-based) reads as element `middle`.
    middle = "shiftright(acc.lo + acc.hi + 1, 1)"
    step = (
        f"IF(acc.lo >= acc.hi, acc, IF({column.sql(dialect=SPARK)} < element_at({array}, {middle}), "
        f"named_struct('lo', acc.lo, 'hi', {middle} - 1), named_struct('lo', {middle}, 'hi', acc.hi)))"
    )
    return (
        f"aggregate(sequence(1, {(n - 1).bit_length()}), named_struct('lo', 0, 'hi', {n - 1}), "
        f"(acc, step) -> {step}, acc -> acc.lo)"
    )


def _bucketize(df: DataFrame, splits: str, input_col: str, output_col: str) -> DataFrame:
    """Spark ML's Bucketizer over ``splits`` (as :func:`_splits` encodes them), built in the JVM
    directly: pyspark's wrapper sends the splits through py4j one element at a time (about a
    second for 10,000 fragments)."""
    bucketizer = df.sparkSession._jvm.org.apache.spark.ml.feature.Bucketizer()  # type: ignore[union-attr]
    bucketizer.setSplits(bucketizer.splits().jsonDecode(splits))
    bucketizer.setInputCol(input_col).setOutputCol(output_col).setHandleInvalid("keep")
    return DataFrame(bucketizer.transform(df._jdf), df.sparkSession)


def _sql_column(name: str) -> exp.Expr:
    return exp.column(exp.to_identifier(name, quoted=True))


@dataclass(frozen=True)
class _Splits:
    """A partition's cuts as the Bucketizer's splits, for a column of one type."""

    encoded: str  # the splits, -Inf and Inf around the cuts' double images, as Spark's JSON
    corrected: bool  # some cut is beyond 2**53 in magnitude: a value may round across it


# Partitions are reused by every capture and use of their sketches: their splits, 10,000 double
# images and their JSON (15 ms to 25 ms of a capture's driver time per annotated scan), are kept.
@functools.lru_cache(maxsize=64)
def _splits(partition: RangePartition, kind: T.DataType) -> _Splits | None:
    """The Bucketizer's splits for ``partition`` on a column of type ``kind``; None where it
    cannot search them (strings, or cuts whose double images collide)."""
    if not isinstance(kind, T.NumericType | T.DateType | T.TimestampType | T.TimestampNTZType):
        return None
    if not partition.cuts or not isinstance(partition.cuts[0], int | float | Decimal | dt.date):
        return None
    images = [_double_image(c, kind) for c in partition.cuts]
    if not all(a < b for a, b in itertools.pairwise(images)):
        return None
    # With every cut below 2**53 in magnitude (exact as a double), even a larger value cannot
    # round across a cut: its image is at least 2**53 away from zero, beyond every cut, on the
    # same side as the value. Only partitions with huge cuts need the correction (and its array
    # of all the cuts, which costs planning time at 10,000 fragments).
    corrected = not _always_exact(kind) and any(abs(i) >= _EXACT_LIMIT for i in images)
    infinities = {float("-inf"): "-Inf", float("inf"): "Inf"}  # the JSON form Spark's param decoder reads
    splits = [float("-inf"), *images, float("inf")]
    return _Splits(json.dumps([infinities.get(s, s) for s in splits]), corrected)


def annotate_fragments(
    df: DataFrame, partition: RangePartition, output: str, *, source: str | None = None
) -> DataFrame:
    """``df`` with an integer column ``output``: the fragment of ``source`` (default: the attribute)."""
    source = source or partition.attribute
    column = F.col(f"`{source}`")
    kind = df.schema[source].dataType
    n = partition.fragment_count
    if n == 1:
        return df.withColumn(output, F.when(column.isNull(), F.lit(1)).otherwise(F.lit(0)))
    splits = _splits(partition, kind)
    if splits is None:
        search = F.expr(_binary_search(_sql_column(source), partition.cuts))
        return df.withColumn(output, F.when(column.isNull(), F.lit(n)).otherwise(search).cast("int"))
    image, bucket = f"__{output}_image", f"__{output}_bucket"
    # The image is never NULL (NULLs get their fragment from the column below): the
    # Bucketizer tests a nullable input for NULL before its search, and an input read twice
    # stops Spark from merging it into the projection above. Over a top-k's result (a capture
    # that annotates its result rows, rewrites/capture.py) the merged projection is computed
    # on the k rows; unmerged, Spark sorted every group (Q3's 1.1M) instead.
    not_null = F.coalesce(_double_column(column, kind), F.lit(0.0))
    bucketed = _bucketize(df.withColumn(image, not_null), splits.encoded, image, bucket)
    b = F.col(bucket).cast("int")
    exact = F.when(column.isNull(), F.lit(n))
    if splits.corrected:
        # element_at is 1-based: cuts[i] is element i + 1.
        cuts = F.expr(exp.Array(expressions=[sql_literal(c) for c in partition.cuts]).sql(dialect=SPARK))
        # Only values beyond 2**53 can round across a cut; CASE is lazy, so other rows never
        # pay for the comparison with the exact neighbouring cuts.
        exact = (
            exact.when(F.abs(F.col(image)) < F.lit(_EXACT_LIMIT), b)
            .when((b > 0) & (column < F.element_at(cuts, b)), b - 1)
            .when((b < n - 1) & (column >= F.element_at(cuts, b + 1)), b + 1)
        )
    return bucketed.withColumn(output, exact.otherwise(b).cast("int")).drop(image, bucket)


def rows_in_fragments(df: DataFrame, partition: RangePartition, fragments: Iterable[int]) -> DataFrame:
    """The rows of ``df`` in ``fragments``, exactly at any sketch size (the fragment ids found as
    capture finds them; a query's range conditions coarsen past MAX_TREE_INTERVALS ranges)."""
    # The ids go as one SQL text: as Column literals, each would be a py4j call.
    ids = ", ".join(str(int(f)) for f in fragments) or "NULL"
    annotated = annotate_fragments(df, partition, FRAGMENT_COLUMN)
    return annotated.where(f"`{FRAGMENT_COLUMN}` IN ({ids})").drop(FRAGMENT_COLUMN)
