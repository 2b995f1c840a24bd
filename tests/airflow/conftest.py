"""Airflow for the plugin's tests: a home of its own and a metadata database on the private
PostgreSQL server (or SKETCH_TEST_METASTORE_URL's server), configured before Airflow is
imported, since Airflow reads its configuration once, at import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from sketch_core.config import Settings
from sketch_core.localstack.postgres import PrivatePostgres
from tests.conftest import Databases

REPO = Path(__file__).resolve().parents[2]
TEST_DAGS = Path(__file__).resolve().parent / "dags"


def _dags_folder() -> Path:
    """The example DAGs and the test DAGs under one folder (dag.test() runs only DAGs that
    the configured folder holds)."""
    folder = Path(tempfile.mkdtemp(prefix="airflow-dags-"))
    (folder / "examples").symlink_to(REPO / "dags", target_is_directory=True)
    (folder / "tests").symlink_to(TEST_DAGS, target_is_directory=True)
    return folder


def _airflow_database() -> tuple[Databases, bool]:
    external = os.environ.get("SKETCH_TEST_METASTORE_URL")
    if external:
        return Databases(None, None, external), False
    server = PrivatePostgres.default()
    port, started = server.ensure_running()
    return Databases(server, port, None), started


_DATABASES, _STARTED_SERVER = _airflow_database()
_URL = _DATABASES.create("airflow_test")
_HOME = Path(tempfile.mkdtemp(prefix="airflow-home-"))
# Users of Airflow's simple auth manager, for the UI tests: an admin and a viewer.
PASSWORDS = {"admin": "admin-test-password", "viewer": "viewer-test-password"}
(_HOME / "passwords.json").write_text(json.dumps(PASSWORDS))
os.environ.update(
    AIRFLOW_HOME=str(_HOME),
    AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="admin:admin,viewer:viewer",
    AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=str(_HOME / "passwords.json"),
    AIRFLOW__API_AUTH__JWT_SECRET="sketch-tests-jwt-secret-not-for-production-" + "0" * 40,
    AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=_URL,
    AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC=_URL.replace("+psycopg", "+psycopg_async"),
    AIRFLOW__CORE__LOAD_EXAMPLES="False",
    AIRFLOW__CORE__DAGS_FOLDER=str(_dags_folder()),
    AIRFLOW__CORE__UNIT_TEST_MODE="True",
)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if "airflow.settings" in sys.modules:  # close Airflow's connections before dropping its database
        sys.modules["airflow.settings"].dispose_orm()
    _DATABASES.drop_all()
    if _STARTED_SERVER and _DATABASES.server is not None:
        _DATABASES.server.stop()


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """Airflow's metadata schema, migrated once per session."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), "db", "migrate"],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def connection_json(settings: Settings) -> str:
    """An Airflow connection (JSON form) to the test service's metastore and warehouse."""
    url = make_url(settings.require_metastore_url())
    return json.dumps(
        {
            "conn_type": "sketch_metastore",
            "host": url.host,
            "port": url.port,
            "login": url.username,
            "password": url.password,
            "schema": url.database,
            "extra": {
                "warehouse": str(settings.warehouse),
                "spark_conf": {"spark.sql.shuffle.partitions": "2"},
                # Small files, as for the test service: test tables span several.
                "settings": {
                    "target_file_bytes": settings.target_file_bytes,
                    "row_group_rows": settings.row_group_rows,
                    "spark_shuffle_partitions": settings.spark_shuffle_partitions,
                },
            },
        }
    )


@pytest.fixture(scope="session")
def sketch_conn(settings: Settings) -> Iterator[str]:
    """``sketch_default``, the connection every DAG uses unless told otherwise, defined through
    the environment to point at the test service's metastore and warehouse."""
    variable = "AIRFLOW_CONN_SKETCH_DEFAULT"
    os.environ[variable] = connection_json(settings)
    yield "sketch_default"
    os.environ.pop(variable, None)
