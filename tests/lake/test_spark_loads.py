"""Loads given as Spark DataFrames go through Spark's Iceberg writer, never through the driver.

The no-collection oracle: every way PySpark brings rows to the driver (collect, toArrow,
toPandas, toLocalIterator, take, head, first, show, on the classic DataFrame) is made to fail
during the writes, and the commit's snapshot must carry the writing Spark application's id.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sketch_core.datasets import synthetic_table
from sketch_core.errors import SchemaMismatchError
from sketch_core.service.facade import SketchService
from tests.lake.conftest import DriverCollections
from tests.oracles.results import sorted_rows

pytestmark = pytest.mark.spark


def _frame(spark: SparkSession, table: pa.Table) -> DataFrame:
    return spark.createDataFrame(table.to_pandas())


def test_a_spark_dataframe_is_appended_and_overwritten_by_spark_s_writer(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    svc, table = spark_svc, f"{ns}.facts"
    base = synthetic_table(2000, 20, seed=11)
    svc.tables.create(table, base, sort_by=["a"])
    more = synthetic_table(600, 20, seed=12).set_column(0, "key", pa.array(range(10_000, 10_600), pa.int64()))
    frame = _frame(spark, more).select(*reversed(more.column_names))  # columns by name, any order
    with DriverCollections() as collections:
        appended = svc.tables.append(table, frame)
    assert collections.calls == [], "the load was collected to the driver"
    (commit,) = svc.tables.commits(table)[-1:]
    assert commit.seq == appended and (commit.operation, commit.added_rows) == ("append", 600)
    snapshot = svc.catalog.load_table(table).metadata.snapshot_by_id(commit.snapshot_id)
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary.get("spark.app.id") == spark.sparkContext.applicationId
    assert sorted_rows(svc.tables.read_arrow(table, appended)) == sorted_rows(pa.concat_tables([base, more]))
    # Spark's files are zstd, as PyIceberg's are (without the table's codec property Iceberg's
    # Java writer falls back to gzip: slower to write and to read).
    codecs = {
        pq.ParquetFile(f.path.removeprefix("file:")).metadata.row_group(0).column(0).compression
        for f in svc.tables.pin(table, appended).files
    }
    assert codecs == {"ZSTD"}

    # An overwrite with a condition: the matching rows go, the frame's come, in one commit.
    replacement = more.slice(0, 50).set_column(0, "key", pa.array(range(20_000, 20_050), pa.int64()))
    replacing = _frame(spark, replacement)
    with collections:
        overwritten = svc.tables.overwrite(table, replacing, where="a < 5")
    assert overwritten > appended
    expected = pa.concat_tables([base, more]).filter(pa.compute.greater_equal(pa.compute.field("a"), 5))
    assert sorted_rows(svc.tables.read_arrow(table, overwritten)) == sorted_rows(
        pa.concat_tables([expected, replacement])
    )
    # Only a condition (no new rows), then only new rows (a condition matching none).
    with collections:
        emptied = svc.tables.overwrite(table, replacing.limit(0), where="key >= 20040")
        added = svc.tables.overwrite(table, _frame(spark, more.slice(0, 1)), where="key < 0")
    expected = pa.concat_tables([expected, replacement.slice(0, 40), more.slice(0, 1)])
    assert sorted_rows(svc.tables.read_arrow(table, emptied)) == sorted_rows(
        expected.slice(0, expected.num_rows - 1)
    )
    assert sorted_rows(svc.tables.read_arrow(table, added)) == sorted_rows(expected)
    # Every row replaced.
    with collections:
        replaced = svc.tables.overwrite(table, replacing)
    assert sorted_rows(svc.tables.read_arrow(table, replaced)) == sorted_rows(replacement)
    assert [c.seq for c in svc.tables.commits(table)][-5:] == [
        appended,
        overwritten,
        emptied,
        added,
        replaced,
    ]
    assert collections.calls == []


def test_a_frame_that_does_not_fit_the_table_is_a_schema_mismatch(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    table = f"{ns}.facts"
    before = spark_svc.tables.create(table, pa.table({"k": [1, 2], "v": [1.0, 2.0]}), sort_by=["k"])
    with pytest.raises(SchemaMismatchError, match="column v is missing"):
        spark_svc.tables.append(table, spark.range(3).withColumnRenamed("id", "k"))
    with pytest.raises(SchemaMismatchError, match="column extra is not in the table"):
        spark_svc.tables.append(
            table,
            spark.range(3).select(F.col("id").alias("k"), F.lit(1.0).alias("v"), F.lit(0).alias("extra")),
        )
    assert spark_svc.tables.commits(table)[-1].seq == before, "nothing committed"


def test_a_table_is_created_from_a_spark_dataframe_by_spark_s_writer(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    svc, table = spark_svc, f"{ns}.created"
    rows = synthetic_table(1500, 15, seed=13)
    with DriverCollections() as collections:
        seq = svc.tables.create(table, _frame(spark, rows), sort_by=["a"])
    assert collections.calls == [], "the load was collected to the driver"
    assert [c.operation for c in svc.tables.commits(table)] == ["create", "append"]
    assert svc.tables.commits(table)[-1].seq == seq
    assert svc.tables.commit_log.get_table(table).sort_by == ("a",)  # type: ignore[union-attr]
    assert sorted_rows(svc.tables.read_arrow(table, seq)) == sorted_rows(rows)
