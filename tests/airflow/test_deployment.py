"""The demo's story under a real Airflow: API server, scheduler, DAG processor and triggerer as
their own processes (LocalExecutor) on the private PostgreSQL, driven the ways users drive
it (``airflow dags trigger``, the REST API as the UI and the sketches page do, asset events,
the DAGs' own schedules), with no ``dag.test()``.

One test, in the order a new user's deployment lives through it: load and capture; loads until
the policy's deferred sensor fires in the triggerer and maintenance publishes; a recapture from
``sketch_admin`` started as the page's button starts it; the refresh and the report, scheduled
and triggered by hand at once (they coordinate: one publishes); each report equals the plain
query at the snapshot it read; after the report, its announcement no longer fires the policy;
``sketch_admin`` triggered without the sketch name it needs fails, saying what to pass.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from sketch_airflow.example import DEMO_REPORT, DEMO_SKETCH, DEMO_TABLE, REPORT_PARAMETERS, REPORT_SQL

from sketch_core.config import Settings
from sketch_core.datasets.deltas import DeltaGenerator
from sketch_core.service import SketchService
from tests.airflow.conftest import connection_json
from tests.airflow.deployment import Deployment, deployment_env, free_port
from tests.conftest import Databases
from tests.oracles.results import sorted_rows

EXAMPLE_DAGS = [
    "load_then_capture",
    "intermittent_maintenance",
    "refresh_before_report",
    "sketch_admin",
    "recursive_view",
]


@pytest.fixture(scope="module")
def own_settings(
    settings: Settings, databases: Databases, tmp_path_factory: pytest.TempPathFactory
) -> Settings:
    """A metastore and warehouse of the deployment's own (the demo's table names are fixed)."""
    # A metastore of its own in this process's one Spark session: a catalog name of its own.
    return replace(
        settings,
        metastore_url=databases.create(),
        warehouse=tmp_path_factory.mktemp("deployed"),
        catalog_name="deployed_lake",
    )


@pytest.fixture(scope="module")
def deployment(
    own_settings: Settings, databases: Databases, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    home = tmp_path_factory.mktemp("airflow-deployment")
    passwords = home / "passwords.json"
    passwords.write_text(json.dumps({"admin": "deployment-admin-password"}))
    port = free_port()
    env = deployment_env(
        home,
        databases.create("airflow_deployed"),
        port,
        passwords,
        {"sketch_default": connection_json(own_settings)},
    )
    deployed = Deployment(home, env, port, "deployment-admin-password")
    deployed.migrate()
    deployed.start()
    try:
        yield deployed
    finally:
        deployed.stop()


def _trigger_cli(deployment: Deployment, dag_id: str, conf: dict[str, Any] | None = None) -> str:
    args = ["dags", "trigger", dag_id, "--output", "json"]
    if conf is not None:
        args += ["--conf", json.dumps(conf)]
    out = deployment.cli(*args)
    listed = json.loads(next(line for line in reversed(out.splitlines()) if line.startswith("[")))
    return str(listed[0]["dag_run_id"])


def _trigger_api(deployment: Deployment, dag_id: str, conf: dict[str, Any] | None = None) -> str:
    """As the UI's Trigger button and the sketches page do: no logical date."""
    body: dict[str, Any] = {"logical_date": None}
    if conf is not None:
        body["conf"] = conf
    return str(deployment.api("POST", f"/dags/{dag_id}/dagRuns", body)["dag_run_id"])


def _load(svc: SketchService, inserts: int, deletes: int, seed: int) -> None:
    """A load by some other job, outside Airflow: the policy sees it in the commit log."""
    generator = DeltaGenerator(svc.tables, DEMO_TABLE, ("key",), seed=seed)
    generator.inserts(inserts).apply(svc.tables)
    if deletes:
        generator.deletes(deletes).apply(svc.tables)


def _wait(what: str, check: Any, deployment: Deployment, timeout: float = 240) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{what} did not happen within {timeout:.0f} s:\n{deployment.service_log('scheduler')}"
            )
        time.sleep(2)


def _error_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if '"level": "error"' in line]


