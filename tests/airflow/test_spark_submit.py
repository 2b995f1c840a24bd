"""The cluster path: CaptureSketchOperator spark-submits ``python -m sketch_core.jobs`` through
the Spark provider's hook to a standalone cluster (a Master and a Worker on loopback, started
from the PySpark installation), and the sketch published there equals an in-process capture at
the same snapshot on the same partition. Maintenance submits only the runs that need Spark."""

from __future__ import annotations

import json

import pytest
from sketch_airflow.operators.sketch import (
    CaptureSketchOperator,
    MaintainSketchesOperator,
    RefreshSketchesOperator,
)

from sketch_core.datasets import synthetic_table
from sketch_core.service import SketchService
from tests.airflow.conftest import Cluster, connection_json
from tests.service.test_maintain import fresh_fragments, maintained

HAVING = "SELECT a, SUM(b) AS s FROM {t} WHERE c > :low GROUP BY a HAVING SUM(b) > 100"


def test_capture_through_spark_submit_on_a_cluster_equals_the_in_process_capture(
    spark_svc: SketchService, standalone_cluster: Cluster, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = spark_svc
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(5000, 50, seed=7), sort_by=["a"])
    sql, params = HAVING.format(t=table), {"low": -20}
    local = svc.capture(sql, name=f"{ns}_local", params=params, attributes={table: "a"}, fragments=25)

    spark_conn = {"conn_type": "spark", "host": "spark://127.0.0.1", "port": standalone_cluster.port}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER_TEST", json.dumps(spark_conn))
    sketch_conn = json.loads(connection_json(svc.settings))
    sketch_conn["extra"]["spark_submit_conn_id"] = "spark_cluster_test"
    sketch_conn["extra"]["spark_conf"]["spark.driver.host"] = "127.0.0.1"
    sketch_conn["extra"]["spark_conf"]["spark.executor.memory"] = "1g"
    monkeypatch.setenv("AIRFLOW_CONN_SKETCH_ON_CLUSTER", json.dumps(sketch_conn))
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    operator = CaptureSketchOperator(
        task_id="capture",
        sql=sql,
        name=f"{ns}_cluster",
        parameters=params,
        attributes={table: "a"},
        fragments=25,
        sketch_conn_id="sketch_on_cluster",
    )
    result = operator.execute({})

    assert f"sketch-{ns}_cluster" in standalone_cluster.applications()  # it ran on the cluster
    cluster = svc.sketch(f"{ns}_cluster")
    assert result["version"] == cluster.version == 1
    assert cluster.sequence == local.sequence
    assert cluster.partitions == local.partitions
    assert cluster.fragments == local.fragments
    assert 0 < len(cluster.fragments[table]) < 25

    # A small delta is maintained in the worker's process, without Spark: nothing is submitted.
    name = f"{ns}_cluster"
    svc.tables.append(table, synthetic_table(30, 50, seed=8, key_start=90_000))
    maintain = MaintainSketchesOperator(
        task_id="maintain", names=[name], policy_driven=False, sketch_conn_id="sketch_on_cluster"
    )
    (small,) = maintain.execute({})
    assert (small["strategy"], small["where"], small["to_version"]) == ("incremental", "in-process", 2)
    assert standalone_cluster.applications().count(f"sketch-{name}") == 1
    # A recapture needs Spark: it is submitted to the cluster, and equals a fresh capture.
    svc.tables.delete(table, "a < 5")
    refresh = RefreshSketchesOperator(
        task_id="refresh", names=[name], strategy="full", sketch_conn_id="sketch_on_cluster"
    )
    (full,) = refresh.execute({})
    assert (full["strategy"], full["where"], full["from_version"], full["to_version"]) == (
        "full",
        "spark-submit",
        2,
        3,
    )
    assert standalone_cluster.applications().count(f"sketch-{name}") == 2
    recaptured = svc.sketch(name)
    assert recaptured.sequence == svc.latest_sequence()
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, recaptured.sequence, params)
    assert 0 < len(recaptured.fragments[table]) < 25
