"""Where a report's result goes: written by Spark, to files or an Iceberg table, with a count
and a small preview for XCom (the rows themselves never pass through the driver or XCom)."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Observation, SparkSession

OUTPUT_FORMATS = ("parquet", "csv", "json")
# Rows of the result shown in the task's XCom (and the UI): enough to eyeball it.
PREVIEW_ROWS = 10


def counted(frame: DataFrame) -> tuple[DataFrame, Observation]:
    """The frame, counting its rows as the first action on it runs (read ``observation.get``)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    observation = Observation("report")
    return frame.observe(observation, F.count(F.lit(1)).alias("rows")), observation


def write_files(frame: DataFrame, path: Path, output_format: str) -> None:
    """Write the frame with Spark as a folder of ``output_format`` part files at ``path`` (CSV
    with a header, JSON as lines). The folder appears complete or not at all: it is written
    aside and renamed over the previous result."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial-{uuid.uuid4().hex}")
    writer = frame.write.format(output_format)
    if output_format == "csv":
        writer = writer.option("header", True)
    from sketch_core.spark.jobs import spark_job  # pyspark loads when a task runs, not at parse

    try:
        with spark_job(f"the report written to {path}"):
            writer.save(str(partial))
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)  # the previous result stays as it was
        raise
    replaced = None
    if path.exists():
        replaced = path.with_name(f".{path.name}.replaced-{uuid.uuid4().hex}")
        path.rename(replaced)
    partial.rename(path)
    if replaced is not None:
        shutil.rmtree(replaced) if replaced.is_dir() else replaced.unlink()


def preview_files(spark: SparkSession, path: Path, output_format: str) -> list[dict[str, Any]]:
    reader = spark.read.format(output_format)
    if output_format == "csv":
        reader = reader.option("header", True).option("inferSchema", True)
    from sketch_core.spark.jobs import spark_job

    with spark_job(f"the preview of the report at {path}"):
        return _json_safe(reader.load(str(path)).limit(PREVIEW_ROWS))


def preview_table(spark: SparkSession, relation: str) -> list[dict[str, Any]]:
    from sketch_core.spark.jobs import spark_job

    with spark_job(f"the preview of the report in {relation}"):
        return _json_safe(spark.table(relation).limit(PREVIEW_ROWS))


def _json_safe(frame: DataFrame) -> list[dict[str, Any]]:
    """At most ``PREVIEW_ROWS`` rows, as XCom stores them (dates, decimals as strings)."""
    rows = [row.asDict(recursive=True) for row in frame.limit(PREVIEW_ROWS).collect()]
    return json.loads(json.dumps(rows, default=str))  # type: ignore[no-any-return]
