"""The plugin's hook, operators, trigger and sensor, each against the real metastore."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pendulum
import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowFailException
from airflow.triggers.base import TriggerEvent
from sketch_airflow.hooks.sketch import SketchMetastoreHook, metastore_url
from sketch_airflow.operators.sketch import (
    CaptureSketchOperator,
    RefreshSketchesOperator,
    SketchedQueryOperator,
)
from sketch_airflow.triggers.policy import SketchPolicyTrigger

from sketch_core.datasets import synthetic_table
from sketch_core.errors import ConfigurationError, MetastoreUnavailableError, UnsupportedQueryError
from sketch_core.policy import Policy
from sketch_core.service import SketchService
from tests.service.test_costs import pinned_model


def define(conn_id: str, **fields: Any) -> None:
    os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps({"conn_type": "sketch_metastore", **fields})


# -- hook ----------------------------------------------------------------------------------------
def test_hook_builds_settings_from_the_connection(tmp_path: Path) -> None:
    define(
        "sketch_hook_a",
        host="db.example",
        port=5433,
        login="ana lyst",
        password="p@ss/word",
        schema="sketches",
        extra={
            "warehouse": str(tmp_path),
            "spark_master": "spark://m:7077",
            "settings": {"fragments": "500"},
        },
    )
    settings = SketchMetastoreHook("sketch_hook_a").get_settings()
    assert settings.metastore_url == "postgresql+psycopg://ana%20lyst:p%40ss%2Fword@db.example:5433/sketches"
    assert (settings.warehouse, settings.spark_master, settings.fragments) == (
        tmp_path,
        "spark://m:7077",
        500,
    )


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ({}, "names no warehouse"),
        ({"warehouse": "/w", "settings": {"fragmnets": 5}}, "unknown settings fragmnets"),
        ({"warehouse": "/w", "settings": {"fragments": "many"}}, "fragments='many' is not a int"),
        ({"warehouse": "/w", "spark_conf": ["a"]}, "spark_conf must be an object"),
    ],
)
def test_hook_refuses_bad_connections_naming_the_field(extra: dict[str, Any], problem: str) -> None:
    define("sketch_hook_bad", host="h", extra=extra)
    with pytest.raises(ConfigurationError, match=problem):
        SketchMetastoreHook("sketch_hook_bad").get_settings()


def test_metastore_url_needs_a_host() -> None:
    with pytest.raises(ConfigurationError, match="no host"):
        metastore_url(None, None, None, None, None)


# -- templating and parse-time checks -------------------------------------------------------------
def test_operators_render_sql_parameters_and_sql_files(tmp_path: Path) -> None:
    (tmp_path / "report.sql").write_text("SELECT a, COUNT(*) AS n FROM {{ params.table }} GROUP BY a")
    with DAG(
        "templating",
        start_date=pendulum.datetime(2026, 1, 1),
        schedule=None,
        template_searchpath=[str(tmp_path)],
    ):
        inline = CaptureSketchOperator(
            task_id="inline",
            sql="SELECT a FROM {{ params.table }} WHERE b > :low GROUP BY a",
            name="top_{{ ds_nodash }}",
            parameters={"low": "{{ params.low }}"},
        )
        from_file = SketchedQueryOperator(
            task_id="from_file", sql="report.sql", output_path="/out/{{ ds }}.parquet"
        )
    context: dict[str, Any] = {
        "params": {"table": "demo.facts", "low": 7},
        "ds": "2026-11-02",
        "ds_nodash": "20261102",
    }
    for operator in (inline, from_file):
        operator.resolve_template_files()
        operator.render_template_fields(context)
    assert inline.sql == "SELECT a FROM demo.facts WHERE b > :low GROUP BY a"
    assert (inline.name, inline.parameters) == ("top_20261102", {"low": "7"})
    assert from_file.sql == "SELECT a, COUNT(*) AS n FROM demo.facts GROUP BY a"
    assert from_file.output_path == "/out/2026-11-02.parquet"


def test_inline_unsupported_sql_is_refused_when_the_operator_is_built() -> None:
    with pytest.raises(UnsupportedQueryError) as raised:
        CaptureSketchOperator(task_id="bad", sql="SELECT a, b FROM s.t GROUP BY ROLLUP (a, b)")
    assert raised.value.construct == "ROLLUP/CUBE/GROUPING SETS"
    # A report that runs without sketches may use any construct Spark has.
    plain = SketchedQueryOperator(
        task_id="plain",
        sql="SELECT a, x FROM demo.facts LATERAL VIEW explode(array(b, c)) e AS x",
        use_sketches=False,
    )
    assert plain.use_sketches is False


def test_bad_input_at_run_time_fails_without_retry_and_transient_errors_propagate(
    sketch_conn: str, tmp_path: Path
) -> None:
    templated = CaptureSketchOperator(task_id="late", sql="{{ params.sql }}", sketch_conn_id=sketch_conn)
    templated.sql = "SELECT a, x FROM demo.facts LATERAL VIEW explode(array(b, c)) e AS x"  # as rendered
    with pytest.raises(AirflowFailException, match="LATERAL VIEW"):
        templated.execute({})
    define("sketch_down", host="127.0.0.1", port=1, login="x", schema="x", extra={"warehouse": str(tmp_path)})
    down = SketchedQueryOperator(
        task_id="down", sql="SELECT 1 AS one FROM demo.facts", sketch_conn_id="sketch_down"
    )
    with pytest.raises(MetastoreUnavailableError) as raised:
        down.execute({})
    assert raised.value.transient  # Airflow retries it


def test_airflow_retries_an_unreachable_metastore_and_fails_bad_input_at_once(
    airflow_db: None, sketch_conn: str, tmp_path: Path
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    from tests.airflow.conftest import TEST_DAGS

    define("sketch_down", host="127.0.0.1", port=1, login="x", schema="x", extra={"warehouse": str(tmp_path)})
    run = DagBag(dag_folder=str(TEST_DAGS)).dags["bad_input"].test()
    tries = {ti.task_id: (ti.state, ti.try_number) for ti in run.get_task_instances()}
    # Both tasks have a retry. The transient error is left to it (tried twice); the unsupported
    # query fails for good at once.
    assert tries == {"unreachable": ("failed", 2), "unsupported": ("failed", 1)}


# -- trigger --------------------------------------------------------------------------------------
def test_trigger_serializes_to_what_rebuilds_it() -> None:
    trigger = SketchPolicyTrigger(names=["a", "b"], sketch_conn_id="c", poke_interval=2.5, max_failures=3)
    classpath, kwargs = trigger.serialize()
    assert classpath == "sketch_airflow.triggers.policy.SketchPolicyTrigger"
    rebuilt = SketchPolicyTrigger(**json.loads(json.dumps(kwargs)))
    assert rebuilt.serialize() == (classpath, kwargs)


def watched_sketch(svc: SketchService, ns: str, delta_rows: int) -> tuple[str, str]:
    """A table and a sketch over it whose policy fires at ``delta_rows`` changed rows."""
    table, name = f"{ns}.facts", f"{ns}_watched"
    svc.tables.create(table, synthetic_table(2000, 20, seed=1), sort_by=["a"])
    svc.capture(
        f"SELECT a, SUM(b) AS s FROM {table} GROUP BY a", name=name, attributes={table: "a"}, fragments=10
    )
    svc.set_policy(name, Policy(delta_rows=delta_rows))
    return table, name


def test_refresh_by_cost_leaves_a_sketch_stale_where_the_report_is_cheaper_without_it(
    spark_svc: SketchService, sketch_conn: str, ns: str
) -> None:
    svc = spark_svc
    table, name = watched_sketch(svc, ns, 100)
    svc.tables.append(table, synthetic_table(40, 20, seed=3, key_start=10_000))
    refresh = RefreshSketchesOperator(
        task_id="refresh", names=[name], strategy="cost", sketch_conn_id=sketch_conn
    )
    # The operator's own service decides: a model where maintaining outweighs what it saves.
    lines = {"full": (9.0, 0.0), "use": (0.1, 0.0), "plain": (0.5, 0.0)}
    pinned_model(refresh._service(), name, incremental=(5.0, 0.0), **lines)
    (skipped,) = refresh.execute({})
    assert (skipped["strategy"], skipped["from_version"], skipped["to_version"]) == ("skip", 1, 1)
    assert svc.sketch(name).version == 1
    decision = svc.costs.last_decision(name)
    assert decision is not None and decision.action == "skip" and "skip" in decision.reason
    # Where maintaining pays, the same refresh brings the sketch up.
    pinned_model(refresh._service(), name, incremental=(0.01, 0.0), **lines)
    (maintained_run,) = refresh.execute({})
    assert (maintained_run["strategy"], maintained_run["to_version"]) == ("incremental", 2)
    assert svc.sketch(name).version == 2


def test_trigger_fires_once_the_policy_does(spark_svc: SketchService, sketch_conn: str, ns: str) -> None:
    svc = spark_svc
    table, name = watched_sketch(svc, ns, 100)
    trigger = SketchPolicyTrigger(names=[name], sketch_conn_id=sketch_conn, poke_interval=0.2)

    def load_later() -> None:
        time.sleep(1.0)
        svc.tables.append(table, synthetic_table(150, 20, seed=2, key_start=10_000))

    async def first_event() -> TriggerEvent:
        return await asyncio.wait_for(anext(trigger.run()), timeout=60)

    loader = threading.Thread(target=load_later)
    started = time.monotonic()
    loader.start()
    event = asyncio.run(first_event())
    loader.join()
    assert time.monotonic() - started >= 1.0  # it waited for the load
    assert event.payload["status"] == "fired"
    assert "delta rows 150 >= 100" in event.payload["sketches"][name]


def test_trigger_reports_an_unreachable_metastore_after_retrying(tmp_path: Path) -> None:
    define("sketch_gone", host="127.0.0.1", port=1, login="x", schema="x", extra={"warehouse": str(tmp_path)})
    trigger = SketchPolicyTrigger(
        names=["x"], sketch_conn_id="sketch_gone", poke_interval=0.01, max_failures=2
    )

    async def first_event() -> TriggerEvent:
        return await asyncio.wait_for(anext(trigger.run()), timeout=60)

    event = asyncio.run(first_event())
    assert event.payload["status"] == "error"
    assert "cannot reach the metastore" in event.payload["message"]


def test_sensor_defers_and_resumes_when_the_policy_fires(
    spark_svc: SketchService, sketch_conn: str, airflow_db: None, ns: str
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    from tests.airflow.conftest import TEST_DAGS

    svc = spark_svc
    table, name = watched_sketch(svc, ns, 50)
    dag = DagBag(dag_folder=str(TEST_DAGS)).dags["wait_for_policy"]

    def load_once_the_sensor_waits() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if any(not d.fired for d in svc.policies.decisions(name)):
                svc.tables.append(table, synthetic_table(60, 20, seed=3, key_start=9000))
                return
            time.sleep(0.1)

    loader = threading.Thread(target=load_once_the_sensor_waits)
    loader.start()
    run = dag.test(run_conf={"name": name})
    loader.join()
    assert run.state == "success"
    # The sensor checked before the load (not due: it deferred), and again in the trigger after it.
    fired, waited = svc.policies.decisions(name)
    assert not waited.fired and "up to date" in waited.reason
    assert fired.fired and "delta rows 60 >= 50" in fired.reason
