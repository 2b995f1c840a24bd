"""A table another engine (PyIceberg here) writes with Iceberg's ``uuid``, ``fixed`` and
``binary`` types. PyIceberg gives a uuid to Arrow as an extension type that PySpark cannot
convert, so every query and capture over such a table failed, those that read none of its
uuid columns too. Now the service reads it as Spark does (a uuid as its text), captures, uses
and maintains sketches over it (a query grouping by a uuid is recaptured: the in-process engine
refuses it by name), and equals Spark's answer throughout."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import BinaryType, DoubleType, FixedType, LongType, NestedField, UUIDType
from pyspark.sql import SparkSession

from sketch_core.service.facade import SketchService
from tests.oracles.results import sorted_rows, spark_answer
from tests.service.test_maintain import fresh_fragments, maintained

pytestmark = pytest.mark.spark

SCHEMA = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "u", UUIDType()),
    NestedField(3, "b", BinaryType()),
    NestedField(4, "f", FixedType(3)),
    NestedField(5, "v", DoubleType()),
)


def rows(start: int, n: int) -> pa.Table:
    keys = range(start, start + n)
    ids = pa.array([uuid.UUID(int=k % 37 + 1).bytes for k in keys], pa.binary(16))
    return pa.table(
        {
            "id": pa.array(keys, pa.int64()),
            "u": pa.ExtensionArray.from_storage(pa.uuid(), ids),
            "b": pa.array([b"\x01\x02" if k % 9 == 0 else bytes([k % 256]) for k in keys], pa.binary()),
            "f": pa.array([bytes([k % 5, 7, 7]) for k in keys], pa.binary(3)),
            "v": pa.array([float(k * 7919 % 1009) for k in keys]),
        }
    )


def test_a_table_with_uuid_fixed_and_binary_columns_answers_as_spark(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    svc, table = spark_svc, f"{ns}.odd"
    svc.context.catalog.create_namespace(ns)
    written = svc.context.catalog.create_table(table, schema=SCHEMA)
    written.append(rows(0, 3000))
    reports = {
        "u": f"SELECT u, SUM(v) AS s FROM {table} GROUP BY u ORDER BY s DESC LIMIT 3",
        "b": f"SELECT id, v FROM {table} WHERE b = X'0102' ORDER BY v DESC, id LIMIT 5",
        "f": f"SELECT hex(f) AS h, COUNT(*) AS n FROM {table} GROUP BY hex(f) HAVING COUNT(*) > 500",
    }
    answer = svc.query(reports["u"], use_sketches=False).table
    assert answer.schema.field("u").type == pa.string(), "a uuid reads as its text, as in Spark"
    for column, sql in reports.items():
        assert sorted_rows(svc.query(sql, use_sketches=False).table) == spark_answer(spark, sql, table)
        svc.capture(sql, name=f"{ns}_{column}", attributes={table: "id"}, fragments=30)
        assert sorted_rows(svc.query(sql, use_sketches="always").table) == spark_answer(spark, sql, table)
    svc.context.catalog.load_table(table).append(rows(5000, 200))
    spark.sql(f"DELETE FROM lake.{table} WHERE id % 13 = 1")
    for column, sql in reports.items():
        name = f"{ns}_{column}"
        (run,) = svc.maintain(name)
        assert run.strategy == ("full" if column == "u" else "incremental"), column
        assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())
        assert sorted_rows(svc.query(sql, use_sketches="always").table) == spark_answer(spark, sql, table)
