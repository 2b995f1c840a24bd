"""The session keeps the classes Spark generates for more plans than Spark's default 100: a few
reports run plain and sketched in one session otherwise evict each other's classes, and every
run generates and JIT-compiles them again."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from sketch_core.spark.session import CODEGEN_CACHE_ENTRIES, CODEGEN_CACHE_KEY

SPARK_DEFAULT_ENTRIES = 100


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
