"""Administer one sketch by hand (the UI's buttons trigger this): capture, maintain or drop.

Params: ``action`` (capture, maintain or drop), ``name``, and for capture the ``sql`` with
its ``parameters``; for maintain the ``strategy``.
"""

from __future__ import annotations

from typing import Any

import pendulum
from airflow.sdk import DAG, Param, task
from sketch_airflow.assets import SKETCH_VERSIONS, emit_version
from sketch_airflow.hooks.sketch import SketchMetastoreHook
from sketch_airflow.operators.sketch import failing_without_retry_on_bad_input

with DAG(
    dag_id="sketch_admin",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    schedule=None,
    catchup=False,
    tags=["sketch", "example"],
    params={
        "action": Param("maintain", enum=["capture", "maintain", "drop"]),
        "name": Param("", type="string", description="The sketch."),
        "sql": Param("", type="string", description="capture: the query."),
        "parameters": Param({}, type="object", description="capture: values of :name placeholders."),
        "strategy": Param("auto", enum=["auto", "incremental", "full"]),
    },
) as dag:

    @task(outlets=[SKETCH_VERSIONS])
    def administer(params: dict[str, Any], **context: Any) -> dict[str, Any]:
        hook = SketchMetastoreHook()
        try:
            with failing_without_retry_on_bad_input():
                svc = hook.get_conn()
                action, name = params["action"], params["name"] or None
                if action == "capture":
                    version = svc.capture(params["sql"], name=name, params=params["parameters"])
                    emit_version(context, [SKETCH_VERSIONS], version.name, version.version, version.sequence)
                    return {"action": action, "name": version.name, "version": version.version}
                if name is None:
                    raise ValueError(f"{action} needs a sketch name")
                if action == "drop":
                    svc.drop_sketch(name)
                    return {"action": action, "name": name}
                (run,) = svc.maintain(name, params["strategy"])
                if run.strategy != "none" and run.to_version is not None:
                    sequence = svc.sketch(name).sequence
                    emit_version(context, [SKETCH_VERSIONS], name, run.to_version, sequence)
                return {"action": action, "name": name, "strategy": run.strategy, "version": run.to_version}
        finally:
            hook.close()

    administer()
