"""``SketchService.sketch_rows``: the rows a sketch keeps, exactly, and the query's result over them."""

from __future__ import annotations

import numpy as np
import pytest

from sketch_core.algebra.query_text import bind_tables
from sketch_core.datasets.synthetic import synthetic_table
from sketch_core.errors import SketchNotFoundError
from sketch_core.service import SketchService
from tests.oracles.results import sorted_rows


def test_sketch_rows_are_the_rows_of_its_fragments_and_answer_the_query(
    spark_svc: SketchService, ns: str
) -> None:
    data = synthetic_table(20_000, 40, seed=5)
    table = f"{ns}.events"
    spark_svc.tables.create(table, data, sort_by=["key"])
    sql = f"SELECT key, a, b FROM {table} WHERE b > 0 ORDER BY b DESC, key LIMIT 5"
    name = f"{ns}_top_rows"
    version = spark_svc.capture(sql, name=name, attributes={table: "key"}, fragments=50)
    attribute, count = version.partitions[table]
    _, partition = spark_svc.range_partition(table, attribute, count)
    keys = data.column("key").to_numpy()
    in_sketch = np.isin(partition.fragments_of(keys), version.fragments[table])

    rows = spark_svc.sketch_rows(name)

    assert set(rows) == {table}
    kept = rows[table].toArrow()
    assert kept.column_names == data.column_names
    assert 0 < kept.num_rows < data.num_rows // 5  # at most 5 of 50 fragments
    assert sorted(kept.column("key").to_pylist()) == keys[in_sketch].tolist()
    view = f"{ns}_sketch_rows"
    rows[table].createOrReplaceTempView(view)
    over_kept = spark_svc.spark.sql(bind_tables(sql, {table: view})).toArrow()
    assert sorted_rows(over_kept) == sorted_rows(spark_svc.query(sql, use_sketches=False).table)


def test_sketch_rows_of_an_unknown_sketch_name_it(spark_svc: SketchService) -> None:
    with pytest.raises(SketchNotFoundError, match="no_such_sketch"):
        spark_svc.sketch_rows("no_such_sketch")


def test_an_empty_sketch_keeps_no_rows(spark_svc: SketchService, ns: str) -> None:
    table = f"{ns}.events"
    spark_svc.tables.create(table, synthetic_table(2_000, 10, seed=6), sort_by=["key"])
    sql = f"SELECT key, b FROM {table} WHERE b > 1000000000 ORDER BY b DESC, key LIMIT 3"
    name = f"{ns}_nothing"
    version = spark_svc.capture(sql, name=name, attributes={table: "key"}, fragments=20)
    assert version.fragments[table] == []

    assert spark_svc.sketch_rows(name)[table].count() == 0
