"""Where a sketch's Spark work runs: in this process (the default), or as a job started
through a function the service is given (``SketchService.from_settings(..., submit=...)``).

A submitted job is ``python -m sketch_core.jobs <arguments>`` (see :mod:`sketch_core.jobs`):
it opens its own service on the same metastore and warehouse, does the work there under the
sketch's work lock, and publishes what it computes; the submitter reads the outcome from the
metastore. The Airflow provider submits through the Spark provider's ``SparkSubmitHook``
(:func:`sketch_airflow.hooks.submit.submit_job`); a test or another scheduler can submit
any way it likes, as long as the call returns once the job has finished and raises when it
failed.

Captures are submitted whole. Maintenance is planned here first (metastore reads only): only
runs that need Spark (:attr:`MaintenancePlan.needs_spark`) are submitted, the rest run here
without starting Spark.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sketch_core.algebra.frontend import encode_params
from sketch_core.errors import ConfigurationError, InfrastructureError, SketchNotFoundError
from sketch_core.service.context import ServiceContext
from sketch_core.service.results import MaintenancePlan, MaintenanceRun, SketchVersion

# (the job's arguments, the sketch it works on) -> None once the job has finished.
Submit = Callable[[Sequence[str], str], None]


class SubmittedJobs:
    """Captures and maintenance runs that need Spark, run as submitted jobs."""

    def __init__(self, context: ServiceContext, submit: Submit) -> None:
        self.context = context
        self.submit = submit

    def capture(
        self,
        sql: str,
        name: str | None,
        params: Mapping[str, Any] | None,
        attributes: Mapping[str, str] | None,
        fragments: int | Mapping[str, int] | None,
        snapshot: int | None,
        with_state: bool,
    ) -> SketchVersion:
        """Capture in a job; the version it published."""
        if not name:
            raise ConfigurationError(
                "a capture in a submitted Spark job needs a sketch name", hint="pass name="
            )
        args = ["capture", "--sql", sql, "--name", name, "--params", json.dumps(encode_params(params))]
        if attributes:
            args += ["--attributes", json.dumps(dict(attributes))]
        if fragments is not None:
            args += [
                "--fragments",
                json.dumps(dict(fragments) if isinstance(fragments, Mapping) else fragments),
            ]
        if snapshot is not None:
            args += ["--snapshot", str(snapshot)]
        if with_state:
            args.append("--with-state")
        try:
            record = self.context.sketches.version(name)
        except SketchNotFoundError:  # a first capture
            record = None
        before = record.version if record is not None else None
        target = self.context.latest_sequence() if snapshot is None else snapshot
        self.submit(args, name)
        return self._published_after(name, before, target, "capture")

    def maintain(self, plan: MaintenancePlan, strategy: str) -> MaintenanceRun:
        """The maintenance ``plan`` (that needs Spark) run in a job with ``strategy``."""
        self.submit(["maintain", "--name", plan.name, "--strategy", strategy], plan.name)
        version = self._published_after(plan.name, plan.from_version, plan.target, "maintenance")
        return self._submitted_run(plan, version.version)

    def _published_after(self, name: str, before: int | None, target: int, what: str) -> SketchVersion:
        """The version a job published: the sketch's newest, which must be newer than
        ``before`` or valid at ``target`` (the job found it published by a concurrent run)."""
        try:
            record = self.context.sketches.version(name)
        except SketchNotFoundError:
            record = None
        if record is None or (before is not None and record.version <= before and record.sequence < target):
            raise InfrastructureError(f"the {what} job for {name} published no new version")
        return self.context.partitions.sketch_version(record)

    def _submitted_run(self, plan: MaintenancePlan, to_version: int) -> MaintenanceRun:
        """The run a job recorded with the version it published (the plan's figures, if none)."""
        recorded = [r for r in self.context.sketches.runs(plan.name) if r["to_version"] == to_version]
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
