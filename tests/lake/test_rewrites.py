"""A rewrite of a table's files (Iceberg's ``rewrite_data_files``: a compaction, a sort, a
Z-order) changes no rows: it is recorded as a ``replace`` with no rows added or deleted, its
delta is empty, and the sketches survive it without a recapture."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from sketch_core.datasets import synthetic_table
from sketch_core.datasets.deltas import DeltaGenerator
from sketch_core.errors import ConfigurationError
from sketch_core.layout.simulation import Layout
from sketch_core.service.facade import SketchService
from tests.oracles.results import sorted_rows

pytestmark = pytest.mark.spark

REPORT = "SELECT a, SUM(b) AS s, COUNT(*) AS n FROM {t} GROUP BY a HAVING SUM(b) > :floor"


def _fragments(svc: SketchService, name: str) -> dict[str, set[int]]:
    return {t: set(ids) for t, ids in svc.sketch(name).fragments.items()}


def _sketched_table(
    svc: SketchService, table: str, name: str, seed: int, **capture: bool
) -> tuple[str, dict]:
    """A table sorted by ``key`` and a HAVING report's sketch on ``a``: the report and its params."""
    svc.tables.create(table, synthetic_table(20_000, 100, seed=seed), sort_by=["key"])
    sql, params = REPORT.format(t=table), {"floor": 1500}
    svc.capture(sql, params=params, name=name, attributes={table: "a"}, fragments=50, **capture)
    return sql, params


def test_a_zorder_rewrite_is_a_replace_that_maintenance_passes_over(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    svc, table, name = spark_svc, f"{ns}.facts", f"{ns}_rewritten"
    sql, params = _sketched_table(svc, table, name, 31, with_state=True)
    before = svc.commit_log.latest_sequence()

    sequence = svc.tables.recluster(table, Layout("zorder", ("a", "c")))
    rewrite = svc.tables.commits(table)[-1]
    assert (rewrite.operation, rewrite.added_rows, rewrite.deleted_rows) == ("replace", 0, 0)
    assert rewrite.seq == sequence > before
    delta = svc.tables.delta(table, before)
    assert delta.inserted.num_rows == delta.deleted.num_rows == 0
    assert {f.path for f in svc.tables.pin(table).files}.isdisjoint(
        f.path for f in svc.tables.pin(table, before).files
    ), "every file was rewritten"

    (run,) = svc.maintain(name)
    assert (run.strategy, run.delta_rows, run.where) == ("incremental", 0, "carried"), run
    fresh = svc.capture(sql, params=params, name=f"{ns}_fresh", attributes={table: "a"}, fragments=50)
    assert _fragments(svc, name) == {t: set(ids) for t, ids in fresh.fragments.items()}
    assert sorted_rows(svc.query(sql, params, use_sketches="always").table) == sorted_rows(
        svc.query(sql, params, use_sketches=False).table
    )

    # Commits after the rewrite compose with it: an append then a delete, maintained.
    generator = DeltaGenerator(svc.tables, table, ("key",), seed=32)
    generator.mixed(300).apply(svc.tables)
    (after,) = svc.maintain(name, strategy="incremental")
    assert after.strategy == "incremental"
    again = svc.capture(sql, params=params, name=f"{ns}_fresh", attributes={table: "a"}, fragments=50)
    assert _fragments(svc, name) == {t: set(ids) for t, ids in again.fragments.items()}


def test_a_rewrite_carries_a_sketch_forward_without_building_its_state_or_recapturing(
    small_files: None, spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    """A sketch captured without operator state (the capture's default) is published again at
    the rewrite as it was: no state computed for it, no table read; a recapture only when
    asked for."""
    svc, table, name = spark_svc, f"{ns}.facts", f"{ns}_carried"
    sql, params = _sketched_table(svc, table, name, 33)
    first = svc.sketches.version(name)
    assert first is not None and first.state_ref is None

    svc.tables.recluster(table, Layout("sort", ("a",)))
    plan = svc.plan_maintenance(name)
    assert plan.rewrites_only and (plan.strategy, plan.delta_rows) == ("incremental", 0)
    assert not plan.needs_spark, "nothing to compute: no Spark job"
    (run,) = svc.maintain(name)
    assert (run.strategy, run.delta_rows, run.where) == ("incremental", 0, "carried"), run
    carried = svc.sketches.version(name)
    assert carried is not None and carried.version == first.version + 1
    assert carried.bitmaps == first.bitmaps and carried.state_ref is None
    assert carried.sequence == svc.commit_log.latest_sequence()
    assert carried.table_snapshots[table] == svc.tables.pin(table).snapshot_id != first.table_snapshots[table]
    (recorded,) = [r for r in svc.sketches.runs(name) if r["strategy"] == "incremental"]
    assert recorded["status"] == "succeeded" and not recorded["built_state"]
    # Sorted on the sketch's attribute now: the sketch skips files, and answers as the table.
    used = svc.query(sql, params, use_sketches="always")
    assert used.sketch == (name, carried.version) and used.files_read < used.files_total
    assert sorted_rows(used.table) == sorted_rows(svc.query(sql, params, use_sketches=False).table)

    # The service's recluster carries the sketches it finds current at once: the report
    # right after it uses the sketch (the default reads no sketch behind its snapshots).
    svc.recluster(table, Layout("zorder", ("a", "c")))
    at_once = svc.sketches.version(name)
    assert at_once is not None and at_once.version == carried.version + 1
    assert at_once.sequence == svc.commit_log.latest_sequence() and at_once.bitmaps == first.bitmaps
    assert svc.query(sql, params, use_sketches="always").sketch == (name, at_once.version)
    assert svc.maintain(name)[0].strategy == "none"

    svc.tables.recluster(table, Layout("sort", ("c",)))
    (full,) = svc.maintain(name, strategy="full")
    assert full.strategy == "full", "a recapture asked for is a recapture"
    recaptured = svc.sketches.version(name)
    assert recaptured is not None and recaptured.bitmaps == first.bitmaps


def test_a_sort_rewrite_becomes_the_table_s_write_order_and_skips_files_on_its_column(
    small_files: None, spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    svc, table, name = spark_svc, f"{ns}.sales", f"{ns}_by_a"
    sql, params = _sketched_table(svc, table, name, 33)
    scattered = svc.query(sql, params, use_sketches="always")
    assert scattered.files_read == scattered.files_total > 2, "sorted by key, the groups lie everywhere"

    with pytest.raises(ConfigurationError, match="has no column nope"):
        svc.tables.recluster(table, Layout("sort", ("a", "nope")))
    assert svc.tables.commits(table)[-1].operation == "create", "nothing committed"

    with pytest.raises(ConfigurationError, match="page_rows must be a positive number of rows"):
        svc.tables.recluster(table, Layout("sort", ("a",)), page_rows=0)
    assert svc.tables.commits(table)[-1].operation == "create", "nothing committed"

    svc.tables.recluster(table, Layout("sort", ("a",)), page_rows=500)
    props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES lake.{table}").collect()}
    assert props["sort-order"] == "a ASC NULLS FIRST"
    assert props["write.parquet.page-row-limit"] == "500"
    (run,) = svc.maintain(name)
    assert (run.strategy, run.delta_rows) == ("incremental", 0)
    clustered = svc.query(sql, params, use_sketches="always")
    assert clustered.sketch is not None and clustered.files_read < clustered.files_total
    assert sorted_rows(clustered.table) == sorted_rows(svc.query(sql, params, use_sketches=False).table)
