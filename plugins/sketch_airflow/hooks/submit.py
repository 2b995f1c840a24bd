"""Running ``python -m sketch_core.jobs`` through the Spark provider's ``SparkSubmitHook``, on
any master its connection names (a standalone cluster, YARN, Kubernetes): captures, and the
maintenance runs that need Spark (recaptures, and deltas too big for in-process work)."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from sketch_core.algebra.frontend import encode_params
from sketch_core.config import Settings
from sketch_core.errors import ConfigurationError, InfrastructureError, SketchNotFoundError
from sketch_core.service.results import MaintenancePlan, MaintenanceRun, SketchVersion

if TYPE_CHECKING:
    from sketch_core.service import SketchService

log = logging.getLogger(__name__)


def submit_job(settings: Settings, spark_conn_id: str, args: Sequence[str], name: str) -> None:
    """spark-submit the job in client mode: the driver runs beside the worker task, reads the
    metastore and warehouse from its environment, and publishes what it computes there; the
    submitter reads the outcome from the metastore. Raises when the job fails."""
    env: dict[str, Any] = {
        "SKETCH_METASTORE_URL": settings.require_metastore_url(),
        "SKETCH_WAREHOUSE": str(settings.warehouse),
        "SKETCH_SPARK_SHUFFLE_PARTITIONS": str(settings.spark_shuffle_partitions),
        "SKETCH_FRAGMENTS": str(settings.fragments),
        # The driver and the executors run this interpreter: it has the project installed.
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    conf = {"spark.pyspark.python": sys.executable, **settings.extra}
    hook = SparkSubmitHook(
        conn_id=spark_conn_id,
        conf=conf,
        env_vars=env,
        name=f"sketch-{name}",
        application_args=list(args),
        spark_binary=str(Path(sys.executable).with_name("spark-submit")),
    )
    from sketch_core.jobs.run import JOB_SCRIPT  # the service, Spark and z3: when a task runs

    hook.submit(str(JOB_SCRIPT))


def _published_after(
    svc: SketchService, name: str, before: int | None, target: int, what: str
) -> SketchVersion:
    """The version a job published: the sketch's newest, which must be newer than ``before``
    or valid at ``target`` (the job found it published by a concurrent run of the sketch)."""
    try:
        version = svc.sketch(name)
    except SketchNotFoundError:
        version = None
    if version is None or (before is not None and version.version <= before and version.sequence < target):
        raise InfrastructureError(f"the {what} job for {name} published no new version")
    return version


def submit_capture(
    svc: SketchService,
    spark_conn_id: str,
    sql: str,
    name: str | None,
    parameters: Mapping[str, Any] | None,
    attributes: Mapping[str, str] | None,
    fragments: int | Mapping[str, int] | None,
    with_state: bool = False,
) -> SketchVersion:
    """Capture through spark-submit; the version the job published."""
    if not name:
        raise ConfigurationError("a capture through spark-submit needs a sketch name", hint="pass name=")
    args = ["capture", "--sql", sql, "--name", name, "--params", json.dumps(encode_params(parameters))]
    if attributes:
        args += ["--attributes", json.dumps(dict(attributes))]
    if fragments is not None:
        args += ["--fragments", json.dumps(dict(fragments) if isinstance(fragments, Mapping) else fragments)]
    if with_state:
        args.append("--with-state")
    try:
        record = svc.sketches.version(name)
    except SketchNotFoundError:  # a first capture
        record = None
    before = record.version if record is not None else None
    target = svc.latest_sequence()
    submit_job(svc.settings, spark_conn_id, args, name)
    return _published_after(svc, name, before, target, "capture")


def maintain_submitting(
    svc: SketchService, spark_conn_id: str | None, names: Sequence[str] | None, strategy: str
) -> list[MaintenanceRun]:
    """Maintain sketches (``names``, default every published one): with a spark-submit
    connection, each run that needs Spark (``MaintenancePlan.needs_spark``) is submitted as a
    job and the rest run in this process, without Spark; without one, all run in-process."""
    if spark_conn_id is None:
        if names is None:
            return svc.maintain(None, strategy)
        return svc.maintain_each(names, strategy)  # a blocked sketch waits, the others go on
    runs = []
    for name in names if names is not None else [d.name for d in svc.sketches.definitions()]:
        try:
            plan = svc.plan_maintenance(name, strategy)
        except SketchNotFoundError:
            if names is not None:
                raise
            continue  # defined but never published: nothing to maintain from (as maintain(None))
        if not plan.needs_spark:
            runs.extend(svc.maintain_each([name], strategy))
            continue
        blocked = svc.blocked(name) if plan.strategy not in ("none", "skip") else None
        if blocked is not None:  # checked here: a job would only fail on it
            log.warning("%s", blocked)
            continue
        submit_job(svc.settings, spark_conn_id, ["maintain", "--name", name, "--strategy", strategy], name)
        version = _published_after(svc, name, plan.from_version, plan.target, "maintenance")
        runs.append(_submitted_run(svc, plan, version.version))
    return runs


def _submitted_run(svc: SketchService, plan: MaintenancePlan, to_version: int) -> MaintenanceRun:
    """The run a job recorded with the version it published (the plan's figures, if none)."""
    recorded = [r for r in svc.sketches.runs(plan.name) if r["to_version"] == to_version]
    strategy, delta_rows, seconds = plan.strategy, plan.delta_rows, 0.0
    if recorded:
        run = recorded[-1]
        strategy, delta_rows, seconds = (
            str(run["strategy"]),
            int(run["delta_rows"]),
            float(run["seconds"] or 0),
        )
    return MaintenanceRun(
        plan.name, plan.from_version, to_version, strategy, delta_rows, seconds, where="spark-submit"
    )
