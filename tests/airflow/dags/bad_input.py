"""Test DAG: one task whose metastore is unreachable (transient: retried) and one whose query,
known only once rendered, is unsupported (failed at once, without retries)."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG
from sketch_airflow.operators.sketch import SketchedQueryOperator

with DAG(
    "bad_input",
    start_date=pendulum.datetime(2026, 1, 1),
    schedule=None,
    params={"sql": "SELECT a, x FROM demo.facts LATERAL VIEW explode(array(b, c)) e AS x"},
    default_args={"retries": 1, "retry_delay": timedelta(seconds=1)},
):
    SketchedQueryOperator(task_id="unreachable", sql="SELECT a FROM demo.facts", sketch_conn_id="sketch_down")
    SketchedQueryOperator(task_id="unsupported", sql="{{ params.sql }}")
