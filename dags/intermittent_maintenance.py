"""Intermittent maintenance: wait (deferred, no worker slot held) until a sketch's policy
fires, then maintain the sketches whose policy fires.

Scheduled every ten minutes and on every load of the demo table; a run whose sensor times out
is skipped, not failed.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, AssetOrTimeSchedule, CronTriggerTimetable
from sketch_airflow.assets import table_asset
from sketch_airflow.example import DEMO_TABLE
from sketch_airflow.operators.sketch import MaintainSketchesOperator
from sketch_airflow.sensors.policy import SketchPolicySensor

with DAG(
    dag_id="intermittent_maintenance",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    schedule=AssetOrTimeSchedule(
        timetable=CronTriggerTimetable("*/10 * * * *", timezone="UTC"), assets=[table_asset(DEMO_TABLE)]
    ),
    catchup=False,
    max_active_runs=1,
    tags=["sketch", "example"],
) as dag:
    wait = SketchPolicySensor(
        task_id="wait_for_policy",
        poke_interval=30,
        timeout=timedelta(minutes=9).total_seconds(),
        soft_fail=True,
    )
    maintain = MaintainSketchesOperator(task_id="maintain_due", strategy="auto", retries=2)
    wait >> maintain
