"""Iceberg's two timestamp types as Spark creates them: ``timestamp`` (TIMESTAMP_NTZ in Spark,
no zone) and ``timestamptz`` (TIMESTAMP). The service read both as TIMESTAMP, so a report's
TIMESTAMP_NTZ values came back zoned (UTC) where Spark's are not: equal instants, but unequal
values to a caller comparing the answers. Now both paths answer as Spark does, sketched on
either column and maintained."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from sketch_core.service.facade import SketchService
from tests.oracles.results import sorted_rows, spark_answer
from tests.service.test_maintain import fresh_fragments, maintained

pytestmark = pytest.mark.spark


def test_timestamps_with_and_without_zone_answer_as_spark(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    svc, table = spark_svc, f"{ns}.events"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{ns}")
    spark.sql(
        f"CREATE TABLE lake.{table} (id BIGINT, local_at TIMESTAMP_NTZ, at TIMESTAMP, amt DOUBLE) "
        "USING iceberg"
    )
    spark.sql(
        f"""INSERT INTO lake.{table} SELECT id,
        TIMESTAMP_NTZ'2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, CAST(id % 900 AS INT), 0),
        TIMESTAMP'2024-01-01 00:00:00'
            + make_interval(0, 0, 0, CAST(id % 40 AS INT), CAST(id % 24 AS INT), 0, 0),
        pmod(id * 7919, 1000) * 1.5 FROM range(12000)"""
    )
    reports = {
        "local_at": f"SELECT local_at, SUM(amt) AS s FROM {table} GROUP BY local_at "
        "ORDER BY s DESC, local_at LIMIT 5",
        "at": f"SELECT at, COUNT(*) AS n FROM {table} WHERE at >= TIMESTAMP '2024-01-20 00:00:00' "
        "GROUP BY at HAVING COUNT(*) > 12",
    }

    plain = svc.query(reports["local_at"], use_sketches=False).table
    assert plain.schema.field("local_at").type == pa.timestamp("us"), "no zone, as in Spark"
    for column, sql in reports.items():
        assert sorted_rows(svc.query(sql, use_sketches=False).table) == spark_answer(spark, sql, table)
        name = f"{ns}_{column}"
        svc.capture(sql, name=name, attributes={table: column}, fragments=40)
        assert sorted_rows(svc.query(sql, use_sketches="always").table) == spark_answer(spark, sql, table)
    spark.sql(f"DELETE FROM lake.{table} WHERE id % 53 = 1")
    spark.sql(
        f"""INSERT INTO lake.{table} SELECT id + 50000, TIMESTAMP_NTZ'2024-01-01 03:00:00',
        TIMESTAMP'2024-01-25 05:00:00', 900.0 FROM range(30)"""
    )
    for column, sql in reports.items():
        name = f"{ns}_{column}"
        svc.maintain(name)
        assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())
        assert sorted_rows(svc.query(sql, use_sketches="always").table) == spark_answer(spark, sql, table)
