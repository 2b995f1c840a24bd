"""The long run at a size for CI: sketches over two tables kept up by the real
intermittent-maintenance DAG across commits, every version checked against a fresh capture
(the full size, 50 sketches over 5 tables and 200 commits, is `make long-run`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from airflow.dag_processing.dagbag import DagBag
from pyspark.sql import SparkSession

from benchmarks.long_run import run_long
from sketch_core.config import Settings
from sketch_core.service import SketchService
from tests.airflow.conftest import connection_json
from tests.conftest import Databases

REPO = Path(__file__).resolve().parents[2]


def test_sketches_kept_up_by_the_dag_do_not_drift(
    airflow_db: None,
    settings: Settings,
    databases: Databases,
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    ns: str,
) -> None:
    # The DAG maintains every due sketch of its metastore: one of its own, or it would maintain
    # (and fail on) whatever the other tests left in the shared one. Its own catalog name too,
    # in this process's one Spark session.
    own = replace(
        settings,
        metastore_url=databases.create(),
        warehouse=tmp_path / "warehouse",
        catalog_name="long_run_lake",
    )
    monkeypatch.setenv("AIRFLOW_CONN_SKETCH_DEFAULT", connection_json(own))
    svc = SketchService.from_settings(own, spark=spark)
    dag = DagBag(dag_folder=str(REPO / "dags")).dags["intermittent_maintenance"]
    states: list[str] = []

    def maintain() -> None:
        states.append(str(dag.test().state))

    try:
        figures = run_long(svc, maintain, tables=2, sketches=6, commits=12, check_every=4, namespace=ns)
    finally:
        svc.close()
    assert states == ["success"] * 3
    assert (figures.commits, figures.dag_runs) == (12, 3)
    assert figures.drifted == [] and figures.wrong_reports == []
    assert figures.versions_checked == figures.versions_published > 6, "every version, captures too"
    assert figures.maintenance.get("incremental", 0) > 0
