"""Reports over Iceberg views that Spark creates in the catalog (``CREATE VIEW lake.ns.v``):
named with their tables in full, relative to the namespace in use, with renamed columns, and
over another view. Spark runs such a report; the service answered "unknown table". Now each
is read plain, captured, used and maintained over the view's tables, and equals Spark's answer
before and after Spark's commits."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from sketch_core.errors import QueryError, TableNotFoundError
from sketch_core.service.facade import SketchService
from tests.oracles.results import sorted_rows
from tests.service.test_maintain import fresh_fragments, maintained

pytestmark = pytest.mark.spark


def test_reports_over_views_answer_as_spark_and_their_sketches_follow_commits(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    svc = spark_svc
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{ns}")
    spark.sql(f"CREATE TABLE lake.{ns}.orders (id BIGINT, cust BIGINT, day DATE, amt DOUBLE) USING iceberg")
    spark.sql(
        f"""INSERT INTO lake.{ns}.orders SELECT id, pmod(id * 37, 400),
        DATE'2024-01-01' + CAST(pmod(id, 40) AS INT), pmod(id * 7919, 10007) * 0.5 FROM range(8000)"""
    )
    spark.sql(f"CREATE VIEW lake.{ns}.big AS SELECT * FROM lake.{ns}.orders WHERE amt > 1000")
    current = spark.catalog.currentCatalog(), spark.catalog.currentDatabase()
    spark.sql(f"USE lake.{ns}")
    try:  # names relative to the namespace in use, as a notebook creates views
        spark.sql("CREATE VIEW recent AS SELECT id, day, amt FROM orders WHERE day >= DATE'2024-01-20'")
        spark.sql(
            "CREATE VIEW per_customer (customer, total) AS SELECT cust, SUM(amt) FROM orders GROUP BY cust"
        )
        spark.sql("CREATE VIEW busy AS SELECT cust, COUNT(*) AS n FROM big GROUP BY cust")
    finally:
        spark.sql(f"USE {current[0]}.{current[1]}")
    reports = {
        "big": f"SELECT cust, SUM(amt) AS s FROM {ns}.big GROUP BY cust ORDER BY s DESC, cust LIMIT 3",
        "recent": f"SELECT day, COUNT(*) AS n FROM {ns}.recent GROUP BY day HAVING COUNT(*) > 60",
        "per_customer": f"SELECT customer, total FROM {ns}.per_customer "
        "ORDER BY total DESC, customer LIMIT 4",
        "busy": f"SELECT cust, n FROM lake.{ns}.busy ORDER BY n DESC, cust LIMIT 5",
    }

    def spark_rows(sql: str) -> list[tuple[object, ...]]:
        rows = sorted_rows(spark.sql(sql.replace(f"FROM {ns}.", f"FROM lake.{ns}.")).toArrow())
        assert rows, "the oracle must return rows"
        return rows

    for view, sql in reports.items():
        assert sorted_rows(svc.query(sql, use_sketches=False).table) == spark_rows(sql), view
        svc.capture(sql, name=f"{ns}_{view}", fragments=40)
        sketched = svc.query(sql, use_sketches="always")
        assert sketched.sketch is not None and sorted_rows(sketched.table) == spark_rows(sql), view
    spark.sql(f"INSERT INTO lake.{ns}.orders SELECT id + 100000, 5, DATE'2024-01-25', 9000.0 FROM range(100)")
    spark.sql(f"DELETE FROM lake.{ns}.orders WHERE id % 101 = 3")
    for view, sql in reports.items():
        name = f"{ns}_{view}"
        assert [r.strategy for r in svc.maintain(name)] == ["incremental"], view
        assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence()), view
        assert sorted_rows(svc.query(sql, use_sketches="always").table) == spark_rows(sql), view


def test_a_view_whose_tables_are_named_in_another_catalog_is_refused_by_name(
    spark_svc: SketchService, spark: SparkSession, ns: str, tmp_path: Path
) -> None:
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{ns}")
    local = f"local_{ns}"  # a table of Spark's own catalog, in the current namespace
    spark.sql(f"CREATE TABLE spark_catalog.default.{local} (id BIGINT) USING parquet LOCATION '{tmp_path}'")
    try:
        spark.sql(f"CREATE VIEW lake.{ns}.mixed AS SELECT id FROM {local}")  # made in spark_catalog.default
        with pytest.raises(QueryError, match=f"view {ns}.mixed reads table {local} without a namespace"):
            spark_svc.query(f"SELECT COUNT(*) AS n FROM {ns}.mixed")
    finally:
        spark.sql(f"DROP TABLE spark_catalog.default.{local}")
    with pytest.raises(TableNotFoundError, match="unknown table"):
        spark_svc.query(f"SELECT COUNT(*) AS n FROM {ns}.neither_table_nor_view")
