"""Administer one sketch by hand (the UI's buttons trigger this): capture, maintain or drop;
or rewrite a table's files in the layout its reports need (recluster).

Params: ``action`` (capture, maintain, drop or recluster), ``name``; for recluster the
``table`` and optionally the ``layout`` (``sort(a, b)`` or ``zorder(a, b)``; empty: the layout
advisor's recommendation, refused when it has none); for capture the ``sql`` with its
``parameters``, and optionally the ``attributes`` to partition on (``{table: attribute}``) and
the ``fragments`` per partition (0: the default); for maintain the ``strategy``. Capturing
under the name of an existing sketch recaptures it on the same attributes and fragment counts
unless others are given. Spark work runs where the connection says (in-process, or
spark-submitted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pendulum
from airflow.sdk import DAG, Param, task
from sketch_airflow.assets import SKETCH_VERSIONS, emit_carried, emit_version
from sketch_airflow.hooks.sketch import SketchMetastoreHook
from sketch_airflow.operators.sketch import failing_without_retry_on_bad_input

from sketch_core.errors import ConfigurationError

if TYPE_CHECKING:  # the service loads Spark: imported when a task runs, not when parsed
    from sketch_core.service import SketchService, SketchVersion


def capture(svc: SketchService, name: str | None, params: dict[str, Any]) -> SketchVersion:
    """Capture, or recapture an existing sketch (same attributes and fragments unless given)."""
    attributes = params.get("attributes") or None
    fragments: int | dict[str, int] | None = params.get("fragments") or None
    if name is not None and name in {d.name for d in svc.sketches.definitions()}:
        existing = svc.sketch(name)
        attributes = attributes or {t: a for t, (a, _) in existing.partitions.items()}
        fragments = fragments or {t: n for t, (_, n) in existing.partitions.items()}
    return svc.capture(
        params["sql"],
        name=name,
        params=params["parameters"],
        attributes=attributes,
        fragments=fragments,
        with_state=True,  # it is to be maintained: the state is computed in the same Spark work
    )


def recluster(svc: SketchService, params: dict[str, Any], context: Any) -> dict[str, Any]:
    """Rewrite a table in the given layout, or in the one the layout advisor recommends; the
    sketches carried to the rewrite are asset events like any published version."""
    from sketch_core.layout.simulation import Layout

    if not params.get("table"):
        raise ConfigurationError(
            "recluster needs a table", hint='trigger with conf {"action": "recluster", "table": "ns.table"}'
        )
    layout = Layout.parse(params["layout"]) if params.get("layout") else None
    sequence = svc.recluster(params["table"], layout)
    carried = emit_carried(context, [SKETCH_VERSIONS], svc, sequence)
    return {
        "action": "recluster",
        "table": params["table"],
        "layout": str(layout or "advised"),
        "sequence": sequence,
        "carried": carried,
    }


with DAG(
    dag_id="sketch_admin",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    schedule=None,
    catchup=False,
    # Runs only when triggered (by the sketches page's buttons, the CLI or the API): paused,
    # as Airflow makes new DAGs, the buttons' runs would wait for ever.
    is_paused_upon_creation=False,
    tags=["sketch", "example"],
    params={
        "action": Param("maintain", enum=["capture", "maintain", "drop", "recluster"]),
        "name": Param("", type="string", description="The sketch."),
        "sql": Param("", type="string", description="capture: the query."),
        "parameters": Param({}, type="object", description="capture: values of :name placeholders."),
        "attributes": Param({}, type="object", description="capture: {table: attribute} (default: chosen)."),
        "fragments": Param(0, type="integer", minimum=0, description="capture: fragments (0: default)."),
        "strategy": Param("auto", enum=["auto", "incremental", "full"]),
        "table": Param("", type="string", description="recluster: the table (ns.table)."),
        "layout": Param(
            "", type="string", description="recluster: sort(a, ...) or zorder(a, ...) (default: advised)."
        ),
    },
) as dag:

    @task(outlets=[SKETCH_VERSIONS])
    def administer(params: dict[str, Any], **context: Any) -> dict[str, Any]:
        hook = SketchMetastoreHook()
        try:
            with failing_without_retry_on_bad_input():
                svc = hook.get_conn()
                action, name = params["action"], params["name"] or None
                if action == "recluster":
                    return recluster(svc, params, context)
                if action == "capture":
                    version = capture(svc, name, params)
                    emit_version(context, [SKETCH_VERSIONS], version.name, version.version, version.sequence)
                    return {"action": action, "name": version.name, "version": version.version}
                if name is None:
                    raise ConfigurationError(
                        f"{action} needs a sketch name",
                        hint=f'trigger with conf {{"name": "...", "action": "{action}"}}',
                    )
                if action == "drop":
                    svc.drop_sketch(name)
                    return {"action": action, "name": name}
                (run,) = svc.maintain(name, params["strategy"])
                if run.published and run.to_version is not None:
                    sequence = svc.sketch(name).sequence
                    emit_version(context, [SKETCH_VERSIONS], name, run.to_version, sequence)
                return {"action": action, "name": name, "strategy": run.strategy, "version": run.to_version}
        finally:
            hook.close()

    administer()
