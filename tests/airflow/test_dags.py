"""The example DAGs: DagBag imports them; dag.test() runs each against the real metastore and
local Spark, and the sketch versions they publish give the same results as the plain queries."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from airflow.dag_processing.dagbag import DagBag
from airflow.utils.session import create_session
from pyspark.sql import SparkSession
from sketch_airflow.assets import sketch_asset, table_asset
from sketch_airflow.example import (
    DEMO_SKETCH,
    DEMO_TABLE,
    NETWORK_LINKS,
    REACHABLE_SQL,
    REACHABLE_VIEW,
    REPORT_PARAMETERS,
    REPORT_SQL,
)

from examples.airflow_demo import read_xcom
from sketch_core.datasets.deltas import DeltaGenerator
from sketch_core.service import SketchService
from tests.airflow.conftest import REPO
from tests.oracles.results import sorted_rows
from tests.service.test_maintain import fresh_fragments, maintained

EXAMPLES = (
    "intermittent_maintenance",
    "load_then_capture",
    "recursive_view",
    "refresh_before_report",
    "sketch_admin",
)


@pytest.fixture(scope="module")
def dagbag() -> DagBag:
    return DagBag(dag_folder=str(REPO / "dags"))


def test_every_example_dag_imports(dagbag: DagBag) -> None:
    assert dagbag.import_errors == {}
    assert sorted(dagbag.dags) == sorted(EXAMPLES)


def test_a_dag_with_an_unsupported_query_fails_to_parse_naming_it(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text(
        textwrap.dedent(
            """
            import pendulum
            from airflow.sdk import DAG
            from sketch_airflow.operators.sketch import CaptureSketchOperator

            with DAG("bad", start_date=pendulum.datetime(2026, 1, 1), schedule=None):
                CaptureSketchOperator(
                    task_id="capture",
                    sql="SELECT a, x FROM demo.facts LATERAL VIEW explode(array(b, c)) e AS x",
                )
            """
        )
    )
    bag = DagBag(dag_folder=str(tmp_path))
    assert "bad" not in bag.dags
    (error,) = bag.import_errors.values()
    assert "UnsupportedQueryError" in error and "LATERAL VIEW" in error


def test_an_unsupported_query_in_a_sql_file_fails_when_the_dag_is_parsed(tmp_path: Path) -> None:
    (tmp_path / "report.sql").write_text("SELECT a FROM demo.facts GROUP BY ROLLUP (a)\n")
    (tmp_path / "fine.sql").write_text("SELECT a, COUNT(*) AS n FROM demo.facts GROUP BY a\n")
    (tmp_path / "templated.sql").write_text("SELECT a FROM {{ params.table }} GROUP BY ROLLUP (a)\n")
    dag_file = """
        import pendulum
        from airflow.sdk import DAG
        from sketch_airflow.operators.sketch import SketchedQueryOperator

        with DAG("{dag_id}", start_date=pendulum.datetime(2026, 1, 1), schedule=None):
            SketchedQueryOperator(task_id="report", sql="{sql_file}")
        """
    for dag_id, sql_file in (("bad", "report.sql"), ("fine", "fine.sql"), ("late", "templated.sql")):
        text = textwrap.dedent(dag_file).format(dag_id=dag_id, sql_file=sql_file)
        (tmp_path / f"{dag_id}.py").write_text(text)
    bag = DagBag(dag_folder=str(tmp_path))
    # A file with Jinja is only known once rendered: it is checked when the task runs.
    assert sorted(bag.dags) == ["fine", "late"]
    (error,) = bag.import_errors.values()
    assert "UnsupportedQueryError" in error and "ROLLUP" in error
    assert bag.dags["fine"].get_task("report").sql.startswith("SELECT a, COUNT(*)")


def plain_and_sketched(svc: SketchService) -> tuple[list[Any], list[Any], Any]:
    plain = svc.query(REPORT_SQL, REPORT_PARAMETERS, use_sketches=False)
    sketched = svc.query(REPORT_SQL, REPORT_PARAMETERS, use_sketches="always")
    return sorted_rows(plain.table), sorted_rows(sketched.table), sketched


def test_example_dags_end_to_end(
    dagbag: DagBag,
    airflow_db: None,
    sketch_conn: str,
    spark_svc: SketchService,
    spark: SparkSession,
    tmp_path: Path,
) -> None:
    svc = spark_svc
    if svc.tables.exists(DEMO_TABLE):
        pytest.fail(f"{DEMO_TABLE} exists already: these tests own the demo namespace")
    # Airflow's database is the session's: another test's demo may have published before.
    earlier_sketch_events = len(asset_events(sketch_asset(DEMO_SKETCH).uri))
    earlier_table_events = len(asset_events(table_asset(DEMO_TABLE).uri))
    # Load, then capture: a version is published, and the report with it equals the plain one.
    run = dagbag.dags["load_then_capture"].test(run_conf={"initial_rows": 8000, "seed": 3})
    assert run.state == "success"
    captured = read_xcom(run, "capture")
    assert captured["name"] == DEMO_SKETCH and captured["version"] == 1
    plain, sketched, result = plain_and_sketched(svc)
    assert plain == sketched and result.sketch == (DEMO_SKETCH, 1)
    assert result.files_read < result.files_total

    # Loads below the policy's 2,000 rows: the maintenance DAG's sensor would wait. Above: it
    # fires at once and the sketches whose policy fires are maintained.
    generator = DeltaGenerator(svc.tables, DEMO_TABLE, ("key",), seed=4)
    generator.inserts(1500).apply(svc.tables)
    generator.deletes(700).apply(svc.tables)
    run = dagbag.dags["intermittent_maintenance"].test()
    assert run.state == "success"
    # Sketches other tests left in the shared metastore may fire too: this one is the demo's.
    (maintenance,) = [m for m in read_xcom(run, "maintain_due") if m["name"] == DEMO_SKETCH]
    assert maintenance["name"] == DEMO_SKETCH and maintenance["strategy"] == "incremental"
    assert maintenance["to_version"] == 2
    sequence = svc.sketch(DEMO_SKETCH).sequence
    assert sequence == svc.latest_sequence()
    assert maintained(svc, DEMO_SKETCH) == fresh_fragments(
        svc, REPORT_SQL, DEMO_SKETCH, sequence, REPORT_PARAMETERS
    )

    # A small load, then the report's refresh brings the sketch up to date before it runs.
    generator.mixed(300).apply(svc.tables)
    run = dagbag.dags["refresh_before_report"].test(run_conf={"output_dir": str(tmp_path)})
    assert run.state == "success"
    (refresh,) = read_xcom(run, "refresh_sketches")
    assert (refresh["strategy"], refresh["to_version"]) == ("incremental", 3)
    stats = read_xcom(run, "report")
    # Applied where it is expected to pay (on this small table the recorded runs may say it
    # does not), and the report says which way it went.
    if stats["sketch"] is not None:
        assert stats["sketch"] == [DEMO_SKETCH, 3] and stats["files_read"] < stats["files_total"]
    assert stats["sketch_reason"].startswith("use" if stats["sketch"] else "skip"), stats
    written = pq.read_table(stats["output_path"])
    plain, sketched, _ = plain_and_sketched(svc)
    assert sorted_rows(written) == plain == sketched

    # The admin DAG: maintain (nothing to do), drop, capture again.
    admin = dagbag.dags["sketch_admin"]
    assert admin.test(run_conf={"action": "maintain", "name": DEMO_SKETCH}).state == "success"
    assert svc.sketch(DEMO_SKETCH).version == 3
    assert admin.test(run_conf={"action": "drop", "name": DEMO_SKETCH}).state == "success"
    assert DEMO_SKETCH not in {d.name for d in svc.sketches.definitions()}
    conf = {
        "action": "capture",
        "name": DEMO_SKETCH,
        "sql": REPORT_SQL,
        "parameters": REPORT_PARAMETERS,
        "attributes": {DEMO_TABLE: "a"},
        "fragments": 24,
    }
    assert admin.test(run_conf=conf).state == "success"
    assert (svc.sketch(DEMO_SKETCH).version, svc.sketch(DEMO_SKETCH).partitions) == (
        1,
        {DEMO_TABLE: ("a", 24)},
    )
    # Capturing again under the name, after a load, recaptures on the sketch's own partition.
    DeltaGenerator(svc.tables, DEMO_TABLE, ("key",), seed=41).inserts(25).apply(svc.tables)
    recapture = {"action": "capture", "name": DEMO_SKETCH, "sql": REPORT_SQL, "parameters": REPORT_PARAMETERS}
    assert admin.test(run_conf=recapture).state == "success"
    recaptured = svc.sketch(DEMO_SKETCH)
    assert (recaptured.version, recaptured.partitions) == (2, {DEMO_TABLE: ("a", 24)})
    assert recaptured.sequence == svc.latest_sequence()

    # Every published version was an event of the sketch's asset, and the loads of the table's.
    events = asset_events(sketch_asset(DEMO_SKETCH).uri)
    events = events[earlier_sketch_events:]
    assert [e["version"] for e in events] == [1, 2, 3, 1, 2]
    assert all(e["sketch"] == DEMO_SKETCH and e["sequence"] >= 1 for e in events)
    loads = len(asset_events(table_asset(DEMO_TABLE).uri)) - earlier_table_events
    assert loads == 1  # one run of the load task
    # load_then_capture declares the sketch's asset: Airflow knows it, DAGs can be scheduled on it.
    assert asset_is_active(sketch_asset(DEMO_SKETCH).uri)

    # Rewriting the table's files (a Z-order here) changes no rows: the sketch stays current.
    recluster = {"action": "recluster", "table": DEMO_TABLE, "layout": "zorder(a, key)"}
    assert admin.test(run_conf=recluster).state == "success"
    assert svc.tables.commits(DEMO_TABLE)[-1].operation == "replace"
    carried = svc.sketch(DEMO_SKETCH)
    assert carried.sequence == svc.latest_sequence(), "carried to the rewrite at once"
    events = asset_events(sketch_asset(DEMO_SKETCH).uri)[earlier_sketch_events:]
    assert [e["version"] for e in events] == [1, 2, 3, 1, 2, carried.version], "an event like any version"
    (run,) = svc.maintain(DEMO_SKETCH)
    assert (run.strategy, run.delta_rows) == ("none", 0)
    assert (
        admin.test(run_conf={"action": "recluster", "table": DEMO_TABLE, "layout": "sort(a; x)"}).state
        == "failed"
    )


def test_the_recursive_view_dag_keeps_its_table_equal_to_the_query(
    dagbag: DagBag, airflow_db: None, sketch_conn: str, spark_svc: SketchService
) -> None:
    svc = spark_svc
    if svc.tables.exists(NETWORK_LINKS):
        pytest.fail(f"{NETWORK_LINKS} exists already: this test owns the network namespace")
    dag = dagbag.dags["recursive_view"]
    for seed in (1, 2, 3):
        run = dag.test(run_conf={"seed": seed, "inserts": 3, "expires": 2})
        assert run.state == "success"
        view = read_xcom(run, "reachable")
        assert view["strategy"] == ("capture" if seed == 1 else "incremental"), view
        assert sorted_rows(svc.tables.read_arrow(REACHABLE_VIEW)) == sorted_rows(
            svc.query(REACHABLE_SQL, use_sketches=False).table
        )
    assert len(asset_events(sketch_asset(REACHABLE_VIEW).uri)) == 3  # one version per run


def asset_is_active(uri: str) -> bool:
    from airflow.models.asset import AssetActive
    from sqlalchemy import select

    with create_session() as session:
        return session.scalar(select(AssetActive.uri).where(AssetActive.uri == uri)) is not None


def asset_events(uri: str) -> list[dict[str, Any]]:
    """The extras of the events of the asset with ``uri``, oldest first."""
    from airflow.models.asset import AssetEvent, AssetModel
    from sqlalchemy import select

    with create_session() as session:
        query = (
            select(AssetEvent.extra)
            .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
            .where(AssetModel.uri == uri)
            .order_by(AssetEvent.id)
        )
        return [dict(extra or {}) for extra in session.scalars(query)]
