"""The JVM that sessions start is the one the class archive is fingerprinted by: JAVA_HOME when
it holds a java, else the java on PATH."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sketch_core.errors import ConfigurationError
from sketch_core.spark import class_archive, java
from sketch_core.spark.java import ensure_java, java_home


def a_jdk(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    launcher = root / "bin" / "java"
    launcher.write_text("#!/bin/sh\n")
    launcher.chmod(0o755)
    (root / "release").write_text('JAVA_VERSION="17.0.99"\n')
    return root


def test_java_home_is_java_home_when_it_holds_a_java_else_the_one_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configured, on_path = a_jdk(tmp_path / "configured"), a_jdk(tmp_path / "on_path")
    monkeypatch.setenv("PATH", str(on_path / "bin"))
    monkeypatch.setenv("JAVA_HOME", str(configured))
    assert java_home() == configured
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "gone"))
    assert java_home() == on_path.resolve()
    ensure_java()
    assert os.environ["JAVA_HOME"] == str(on_path.resolve())


def test_the_archive_follows_the_jvm_the_sessions_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = a_jdk(tmp_path / "first"), a_jdk(tmp_path / "second")
    (second / "release").write_text('JAVA_VERSION="21.0.1"\n')
    monkeypatch.setenv("PATH", str(first / "bin"))
    monkeypatch.setenv("JAVA_HOME", str(first))
    by_first = class_archive._fingerprint(tmp_path)
    monkeypatch.setenv("JAVA_HOME", str(second))  # java on PATH unchanged: JAVA_HOME is what starts
    assert class_archive._fingerprint(tmp_path) != by_first


def test_no_java_is_a_configuration_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert java.java_home() is None
    with pytest.raises(ConfigurationError) as info:
        ensure_java()
    assert "Java was not found" in str(info.value) and info.value.hint
