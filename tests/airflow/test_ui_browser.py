"""The sketches page in headless Chromium (Debian's package), served by Airflow's own API app:
it lists the sketches with the metastore's figures, and its button starts a sketch_admin run
through Airflow's REST API. A screenshot is kept in test-artifacts/."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sketch_airflow.example import DEMO_SKETCH

from sketch_core.datasets import synthetic_table
from sketch_core.service import SketchService
from tests.airflow.conftest import PASSWORDS, REPO

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = REPO / "test-artifacts"
# Flags for a closed network and no display (see the machine notes): no background traffic.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def airflow_server(airflow_db: None, sketch_conn: str) -> Iterator[str]:
    """Airflow's API app (with the plugin mounted) on a loopback port, the example DAGs synced."""
    import uvicorn
    from airflow.api_fastapi.app import create_app, purge_cached_app
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db

    manager = DagBundlesManager()
    manager.sync_bundles_to_db()
    for bundle in manager.get_all_dag_bundles():
        bundle.initialize()
        sync_bag_to_db(
            BundleDagBag(dag_folder=bundle.path, bundle_path=bundle.path, bundle_name=bundle.name),
            bundle.name,
            bundle.version,
        )
    purge_cached_app()
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline, "the API server did not start"
        time.sleep(0.1)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=30)
    purge_cached_app()


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed")
def test_page_in_chromium_lists_sketches_and_triggers_the_admin_dag(
    airflow_server: str, spark_svc: SketchService, ns: str
) -> None:
    from airflow.models.dagrun import DagRun
    from playwright.sync_api import sync_playwright

    svc = spark_svc
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(4000, 40, seed=1), sort_by=["a"])
    name = f"{ns}_browsed"
    svc.capture(
        f"SELECT a, COUNT(*) AS n FROM {table} WHERE b > 0 GROUP BY a",
        name=name,
        attributes={table: "a"},
        fragments=40,
    )
    svc.tables.append(table, synthetic_table(25, 40, seed=2, key_start=90_000))
    status = svc.status(name)[0]
    # And the demo's sketch, as its DAG captures it (appending to demo.facts if it exists; a
    # sketch of that name captured otherwise, by sketch_admin in test_dags, is dropped first).
    from airflow.dag_processing.dagbag import DagBag

    if DEMO_SKETCH in {d.name for d in svc.sketches.definitions()}:
        svc.drop_sketch(DEMO_SKETCH)

    demo_run = (
        DagBag(dag_folder=str(REPO / "dags"))
        .dags["load_then_capture"]
        .test(run_conf={"initial_rows": 6000, "inserts": 300, "deletes": 100, "seed": 9})
    )
    assert demo_run.state == "success"
    demo = svc.status(DEMO_SKETCH)[0]
    login = httpx.post(
        f"{airflow_server}/auth/token", json={"username": "admin", "password": PASSWORDS["admin"]}
    )
    assert login.status_code == 201, login.text
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            context.add_cookies(
                [{"name": "_token", "value": login.json()["access_token"], "url": airflow_server}]
            )
            page = context.new_page()
            page.goto(f"{airflow_server}/sketches/")
            demo_row = page.locator(f'tr[data-sketch="{DEMO_SKETCH}"]')
            assert demo_row.locator("td.version").inner_text() == str(demo.version)
            assert demo_row.locator("td.behind").inner_text() == "0"
            assert f"{demo.tables[0].fragments}/{demo.tables[0].fragment_count}" in demo_row.inner_text()
            assert demo.policy in demo_row.inner_text()  # the demo's policy, attached at capture
            row = page.locator(f'tr[data-sketch="{name}"]')
            assert row.locator("td.version").inner_text() == "1"
            assert row.locator("td.behind").inner_text() == "1"
            assert row.locator("td.pending").inner_text() == "25"
            assert f"{status.tables[0].fragments}/40" in row.inner_text()
            page.screenshot(path=str(ARTIFACTS / "sketches_page.png"), full_page=True)
            # sketch_admin is not paused on creation; paused by someone, the page says so and
            # its button unpauses it.
            assert page.locator("#admin-paused").count() == 0
            token = login.json()["access_token"]
            paused = httpx.patch(
                f"{airflow_server}/api/v2/dags/sketch_admin",
                json={"is_paused": True},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert paused.status_code == 200, paused.text
            page.reload()
            assert "which is paused" in page.locator("#admin-paused").inner_text()
            with page.expect_navigation(timeout=30_000):  # unpaused, the page reloads
                page.locator("button#unpause").click()
            assert page.locator("#admin-paused").count() == 0
            dag = httpx.get(
                f"{airflow_server}/api/v2/dags/sketch_admin", headers={"Authorization": f"Bearer {token}"}
            )
            assert dag.json()["is_paused"] is False
            row = page.locator(f'tr[data-sketch="{name}"]')
            row.locator('button[data-action="maintain"][data-strategy="auto"]').click()
            message = page.locator("#message[data-status]")
            message.wait_for(timeout=30_000)
            assert message.get_attribute("data-status") == "ok", message.inner_text()
            run_id = message.inner_text().split()[1]
            # Signed out, the browser is sent to the login page, to come back afterwards.
            anonymous = browser.new_context().new_page()
            anonymous.goto(f"{airflow_server}/sketches/")
            assert "/auth/login" in anonymous.url and "next=" in anonymous.url, anonymous.url
        finally:
            browser.close()
    runs = DagRun.find(dag_id="sketch_admin", run_id=run_id)
    assert len(runs) == 1 and runs[0].conf == {"action": "maintain", "name": name, "strategy": "auto"}
