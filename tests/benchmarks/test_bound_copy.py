"""The bound's copy of a sketch's rows: through the driver when few, written by Spark when many
(a sketch that keeps most of `lineitem` at SF10 filled the driver's heap); the same rows either
way, in files of at most the table's rows per file."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

import benchmarks.capture_use as capture_use
from sketch_core.datasets import synthetic_table
from sketch_core.service import SketchService
from tests.oracles.results import sorted_rows

pytestmark = pytest.mark.spark


def test_a_big_copy_is_written_by_spark_with_the_same_rows(
    spark_svc: SketchService, ns: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = f"{ns}.facts"
    spark_svc.tables.create(table, synthetic_table(6_000, 60, seed=2), sort_by=["key"])
    pin = spark_svc.tables.pin(table)
    frame = spark_svc.spark.read.parquet(*[f.path for f in pin.files]).where("a < 30")
    expected = sorted_rows(frame.toArrow())
    per_file = pin.record_count // len(pin.files)

    through_driver = capture_use.copy_frame_like(frame, pin, 500, tmp_path / "driver")
    monkeypatch.setattr(capture_use, "DRIVER_COPY_MAX_ROWS", 100)
    by_spark = capture_use.copy_frame_like(frame, pin, 500, tmp_path / "spark")
    assert not list(through_driver.glob("part-*")) and list(by_spark.glob("part-*.parquet"))
    for directory in (through_driver, by_spark):
        assert sorted_rows(spark_svc.spark.read.parquet(str(directory)).toArrow()) == expected
        for path in directory.glob("*.parquet"):
            assert pq.ParquetFile(path).metadata.num_rows <= per_file
