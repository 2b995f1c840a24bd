"""Spark failures as the project's typed errors (``sketch_core.spark.jobs.spark_job``)."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from sketch_core.errors import SparkJobError, SparkQueryError
from sketch_core.spark.jobs import spark_job

pytestmark = pytest.mark.spark


def test_a_jvm_error_names_its_innermost_java_cause_not_the_py4j_call(spark: SparkSession) -> None:
    """As Spark's "Exception thrown in awaitResult" wraps a job's failure (results beyond
    ``spark.driver.maxResultSize``): here an ExecutionException around the cause."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    cause = jvm.java.lang.IllegalStateException("the results are bigger than the driver takes")
    failed = jvm.java.util.concurrent.CompletableFuture.failedFuture(cause)
    with pytest.raises(SparkJobError) as info, spark_job("collecting the state"):
        failed.get()
    assert info.value.what == "collecting the state"
    assert info.value.cause == "java.lang.IllegalStateException: the results are bigger than the driver takes"
    assert "An error occurred while calling" not in str(info.value)


def test_the_query_s_own_errors_stay_query_errors(spark: SparkSession) -> None:
    with pytest.raises(SparkQueryError), spark_job("a query"):
        spark.sql("SELECT no_such_column FROM range(1)").collect()
