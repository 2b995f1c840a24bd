"""The long run at a size for CI: sketches over two tables kept up by the real
intermittent-maintenance DAG across commits, every version checked against a fresh capture
(the full size, 50 sketches over 5 tables and 200 commits, is `make long-run`)."""

from __future__ import annotations

from pathlib import Path

from airflow.dag_processing.dagbag import DagBag

from benchmarks.long_run import run_long
from sketch_core.service import SketchService

REPO = Path(__file__).resolve().parents[2]


def test_sketches_kept_up_by_the_dag_do_not_drift(
    airflow_db: None, sketch_conn: str, spark_svc: SketchService, ns: str
) -> None:
    dag = DagBag(dag_folder=str(REPO / "dags")).dags["intermittent_maintenance"]
    states: list[str] = []

    def maintain() -> None:
        states.append(str(dag.test().state))

    figures = run_long(spark_svc, maintain, tables=2, sketches=6, commits=12, check_every=4, namespace=ns)
    assert states == ["success"] * 3
    assert (figures.commits, figures.dag_runs) == (12, 3)
    assert figures.drifted == [] and figures.wrong_reports == []
    assert figures.versions_checked == figures.versions_published > 6, "every version, captures too"
    assert figures.maintenance.get("incremental", 0) > 0
