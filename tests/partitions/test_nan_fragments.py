"""NaN in a floating-point sketch attribute: every lookup (Spark's annotation, the in-process
one) puts it in the NULL fragment, while Spark orders NaN above every number. The sketch's
condition must read NaN rows exactly when the sketch keeps the NULL fragment."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from sketch_core.service import SketchService

pytestmark = pytest.mark.spark
ROWS = 80_000  # several files, so that the sketch prunes some


def test_nan_rows_are_read_with_the_null_fragment_and_only_then(
    small_files: None, spark_svc: SketchService, ns: str
) -> None:
    table = f"{ns}.scores"
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 100, ROWS)
    x[::40] = np.nan
    spark_svc.tables.create(table, pa.table({"id": np.arange(ROWS, dtype=np.int64), "x": x}), sort_by=["x"])
    reports = {
        # NaN rows and the lowest values: the NULL fragment and the first, not the last.
        "low": f"SELECT COUNT(*) AS n, COUNT(IF(isnan(x), 1, NULL)) AS nans FROM {table} "
        "WHERE isnan(x) OR x < 5",
        # The highest values, NaN left out: the last fragment, not the NULL one.
        "high": f"SELECT COUNT(*) AS n, MAX(id) AS m FROM {table} WHERE x > 95 AND NOT isnan(x)",
    }
    for label, sql in reports.items():
        version = spark_svc.capture(sql, name=f"{ns}_{label}", attributes={table: "x"}, fragments=20)
        _, partition = spark_svc.range_partition(table, "x", 20)
        kept = set(version.fragments[table])
        assert (partition.null_fragment in kept) == (label == "low")
        plain = spark_svc.query(sql, use_sketches=False).table.to_pylist()
        sketched = spark_svc.query(sql, use_sketches="always")
        assert sketched.sketch is not None
        if label == "high":  # (no bound counts NaNs: with the NULL fragment every file is read)
            assert sketched.files_read < sketched.files_total
        assert sketched.table.to_pylist() == plain, label
    assert spark_svc.query(reports["low"], use_sketches=False).table.to_pylist()[0]["nans"] == ROWS // 40
