"""The session keeps the classes Spark generates for more plans than Spark's default 100: a few
reports run plain and sketched in one session otherwise evict each other's classes, and every
run generates and JIT-compiles them again."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from pyspark.sql import SparkSession

from sketch_core.spark.session import (
    CODEGEN_CACHE_ENTRIES,
    CODEGEN_CACHE_KEY,
    SPARK_CODEGEN_CACHE_ENTRIES,
    small_codegen_cache,
    warn_small_codegen_cache,
)

SPARK_DEFAULT_ENTRIES = 100  # Spark 4.1's spark.sql.codegen.cache.maxEntries


def _compilations(spark: SparkSession) -> int:
    """How many classes Spark has generated (compiled with Janino) in this JVM so far."""
    jvm: Any = spark.sparkContext._jvm
    return int(jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount())


def _plan(spark: SparkSession, number: int) -> None:
    # Numeric literals are written into the generated code: each number is a class of its own.
    spark.range(4).selectExpr(f"id * {number} + {number} AS x").where(f"x > {number}").collect()


def test_the_session_keeps_the_generated_classes_of_more_plans_than_sparks_default(
    spark: SparkSession,
) -> None:
    assert int(spark.conf.get(CODEGEN_CACHE_KEY)) == CODEGEN_CACHE_ENTRIES > SPARK_DEFAULT_ENTRIES
    base = 7_000_001  # numbers no other test's plans use
    before = _compilations(spark)
    _plan(spark, base)
    assert _compilations(spark) > before, "the first plan generated no class: nothing to check"
    # More distinct plans than Spark's default cache holds, fewer than the session's.
    number = base
    while _compilations(spark) - before < 2 * SPARK_DEFAULT_ENTRIES:
        number += 1
        _plan(spark, number)
        assert number - base < CODEGEN_CACHE_ENTRIES // 4, "plans generate fewer classes than expected"
    again = _compilations(spark)
    _plan(spark, base)  # its classes were generated before the others': still kept
    assert _compilations(spark) == again


def test_a_session_with_sparks_default_cache_is_told_apart_from_the_services() -> None:
    assert SPARK_CODEGEN_CACHE_ENTRIES == SPARK_DEFAULT_ENTRIES
    assert small_codegen_cache(None) == SPARK_DEFAULT_ENTRIES  # unset: Spark's default
    assert small_codegen_cache("100") == SPARK_DEFAULT_ENTRIES
    assert small_codegen_cache(str(CODEGEN_CACHE_ENTRIES - 1)) == CODEGEN_CACHE_ENTRIES - 1
    assert small_codegen_cache(str(CODEGEN_CACHE_ENTRIES)) is None
    assert small_codegen_cache("5000") is None
    assert small_codegen_cache("many") is None  # Spark refuses it before the service sees it


def test_the_services_session_is_not_warned_about(
    spark: SparkSession, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="sketch_core.spark.session"):
        warn_small_codegen_cache(spark)
    assert not [r for r in caplog.records if CODEGEN_CACHE_KEY in r.getMessage()]
