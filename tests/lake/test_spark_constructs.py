"""Reports with windows, outer and anti joins, scalar subqueries and set differences over
tables that Spark wrote: a fact table created from a Spark DataFrame by Spark's Iceberg writer,
and a dimension made by a Spark ``CREATE TABLE ... AS SELECT``. Spark's ``INSERT``, ``UPDATE``,
``MERGE`` and ``DELETE`` then change the facts, on copy-on-write and on merge-on-read tables.

After each commit, every sketch is maintained as users run it (``auto``): incrementally, and
equal to a fresh capture; the report with its sketch equals the plain report.
"""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from sketch_core.datasets import synthetic_table
from sketch_core.service.facade import SketchService
from tests.lake.test_merge_on_read import MERGE_ON_READ
from tests.lake.test_spark_sequences import statement
from tests.oracles.results import sorted_rows
from tests.service.test_maintain import fresh_fragments, maintained

pytestmark = pytest.mark.spark

GROUPS = 12
REPORTS = {
    "top_n": """SELECT a, key, b FROM (SELECT a, key, b,
        ROW_NUMBER() OVER (PARTITION BY a ORDER BY b DESC, key) AS rn FROM {t}) WHERE rn <= 2""",
    "frame": """SELECT a, key FROM (SELECT a, key, b,
        AVG(b) OVER (PARTITION BY a ORDER BY key ROWS BETWEEN 2 PRECEDING AND 2 FOLLOWING) AS m
        FROM {t}) WHERE b > m + 3""",
    # (aliases of two letters: the synthetic table has columns a to j)
    "left_join_not_in": """SELECT fa.a, COUNT(*) AS n, COUNT(dm.a) AS matched FROM {t} fa
        LEFT JOIN {d} dm ON fa.a = dm.a AND fa.b = dm.top
        WHERE fa.c NOT IN (SELECT xs.c FROM {t} xs WHERE xs.a = fa.a AND xs.key < fa.key AND xs.d > 15)
        GROUP BY fa.a HAVING COUNT(dm.a) > 0""",
    "scalar_subquery": """SELECT a, SUM(b) AS s FROM {t} GROUP BY a
        HAVING SUM(b) > (SELECT SUM(b) / 9 FROM {t})""",
    "except": """SELECT a, d FROM {t} WHERE c > 10 EXCEPT SELECT a, d FROM {t} WHERE b < 2""",
}
SEQUENCES = {
    "copy-on-write": [("insert", 3, 2), ("update", 5, 1), ("merge", 7, 3), ("delete", 2, 1)],
    "merge-on-read": [("update", 4, 2), ("delete", 6, 1)],
}


@pytest.mark.parametrize("mode", sorted(SEQUENCES))
def test_construct_sketches_follow_spark_commits_on_spark_written_tables(
    spark_svc: SketchService, spark: SparkSession, ns: str, mode: str
) -> None:
    svc, table, dims = spark_svc, f"{ns}.facts", f"{ns}.dims"
    svc.tables.create(table, spark.createDataFrame(synthetic_table(1500, GROUPS, seed=7).to_pandas()))
    spark.sql(
        f"CREATE TABLE lake.{dims} USING iceberg AS SELECT a, MAX(b) AS top FROM lake.{table} GROUP BY a"
    )
    if mode == "merge-on-read":
        spark.sql(f"ALTER TABLE lake.{table} SET TBLPROPERTIES ({MERGE_ON_READ})")
    reports = {f"{ns}_{label}": sql.format(t=table, d=dims) for label, sql in REPORTS.items()}
    for name, sql in reports.items():
        svc.capture(sql, name=name, attributes={table: "a"}, fragments=8)

    for number, step in enumerate(SEQUENCES[mode], start=1):
        spark.sql(statement(table, step, number))
        seq = svc.latest_sequence()
        for name, sql in reports.items():
            assert [run.strategy for run in svc.maintain(name)] == ["incremental"], (step, name)
            assert maintained(svc, name) == fresh_fragments(svc, sql, name, seq), (step, name)
            plain = svc.query(sql, use_sketches=False).table
            used = svc.query(sql, use_sketches="always")
            assert used.sketch is not None and sorted_rows(used.table) == sorted_rows(plain), (step, name)
    empty = [name for name, sql in reports.items() if not svc.query(sql, use_sketches=False).table.num_rows]
    assert not empty, f"every report must return rows, or the oracle is vacuous: {empty}"
