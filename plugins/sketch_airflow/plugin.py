"""The Airflow plugin ``sketch``: the sketches page, a FastAPI app mounted in Airflow's API
server behind its authentication, with an entry in Airflow's navigation."""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from sketch_airflow.ui.app import URL_PREFIX, create_app


class SketchPlugin(AirflowPlugin):
    name = "sketch"
    fastapi_apps: list[dict[str, Any]] = [  # noqa: RUF012 (Airflow reads these class attributes)
        {"app": create_app(), "url_prefix": URL_PREFIX, "name": "Provenance sketches"}
    ]
    external_views: list[dict[str, Any]] = [  # noqa: RUF012
        {
            "name": "Sketches",
            "href": f"{URL_PREFIX}/",
            "destination": "nav",
            "category": "browse",
            "url_route": "sketches",
        }
    ]
