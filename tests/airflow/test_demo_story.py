"""`make demo`'s story (examples.airflow_demo.run_story) on small data, through the example DAGs,
against a metastore and warehouse of its own."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from airflow.dag_processing.dagbag import DagBag
from pyspark.sql import SparkSession
from rich.console import Console

from examples.airflow_demo import read_xcom, run_story
from sketch_core.config import Settings
from sketch_core.service import SketchService
from tests.airflow.conftest import REPO, connection_json
from tests.conftest import Databases


def test_the_demo_story_publishes_versions_and_agrees_with_the_plain_report(
    settings: Settings,
    databases: Databases,
    spark: SparkSession,
    airflow_db: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A metastore of its own in this process's one Spark session: a catalog name of its own.
    own = replace(
        settings, metastore_url=databases.create(), warehouse=tmp_path / "warehouse", catalog_name="demo_lake"
    )
    monkeypatch.setenv("AIRFLOW_CONN_SKETCH_DEFAULT", connection_json(own))
    svc = SketchService.from_settings(own, spark=spark)
    console = Console(record=True, width=200)
    try:
        outcome = run_story(
            svc,
            DagBag(dag_folder=str(REPO / "dags")).dags,
            read_xcom,
            initial_rows=6000,
            loads=2,
            output_dir=tmp_path / "reports",
            console=console,
        )
    finally:
        svc.close()
    output = console.export_text()
    assert outcome.results_equal, output
    # Capture; the second load makes the policy fire (2,800 rows >= 2,000); the refresh.
    assert outcome.versions == [1, 2, 3], output
    assert [m["strategy"] for m in outcome.maintenance] == ["incremental", "incremental"], output
    assert outcome.files[0] < outcome.files[1]
    assert outcome.default_use.startswith(("use", "skip")), output
    assert outcome.full_seconds > 0 and outcome.incremental_seconds > 0
    assert "load 1 (Spark INSERT and DELETE): 1,000 rows in, 400 of them cancelled; policy waits" in output
    assert "load 2 (Spark INSERT and DELETE): 1,000 rows in, 400 of them cancelled; policy fires" in output
    assert "Summary" in output and Path(outcome.report_path or "").exists()
