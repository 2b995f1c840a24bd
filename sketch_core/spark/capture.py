"""The Spark side of capture: annotated views and the one-job capture query."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sketch_core.algebra.ir import Scan
from sketch_core.algebra.printer import aggregate_sql, to_sql
from sketch_core.partitions import RangePartition
from sketch_core.rewrites.capture import FRAGMENT_COLUMN, CapturePlan
from sketch_core.spark.annotate import annotate_fragments
from sketch_core.spark.views import keep_view, pinned_dataframe
from sketch_core.tables.pinned import PinnedSnapshot


def register_annotated_view(
    spark: SparkSession, pinned: PinnedSnapshot, partition: RangePartition, tag: str
) -> str:
    """A view of the pinned table with ``__fragment``: each row's fragment id (INIT, PBDS 4.1)."""
    name = f"{pinned.view_name}__ann_{tag}"
    annotated = annotate_fragments(pinned_dataframe(spark, pinned), partition, FRAGMENT_COLUMN)
    return keep_view(spark, name, annotated)


def run_capture(
    spark: SparkSession,
    capture: CapturePlan,
    source: Callable[[Scan], str],
    partitions: Mapping[str, RangePartition],
) -> dict[str, set[int]]:
    """Run the capture plan as one Spark job; the fragment ids per table (scans of a table
    merged). Delayed annotations are computed on the result rows, from their key column."""
    rows = spark.sql(to_sql(capture.rows, source=source))
    for name, key in capture.delayed.items():
        rows = annotate_fragments(rows, partitions[capture.tables[name]], name, source=key)
    row = rows.agg(*(F.expr(aggregate_sql(call)).alias(n) for n, call in capture.unions())).collect()[0]
    fragments: dict[str, set[int]] = {table: set() for table in capture.tables.values()}
    for column, table in capture.tables.items():
        fragments[table].update(int(f) for f in (row[column] or []))
    return fragments
