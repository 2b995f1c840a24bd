"""Fragment annotation on Spark equals the pure binary-search lookup, for every path."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from sketch_core.partitions import RangePartition
from sketch_core.spark.annotate import annotate_fragments

pytestmark = pytest.mark.spark


def check(spark: SparkSession, kind: T.DataType, values: list[object], cuts: tuple[object, ...]) -> None:
    partition = RangePartition("t.r", "a", cuts)
    df = spark.createDataFrame([(v,) for v in values], T.StructType([T.StructField("a", kind)]))
    rows = annotate_fragments(df, partition, "f").collect()
    assert [(r.a, r.f) for r in rows] == [(v, partition.fragment_of(v)) for v in values]


def test_integers_including_cut_points_and_nulls(spark: SparkSession) -> None:
    values = [None, -5, 0, 9, 10, 11, 19, 20, 29, 30, 10**6]
    check(spark, T.LongType(), values, (10, 20, 30))


def test_large_integers_that_collide_as_doubles_stay_exact(spark: SparkSession) -> None:
    base = 2**60
    cuts = (base + 1, base + 2, base + 3)  # all the same double: the exact CASE path is taken
    check(spark, T.LongType(), [base, base + 1, base + 2, base + 3, base + 4], cuts)


def test_values_beyond_double_precision_with_small_cuts_need_no_correction(spark: SparkSession) -> None:
    huge = [2**60, 2**60 + 1, 2**53 + 1, -(2**53) - 1, -(2**62), 2**63 - 1, -(2**63)]
    check(spark, T.LongType(), [*huge, 9, 10, None], (10, 20, 2**53 - 1))
    check(spark, T.DecimalType(38, 2), [Decimal(10**30), Decimal(-(10**30)), Decimal("0.01")], (Decimal(5),))


def test_large_integers_next_to_cuts_are_corrected(spark: SparkSession) -> None:
    base = 2**60
    cuts = (base, base + 4096, base + 8192)  # distinct as doubles, but neighbours round onto them
    values = [base - 1, base, base + 1, base + 4095, base + 4096, base + 4097, base + 8191, base + 8192]
    check(spark, T.LongType(), values, cuts)


def test_decimals_dates_timestamps_strings(spark: SparkSession) -> None:
    check(
        spark,
        T.DecimalType(15, 2),
        [Decimal("1.49"), Decimal("1.50"), Decimal("9.99"), None],
        (Decimal("1.50"), Decimal("5.00")),
    )
    days = [dt.date(2020, 1, d) for d in range(1, 20)]
    check(spark, T.DateType(), [*days, None], (dt.date(2020, 1, 5), dt.date(2020, 1, 10)))
    stamps = [dt.datetime(2020, 1, 1, h) for h in range(24)]
    check(spark, T.TimestampType(), stamps, (dt.datetime(2020, 1, 1, 6), dt.datetime(2020, 1, 1, 12, 30)))
    check(spark, T.StringType(), ["a", "b", "bb", "c", "z", None], ("b", "c"))


def test_single_fragment(spark: SparkSession) -> None:
    check(spark, T.LongType(), [1, None, 5], ())


@pytest.mark.parametrize("kind", ["bigint", "date"])
def test_over_a_top_k_the_fragments_are_computed_on_the_k_rows_only(spark: SparkSession, kind: str) -> None:
    # A capture delays an annotation to the result rows (rewrites/capture.py): over a top-k,
    # Spark must fold the fragment into the top-k (TakeOrderedAndProject), not sort every row.
    day = dt.date(2020, 1, 1)
    value = (lambda i: i) if kind == "bigint" else (lambda i: day + dt.timedelta(days=i))
    partition = RangePartition("t.r", "a", tuple(value(i) for i in range(100, 10_000, 100)))
    as_kind = "id" if kind == "bigint" else "date_add(DATE'2020-01-01', CAST(id AS INT))"
    rows = spark.range(10_000).selectExpr(f"IF(id < 0, NULL, {as_kind}) AS a", "id % 97 AS v")  # nullable
    top = rows.orderBy("v", "a").limit(5)
    annotated = annotate_fragments(top, partition, "f")
    plan = annotated._jdf.queryExecution().executedPlan().toString()
    assert "TakeOrderedAndProject" in plan
    expected = [value(i) for i in (0, 97, 194, 291, 388)]
    assert [(r.a, r.f) for r in annotated.collect()] == [(v, partition.fragment_of(v)) for v in expected]


def test_strings_at_many_fragments_take_the_exact_search(spark: SparkSession) -> None:
    # 10,000 string fragments: the search is a loop of fixed size (a tree of nested IFs this
    # large failed Spark's code generation); every cut, its neighbours and the ends.
    cuts = tuple(f"Clerk#{i:09d}" for i in range(0, 99_990, 10))
    values = ["", "A", "Clerk#", "Clerk#000000000", "Clerk#000000005", "Clerk#000099980", "Clerk#1", "z"]
    values += [f"Clerk#{i:09d}" for i in range(0, 100_000, 7)][:2_000]
    check(spark, T.StringType(), [*values, None], cuts)
    check(spark, T.StringType(), ["a", "b"], ("b",))


def test_one_partition_annotates_columns_of_each_type_by_its_own_splits(spark: SparkSession) -> None:
    """A partition's splits are kept per column type: the same cuts are other double images for
    a decimal (its unscaled integer) than for an integer, and each lookup stays exact whichever
    ran first."""
    for kinds in ((T.LongType(), T.DecimalType(9, 2), T.DoubleType()), (T.DecimalType(9, 2), T.LongType())):
        for kind in kinds:
            values: list[object] = [0, 9, 10, 11, 19, 20, 21, 500, None]
            if isinstance(kind, T.DecimalType):
                values = [None if v is None else Decimal(v) for v in values]
            elif isinstance(kind, T.DoubleType):
                values = [None if v is None else float(v) for v in values]
            check(spark, kind, values, (10, 20))
