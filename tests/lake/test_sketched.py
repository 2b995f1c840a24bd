"""``svc.sketched``: the report as a lazy Spark DataFrame read through Iceberg's source, the
sketch's ranges in the scan, nothing collected; its rows equal the plain query's at the same
snapshot, and Iceberg's planning skips files by the sketch."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from sketch_core.datasets import synthetic_table
from sketch_core.datasets.deltas import DeltaGenerator
from sketch_core.errors import SnapshotExpiredError
from sketch_core.service.facade import SketchService
from sketch_core.spark.lake import scan_metrics
from tests.lake.conftest import DriverCollections
from tests.oracles.results import sorted_rows

pytestmark = pytest.mark.spark

HAVING = "SELECT a, SUM(b) AS s, COUNT(*) AS n FROM {t} WHERE c > -40 GROUP BY a HAVING SUM(b) > :floor"


def _rows(frame: object) -> list[tuple[object, ...]]:
    return sorted_rows(pa.Table.from_pandas(frame.toPandas(), preserve_index=False))  # type: ignore[attr-defined]


def test_a_sketched_report_is_a_lazy_frame_that_skips_files_and_equals_the_plain_query(
    small_files: None, spark_svc: SketchService, spark: SparkSession, ns: str
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


def test_a_report_pinned_at_a_sequence_is_unchanged_while_spark_jobs_commit(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    """Snapshot isolation: Spark INSERT/DELETE/UPDATE commits land from another thread while the
    report runs at sequence N, through the service's reads and through Iceberg's source."""
    svc, table = spark_svc, f"{ns}.facts"
    svc.tables.create(table, synthetic_table(8_000, 80, seed=24), sort_by=["a"])
    sql, params = HAVING.format(t=table), {"floor": 1000}
    pinned = svc.capture(sql, params=params, name=f"{ns}_h", attributes={table: "a"}, fragments=20).sequence
    expected = sorted_rows(svc.query(sql, params, snapshot=pinned, use_sketches=False).table)
    statements = [
        f"INSERT INTO lake.{table} SELECT key + 1000000, a, b + 7, c, d, e, f, g, h, i, j FROM lake.{table} "
        "WHERE a % 3 = 0",
        f"DELETE FROM lake.{table} WHERE a % 5 = 1",
        f"UPDATE lake.{table} SET b = b DIV 2 WHERE a % 7 = 2",
    ] * 2
    failures: list[BaseException] = []

    def commit_all() -> None:
        try:
            for statement in statements:
                spark.sql(statement)
        except BaseException as exc:
            failures.append(exc)

    writer = threading.Thread(target=commit_all)
    writer.start()
    rounds = 0
    while writer.is_alive() or rounds < 2:
        for use in (False, "always"):
            assert sorted_rows(svc.query(sql, params, snapshot=pinned, use_sketches=use).table) == expected
            assert _rows(svc.sketched(sql, params, snapshot=pinned, use_sketches=use)) == expected
        rounds += 1
    writer.join()
    assert not failures, failures
    assert svc.latest_sequence() >= pinned + len(statements), "the commits landed meanwhile"
    assert sorted_rows(svc.query(sql, params, use_sketches=False).table) != expected


def test_a_sketched_report_at_an_expired_snapshot_says_so(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    svc, table = spark_svc, f"{ns}.facts"
    first = svc.tables.create(table, synthetic_table(2_000, 20, seed=25), sort_by=["a"])
    spark.sql(f"DELETE FROM lake.{table} WHERE a = 1")
    svc.tables.expire_snapshots(table, svc.latest_sequence())
    other = SketchService(svc.settings, svc.engine, svc.catalog, svc.spark)  # loaded after it
    with pytest.raises(SnapshotExpiredError, match=table):
        other.sketched(HAVING.format(t=table), {"floor": 10}, snapshot=first)
    assert _rows(other.sketched(HAVING.format(t=table), {"floor": 10})) == sorted_rows(
        other.query(HAVING.format(t=table), {"floor": 10}, use_sketches=False).table
    )
