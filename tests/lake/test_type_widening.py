"""Types Spark widens under a sketch (``ALTER TABLE ... ALTER COLUMN ... TYPE``, as Iceberg
allows: int to bigint, float to double, a decimal's precision at the same scale). The files
written before keep the old type and are read as the new one; each sketch whose table widened is
recaptured once (its state holds the old type), and the delta batches after it pass validation.
A decimal's precision was quarantined as a changed type, blocking every sketch on the table."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from sketch_core.service.facade import SketchService
from tests.oracles.results import sorted_rows, spark_answer
from tests.service.test_maintain import fresh_fragments, maintained

pytestmark = pytest.mark.spark


def test_columns_spark_widens_are_read_maintained_and_validated_as_the_new_type(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    svc, table = spark_svc, f"{ns}.sales"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{ns}")
    spark.sql(f"CREATE TABLE lake.{table} (id BIGINT, qty INT, price FLOAT, amt DECIMAL(9, 2)) USING iceberg")
    for part in range(3):
        spark.sql(
            f"""INSERT INTO lake.{table} SELECT id, CAST(pmod(id * 31, 1000) AS INT),
            CAST(pmod(id * 17, 100) AS FLOAT) + 0.5, CAST(pmod(id * 7919, 10007) * 0.5 AS DECIMAL(9, 2))
            FROM range({part * 3000}, {(part + 1) * 3000}) ORDER BY id"""
        )
    reports = {
        "qty": f"SELECT qty, SUM(amt) AS s FROM {table} GROUP BY qty ORDER BY s DESC, qty LIMIT 5",
        "amt": f"SELECT id, amt, price FROM {table} WHERE qty > 500 ORDER BY amt DESC, id LIMIT 5",
    }
    for column, sql in reports.items():
        svc.capture(sql, name=f"{ns}_{column}", attributes={table: column}, fragments=30)
    spark.sql(f"INSERT INTO lake.{table} VALUES (90001, 7, 1.5, 10.00)")
    for column in reports:
        assert svc.maintain(f"{ns}_{column}")[0].strategy == "incremental"

    spark.sql(f"ALTER TABLE lake.{table} ALTER COLUMN qty TYPE BIGINT")
    spark.sql(f"ALTER TABLE lake.{table} ALTER COLUMN price TYPE DOUBLE")
    spark.sql(f"ALTER TABLE lake.{table} ALTER COLUMN amt TYPE DECIMAL(14, 2)")
    spark.sql(f"INSERT INTO lake.{table} VALUES (90002, 999, 99.5, 4999.99), (90003, 998, 0.25, 5000.00)")

    def maintained_as(strategy: str, why: str) -> None:
        for column, sql in reports.items():
            name = f"{ns}_{column}"
            assert [r.strategy for r in svc.maintain(name)] == [strategy], why
            assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())
            assert sorted_rows(svc.query(sql, use_sketches="always").table) == spark_answer(spark, sql, table)

    maintained_as("full", "recaptured once: the state's types")
    spark.sql(f"UPDATE lake.{table} SET amt = amt + 1, qty = qty + 1 WHERE id % 97 = 0")
    maintained_as("incremental", "the batches passed validation")
    assert svc.quarantined([table]) == []
