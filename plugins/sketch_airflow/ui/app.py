"""The sketches page as a FastAPI app, mounted by the plugin in Airflow's API server at
``/sketches`` and shown in Airflow's navigation. Every route needs an Airflow user (the UI's
session cookie, or a bearer token), so the page is behind Airflow's own authentication: a
browser without one is sent to Airflow's login page (and back here after it), API clients get
the 401."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException

from sketch_airflow.hooks.sketch import SketchMetastoreHook
from sketch_airflow.ui.chart import Point
from sketch_airflow.ui.page import ADMIN_DAG, AdminDag, render_page
from sketch_core.config import Settings
from sketch_core.service import SketchService

URL_PREFIX = "/sketches"


def _airflow_user() -> Callable[..., Any]:
    # Imported lazily: Airflow's API security module needs the API server's configuration.
    from airflow.api_fastapi.core_api.security import get_user

    return get_user


def admin_dag_state() -> AdminDag:
    """Whether the DAG the page's buttons trigger is deployed, and paused (read from Airflow's
    database: the page is served by the API server, which has it)."""
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session

    with create_session() as session:
        model = session.get(DagModel, ADMIN_DAG)
        if model is None or model.is_stale:
            return "missing"
        return "paused" if model.is_paused else "active"


def _login_url(request: Request) -> str:
    from airflow.api_fastapi.app import get_auth_manager

    return str(get_auth_manager().get_url_login(next_url=str(request.url)))


def maintenance_points(svc: SketchService, names: list[str]) -> list[Point]:
    return [
        Point(name, run["strategy"], int(run["delta_rows"]), float(run["seconds"]))
        for name in names
        for run in svc.sketches.runs(name)
        # Captures have no delta: the chart is about what maintenance costs as deltas grow.
        if run["status"] == "succeeded" and run["seconds"] is not None and run["strategy"] != "capture"
    ]


class _ConnectionService:
    """The service over the ``sketch_default`` connection as it is now: the connection is
    read on every request (a metadata-database lookup), and the service (with its metastore
    pool) is rebuilt only when the settings it yields have changed, so an edited connection
    takes effect without restarting the API server."""

    def __init__(self) -> None:
        self._settings: Settings | None = None
        self._service: SketchService | None = None

    def __call__(self) -> SketchService:
        settings = SketchMetastoreHook().get_settings()
        if self._service is None or settings != self._settings:
            if self._service is not None:
                self._service.close()
            self._service = SketchService.from_settings(settings)
            self._settings = settings
        return self._service


def create_app(
    service: Callable[[], SketchService] | None = None, admin_dag: Callable[[], AdminDag] | None = None
) -> FastAPI:
    """``service``: where the page reads from (default: the ``sketch_default`` connection);
    ``admin_dag``: the state of ``sketch_admin`` (default: from Airflow's database)."""
    app = FastAPI(title="Provenance sketches", docs_url=None, redoc_url=None, openapi_url=None)
    current_service = service or _ConnectionService()
    admin_state = admin_dag or admin_dag_state

    user_dependency = Depends(_airflow_user())

    @app.exception_handler(HTTPException)
    async def login_first(request: Request, exc: HTTPException) -> Response:
        """A browser that is not signed in goes to the login page, not to a JSON 401."""
        wants_page = request.url.path.rstrip("/") == request.scope.get("root_path", "").rstrip("/")
        if exc.status_code in (401, 403) and wants_page and "text/html" in request.headers.get("accept", ""):
            return RedirectResponse(_login_url(request), status_code=303)
        return await http_exception_handler(request, exc)

    @app.get("/", response_class=HTMLResponse)
    def page(user: Any = user_dependency) -> str:
        svc = current_service()
        statuses = svc.status()
        points = maintenance_points(svc, [s.name for s in statuses])
        return render_page(statuses, points, user.get_name(), admin_state())

    @app.get("/api/sketches")
    def sketches(user: Any = user_dependency) -> list[dict[str, Any]]:
        statuses = current_service().status()
        return [{**asdict(s), "fresh": s.fresh} for s in statuses]

    return app
