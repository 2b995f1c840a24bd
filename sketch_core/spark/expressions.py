"""Spark as the :data:`~sketch_core.incremental.remote.RemoteEvaluator` of the in-process engine:
the expressions it refuses, evaluated by the session on the rows of one operator's delta."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from sqlglot import exp

from sketch_core.algebra.dialect import SPARK
from sketch_core.errors import UnsupportedQueryError
from sketch_core.spark.jobs import spark_job

_ROW = "__remote_row"  # keeps the rows in their order through Spark


def evaluate_on_spark(spark: SparkSession, table: pa.Table, expressions: Mapping[str, exp.Expr]) -> pa.Table:
    """One column per named expression over ``table``'s rows, row for row, as Spark computes
    it under the session's settings (ANSI mode, time zone). An expression Spark cannot analyze
    as printed is :class:`UnsupportedQueryError` (the sketch is then recaptured); a failure
    while evaluating is the job's (see :func:`~sketch_core.spark.jobs.spark_job`)."""
    numbered = table.append_column(_ROW, pa.array(range(table.num_rows), pa.int64()))
    selected = [f"`{_ROW}`"] + [
        f"{expression.sql(dialect=SPARK)} AS {exp.to_identifier(name).sql(dialect=SPARK)}"
        for name, expression in expressions.items()
    ]
    text = ", ".join(e.sql(dialect=SPARK) for e in expressions.values())[:200]
    with spark_job(f"evaluating {text} over {table.num_rows} delta rows"):
        # One batch: PySpark 4.2 makes no rows of a table whose first two batches are empty
        # (as a filtered delta's can be).
        frame = spark.createDataFrame(numbered.combine_chunks())
        try:
            result = frame.selectExpr(*selected).toArrow()
        except AnalysisException as exc:
            raise UnsupportedQueryError(
                f"an expression Spark could not analyze on the delta rows ({str(exc).splitlines()[0]})",
                text,
                hint="maintain this sketch with strategy='full'",
            ) from exc
    return result.sort_by(_ROW).drop_columns([_ROW])
