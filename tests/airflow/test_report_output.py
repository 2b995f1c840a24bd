"""``SketchedQueryOperator`` writes its result with Spark, to an Iceberg table or to files;
only the count and a small preview reach XCom, and no rows pass through the driver."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow.sdk.exceptions import AirflowFailException
from pyspark.sql import SparkSession
from sketch_airflow.operators.report_output import PREVIEW_ROWS
from sketch_airflow.operators.sketch import SketchedQueryOperator

from sketch_core.datasets import synthetic_table
from sketch_core.service.facade import SketchService
from tests.lake.conftest import DriverCollections
from tests.oracles.results import sorted_rows

pytestmark = pytest.mark.spark

REPORT = "SELECT a, SUM(b) AS s, COUNT(*) AS n FROM {t} GROUP BY a HAVING COUNT(*) > :least"


def _spark_rows(spark: SparkSession, relation: str) -> list[tuple[object, ...]]:
    return sorted_rows(pa.Table.from_pandas(spark.table(relation).toPandas(), preserve_index=False))


def test_a_report_is_written_by_spark_to_a_table_and_to_files_with_a_preview_in_xcom(
    small_files: None,
    spark_svc: SketchService,
    spark: SparkSession,
    ns: str,
    sketch_conn: str,
    tmp_path: Path,
) -> None:
    svc, table = spark_svc, f"{ns}.facts"
    svc.tables.create(table, synthetic_table(6000, 60, seed=41), sort_by=["a"])
    sql = REPORT.format(t=table)
    counts = sorted(svc.query(sql, {"least": 0}, use_sketches=False).table["n"].to_pylist())
    params = {"least": counts[-5]}  # the few biggest groups: a sketch that skips files
    svc.capture(sql, params=params, name=f"{ns}_report", attributes={table: "a"}, fragments=20)
    expected = sorted_rows(svc.query(sql, params, use_sketches=False).table)
    assert 0 < len(expected) < 5

    out = tmp_path / "reports" / "big_groups.parquet"
    operator = SketchedQueryOperator(
        task_id="report",
        sql=sql,
        parameters=params,
        output_table=f"{ns}.big_groups",
        output_path=str(out),
        use_sketches="always",
        sketch_conn_id=sketch_conn,
    )
    # The writes collect nothing; the preview's few rows are the only rows the driver sees.
    with DriverCollections(allowed_in="_json_safe") as collections:
        stats = operator.execute({})
    assert collections.calls == [] and collections.allowed, (collections.calls, collections.allowed)
    assert stats["rows"] == len(expected) and stats["sketch"] == [f"{ns}_report", 1]
    assert 0 < stats["files_read"] < stats["files_total"]
    assert len(stats["preview"]) == min(PREVIEW_ROWS, len(expected))
    assert sorted((r["a"], r["s"], r["n"]) for r in stats["preview"]) == expected
    assert _spark_rows(spark, f"lake.{ns}.big_groups") == expected
    assert sorted_rows(pq.read_table(out)) == expected
    assert [c.operation for c in svc.tables.commits(f"{ns}.big_groups")] == ["create", "append"]

    again = operator.execute({})  # the next run replaces both outputs
    assert again["rows"] == len(expected)
    assert svc.tables.commits(f"{ns}.big_groups")[-1].operation == "overwrite"
    assert _spark_rows(spark, f"lake.{ns}.big_groups") == expected
    assert sorted_rows(pq.read_table(out)) == expected
    assert [p.name for p in out.parent.iterdir()] == [out.name], "no partial or replaced folder left"


def test_a_report_that_fails_in_spark_fails_the_task_and_leaves_the_previous_output(
    spark_svc: SketchService, ns: str, sketch_conn: str, tmp_path: Path
) -> None:
    svc, table = spark_svc, f"{ns}.facts"
    svc.tables.create(table, synthetic_table(500, 10, seed=43))
    out = tmp_path / "report.parquet"
    good = SketchedQueryOperator(
        task_id="report",
        sql=f"SELECT a, COUNT(*) AS n FROM {table} GROUP BY a",
        output_path=str(out),
        sketch_conn_id=sketch_conn,
    )
    assert good.execute({})["rows"] == 10
    before = sorted_rows(pq.read_table(out))

    # Division by zero is a data error under Spark's default ANSI mode: no retry can fix it.
    failing = SketchedQueryOperator(
        task_id="report",
        sql=f"SELECT a, SUM(b) / (COUNT(*) - COUNT(*)) AS r FROM {table} GROUP BY a",
        output_path=str(out),
        use_sketches=False,
        sketch_conn_id=sketch_conn,
    )
    with pytest.raises(
        AirflowFailException, match=r"SparkQueryError: Spark cannot run the report written to"
    ):
        failing.execute({})
    assert sorted_rows(pq.read_table(out)) == before
    assert [p.name for p in tmp_path.iterdir()] == [out.name], "no partial folder left"
