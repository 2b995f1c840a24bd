"""Running ``python -m sketch_core.jobs`` through the Spark provider's ``SparkSubmitHook``, on
any master its connection names (a standalone cluster, YARN, Kubernetes): the ``submit``
function a service is given when its connection names a ``spark_submit_conn_id`` (see
:mod:`sketch_core.service.runner`: captures, and the maintenance runs that need Spark)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from sketch_core.config import Settings
from sketch_core.spark.jars import default_jars_dir, spark_jars
from sketch_core.spark.lake import lake_conf


def submit_job(settings: Settings, spark_conn_id: str, args: Sequence[str], name: str) -> None:
    """spark-submit the job in client mode: the driver runs beside the worker task, reads the
    metastore and warehouse from its environment, and publishes what it computes there; the
    submitter reads the outcome from the metastore. Raises when the job fails."""
    env: dict[str, Any] = {
        "SKETCH_METASTORE_URL": settings.require_metastore_url(),
        "SKETCH_WAREHOUSE": str(settings.warehouse),
        "SKETCH_SPARK_SHUFFLE_PARTITIONS": str(settings.spark_shuffle_partitions),
        "SKETCH_FRAGMENTS": str(settings.fragments),
        "SKETCH_CATALOG": settings.catalog_name,
        "SKETCH_JARS": str(settings.jars_dir or default_jars_dir()),
        "SKETCH_JIT": settings.jit,
        # The driver and the executors run this interpreter: it has the project installed.
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    hook = SparkSubmitHook(
        conn_id=spark_conn_id,
        conf=submit_conf(settings),
        jars=",".join(str(p) for p in spark_jars(settings.jars_dir)),
        env_vars=env,
        name=f"sketch-{name}",
        application_args=list(args),
        spark_binary=str(Path(sys.executable).with_name("spark-submit")),
    )
    from sketch_core.jobs.run import JOB_SCRIPT  # the service, Spark and z3: when a task runs

    hook.submit(str(JOB_SCRIPT))


def submit_conf(settings: Settings) -> dict[str, str]:
    """The Spark settings a job is submitted with: the lake catalog (its jars go on the driver's
    classpath from the start, with --jars), the JVM options the service's own sessions run with
    (the JIT setting; the driver, in client mode on this machine, maps the class archive), and
    the connection's ``spark_conf`` over them."""
    # (Spark's session module, imported when a job is submitted, not when DAGs are parsed.)
    from sketch_core.spark.session import jvm_conf

    return {
        "spark.pyspark.python": sys.executable,
        **jvm_conf(settings),
        **lake_conf(settings),
        **settings.extra,
    }
