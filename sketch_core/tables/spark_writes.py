"""Loads given as Spark DataFrames, written by Spark's Iceberg writer: distributed, nothing
collected to the driver.

The write is an ordinary commit of the lake catalog (``<catalog>.<namespace>.<table>``): the
catalog's trigger numbers it and the table service records it from its metadata like any other
engine's. Spark's writer follows the table's sort order (the table service declares it), so
the files come out clustered on the sort key as the service's own writes do.

Which snapshot is the write's: a DataFrame write carries a marker in its snapshot summary
(``snapshot-property.*`` write option); a MERGE (an overwrite with a condition) cannot, and is
found as the newest snapshot since the one it started from that this Spark application wrote.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from sketch_core.errors import SchemaMismatchError

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata
    from pyspark.sql import DataFrame

MARKER = "sketch.write-id"
_APP_ID = "spark.app.id"


def is_spark_dataframe(data: Any) -> bool:
    return hasattr(data, "sparkSession") and hasattr(data, "writeTo")


def frame_schema(frame: DataFrame) -> pa.Schema:
    """The frame's columns as an Arrow schema (for creating a table the frame is then written to)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(frame.schema)


def conform_frame(frame: DataFrame, schema: pa.Schema, table: str) -> DataFrame:
    """The frame's columns by name, in the table's order; a missing or extra column is a
    SchemaMismatchError (types are checked by Spark's writer)."""
    wanted = schema.names
    lower = {c.lower(): c for c in frame.columns}
    problems = [f"column {c} is missing" for c in wanted if c.lower() not in lower]
    problems += [f"column {c} is not in the table" for c in frame.columns if c not in wanted]
    if problems:
        raise SchemaMismatchError(table, problems)
    return frame.select(*[frame[lower[c.lower()]].alias(c) for c in wanted])


def write_frame(frame: DataFrame, target: str, *, replace: bool, where: str | None = None) -> str:
    """Append ``frame`` to ``target`` (or replace every row, or the rows matching ``where``,
    with it), in one commit; returns the write's marker (see :func:`written_snapshot`).
    Raises SchemaMismatchError for data Spark's writer refuses."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    marker = uuid.uuid4().hex
    try:
        if where is None:
            writer = frame.writeTo(target).option(f"snapshot-property.{MARKER}", marker)
            writer.overwrite(F.lit(True)) if replace else writer.append()
        else:
            view = f"sketch_overwrite_{marker}"
            _merge_source(frame).createOrReplaceTempView(view)
            try:
                frame.sparkSession.sql(_overwrite_merge(target, view, frame.columns, where))
            finally:
                frame.sparkSession.catalog.dropTempView(view)
    except AnalysisException as exc:
        raise SchemaMismatchError(target, [str(exc).splitlines()[0]]) from exc
    return marker


_SOURCE = "__sketch_new_"  # prefix of the new rows' columns in the MERGE's source
_DELETES = "__sketch_deletes"  # true on the one source row that the rows to delete match


def _merge_source(frame: DataFrame) -> DataFrame:
    """The new rows with their columns renamed (so ``where``'s names can only mean the
    target's), and one more row, all NULL but for ``_DELETES``, that the rows to delete match."""
    from pyspark.sql import functions as F

    renamed = frame.select(
        *[frame[c].alias(_SOURCE + c) for c in frame.columns], F.lit(False).alias(_DELETES)
    )
    driver = frame.sparkSession.range(1).select(F.lit(True).alias(_DELETES))
    return renamed.unionByName(driver, allowMissingColumns=True)


def _overwrite_merge(target: str, view: str, columns: list[str], where: str) -> str:
    """One commit deleting the rows matching ``where`` and adding the new ones.

    The condition is in ON, where Spark pushes it into the target's scan, so Iceberg reads
    only the files that may hold such rows. (A ``WHEN NOT MATCHED BY SOURCE AND where`` clause
    deletes the same rows but joins every row of the table: 24 s instead of 1 s on 24M rows.)
    Each target row matches at most the one deleting row, so no row is matched twice."""
    names = ", ".join(f"`{c}`" for c in columns)
    values = ", ".join(f"s.`{_SOURCE}{c}`" for c in columns)
    return (
        f"MERGE INTO {target} t USING {view} s ON s.{_DELETES} AND ({where}) "
        f"WHEN MATCHED THEN DELETE "
        f"WHEN NOT MATCHED AND NOT s.{_DELETES} THEN INSERT ({names}) VALUES ({values})"
    )


def written_snapshot(metadata: TableMetadata, since: int | None, marker: str, app_id: str) -> int | None:
    """The snapshot the write made: the newest one after ``since`` carrying ``marker``, or (a
    MERGE) written by Spark application ``app_id``."""
    by_app = None
    snapshot_id = metadata.current_snapshot_id
    while snapshot_id is not None and snapshot_id != since:
        snapshot = metadata.snapshot_by_id(snapshot_id)
        if snapshot is None:
            break
        summary = snapshot.summary
        if summary is not None and summary.get(MARKER) == marker:
            return int(snapshot_id)
        if by_app is None and summary is not None and summary.get(_APP_ID) == app_id:
            by_app = int(snapshot_id)
        snapshot_id = snapshot.parent_snapshot_id
    return by_app
