"""Airflow for the plugin's tests: a home of its own and a metadata database on the private
PostgreSQL server (or SKETCH_TEST_METASTORE_URL's server), configured before Airflow is
imported, since Airflow reads its configuration once, at import."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from sketch_core.config import Settings
from sketch_core.localstack.postgres import PrivatePostgres
from sketch_core.spark.session import ensure_java
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
_DAGS = _dags_folder()
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
    AIRFLOW__CORE__DAGS_FOLDER=str(_DAGS),
    AIRFLOW__CORE__UNIT_TEST_MODE="True",
)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if "airflow.settings" in sys.modules:  # close Airflow's connections before dropping its database
        sys.modules["airflow.settings"].dispose_orm()
    _DATABASES.drop_all()
    if _STARTED_SERVER and _DATABASES.server is not None:
        _DATABASES.server.stop_unless_in_use()
    # rmtree unlinks the DAG folder's symlinks; it does not follow them into the repository.
    for temporary in (_DAGS, _HOME):
        shutil.rmtree(temporary, ignore_errors=True)


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
                    "attribute_strategy": settings.attribute_strategy,
                    "catalog_name": settings.catalog_name,
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


# -- a Spark standalone cluster on loopback, for spark-submit --------------------------------------


SPARK_BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Cluster:
    master_url: str
    host: str
    port: int
    master_log: Path

    def applications(self) -> list[str]:
        """Names of the applications the master registered so far."""
        lines = self.master_log.read_text(errors="replace").splitlines()
        return [line.split("Registering app ", 1)[1].strip() for line in lines if "Registering app " in line]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start(args: list[str], log: Path, ready: str, timeout: float = 90) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(SPARK_BIN / "spark-class"), *args], stdout=out, stderr=subprocess.STDOUT, env=env
        )
    deadline = time.monotonic() + timeout
    while ready not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"{args[0]} did not start:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)
    return process


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    ensure_java()
    logs = tmp_path_factory.mktemp("spark-cluster")
    port = _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    master = _start(
        [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(_free_port()),
        ],
        logs / "master.log",
        "I have been elected leader",
    )
    try:
        worker = _start(
            [
                "org.apache.spark.deploy.worker.Worker",
                master_url,
                "--host",
                "127.0.0.1",
                "--cores",
                "2",
                "--memory",
                "2g",
                "--webui-port",
                str(_free_port()),
                "--work-dir",
                str(logs / "work"),
            ],
            logs / "worker.log",
            "Successfully registered with master",
        )
        try:
            yield Cluster(master_url, "127.0.0.1", port, logs / "master.log")
        finally:
            worker.terminate()
            worker.wait(timeout=30)
    finally:
        master.terminate()
        master.wait(timeout=30)
