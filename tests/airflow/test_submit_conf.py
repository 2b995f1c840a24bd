"""A spark-submitted job's JVMs run with the options the service's own sessions run with: the
driver (client mode, on this machine) starts with the JIT setting's options and maps the class
archive; the executors get the JIT options; and a connection's own ``spark_conf`` for them is
kept by the job's session, not replaced by the service's."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from sketch_airflow.hooks.submit import submit_conf

from sketch_core.config import Settings
from sketch_core.spark.jars import spark_jars
from sketch_core.spark.session import jvm_conf

# Builds its session as ``python -m sketch_core.jobs`` does, and writes what its JVM runs with.
_PROBE = """
import json, sys
from sketch_core.config import Settings
from sketch_core.spark.session import build_session

spark = build_session(Settings.from_env(), "probe", submitted=True)
jvm = spark.sparkContext._jvm
runtime = jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
arguments = [str(a) for a in runtime.getInputArguments()]
executors = spark.sparkContext.getConf().get("spark.executor.extraJavaOptions")
with open(sys.argv[1], "w") as out:
    json.dump({"driver": arguments, "executors": executors}, out)
spark.stop()
"""


def _submitted(settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    probe, found = tmp_path / "probe.py", tmp_path / "found.json"
    probe.write_text(_PROBE)
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_LOCAL_TEST", json.dumps({"conn_type": "spark", "host": "local[1]"})
    )
    hook = SparkSubmitHook(
        conn_id="spark_local_test",
        conf={**submit_conf(settings), "spark.driver.host": "127.0.0.1"},
        jars=",".join(str(p) for p in spark_jars(settings.jars_dir)),
        env_vars={
            "SKETCH_JIT": settings.jit,
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
        },
        application_args=[str(found)],
        spark_binary=str(Path(sys.executable).with_name("spark-submit")),
    )
    hook.submit(str(probe))
    result: dict[str, object] = json.loads(found.read_text())
    return result


def test_a_submitted_driver_starts_with_the_sessions_jvm_options(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wanted = jvm_conf(settings)
    found = _submitted(settings, tmp_path, monkeypatch)
    driver = found["driver"]
    assert isinstance(driver, list)
    for option in wanted["spark.driver.extraJavaOptions"].split():  # the archive's too, if built
        assert option in driver
    # (Spark adds its own module options to whatever the executors are given.)
    executors = str(found["executors"]).split()
    for option in wanted["spark.executor.extraJavaOptions"].split():
        assert option in executors


def test_a_connections_own_executor_options_are_kept_by_the_jobs_session(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = "-Dsketch.test.option=1"
    with_own = replace(settings, extra={**settings.extra, "spark.executor.extraJavaOptions": own})
    assert submit_conf(with_own)["spark.executor.extraJavaOptions"] == own
    found = _submitted(with_own, tmp_path, monkeypatch)
    executors = str(found["executors"]).split()
    assert own in executors
    # The connection's options stand in place of the service's, as in the service's sessions
    # (not set over them again by the job's session).
    assert not set(jvm_conf(settings)["spark.executor.extraJavaOptions"].split()) & set(executors)
