"""SKETCH_JIT picks the JVM's JIT compilers: the session's JVM runs with the options it names."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from pyspark.sql import SparkSession

from sketch_core.config import DEFAULT_JIT, JIT_SETTINGS, Settings
from sketch_core.errors import ConfigurationError
from sketch_core.spark.session import ensure_java, java_options


def _jvm_arguments(spark: SparkSession) -> list[str]:
    jvm: Any = spark.sparkContext._jvm
    return list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())


def test_the_sessions_jvm_runs_with_the_default_settings_options(spark: SparkSession) -> None:
    arguments = _jvm_arguments(spark)
    for option in java_options(DEFAULT_JIT).split():
        assert option in arguments
    assert ("-XX:TieredStopAtLevel=1" in arguments) == (DEFAULT_JIT == "quick")


def test_each_setting_names_options_the_installed_java_accepts() -> None:
    ensure_java()
    assert java_options("quick").split() != java_options("tiered").split()
    for jit in JIT_SETTINGS:
        done = subprocess.run(
            ["java", *java_options(jit).split(), "-version"], capture_output=True, check=False
        )
        assert done.returncode == 0, done.stderr.decode()


def test_the_setting_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKETCH_JIT", "Quick")
    assert Settings.from_env().jit == "quick"
    monkeypatch.delenv("SKETCH_JIT")
    assert Settings.from_env().jit == DEFAULT_JIT
    monkeypatch.setenv("SKETCH_JIT", "fast")
    with pytest.raises(ConfigurationError, match="SKETCH_JIT"):
        Settings.from_env()


def test_a_setting_given_in_code_is_checked_where_the_options_are_made() -> None:
    with pytest.raises(ConfigurationError, match="jit='fast'"):
        java_options("fast")
