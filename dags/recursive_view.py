"""A materialised recursive view over a network whose links come and expire.

``network.reachable`` holds which nodes the first two backbone nodes of ``network.links``
reach (``WITH RECURSIVE ... UNION``). The first run creates the links and materialises the
view; every later run adds and expires links, and maintains the view incrementally: an expired
link only restricts the provenance formulas that mention it, so nothing is derived again, and
the view's table gets one commit with the rows that left and came.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param, task
from sketch_airflow.assets import table_asset
from sketch_airflow.example import NETWORK_LINKS, REACHABLE_SQL, REACHABLE_VIEW, change_links
from sketch_airflow.hooks.sketch import SketchMetastoreHook
from sketch_airflow.operators.sketch import MaterializeViewOperator

with DAG(
    dag_id="recursive_view",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    schedule=None,
    catchup=False,
    tags=["sketch", "example", "recursive"],
    params={
        "inserts": Param(3, type="integer", minimum=0),
        "expires": Param(2, type="integer", minimum=0),
        "seed": Param(1, type="integer"),
    },
) as dag:

    @task(outlets=[table_asset(NETWORK_LINKS)])
    def links_change(params: dict[str, int]) -> dict[str, int]:
        hook = SketchMetastoreHook()
        try:
            return change_links(hook.get_conn(), params["inserts"], params["expires"], params["seed"])
        finally:
            hook.close()

    view = MaterializeViewOperator(task_id="reachable", table=REACHABLE_VIEW, sql=REACHABLE_SQL, fragments=8)
    links_change() >> view
