"""What can be checked of docker/ without a Docker engine: the compose file is valid YAML with
the stack's services, every service shares the warehouse, the image's build inputs exist, and
the connections it defines are accepted by the hook."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

DOCKER = Path(__file__).resolve().parents[2] / "docker"
COMPOSE = yaml.safe_load((DOCKER / "compose.yaml").read_text())


def test_compose_defines_the_stack() -> None:
    services = COMPOSE["services"]
    expected = {
        "postgres",
        "airflow-init",
        "airflow-apiserver",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-triggerer",
        "spark-master",
        "spark-worker",
    }
    assert expected <= set(services)
    for name, service in services.items():
        if name != "postgres":
            assert "warehouse:/data/warehouse" in service.get("volumes", []), name
    assert services["spark-worker"]["command"][0].endswith("spark://spark-master:7077 --cores 2 --memory 2g")


def test_dockerfile_copies_what_exists() -> None:
    dockerfile = (DOCKER / "Dockerfile").read_text()
    sources = re.findall(r"^COPY --chown=\S+ (.+) \S+$", dockerfile, flags=re.M)
    for source in " ".join(sources).split():
        assert (DOCKER.parent / source).exists(), source
    assert "apache/airflow:3.3" in dockerfile  # the Airflow the project is tested with


def test_the_compose_connections_are_accepted_by_the_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("airflow")
    from sketch_airflow.hooks.sketch import SketchMetastoreHook

    env = COMPOSE["x-airflow"]["environment"]
    monkeypatch.setenv("AIRFLOW_CONN_SKETCH_COMPOSE", env["AIRFLOW_CONN_SKETCH_DEFAULT"])
    json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])
    hook = SketchMetastoreHook("sketch_compose")
    settings = hook.get_settings()
    assert settings.metastore_url == "postgresql+psycopg://airflow:airflow@postgres:5432/sketches"
    assert str(settings.warehouse) == "/data/warehouse"
    assert hook.spark_submit_conn_id() == "spark_default"
