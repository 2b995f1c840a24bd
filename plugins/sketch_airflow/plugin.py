"""The Airflow plugin ``sketch``: the sketches page (a FastAPI app behind Airflow's auth, with
an entry in the navigation) is added here."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin


class SketchPlugin(AirflowPlugin):
    name = "sketch"
