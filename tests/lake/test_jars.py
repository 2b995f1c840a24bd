"""The JVM libraries and the catalog's Spark properties, without starting Spark."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sketch_core.config import Settings
from sketch_core.errors import ConfigurationError
from sketch_core.spark import jars
from sketch_core.spark.lake import jdbc_location, lake_conf


def test_the_bootstrap_fetched_every_jar_into_the_default_folder() -> None:
    directory = jars.default_jars_dir()
    assert jars.missing_jars(directory) == []
    assert [p.name for p in jars.spark_jars()] == [a.file_name for a in jars.ARTIFACTS]
    jars.check_pyspark_line()  # the pinned pyspark is the runtime's Spark line


def test_missing_jars_without_maven_say_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jars.shutil, "which", lambda _: None)
    with pytest.raises(ConfigurationError, match="Maven is not installed") as info:
        jars.fetch_jars(tmp_path / "empty")
    assert "sketch jars" in (info.value.hint or "")
    assert jars.missing_jars(tmp_path / "empty") == list(jars.ARTIFACTS)


def test_an_artifact_maven_cannot_fetch_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bogus = jars.Artifact("org.apache.iceberg", "iceberg-no-such-runtime", "0.0.0")
    monkeypatch.setattr(jars, "ARTIFACTS", (bogus,))
    with pytest.raises(ConfigurationError, match=r"could not fetch org\.apache\.iceberg:iceberg-no-such"):
        jars.fetch_jars(tmp_path)


def test_the_metastore_url_becomes_the_catalog_s_jdbc_location() -> None:
    assert jdbc_location("postgresql+psycopg://bob:s3cret@127.0.0.1:5433/meta?sslmode=disable") == (
        "jdbc:postgresql://127.0.0.1:5433/meta?sslmode=disable",
        "bob",
        "s3cret",
    )
    assert jdbc_location("postgresql://db.example/meta") == ("jdbc:postgresql://db.example/meta", None, None)
    with pytest.raises(ConfigurationError, match="needs PostgreSQL"):
        jdbc_location("sqlite:///meta.db")


def test_lake_conf_names_the_catalog_and_the_warehouse(tmp_path: Path) -> None:
    settings = Settings(metastore_url="postgresql+psycopg://u@h:1/m", warehouse=tmp_path, catalog_name="corp")
    conf = lake_conf(settings)
    assert conf["spark.sql.catalog.corp"] == "org.apache.iceberg.spark.SparkCatalog"
    assert conf["spark.sql.catalog.corp.uri"] == "jdbc:postgresql://h:1/m"
    assert conf["spark.sql.catalog.corp.warehouse"] == tmp_path.as_uri()
    assert conf["spark.sql.catalog.corp.jdbc.user"] == "u"


def test_a_catalog_name_spark_cannot_use_unquoted_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKETCH_CATALOG", "my-lake")
    with pytest.raises(ConfigurationError, match="SKETCH_CATALOG='my-lake'"):
        Settings.from_env()
    monkeypatch.setenv("SKETCH_CATALOG", "corp")
    assert Settings.from_env().catalog_name == "corp"


def test_sketch_jars_prints_the_spark_submit_options(env: dict[str, str]) -> None:
    sketch = Path(sys.executable).with_name("sketch")
    done = subprocess.run(
        [str(sketch), "jars"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("--jars ") and all(a.file_name in lines[0] for a in jars.ARTIFACTS)
    assert "--conf spark.sql.catalog.lake=org.apache.iceberg.spark.SparkCatalog" in lines
    assert any(line.startswith("--conf spark.sql.catalog.lake.uri=jdbc:postgresql://") for line in lines)
