"""The example DAGs' data and report: a synthetic fact table and a top-k report over it.

Shared by the DAGs in ``dags/`` and by ``make demo``, so the story they tell is one: loads,
Spark jobs as on a data platform, append and delete rows of ``demo.facts``; the report ranks
groups by the sum of ``b``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from sketch_core.datasets.deltas import Delta
    from sketch_core.service import SketchService

DEMO_TABLE = "demo.facts"
DEMO_SKETCH = "demo_top_groups"
DEMO_REPORT = "demo_daily_report"
DEMO_GROUPS = 400
REPORT_SQL = (
    "SELECT a, SUM(b) AS total, COUNT(*) AS n FROM demo.facts "
    "WHERE c > :min_c GROUP BY a ORDER BY total DESC, a LIMIT 10"
)
REPORT_PARAMETERS: dict[str, Any] = {"min_c": -100}
# Maintain once 2,000 rows changed, or an hour after the last version with anything pending,
# and before the daily report.
DEMO_POLICY: dict[str, Any] = {
    "delta_rows": 2000,
    "elapsed_seconds": 3600,
    "before_reports": [DEMO_REPORT],
    "combine": "any",
}


def load_batch(
    svc: SketchService, table: str, *, initial_rows: int, inserts: int, deletes: int, seed: int
) -> dict[str, Any]:
    """One load, run as a platform runs it, by Spark jobs writing the Iceberg table: creates
    ``table`` (sorted on the group column) the first time, then appends ``inserts`` fresh rows
    and deletes ``deletes`` existing ones, each its own Spark commit."""
    from sketch_core.datasets import synthetic_table  # when a load runs, not when DAGs are parsed
    from sketch_core.datasets.deltas import DeltaGenerator

    commits = []
    if not svc.tables.exists(table):
        rows = synthetic_table(initial_rows, DEMO_GROUPS, seed=seed)
        with staged(svc, rows) as frame:
            commits.append(svc.tables.create(table, frame, ["a"]))
        # Deletes and merges write position-delete files instead of rewriting data files:
        # cheap for the loads, and each commit's metadata counts exactly the rows it deleted.
        modes = ", ".join(f"'write.{kind}.mode' = 'merge-on-read'" for kind in ("delete", "update", "merge"))
        svc.spark.sql(f"ALTER TABLE {svc.settings.catalog_name}.{table} SET TBLPROPERTIES ({modes})")
    else:
        generator = DeltaGenerator(svc.tables, table, ("key",), seed=seed)
        if inserts:
            commits.append(load_with_spark(svc, generator.inserts(inserts)))
        if deletes:
            commits.append(load_with_spark(svc, generator.deletes(deletes)))
    return {"table": table, "commits": commits}


def load_with_spark(svc: SketchService, delta: Delta) -> int:
    """Commit ``delta`` with Spark as a load job would: new rows land as Parquet in a staging
    folder and Spark SQL inserts them (``INSERT INTO lake.<table> ... SELECT``); deletes are
    ``DELETE FROM ... WHERE``; a mixed delta is one ``MERGE``. Returns the commit's sequence."""
    target = f"{svc.settings.catalog_name}.{delta.table}"
    if delta.kind == "delete":
        assert delta.delete_where is not None
        svc.spark.sql(f"DELETE FROM {target} WHERE {delta.delete_where}")
        return svc.latest_sequence()
    assert delta.inserts is not None
    with staged(svc, delta.inserts) as frame:
        if delta.kind == "insert":
            columns = ", ".join(delta.inserts.column_names)
            view = f"staged_{uuid.uuid4().hex}"
            frame.createOrReplaceTempView(view)
            try:
                svc.spark.sql(f"INSERT INTO {target} ({columns}) SELECT {columns} FROM {view}")
            finally:
                svc.spark.catalog.dropTempView(view)
            return svc.latest_sequence()
        return svc.tables.overwrite(delta.table, frame, where=delta.delete_where)


@contextmanager
def staged(svc: SketchService, rows: pa.Table) -> Iterator[DataFrame]:
    """``rows`` written to a staging Parquet file, as a Spark DataFrame over it (removed after)."""
    import pyarrow.parquet as pq

    folder = svc.settings.warehouse / "_staging"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{uuid.uuid4().hex}.parquet"
    pq.write_table(rows, path)
    try:
        yield svc.spark.read.parquet(str(path))
    finally:
        path.unlink(missing_ok=True)
