"""Shared fixtures: one private PostgreSQL server, one SparkSession, one warehouse per session.

Everything is real: the server is PostgreSQL started by the project's own code (or the one in
SKETCH_TEST_METASTORE_URL), Spark runs local[2], Iceberg tables live in a temp warehouse. The
service runs on the settings users get (Spark's shuffle partitions and driver memory sized for
the test machine aside); a test of what a sketch skips asks for tables in several files
(``small_files``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings
from pyspark.sql import SparkSession
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from sketch_core.config import Settings
from sketch_core.localstack.postgres import PrivatePostgres
from sketch_core.metastore.engine import connect_metastore
from sketch_core.service import SketchService
from sketch_core.spark.session import build_session

# py4j logs at INFO when its last connection is garbage-collected at interpreter exit, after
# pytest has closed the stream the logging handlers (Airflow's) write to: a "--- Logging error
# ---" traceback after the summary line, which reads like a failure.
logging.getLogger("py4j").setLevel(logging.WARNING)

# Generated histories per property test: a quick setting for `make test` and CI, a long one for
# soak runs (SKETCH_HYPOTHESIS_PROFILE=long).
hypothesis_settings.register_profile("ci", max_examples=15, deadline=None)
hypothesis_settings.register_profile("long", max_examples=400, deadline=None)
hypothesis_settings.load_profile(os.environ.get("SKETCH_HYPOTHESIS_PROFILE", "ci"))


class Databases:
    """Creates throw-away databases on the test server."""

    def __init__(self, server: PrivatePostgres | None, port: int | None, external_url: str | None) -> None:
        self.server, self.port, self.external_url = server, port, external_url
        self.created: list[str] = []

    def create(self, prefix: str = "sketch_test") -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        self.created.append(name)
        if self.server is not None and self.port is not None:
            return self.server.ensure_database(self.port, name)
        assert self.external_url is not None
        import psycopg

        base = make_url(self.external_url)
        with psycopg.connect(
            host=base.host,
            port=base.port,
            user=base.username,
            password=base.password,
            dbname=base.database or "postgres",
            autocommit=True,
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return base.set(database=name).render_as_string(hide_password=False)

    def drop_all(self) -> None:
        if self.server is not None and self.port is not None:
            for name in self.created:
                self.server.drop_database(self.port, name)


@pytest.fixture(scope="session")
def databases() -> Iterator[Databases]:
    external = os.environ.get("SKETCH_TEST_METASTORE_URL")
    if external:
        yield Databases(None, None, external)
        return
    server = PrivatePostgres.default()
    port, started = server.ensure_running()
    dbs = Databases(server, port, None)
    try:
        yield dbs
    finally:
        dbs.drop_all()
        if started:  # leave no server behind that this session started
            server.stop_unless_in_use()


@pytest.fixture
def fresh_engine(databases: Databases) -> Iterator[Engine]:
    engine = connect_metastore(databases.create())
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def settings(databases: Databases, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return Settings(
        metastore_url=databases.create(),
        warehouse=tmp_path_factory.mktemp("warehouse"),
        spark_shuffle_partitions=2,
        spark_driver_memory="2g",
    )


# What a table written by a job that makes many files looks like at test size: files of 256 KiB
# and row groups of 4,096 rows (the default 8 MiB files hold a test-sized table whole).
SMALL_FILES = {"target_file_bytes": 256 * 1024, "row_group_rows": 4096}


@contextlib.contextmanager
def small_files_written(svc: SketchService) -> Iterator[SketchService]:
    """While open, the tables ``svc`` creates are laid out in SMALL_FILES (the table's write
    properties, so Spark's writes to them too, keep that layout after)."""
    service_settings, table_settings = svc.settings, svc.tables.settings
    svc.settings = replace(service_settings, **SMALL_FILES)  # type: ignore[arg-type]
    svc.tables.settings = replace(table_settings, **SMALL_FILES)  # type: ignore[arg-type]
    try:
        yield svc
    finally:
        svc.settings, svc.tables.settings = service_settings, table_settings


@pytest.fixture
def small_files(svc: SketchService) -> Iterator[None]:
    """For tests of what a sketch skips: the tables the test creates span several files and row
    groups, as larger tables do (see SMALL_FILES); the service's other settings stay the defaults."""
    with small_files_written(svc):
        yield


@pytest.fixture
def env(settings: Settings) -> dict[str, str]:
    """The environment that points the `sketch` command at the tests' metastore and warehouse."""
    assert settings.metastore_url is not None
    return {
        "SKETCH_METASTORE_URL": settings.metastore_url,
        "SKETCH_WAREHOUSE": str(settings.warehouse),
    }


@pytest.fixture(scope="session")
def spark(settings: Settings) -> Iterator[SparkSession]:
    session = build_session(settings, app_name="sketch-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def svc(settings: Settings) -> Iterator[SketchService]:
    service = SketchService.from_settings(settings)
    yield service
    service.close()


@pytest.fixture
def spark_svc(svc: SketchService, spark: SparkSession) -> SketchService:
    svc.context.spark_session = spark
    return svc


@pytest.fixture
def ns(request: pytest.FixtureRequest) -> str:
    """A namespace unique to the test, so tests sharing the service never see each other's tables."""
    return f"t_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def tpch_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from sketch_core.datasets.tpch import generate_tpch

    cache = Path(os.environ.get("SKETCH_HOME") or tmp_path_factory.mktemp("cache"))
    return generate_tpch(0.01, cache)


@pytest.fixture(scope="session")
def tpch_svc(svc: SketchService, spark: SparkSession, tpch_dir: Path) -> SketchService:
    """The session's service with TPC-H SF0.01 loaded as ``tpch.*`` (once per session)."""
    from sketch_core.datasets.tpch import load_tpch

    svc.context.spark_session = spark
    with small_files_written(svc):  # in several files each, as the tables of larger scales are
        load_tpch(svc.tables, 0.01, tpch_dir.parent.parent)
    return svc
