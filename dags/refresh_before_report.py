"""Refresh the report's sketches to the latest snapshots, then run the report with skipping.

The refresh announces the report (policies naming it fire) and maintains the sketches of its
query by the cheapest correct path; the report writes its result and pushes its statistics
(rows, files read of total, sketch version used) to XCom.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG
from sketch_airflow.example import DEMO_REPORT, REPORT_PARAMETERS, REPORT_SQL
from sketch_airflow.operators.sketch import RefreshSketchesOperator, SketchedQueryOperator

with DAG(
    dag_id="refresh_before_report",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    schedule="@daily",
    catchup=False,
    tags=["sketch", "example"],
    params={"output_dir": "/tmp/sketch-reports"},
) as dag:
    refresh = RefreshSketchesOperator(
        task_id="refresh_sketches", sql=REPORT_SQL, report=DEMO_REPORT, retries=2
    )
    report = SketchedQueryOperator(
        task_id="report",
        sql=REPORT_SQL,
        parameters=REPORT_PARAMETERS,
        report=DEMO_REPORT,  # its announcement ends once it has run
        # run_after: every run has one (a manual run, from the CLI, the API or the UI, has no
        # logical date, so no ds).
        output_path="{{ params.output_dir }}/" + DEMO_REPORT + "_{{ dag_run.run_after | ts_nodash }}.parquet",
    )
    refresh >> report
