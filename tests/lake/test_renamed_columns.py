"""Columns renamed by another engine (``ALTER TABLE ... RENAME COLUMN``), and a dropped
column's name given to a new one. Data files keep the names their columns had when written;
the service read them by the current name and got NULL for a renamed column in every older
file (a plain report summed only the newest rows), and the dropped column's values for the new
one; and it kept reading a table under the names it had loaded until the table's next commit
(a schema change commits no snapshot). Now the plain, sketched and maintained paths all equal
Spark's own answer."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from sketch_core.service.facade import SketchService
from tests.oracles.results import sorted_rows, spark_answer
from tests.service.test_maintain import fresh_fragments, maintained

pytestmark = pytest.mark.spark


def test_renamed_and_reused_column_names_read_by_field_id(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    svc, table = spark_svc, f"{ns}.renamed"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{ns}")
    spark.sql(f"CREATE TABLE lake.{table} (id BIGINT, k INT, v INT, note STRING) USING iceberg")
    spark.sql(
        f"""INSERT INTO lake.{table} SELECT id, CAST(id % 300 AS INT), CAST(pmod(id * 7919, 1000) AS INT),
        concat('n', id % 7) FROM range(20000)"""
    )
    report = f"SELECT k, SUM(v) AS s FROM {table} GROUP BY k ORDER BY s DESC, k LIMIT 5"
    svc.capture(report, name=f"{ns}_before", fragments=30)

    spark.sql(f"ALTER TABLE lake.{table} RENAME COLUMN v TO amount")
    renamed = report.replace("SUM(v)", "SUM(amount)")
    # A schema change commits no snapshot: the table is read under its new names all the same.
    assert sorted_rows(svc.query(renamed, use_sketches=False).table) == spark_answer(spark, renamed, table)
    spark.sql(f"ALTER TABLE lake.{table} DROP COLUMN note")
    spark.sql(f"ALTER TABLE lake.{table} ADD COLUMN note STRING")  # a new column: NULL in older files
    spark.sql(f"INSERT INTO lake.{table} SELECT id + 50000, CAST(id % 300 AS INT), 5000, 'x' FROM range(50)")
    notes = f"SELECT note, COUNT(*) AS n, SUM(amount) AS s FROM {table} GROUP BY note"
    for sql in (renamed, notes):
        assert sorted_rows(svc.query(sql, use_sketches=False).table) == spark_answer(spark, sql, table)

    name = f"{ns}_renamed"
    version = svc.capture(renamed, name=name, fragments=30)
    assert version.fragments
    assert sorted_rows(svc.query(renamed, use_sketches="always").table) == spark_answer(spark, renamed, table)
    spark.sql(f"DELETE FROM lake.{table} WHERE id % 97 = 3")
    spark.sql(f"INSERT INTO lake.{table} SELECT id + 60000, CAST(id % 300 AS INT), 7000, 'y' FROM range(40)")
    (run,) = svc.maintain(name)
    assert run.strategy == "incremental"
    assert maintained(svc, name) == fresh_fragments(svc, renamed, name, svc.latest_sequence())
    assert sorted_rows(svc.query(renamed, use_sketches="always").table) == spark_answer(spark, renamed, table)
    assert sorted_rows(svc.query(notes, use_sketches=False).table) == spark_answer(spark, notes, table)
