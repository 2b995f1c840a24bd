"""Comparing query results across plans: floats rounded, since summation order differs."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from sketch_core.service import SketchService


def rounded(rows: Iterable[Iterable[Any]]) -> list[tuple[Any, ...]]:
    return [tuple(round(v, 6) if isinstance(v, float) and math.isfinite(v) else v for v in r) for r in rows]


def sorted_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """The rows as a sorted list: equal results from plans that order ties differently compare equal."""
    return sorted(rounded(r.values() for r in table.to_pylist()), key=repr)


def check_against_spark(
    svc: SketchService, report: str, name: str | None, as_spark: str | None = None
) -> None:
    """``report`` (its table names prefixed with ``{t}``) answers through the service's plain
    path, and with a sketch captured as ``name`` (None: not sketched) through its sketched
    path, what Spark answers for the text as written over the catalog's tables (or for
    ``as_spark``, the text in Spark's own words, where Spark does not take the report's)."""
    oracle = report if as_spark is None else as_spark
    expected = sorted_rows(svc.spark.sql(oracle.format(t=f"{svc.settings.catalog_name}.")).toArrow())
    assert expected, "the report returns nothing at this scale; the test would be vacuous"
    sql = report.format(t="")
    assert sorted_rows(svc.query(sql, use_sketches=False).table) == expected
    if name is None:
        return
    svc.capture(sql, name=name, fragments=50)
    try:
        sketched = svc.query(sql, use_sketches="always")
        assert sketched.sketch is not None and sketched.sketch[0] == name
        assert sorted_rows(sketched.table) == expected
    finally:
        svc.drop_sketch(name)


def spark_answer(spark: SparkSession, sql: str, table: str) -> list[tuple[Any, ...]]:
    """The sorted rows Spark answers for ``sql`` over the catalog's ``table`` (named ``lake.``
    ``table`` there), which must be some: an empty answer makes an oracle vacuous."""
    rows = sorted_rows(spark.sql(sql.replace(f"FROM {table}", f"FROM lake.{table}")).toArrow())
    assert rows, "the oracle must return rows"
    return rows
