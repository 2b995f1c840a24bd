"""The class archive (AppCDS): sessions map the archive the bootstrap built for this JVM and
these jars, start without one when there is none or it is turned off, and an archive built for
other jars is not used."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from sketch_core.config import Settings
from sketch_core.spark import class_archive
from sketch_core.spark.class_archive import ARCHIVE_ENV, archive_options, archive_path


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SKETCH_HOME", str(tmp_path))
    monkeypatch.delenv(ARCHIVE_ENV, raising=False)
    return tmp_path


def test_no_archive_no_options(home: Path) -> None:
    settings = replace(Settings.from_env(), jars_dir=home / "jars")
    assert not archive_path(settings).exists()
    assert archive_options(settings) == ""


def test_an_archive_for_this_setup_is_mapped_unless_turned_off(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = replace(Settings.from_env(), jars_dir=home / "jars")
    path = archive_path(settings)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    assert archive_options(settings) == f"-XX:SharedArchiveFile={path} -Xshare:auto"
    monkeypatch.setenv(ARCHIVE_ENV, "off")
    assert archive_options(settings) == ""


def test_other_jars_name_another_archive(home: Path) -> None:
    jars = home / "jars"
    jars.mkdir()
    settings = replace(Settings.from_env(), jars_dir=jars)
    before = archive_path(settings)
    (jars / "extra-1.0.jar").write_bytes(b"jar")
    assert archive_path(settings) != before
    assert archive_path(settings).parent == before.parent


def test_a_failed_build_is_a_configuration_error_and_leaves_no_archive(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = replace(Settings.from_env(), jars_dir=home / "jars")
    monkeypatch.setattr(class_archive.sys, "executable", "/bin/false")
    with pytest.raises(class_archive.ConfigurationError, match="class archive could not be built"):
        class_archive.build_archive(settings)
    assert not archive_path(settings).exists()
    assert not list(archive_path(settings).parent.glob("*.part"))


def test_an_unwritable_home_is_a_configuration_error(home: Path) -> None:
    settings = replace(Settings.from_env(), jars_dir=home / "jars")
    (home / "jvm").write_text("a file where the archive's folder would be")
    with pytest.raises(class_archive.ConfigurationError, match="could not be written"):
        class_archive.build_archive(settings)


def test_a_session_loads_sparks_classes_from_the_archive_the_bootstrap_built(tmp_path: Path) -> None:
    settings = Settings.from_env()
    path = archive_path(settings)
    assert path.is_file(), f"the bootstrap builds {path} (python -m sketch_core.spark.class_archive)"
    log = tmp_path / "classes.log"
    script = (
        "from dataclasses import replace\n"
        "from sketch_core.config import Settings\n"
        "from sketch_core.spark.class_archive import archive_options\n"
        "from sketch_core.spark.session import build_session, java_options\n"
        "s = Settings.from_env()\n"
        f"options = java_options(s.jit, archive_options(s)) + ' -Xlog:class+load=info:file={log}'\n"
        "spark = build_session(replace(s, extra={'spark.driver.extraJavaOptions': options}))\n"
        "spark.range(1000).selectExpr('id % 7 AS k').groupBy('k').count().toArrow()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env=os.environ, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    spark_classes = [x for x in log.read_text().splitlines() if " org.apache.spark." in x]
    from_archive = [x for x in spark_classes if "shared objects file (top)" in x]
    from_jars = [x for x in spark_classes if "source: file:" in x and ".jar" in x]
    # Spark's classes come mapped from the archive, hardly any read from its jars (without the
    # archive: thousands, as many as the archive holds).
    assert len(from_archive) > 2000
    assert len(from_jars) < len(from_archive) / 10


def test_sketch_class_archive_names_the_archive_it_finds() -> None:
    path = archive_path(Settings.from_env())
    assert path.is_file(), "the bootstrap builds it"
    sketch = Path(sys.executable).with_name("sketch")
    done = subprocess.run([str(sketch), "class-archive"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"class archive: {path} (built before)" in done.stdout
