"""``svc.sketched``: the report as a lazy Spark DataFrame read through Iceberg's source, the
sketch's ranges in the scan, nothing collected; its rows equal the plain query's at the same
snapshot, and Iceberg's planning skips files by the sketch."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from sketch_core.datasets import synthetic_table
from sketch_core.datasets.deltas import DeltaGenerator
from sketch_core.service.facade import SketchService
from sketch_core.spark.lake import scan_metrics
from tests.lake.conftest import DriverCollections
from tests.oracles.results import sorted_rows

pytestmark = pytest.mark.spark

HAVING = "SELECT a, SUM(b) AS s, COUNT(*) AS n FROM {t} WHERE c > -40 GROUP BY a HAVING SUM(b) > :floor"


def _rows(frame: object) -> list[tuple[object, ...]]:
    return sorted_rows(pa.Table.from_pandas(frame.toPandas(), preserve_index=False))  # type: ignore[attr-defined]


def test_a_sketched_report_is_a_lazy_frame_that_skips_files_and_equals_the_plain_query(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    svc, table = spark_svc, f"{ns}.facts"
    svc.tables.create(table, synthetic_table(40_000, 200, seed=21), sort_by=["a"])
    sql, params = HAVING.format(t=table), {"floor": 2000}
    captured = svc.capture(sql, params=params, name=f"{ns}_h", attributes={table: "a"}, fragments=40)
    at_capture = captured.sequence
    DeltaGenerator(svc.tables, table, ("key",), seed=22).inserts(500).apply(svc.tables)

    with DriverCollections() as collections:
        pinned = svc.sketched(sql, params, snapshot=at_capture, use_sketches="always")
        plain = svc.sketched(sql, params, snapshot=at_capture, use_sketches=False)
        latest = svc.sketched(sql, params)  # the sketch is one load behind: the plain query
    assert collections.calls == [], "sketched() collected nothing to the driver"

    expected = sorted_rows(svc.query(sql, params, snapshot=at_capture, use_sketches=False).table)
    assert _rows(pinned) == expected and _rows(plain) == expected
    assert _rows(latest) == sorted_rows(svc.query(sql, params, use_sketches=False).table)
    (sketched_scan,) = scan_metrics(pinned)
    (plain_scan,) = scan_metrics(plain)
    files = len(svc.tables.pin(table, at_capture).files)
    for scan in (plain_scan, sketched_scan):  # every file of the snapshot planned, read or skipped
        assert scan["resultDataFiles"] + scan["skippedDataFiles"] == files > 2
    # The query's own filter lets Iceberg skip a file or two; the sketch's ranges more.
    assert 0 < sketched_scan["resultDataFiles"] < plain_scan["resultDataFiles"], sketched_scan


def test_a_frame_can_be_written_to_an_iceberg_table_by_spark(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    svc, table = spark_svc, f"{ns}.facts"
    svc.tables.create(table, synthetic_table(5_000, 50, seed=23), sort_by=["a"])
    sql = HAVING.format(t=table)
    svc.capture(sql, params={"floor": 100}, name=f"{ns}_h", attributes={table: "a"}, fragments=20)
    svc.sketched(sql, {"floor": 100}, use_sketches="always").writeTo(f"lake.{ns}.report").create()
    written = spark.table(f"lake.{ns}.report")
    assert _rows(written) == sorted_rows(svc.query(sql, {"floor": 100}, use_sketches=False).table)
