"""Range partitions computed on Spark: equi-depth, distinct values, types, bad input."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from sketch_core.datasets import synthetic_table
from sketch_core.partitions.range_partition import PartitionError
from sketch_core.service import SketchService
from sketch_core.spark.partitioning import compute_range_partition

pytestmark = pytest.mark.spark


def frame(spark: SparkSession, table: pa.Table):  # type: ignore[no-untyped-def]
    return spark.createDataFrame(table.to_pandas())


def test_equi_depth_fragments_hold_similar_row_counts(spark: SparkSession) -> None:
    data = synthetic_table(20_000, groups=50, seed=3)
    partition = compute_range_partition(frame(spark, data), "t.r", "key", 10)
    assert partition.fragment_count == 10
    sizes = np.bincount(partition.fragments_of(data.column("key").to_numpy()), minlength=10)
    assert sizes.min() > 0.9 * 2_000 and sizes.max() < 1.1 * 2_000


def test_few_distinct_values_get_one_fragment_each(spark: SparkSession) -> None:
    data = synthetic_table(5_000, groups=7, seed=4)
    partition = compute_range_partition(frame(spark, data), "t.r", "a", 100)
    assert partition.fragment_count == 7
    assert sorted(set(partition.fragments_of(data.column("a").to_numpy()))) == list(range(7))


def test_dates_strings_and_nulls(spark: SparkSession) -> None:
    days = [dt.date(2020, 1, 1) + dt.timedelta(days=i % 400) for i in range(4_000)]
    names = [f"name{i:05d}" for i in range(4_000)]
    data = pa.table({"d": days, "s": names, "n": [None if i % 3 else i for i in range(4_000)]})
    df = spark.createDataFrame(data.to_pandas())
    by_day = compute_range_partition(df, "t.r", "d", 8)
    assert isinstance(by_day.cuts[0], dt.date) and 6 <= by_day.fragment_count <= 8
    by_name = compute_range_partition(df, "t.r", "s", 8)
    sizes = np.bincount([by_name.fragment_of(v) for v in names], minlength=8)
    assert by_name.fragment_count == 8 and sizes.min() > 300
    with_nulls = compute_range_partition(df, "t.r", "n", 4)
    assert with_nulls.fragment_of(None) == with_nulls.null_fragment


def test_bad_requests_are_refused(spark: SparkSession) -> None:
    df = frame(spark, synthetic_table(10, groups=2))
    with pytest.raises(PartitionError, match="no column"):
        compute_range_partition(df, "t.r", "nope", 4)
    with pytest.raises(PartitionError, match="at least 1"):
        compute_range_partition(df, "t.r", "a", 0)


def test_partitions_are_stored_with_their_snapshot_and_reused(spark_svc: SketchService, ns: str) -> None:
    svc, name = spark_svc, f"{ns}.r"
    created = svc.tables.create(name, synthetic_table(4_000, groups=20, seed=5), sort_by=["key"])
    partition_id, partition = svc.range_partition(name, "key", 8)
    assert partition.fragment_count == 8
    stored = svc.sketches.find_partition(name, "key", 8)
    assert stored is not None and stored.computed_at_seq == created
    # New rows beyond the old bounds change nothing stored, and still map to a fragment.
    svc.tables.append(name, synthetic_table(1_000, groups=20, seed=6, key_start=50_000))
    again_id, again = svc.range_partition(name, "key", 8)
    assert (again_id, again) == (partition_id, partition)
    assert again.fragment_of(50_500) == again.fragment_count - 1
    other_id, _ = svc.range_partition(name, "key", 4)
    assert other_id != partition_id


def test_a_big_table_is_partitioned_from_a_sample_spark_draws(
    spark_svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beyond LOCAL_PARTITION_ROWS a sample of about that many values is partitioned
    in-process (one Spark scan, no distinct count or percentile over every row): the
    fragments hold similar row counts, and every value has one."""
    from sketch_core.service import partition_store

    svc, name = spark_svc, f"{ns}.big"
    data = synthetic_table(40_000, groups=500, seed=7)
    svc.tables.create(name, data, sort_by=["key"])
    monkeypatch.setattr(partition_store, "LOCAL_PARTITION_ROWS", 8_000)

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("partitioned over every row on Spark")

    monkeypatch.setattr(partition_store, "compute_range_partition", refused)
    _, by_key = svc.range_partition(name, "key", 10)
    assert by_key.fragment_count == 10
    sizes = np.bincount(by_key.fragments_of(data.column("key").to_numpy()), minlength=10)
    assert sizes.min() > 0.75 * 4_000 and sizes.max() < 1.25 * 4_000, sizes
    _, by_group = svc.range_partition(name, "a", 1_000)  # fewer values than fragments
    assert by_group.fragment_count <= 500