def test_the_demo_story_under_a_real_scheduler_and_triggerer(
    deployment: Deployment, own_settings: Settings, spark: SparkSession, tmp_path: Path
) -> None:
    listed = deployment.wait_for_dags(EXAMPLE_DAGS)
    # The page's buttons trigger sketch_admin: it is not paused on a fresh deployment.
    assert listed["sketch_admin"]["is_paused"] is False
    assert all(listed[d]["is_paused"] for d in EXAMPLE_DAGS if d != "sketch_admin")
    svc = SketchService.from_settings(own_settings, spark=spark)
    written: list[Path] = []
    try:
        # 1. Load and capture, triggered from the CLI with conf.
        for dag_id in ("load_then_capture", "intermittent_maintenance"):
            deployment.cli("dags", "unpause", dag_id)
        first = _trigger_cli(deployment, "load_then_capture", {"initial_rows": 6000, "seed": 3})
        deployment.wait_for_run("load_then_capture", first)
        assert deployment.xcom("load_then_capture", first, "capture")["version"] == 1
        capture_log = deployment.task_log("load_then_capture", first, "capture")
        assert "captured demo_top_groups version 1" in capture_log
        assert _error_lines(capture_log) == [], "Spark's start-up chatter must not be logged as errors"
        assert "Using incubator modules" in capture_log  # it is there, at its own level

        # 2. Loads by another job until the policy fires: the sensor waits in the triggerer.
        _load(svc, 1000, 400, seed=4)
        _load(svc, 1000, 400, seed=5)
        _wait("maintenance by the policy", lambda: svc.sketch(DEMO_SKETCH).version >= 2, deployment)
        done = _wait(
            "the intermittent_maintenance run to finish",
            lambda: [r for r in deployment.runs("intermittent_maintenance") if r["state"] == "success"],
            deployment,
        )
        maintained = deployment.xcom("intermittent_maintenance", done[0]["dag_run_id"], "maintain_due")
        assert [(m["name"], m["strategy"], m["to_version"]) for m in maintained] == [
            (DEMO_SKETCH, "incremental", 2)
        ]
        sensor_log = deployment.task_log("intermittent_maintenance", done[0]["dag_run_id"], "wait_for_policy")
        assert "Pausing task as DEFERRED" in sensor_log and "policies fired" in sensor_log, sensor_log[-3000:]
        # The load task's asset event started a run of its own (after the one already waiting).
        runs = _wait(
            "an asset-triggered maintenance run",
            lambda: [
                r for r in deployment.runs("intermittent_maintenance") if r["run_type"] == "asset_triggered"
            ],
            deployment,
        )
        assert runs

        # 3. The page, served by the API server's plugin: behind the login, its buttons live.
        signed_out = httpx.get(f"{deployment.url}/sketches/", headers={"Accept": "text/html"})
        assert signed_out.status_code == 303 and "/auth/login" in signed_out.headers["location"]
        page = httpx.get(
            f"{deployment.url}/sketches/", headers={"Authorization": f"Bearer {deployment.token()}"}
        )
        assert page.status_code == 200 and f'data-sketch="{DEMO_SKETCH}"' in page.text
        assert "admin-paused" not in page.text and "admin-missing" not in page.text
        # A recapture from sketch_admin, started exactly as the page's button starts it.
        _load(svc, 60, 0, seed=6)
        admin = _trigger_api(
            deployment, "sketch_admin", {"action": "maintain", "name": DEMO_SKETCH, "strategy": "full"}
        )
        deployment.wait_for_run("sketch_admin", admin)
        assert deployment.xcom("sketch_admin", admin, "administer")["version"] == 3

        # 4. The refresh and the report: scheduled (unpausing runs today's) and from the REST API
        # with conf, at once; the two refreshes coordinate, one publishes.
        _load(svc, 80, 20, seed=7)
        deployment.cli("dags", "unpause", "refresh_before_report")
        by_api = _trigger_api(deployment, "refresh_before_report", {"output_dir": str(tmp_path / "reports")})
        scheduled = _wait(
            "the scheduled refresh_before_report run",
            lambda: [r for r in deployment.runs("refresh_before_report") if r["run_type"] == "scheduled"],
            deployment,
        )[0]["dag_run_id"]
        reports = {}
        for run_id in (by_api, scheduled):
            deployment.wait_for_run("refresh_before_report", run_id)
            reports[run_id] = deployment.xcom("refresh_before_report", run_id, "report")
        assert svc.sketches.versions(DEMO_SKETCH) == [1, 2, 3, 4]
        refreshed = [
            (r["strategy"], r["to_version"])
            for run_id in reports
            for r in deployment.xcom("refresh_before_report", run_id, "refresh_sketches")
        ]
        # One run did the work: a refresh, or the policy's maintenance (the refresh's
        # announcement fires it too); every other found version 4 published.
        assert sorted(refreshed) in ([("incremental", 4), ("none", 4)], [("none", 4)] * 2), refreshed
        assert [r["strategy"] for r in svc.sketches.runs(DEMO_SKETCH) if r["to_version"] == 4] == [
            "incremental"
        ]
        assert Path(reports[by_api]["output_path"]).parent == tmp_path / "reports"
        for stats in reports.values():
            path = Path(stats["output_path"])
            written.append(path)
            plain = svc.query(REPORT_SQL, REPORT_PARAMETERS, snapshot=stats["sequence"], use_sketches=False)
            assert sorted_rows(pq.read_table(path)) == sorted_rows(plain.table)
            assert stats["sketch"] is None or stats["files_read"] <= stats["files_total"]

        # 5. The report has run: a small load afterwards does not fire the policy for it.
        _load(svc, 30, 0, seed=8)
        (check,) = svc.check_policies([DEMO_SKETCH], record=False)
        assert not check.fire, check.decision.reason
        assert f"{DEMO_REPORT!r} not announced" in check.decision.reason

        # 6. Triggered from the CLI without conf, sketch_admin (which needs a sketch name) fails
        # at once, saying what to pass, and publishes nothing.
        unnamed = _trigger_cli(deployment, "sketch_admin")
        with pytest.raises(AssertionError, match="maintain needs a sketch name"):
            deployment.wait_for_run("sketch_admin", unnamed)
        assert svc.sketches.versions(DEMO_SKETCH) == [1, 2, 3, 4]
    finally:
        svc.close()
        for path in written:
            shutil.rmtree(path, ignore_errors=True)  # Spark writes a folder of part files
