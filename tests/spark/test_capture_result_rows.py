"""A capture whose plan returns few rows (a top-k) finishes on the collected rows: its delayed
annotations are the partition's fragments of the key values there. It must find the fragments
the Spark-side annotation finds, for every kind of key (decimals, dates, timestamps, strings,
doubles with NaN, NULL), and for annotations that stay columns."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from sketch_core.algebra.frontend import to_ir
from sketch_core.algebra.ir import Scan
from sketch_core.partitions import RangePartition
from sketch_core.rewrites.capture import FRAGMENT_COLUMN, instrument_capture
from sketch_core.spark import capture as spark_capture
from sketch_core.spark.annotate import annotate_fragments
from sketch_core.spark.capture import run_capture

pytestmark = pytest.mark.spark

DAY = dt.date(2024, 1, 1)
MOMENT = dt.datetime(2024, 1, 1, 12, 0, 0)
# Per key kind: Spark's type, the IR's, 40 distinct values (with NULL) and 3 cuts among them.
KINDS: dict[str, tuple[T.DataType, str, Callable[[int], Any], tuple[Any, ...]]] = {
    "bigint": (T.LongType(), "bigint", lambda i: i * 10, (100, 200, 300)),
    "decimal": (
        T.DecimalType(12, 2),
        "decimal(12,2)",
        lambda i: Decimal(i) / 4,
        (Decimal("2.50"), Decimal("5.00"), Decimal("7.25")),
    ),
    "date": (
        T.DateType(),
        "date",
        lambda i: DAY + dt.timedelta(days=i),
        tuple(DAY + dt.timedelta(days=d) for d in (10, 20, 31)),
    ),
    "timestamp": (
        T.TimestampType(),
        "timestamp",
        lambda i: MOMENT + dt.timedelta(hours=i),
        tuple(MOMENT + dt.timedelta(hours=h) for h in (10, 20, 30)),
    ),
    "string": (T.StringType(), "string", lambda i: f"k{i:03d}", ("k010", "k020", "k030")),
    "double": (T.DoubleType(), "double", lambda i: float("nan") if i == 7 else i / 2, (5.0, 10.0, 15.0)),
}


def keyed_rows(kind: str) -> list[tuple[Any, int, int]]:
    """Key, weight and a second key: every key's weight differs, so the top-k is one set; the
    key with id 3 is NULL (its group ranks among the first)."""
    value = KINDS[kind][2]
    return [
        (None if i == 3 else value(i), (i * 37) % 41 + (100 if i in (3, 7) else 0), i % 5) for i in range(40)
    ]


def capture_both_ways(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch, kind: str, sql: str, attributes: dict[str, str]
) -> tuple[dict[str, set[int]], dict[str, set[int]]]:
    spark_type, ir_type, _, cuts = KINDS[kind]
    schema = T.StructType(
        [T.StructField("k", spark_type), T.StructField("w", T.LongType()), T.StructField("g", T.LongType())]
    )
    frame = spark.createDataFrame(keyed_rows(kind), schema)
    partitions = {
        "s.t": RangePartition("s.t", attributes["s.t"], cuts if attributes["s.t"] == "k" else (1, 3)),
    }
    frame.createOrReplaceTempView(f"result_rows_{kind}")
    annotated = annotate_fragments(frame, partitions["s.t"], FRAGMENT_COLUMN)
    annotated.createOrReplaceTempView(f"result_rows_{kind}_annotated")

    def source(scan: Scan) -> str:
        return f"result_rows_{kind}" + ("_annotated" if FRAGMENT_COLUMN in scan.source_columns else "")

    schemas = {"s.t": [("k", ir_type), ("w", "bigint"), ("g", "bigint")]}
    plan = instrument_capture(to_ir(sql, schemas).plan, attributes=attributes)
    here = run_capture(spark, plan, source, partitions)
    monkeypatch.setattr(spark_capture, "RESULT_ROWS_HERE", -1)
    on_spark = run_capture(spark, plan, source, partitions)
    return here, on_spark


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_top_k_on_its_key_finds_the_fragments_spark_finds(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    sql = "SELECT k, SUM(w) AS s FROM s.t GROUP BY k ORDER BY s DESC LIMIT 6"
    plan = instrument_capture(
        to_ir(sql, {"s.t": [("k", KINDS[kind][1]), ("w", "bigint"), ("g", "bigint")]}).plan,
        attributes={"s.t": "k"},
    )
    assert plan.delayed and plan.most_rows() == 6  # the path under test
    here, on_spark = capture_both_ways(spark, monkeypatch, kind, sql, {"s.t": "k"})
    assert here == on_spark
    partition = RangePartition("s.t", "k", KINDS[kind][3])
    ranked = sorted(keyed_rows(kind), key=lambda row: -row[1])[:6]
    assert here["s.t"] == {partition.fragment_of(row[0]) for row in ranked}
    assert partition.null_fragment in here["s.t"]  # the NULL key's group is among the first


@pytest.mark.parametrize("kind", ["bigint", "string"])
def test_annotations_that_stay_columns_are_read_from_the_rows(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # On g (not in the result): each group's set of fragments is a column of the top rows.
    sql = "SELECT k, SUM(w) AS s FROM s.t GROUP BY k ORDER BY s DESC LIMIT 6"
    schemas = {"s.t": [("k", KINDS[kind][1]), ("w", "bigint"), ("g", "bigint")]}
    plan = instrument_capture(to_ir(sql, schemas).plan, attributes={"s.t": "g"})
    assert not plan.delayed and plan.sets and plan.most_rows() == 6
    here, on_spark = capture_both_ways(spark, monkeypatch, kind, sql, {"s.t": "g"})
    assert here == on_spark
    ranked = sorted(keyed_rows(kind), key=lambda row: -row[1])[:6]
    partition = RangePartition("s.t", "g", (1, 3))
    assert here["s.t"] == {partition.fragment_of(row[2]) for row in ranked}


def test_a_key_the_lookup_cannot_compare_falls_back_to_spark(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    sql = "SELECT k, SUM(w) AS s FROM s.t GROUP BY k ORDER BY s DESC LIMIT 6"
    _, expected = capture_both_ways(spark, monkeypatch, "date", sql, {"s.t": "k"})
    monkeypatch.setattr(spark_capture, "RESULT_ROWS_HERE", 10_000)

    def incomparable(self: RangePartition, value: object) -> int:
        raise TypeError("'<' not supported between instances of 'date' and 'str'")

    monkeypatch.setattr(RangePartition, "fragment_of", incomparable)
    with caplog.at_level("WARNING", logger="sketch_core.spark.capture"):
        here, _ = capture_both_ways(spark, monkeypatch, "date", sql, {"s.t": "k"})
    assert here == expected
    assert "annotated on Spark" in caplog.text


def test_a_top_k_without_rows_keeps_no_fragment(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    sql = "SELECT k, SUM(w) AS s FROM s.t WHERE w < 0 GROUP BY k ORDER BY s DESC LIMIT 6"
    here, on_spark = capture_both_ways(spark, monkeypatch, "timestamp", sql, {"s.t": "k"})
    assert here == on_spark == {"s.t": set()}
