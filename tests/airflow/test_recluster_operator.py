"""``ReclusterTableOperator`` rewrites a table in a layout (given, or advised) as one
``replace`` commit; a layout it cannot read, or no advice, fails the task without retry."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException
from sketch_airflow.operators.sketch import ReclusterTableOperator

from sketch_core.datasets import synthetic_table
from sketch_core.service.facade import SketchService

pytestmark = pytest.mark.spark


def test_the_operator_rewrites_in_the_advised_or_the_given_layout(
    small_files: None, spark_svc: SketchService, ns: str, sketch_conn: str
) -> None:
    svc, table = spark_svc, f"{ns}.facts"
    svc.tables.create(table, synthetic_table(30_000, 150, seed=61), sort_by=["key"])
    sql = f"SELECT a, SUM(b) AS s FROM {table} GROUP BY a HAVING SUM(b) > :t"
    svc.capture(sql, params={"t": 2500}, name=f"{ns}_op", attributes={table: "a"}, fragments=60)

    def run(layout: str | None) -> dict[str, object]:
        operator = ReclusterTableOperator(
            task_id="recluster", table=table, layout=layout, sketch_conn_id=sketch_conn
        )
        return operator.execute({})  # type: ignore[arg-type]

    with pytest.raises(AirflowFailException, match="cannot read the layout"):
        run("zorder(a, b")
    assert svc.tables.commits(table)[-1].operation == "create"
    advised = run(None)
    assert advised["layout"] == "advised" and svc.tables.commits(table)[-1].seq == advised["sequence"]
    assert advised["carried"] == [f"{ns}_op"] and svc.sketch(f"{ns}_op").sequence == advised["sequence"]
    # Now laid out for its only report: no further advice, so the task fails rather than rewrite.
    with pytest.raises(AirflowFailException, match="recommends no rewrite"):
        run(None)
    given = run("zorder(a, c)")
    assert given["layout"] == "zorder(a, c)" and svc.tables.commits(table)[-1].operation == "replace"
