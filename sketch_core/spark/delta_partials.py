"""Aggregations' deltas computed on Spark (IMP Sec. 8's set-oriented strategy, for big deltas).

An aggregation over a stateless subtree Q (selections, projections, joins) changes by the
partial aggregates of Q(new) - Q(old). With the changed tables T1..Tk of Q in a fixed order,
that bag difference telescopes into one term per changed table,

    Q(T1', .., T(i-1)', ΔTi, T(i+1), .., Tk)    for i = 1..k,

where Tj' is the table at the new snapshot, Tj at the old one and ΔTi its inserted rows minus
its deleted rows. Each term runs as two Spark queries (inserted rows, deleted rows) over views
of the pinned snapshots and of the delta rows, and the partial aggregates are summed with their
signs in Arrow. The join partners of a delta are read by Spark, not in-process.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from sketch_core.algebra.ir import Scan
from sketch_core.incremental.engine import Frontier, RowDelta
from sketch_core.incremental.partials import Partials
from sketch_core.partitions import RangePartition
from sketch_core.rewrites.capture import FRAGMENT_COLUMN
from sketch_core.spark.annotate import annotate_fragments
from sketch_core.spark.state_init import signed_partials
from sketch_core.spark.views import spark_schema

Source = Callable[[Scan], str]
SCRATCH_DIRECTORY = "_sketch_scratch"  # under the warehouse: one directory per run


def collect_scratch(scratch: Path, older_than: float) -> int:
    """Delete the scratch directories of runs that died before removing their own (older than
    ``older_than``, epoch seconds: a live run's are younger). Returns how many."""
    if not scratch.is_dir():
        return 0
    stale = [d for d in scratch.iterdir() if d.is_dir() and d.stat().st_mtime < older_than]
    for directory in stale:
        shutil.rmtree(directory, ignore_errors=True)
    return len(stale)


class _DeltaViews:
    """Temp views of the delta rows, created as the terms need them, dropped afterwards. The
    rows go to Spark as Parquet files in a scratch directory (3x faster than
    ``createDataFrame`` for a million rows, and readable by executors on other machines when
    the directory is on shared storage)."""

    def __init__(
        self,
        spark: SparkSession,
        deltas: Mapping[str, RowDelta],
        partitions: Mapping[str, RangePartition],
        scratch: Path,
    ) -> None:
        self.spark, self.deltas, self.partitions = spark, deltas, partitions
        self.names: dict[tuple[str, str, bool], str] = {}
        self._tag = uuid.uuid4().hex[:12]
        self.directory = scratch / self._tag

    def view(self, table: str, kind: str, annotated: bool) -> str:
        key = (table, kind, annotated)
        if key not in self.names:
            rows = getattr(self.deltas[table], kind)
            path = self.directory / f"{table}.{kind}.parquet"
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(rows, path)
            frame = self.spark.read.schema(spark_schema(rows.schema)).parquet(str(path))
            if annotated:
                frame = annotate_fragments(frame, self.partitions[table], FRAGMENT_COLUMN)
            name = f"__delta_{self._tag}_{table.replace('.', '__')}_{kind}{'_ann' if annotated else ''}"
            frame.createOrReplaceTempView(name)
            self.names[key] = name
        return self.names[key]

    def drop(self) -> None:
        for name in self.names.values():
            self.spark.catalog.dropTempView(name)
        shutil.rmtree(self.directory, ignore_errors=True)


def _term(
    views: _DeltaViews, table: str, kind: str, older: Sequence[str], before: Source, after: Source
) -> Source:
    """Sources of one term: ``table`` read as its ``kind`` rows, the changed tables in ``older``
    at the old snapshot, every other table at the new one."""

    def source(scan: Scan) -> str:
        if scan.table == table:
            return views.view(table, kind, FRAGMENT_COLUMN in scan.source_columns)
        return before(scan) if scan.table in older else after(scan)

    return source


def delta_partials(
    spark: SparkSession,
    frontier: Sequence[Frontier],
    attributes: Mapping[str, str],
    partitions: Mapping[str, RangePartition],
    before: Source,
    after: Source,
    deltas: Mapping[str, RowDelta],
    scratch: Path,
) -> dict[int, Partials]:
    """Each frontier aggregation's partial aggregates over its subtree's delta, the tables
    read through ``before`` (old snapshot) and ``after`` (new) views; ``deltas`` per table,
    handed to Spark as files under ``scratch`` (removed afterwards). Every aggregation must
    read each of its tables once (see ``maintenance.summarizable``)."""
    views = _DeltaViews(spark, deltas, partitions, scratch)
    found: dict[int, Partials] = {}
    try:
        for item in frontier:
            assert len(set(item.tables)) == len(item.tables), "a self join's delta does not telescope"
            changed = [t for t in dict.fromkeys(item.tables) if t in deltas]
            terms = [
                (_term(views, table, kind, changed[i + 1 :], before, after), sign)
                for i, table in enumerate(changed)
                for kind, sign in (("inserted", 1), ("deleted", -1))
                if getattr(deltas[table], kind).num_rows
            ]
            if terms:
                found[item.index] = signed_partials(spark, item, attributes, terms)
    finally:
        views.drop()
    return found
