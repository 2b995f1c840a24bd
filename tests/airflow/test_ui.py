"""The sketches page, mounted by the plugin in Airflow's own API app: behind Airflow's auth,
listing the sketches with the metastore's figures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient
from sketch_airflow.ui.app import _ConnectionService
from sketch_airflow.ui.chart import Point, scatter
from sketch_airflow.ui.page import render_page

from sketch_core.config import Settings
from sketch_core.datasets import synthetic_table
from sketch_core.policy import Policy
from sketch_core.service import SketchService
from tests.airflow.conftest import PASSWORDS, connection_json


@pytest.fixture(scope="module")
def client(airflow_db: None, sketch_conn: str) -> Iterator[TestClient]:
    from airflow.api_fastapi.app import create_app, purge_cached_app

    purge_cached_app()
    with TestClient(create_app()) as test_client:
        yield test_client
    purge_cached_app()


def token(client: TestClient, user: str) -> str:
    response = client.post("/auth/token", json={"username": user, "password": PASSWORDS[user]})
    assert response.status_code == 201, response.text
    return str(response.json()["access_token"])


def test_the_page_needs_an_airflow_user(client: TestClient) -> None:
    assert client.get("/sketches/").status_code == 401
    assert client.get("/sketches/api/sketches").status_code == 401
    forged = client.get("/sketches/", headers={"Authorization": "Bearer not-a-token"})
    assert forged.status_code in (401, 403)


def test_a_logged_out_browser_is_sent_to_the_login_page_and_back(client: TestClient) -> None:
    browser = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    page = client.get("/sketches/", headers=browser, follow_redirects=False)
    assert page.status_code == 303, page.text
    login = page.headers["location"]
    assert login.startswith("/auth/login") and "next=" in login and "%2Fsketches%2F" in login
    # The JSON API answers a browser's fetch without a session with the status, as before.
    assert client.get("/sketches/api/sketches", headers=browser, follow_redirects=False).status_code == 401


def test_the_page_says_when_the_admin_dag_cannot_run_its_buttons() -> None:
    paused = render_page([], [], "admin", "paused")
    assert (
        'id="admin-paused"' in paused and 'id="unpause"' in paused and 'href="/dags/sketch_admin"' in paused
    )
    missing = render_page([], [], "admin", "missing")
    assert 'id="admin-missing"' in missing and "dags/sketch_admin.py" in missing
    active = render_page([], [], "admin", "active")
    assert "notice" not in active.split("<style>")[1].split("</style>")[1]


def test_the_page_lists_sketches_with_their_figures(
    client: TestClient, spark_svc: SketchService, ns: str
) -> None:
    svc = spark_svc
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(3000, 30, seed=1), sort_by=["a"])
    name = f"{ns}_<b>shown</b>"  # markup in a name is shown, not run
    svc.capture(
        f"SELECT a, SUM(b) AS s FROM {table} GROUP BY a HAVING SUM(b) > 0",
        name=name,
        attributes={table: "a"},
        fragments=30,
    )
    svc.set_policy(name, Policy(delta_rows=10_000))
    svc.tables.append(table, synthetic_table(40, 30, seed=2, key_start=50_000))
    svc.check_policies([name])
    headers = {"Authorization": f"Bearer {token(client, 'viewer')}"}
    listed = {s["name"]: s for s in client.get("/sketches/api/sketches", headers=headers).json()}
    status = svc.status(name)[0]
    shown = listed[name]
    assert (shown["version"], shown["commits_behind"], shown["delta_rows_pending"]) == (1, 1, 40)
    assert shown["tables"][0]["fragments"] == status.tables[0].fragments < 30
    assert shown["policy"] == "delta rows >= 10,000" and shown["last_decision"]["fired"] is False
    html = client.get("/sketches/", headers=headers).text
    assert "&lt;b&gt;shown&lt;/b&gt;" in html and "<b>shown</b>" not in html
    assert "delta rows 40 &lt; 10,000" in html
    assert f"{status.tables[0].fragments:,}/30" in html
    assert "Signed in as viewer" in html
    # The chart shows maintenance runs (not captures, which have no delta).
    (run,) = svc.maintain(name, "incremental")
    html = client.get("/sketches/", headers=headers).text
    escaped = name.replace("<", "&lt;").replace(">", "&gt;")
    assert html.count('class="run ') >= 1 and 'class="run capture' not in html
    assert f"{escaped}: incremental, {run.delta_rows:,} rows" in html
    # A sketch blocked by a quarantined batch says so, with the reason (escaped).
    blocked = render_page([replace(status, blocked="batch t@7 failed validation: a <NULL>")], [], "viewer")
    assert '<div class="blocked"><b>blocked</b>: batch t@7 failed validation: a &lt;NULL&gt;</div>' in blocked


def test_the_chart_places_runs_by_delta_size_and_time() -> None:
    svg = scatter([Point("s", "incremental", 100, 0.05), Point("s", "full", 10_000, 3.0)])
    circles = [part for part in svg.split("<circle") if 'class="run' in part]
    assert len(circles) == 2
    xs = [float(c.split('cx="')[1].split('"')[0]) for c in circles]
    ys = [float(c.split('cy="')[1].split('"')[0]) for c in circles]
    assert xs[0] < xs[1] and ys[0] > ys[1]  # more rows: further right; more seconds: higher up
    assert "No maintenance runs" in scatter([])


def test_the_page_follows_an_edited_connection(
    sketch_conn: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API server lives for weeks: an edited connection must not need a restart."""
    current = _ConnectionService()
    first = current()
    assert current() is first  # unchanged connection: one service, one metastore pool
    edited = json.loads(connection_json(settings))
    edited["extra"]["settings"]["fragments"] = first.settings.fragments + 7
    monkeypatch.setenv("AIRFLOW_CONN_SKETCH_DEFAULT", json.dumps(edited))
    second = current()
    assert second is not first and second.settings.fragments == first.settings.fragments + 7
    assert current() is second
    second.close()
