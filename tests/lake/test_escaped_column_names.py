"""Columns whose names are not Avro names (``Event Id``, ``order-date``): Iceberg's writers,
Spark's and PyIceberg's alike, store them under escaped names in the Parquet files
(``Event_x20Id``), and readers find them by field id. The service read them by name and got
NULL for every row: plain reports grouped everything under NULL, sketches were empty. Now the
plain, sketched and maintained paths all equal Spark's own answer over the catalog's table."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from sketch_core.service.facade import SketchService
from tests.oracles.results import sorted_rows, spark_answer
from tests.service.test_maintain import fresh_fragments, maintained

pytestmark = pytest.mark.spark

REPORTS = {
    "by_day": "SELECT `order-date`, SUM(amount) AS s FROM {t} GROUP BY `order-date` "
    "ORDER BY s DESC, `order-date` LIMIT 5",
    "per_event": "SELECT `Event Id` % 40 AS bucket, COUNT(*) AS n, MAX(`unit price`) AS top FROM {t} "
    "WHERE `order-date` >= DATE '2024-02-01' GROUP BY `Event Id` % 40 HAVING COUNT(*) > 100",
}


def _answers(svc: SketchService, spark: SparkSession, sql: str, table: str) -> list[tuple[object, ...]]:
    expected = spark_answer(spark, sql, table)
    assert all(None not in row for row in expected), "the oracle must see the values"
    return expected


def test_a_spark_table_with_escaped_names_is_read_sketched_and_maintained(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    svc, table = spark_svc, f"{ns}.orders"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{ns}")
    spark.sql(
        f"""CREATE TABLE lake.{table} (`Event Id` BIGINT, `order-date` DATE, amount BIGINT,
        `unit price` DOUBLE) USING iceberg PARTITIONED BY (bucket(4, `Event Id`))"""
    )
    spark.sql(
        f"""INSERT INTO lake.{table} SELECT id, DATE '2024-01-01' + CAST(id % 90 AS INT),
        pmod(id * 7919, 1000), (id % 313) * 0.5 FROM range(12000)"""
    )
    reports = {f"{ns}_{label}": sql.format(t=table) for label, sql in REPORTS.items()}
    for name, sql in reports.items():
        expected = _answers(svc, spark, sql, table)
        assert sorted_rows(svc.query(sql, use_sketches=False).table) == expected
        version = svc.capture(sql, name=name, fragments=16, with_state=True)
        assert version.fragments
        assert sorted_rows(svc.query(sql, use_sketches="always").table) == expected

    spark.sql(f"DELETE FROM lake.{table} WHERE `Event Id` % 97 = 3")
    spark.sql(f"INSERT INTO lake.{table} SELECT id + 20000, DATE '2024-02-15', 999, 200.5 FROM range(300)")
    sequence = svc.latest_sequence()
    for name, sql in reports.items():
        svc.maintain(name)
        assert maintained(svc, name) == fresh_fragments(svc, sql, name, sequence)
        assert sorted_rows(svc.query(sql, use_sketches="always").table) == _answers(svc, spark, sql, table)

    # A top-k over rows, on a table with no sort key recorded: sketched on its ordering column
    # (it was refused, said to have too few files). Ordered by an expression, there is no
    # ordering column to prefer: the columns it reads are tried, and one of them is safe.
    top = f"SELECT `Event Id`, amount FROM {table} ORDER BY amount DESC, `Event Id` LIMIT 10"
    version = svc.capture(top, name=f"{ns}_top")
    assert version.partitions[table][0] == "amount"
    assert sorted_rows(svc.query(top, use_sketches="always").table) == _answers(svc, spark, top, table)
    expression = top.replace("ORDER BY amount DESC", "ORDER BY amount * 2 DESC")
    version = svc.capture(expression, name=f"{ns}_expression")
    assert version.partitions[table][0] in {"Event Id", "amount"}
    answers = _answers(svc, spark, expression, table)
    assert sorted_rows(svc.query(expression, use_sketches="always").table) == answers


def test_the_services_own_writes_of_escaped_names_read_back(svc: SketchService, ns: str) -> None:
    table = f"{ns}.sales"
    rows = pa.table(
        {
            "Sale Id": pa.array(range(3000), pa.int64()),
            "net-amount": pa.array([i % 7 for i in range(3000)], pa.int64()),
        }
    )
    svc.tables.create(table, rows, sort_by=["Sale Id"])
    stored = pq.read_schema(svc.tables.pin(table).files[0].path.removeprefix("file://"))
    assert "Sale Id" not in stored.names, "PyIceberg no longer escapes names; this test checks nothing"
    sql = f"SELECT `net-amount`, COUNT(*) AS n, MIN(`Sale Id`) AS first FROM {table} GROUP BY `net-amount`"
    expected = sorted((k, 3000 // 7 + (1 if k < 3000 % 7 else 0), k) for k in range(7))
    assert sorted(tuple(r.values()) for r in svc.query(sql, use_sketches=False).table.to_pylist()) == expected
