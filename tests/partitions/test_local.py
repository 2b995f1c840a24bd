"""Range partitions of small tables computed in-process: the same equi-depth shape as Spark's,
the same one-fragment-per-value partitions, and the same refusals."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from sketch_core.datasets import synthetic_table
from sketch_core.partitions.local import local_range_partition
from sketch_core.partitions.range_partition import PartitionError
from sketch_core.spark.partitioning import compute_range_partition


def test_equi_depth_fragments_hold_equal_row_counts() -> None:
    data = synthetic_table(20_000, groups=50, seed=3)
    partition = local_range_partition(data.column("key"), "t.r", "key", 10)
    assert partition.fragment_count == 10
    sizes = np.bincount(partition.fragments_of(data.column("key").to_numpy()), minlength=10)
    assert sizes.min() > 0.98 * 2_000 and sizes.max() < 1.02 * 2_000, sizes


def test_the_documented_example() -> None:
    partition = local_range_partition(pa.chunked_array([list(range(1, 11))]), "t.r", "v", 4)
    assert partition.cuts == (3, 6, 8)


def test_few_distinct_values_are_partitioned_as_on_spark(spark: SparkSession) -> None:
    data = synthetic_table(5_000, groups=7, seed=4)
    local = local_range_partition(data.column("a"), "t.r", "a", 100)
    on_spark = compute_range_partition(spark.createDataFrame(data.to_pandas()), "t.r", "a", 100)
    assert local == on_spark and local.fragment_count == 7


def test_dates_strings_decimals_nulls_and_nan() -> None:
    days = pa.chunked_array([[dt.date(2020, 1, 1) + dt.timedelta(days=i % 400) for i in range(4_000)]])
    by_day = local_range_partition(days, "t.r", "d", 8)
    assert isinstance(by_day.cuts[0], dt.date) and by_day.fragment_count == 8
    names = [f"name{i:05d}" for i in range(4_000)]
    by_name = local_range_partition(pa.chunked_array([names]), "t.r", "s", 8)
    sizes = np.bincount([by_name.fragment_of(v) for v in names], minlength=8)
    assert by_name.fragment_count == 8 and sizes.min() == 500
    money = pa.chunked_array([pa.array([Decimal(i) / 100 for i in range(1_000)], pa.decimal128(8, 2))])
    assert isinstance(local_range_partition(money, "t.r", "m", 4).cuts[0], Decimal)
    holes = pa.chunked_array([[None if i % 3 else float(i) for i in range(4_000)] + [float("nan")]])
    with_nulls = local_range_partition(holes, "t.r", "n", 4)
    assert with_nulls.fragment_count == 4 and with_nulls.fragment_of(None) == with_nulls.null_fragment


def test_bad_requests_are_refused() -> None:
    with pytest.raises(PartitionError, match="at least 1"):
        local_range_partition(pa.chunked_array([[1, 2]]), "t.r", "a", 0)
    with pytest.raises(PartitionError, match="of type bool"):
        local_range_partition(pa.chunked_array([[True, False]]), "t.r", "a", 2)
