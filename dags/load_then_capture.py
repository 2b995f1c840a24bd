"""Load a table, then capture the report's sketch on it (and attach its maintenance policy).

Run it first: the first run creates ``demo.facts``; later runs append and delete rows and
recapture. The load declares the table as an outlet asset, so DAGs can be scheduled on it.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param, task
from sketch_airflow.assets import table_asset
from sketch_airflow.example import (
    DEMO_POLICY,
    DEMO_SKETCH,
    DEMO_TABLE,
    REPORT_PARAMETERS,
    REPORT_SQL,
    load_batch,
)
from sketch_airflow.hooks.sketch import SketchMetastoreHook
from sketch_airflow.operators.sketch import CaptureSketchOperator

with DAG(
    dag_id="load_then_capture",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    schedule=None,
    catchup=False,
    tags=["sketch", "example"],
    params={
        "initial_rows": Param(50_000, type="integer", minimum=1),
        "inserts": Param(1_000, type="integer", minimum=0),
        "deletes": Param(500, type="integer", minimum=0),
        "seed": Param(1, type="integer"),
    },
) as dag:

    @task(outlets=[table_asset(DEMO_TABLE)])
    def load(params: dict[str, int]) -> dict[str, object]:
        hook = SketchMetastoreHook()
        try:
            return load_batch(
                hook.get_conn(),
                DEMO_TABLE,
                initial_rows=params["initial_rows"],
                inserts=params["inserts"],
                deletes=params["deletes"],
                seed=params["seed"],
            )
        finally:
            hook.close()

    capture = CaptureSketchOperator(
        task_id="capture",
        sql=REPORT_SQL,
        name=DEMO_SKETCH,
        parameters=REPORT_PARAMETERS,
        attributes={DEMO_TABLE: "a"},
        fragments=200,
        policy=DEMO_POLICY,
    )
    load() >> capture
