"""A service made with ``submit=`` runs captures, and the maintenance runs that need Spark, as
``python -m sketch_core.jobs`` jobs; small deltas stay in-process. The job here is the jobs
module's entry point called in this process (on the session's Spark, as a job on a cluster
runs on its own): what is checked is the runner's side, and that a job's version equals a
fresh in-process capture. The spark-submit test runs the same through a real cluster."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from sketch_core.datasets import synthetic_table
from sketch_core.datasets.deltas import DeltaGenerator
from sketch_core.errors import ConfigurationError, InfrastructureError
from sketch_core.jobs.run import main as run_job
from sketch_core.service import SketchService
from tests.service.test_maintain import HAVING, fresh_fragments, maintained


class Jobs:
    """A ``submit`` function: runs each job to its end, and remembers what it was asked."""

    def __init__(self) -> None:
        self.submitted: list[list[str]] = []

    def __call__(self, arguments: Sequence[str], sketch: str) -> None:
        self.submitted.append(list(arguments))
        if run_job(arguments) != 0:
            raise InfrastructureError(f"the job for {sketch} failed")


@pytest.fixture
def jobs(spark_svc: SketchService, monkeypatch: pytest.MonkeyPatch) -> Jobs:
    settings = spark_svc.settings
    assert settings.metastore_url is not None
    # What a submitted job reads its metastore and warehouse from.
    monkeypatch.setenv("SKETCH_METASTORE_URL", settings.metastore_url)
    monkeypatch.setenv("SKETCH_WAREHOUSE", str(settings.warehouse))
    return Jobs()


def test_captures_and_spark_maintenance_run_as_jobs_and_small_deltas_in_process(
    spark_svc: SketchService, jobs: Jobs, ns: str
) -> None:
    table = f"{ns}.facts"
    spark_svc.tables.create(table, synthetic_table(6000, 60, seed=5), sort_by=["a"])
    svc = SketchService(spark_svc.settings, spark_svc.engine, spark_svc.catalog, spark_svc.spark, submit=jobs)
    name, sql = f"{ns}_submitted", HAVING.format(t=table)

    version = svc.capture(sql, name=name, attributes={table: "a"}, fragments=40, with_state=True)
    assert [a[0] for a in jobs.submitted] == ["capture"] and "--with-state" in jobs.submitted[0]
    assert (version.name, version.version) == (name, 1)
    assert maintained(svc, name) == fresh_fragments(spark_svc, sql, name, version.sequence)

    DeltaGenerator(svc.tables, table, ("key",), seed=3).mixed(30).apply(svc.tables)
    (small,) = svc.maintain(name, strategy="incremental")
    assert (small.strategy, small.to_version, small.where) == ("incremental", 2, "in-process")
    assert len(jobs.submitted) == 1, "a small delta from stored state needs no Spark: not submitted"

    DeltaGenerator(svc.tables, table, ("key",), seed=4).mixed(30).apply(svc.tables)
    (recaptured,) = svc.maintain(name, strategy="full")
    assert jobs.submitted[-1][:5] == ["maintain", "--name", name, "--strategy", "full"]
    assert (recaptured.strategy, recaptured.to_version, recaptured.where) == ("full", 3, "spark-submit")
    assert maintained(svc, name) == fresh_fragments(spark_svc, sql, name, svc.latest_sequence())


def test_a_job_capture_needs_a_name_and_submits_nothing_without_one(
    spark_svc: SketchService, jobs: Jobs, ns: str
) -> None:
    svc = SketchService(spark_svc.settings, spark_svc.engine, spark_svc.catalog, spark_svc.spark, submit=jobs)
    with pytest.raises(ConfigurationError, match="needs a sketch name"):
        svc.capture(f"SELECT a FROM {ns}.facts")
    assert jobs.submitted == []
