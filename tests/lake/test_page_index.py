"""A sketch's ranges reach the Parquet reader's page index where the files have one.

Iceberg's Java writer (every Spark write) writes a page index; Arrow's (PyIceberg's) does not.
Over files with one, a sketched query pushes the sketch's own ranges, so Spark's reader skips
the pages they miss; over plain files it keeps the few coarsened ranges plus a binary search.
Oracle: the sketched query equals the plain one either way.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from sketch_core.datasets import synthetic_table
from sketch_core.service.facade import SketchService
from sketch_core.tables.page_index import has_page_index
from tests.lake.conftest import spark_sql_during
from tests.oracles.results import sorted_rows

pytestmark = pytest.mark.spark

GROUPS = 200
# Groups scattered over the range of ``a``: the sketch keeps more ranges than the default 4.
KEPT = [3, 17, 40, 41, 77, 102, 130, 151, 170, 199]
REPORT = (
    "SELECT f.a, SUM(f.b) AS total, COUNT(*) AS n FROM {t} f JOIN {g} g ON f.a = g.a "
    "WHERE g.keep GROUP BY f.a"
)


def _report_as_run(svc: SketchService, sql: str, spark: SparkSession) -> str:
    sketched, ran = spark_sql_during(spark, lambda: svc.query(sql, use_sketches="always"))
    assert sketched.sketch is not None
    assert sorted_rows(sketched.table) == sorted_rows(svc.query(sql, use_sketches=False).table)
    (query,) = [text for text in ran if "GROUP BY" in text]
    return query


@pytest.mark.parametrize("writer", ["spark", "arrow"])
def test_a_sketch_pushes_its_own_ranges_only_into_files_with_a_page_index(
    spark_svc: SketchService, spark: SparkSession, ns: str, writer: str
) -> None:
    svc, table, groups = spark_svc, f"{ns}.facts", f"{ns}.groups"
    rows = synthetic_table(20_000, GROUPS, seed=41).sort_by("a")
    svc.tables.create(
        table, spark.createDataFrame(rows.to_pandas()) if writer == "spark" else rows, sort_by=["a"]
    )
    keep = pa.array([g in KEPT for g in range(GROUPS)])
    svc.tables.create(
        groups, pa.table({"a": pa.array(range(GROUPS), pa.int64()), "keep": keep}), sort_by=["a"]
    )
    assert has_page_index(svc.tables.pin(table).files, "a") == (writer == "spark")

    sql = REPORT.format(t=table, g=groups)
    svc.capture(sql, name=f"{ns}_report", attributes={table: "a"}, fragments=GROUPS)
    query = _report_as_run(svc, sql, spark)
    lower_bounds = len(re.findall(r"\ba >= ", query))
    if writer == "spark":
        # Each kept group its own range (two pairs of neighbours merge), no search.
        assert lower_bounds == len(KEPT) - 1 and "IF(" not in query, query
    else:
        # A search over the exact bounds, and the four coarsened ranges Parquet is given.
        coarse = re.findall(r"\(a >= \d+ AND a < \d+\)", query)
        assert "IF(" in query and len(coarse) <= 4, query
