"""Table names as other engines and tools spell them: mixed case, and catalog-qualified.

A table another engine names in mixed case (``Sales.DailyOrders``):

Spark's Iceberg catalog keeps a name as it was spelled and finds the table only so spelled,
while this project names tables in lower case (as Spark's own catalog does). Such a table once
went unrecorded ("a name this project cannot address"), and every query of it failed with a
misleading error. The oracles: the service's plain read equals Spark's, the sketched query
equals the plain one on every path (Parquet files, Iceberg's source with merge-on-read
deletes), and maintenance across Spark's commits equals a fresh capture.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from sketch_core.errors import QueryError, TableError, UnsupportedQueryError
from sketch_core.layout.simulation import Layout
from sketch_core.service.facade import SketchService
from tests.oracles.results import sorted_rows
from tests.service.test_maintain import HAVING, fresh_fragments, maintained

pytestmark = pytest.mark.spark


def _rows(frame: object) -> list[tuple[object, ...]]:
    return sorted_rows(pa.Table.from_pandas(frame.toPandas(), preserve_index=False))  # type: ignore[attr-defined]


def test_a_table_spark_names_in_mixed_case_is_recorded_sketched_and_maintained(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    svc, spelled, name = spark_svc, f"{ns.upper()}.DailyOrders", f"{ns}_having"
    table = spelled.lower()
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{ns.upper()}")
    spark.sql(
        f"CREATE TABLE lake.{spelled} (a BIGINT, b BIGINT, c BIGINT) USING iceberg "
        "TBLPROPERTIES ('write.delete.mode' = 'merge-on-read')"
    )
    spark.sql(f"INSERT INTO lake.{spelled} SELECT id % 40, id % 23, id % 90 - 45 FROM range(3000)")
    sql = HAVING.format(t=spelled)  # the report as its author writes it for Spark
    # Just created by Spark: found without a read before (the lookup records new commits).
    assert svc.tables.exists(table) and svc.tables.exists(spelled)
    assert sorted_rows(svc.tables.read_arrow(table)) == _rows(spark.sql(f"SELECT * FROM lake.{spelled}"))
    plain = svc.query(sql, use_sketches=False).table
    assert sorted_rows(plain) == _rows(spark.sql(sql.replace(spelled, f"lake.{spelled}")))

    svc.capture(sql, name=name, attributes={spelled: "a"}, fragments=8, with_state=True)
    # Named with the catalog, as tools connected to Spark print it, in any quoting: the same.
    for qualified in (f"lake.{spelled}", f"`lake`.`{ns.upper()}`.`DailyOrders`", f"LAKE.{table}"):
        other = HAVING.format(t=qualified)
        assert sorted_rows(svc.query(other, use_sketches="always").table) == sorted_rows(plain)
        assert svc.capture(other, name=f"{name}_q", attributes={table: "a"}, fragments=8).fragments == (
            svc.sketch(name).fragments
        )
        svc.drop_sketch(f"{name}_q")
    spark.sql(f"DELETE FROM lake.{spelled} WHERE a = 7")  # merge-on-read: a delete file
    spark.sql(f"INSERT INTO lake.{spelled} VALUES (7, 20, 1), (39, 22, 2)")
    (run,) = svc.maintain(name)
    assert run.strategy == "incremental"
    seq = svc.latest_sequence()
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, seq)
    plain = svc.query(sql, use_sketches=False).table
    used = svc.query(sql, use_sketches="always")
    assert used.sketch == (name, run.to_version)
    assert sorted_rows(used.table) == sorted_rows(plain)
    # Through Iceberg's Spark source (the pin has deletes), with and without the sketch.
    for use in ("always", False):
        assert _rows(svc.sketched(sql, use_sketches=use)) == sorted_rows(plain)

    # The service's own writes and rewrites reach the table under its catalog spelling.
    svc.tables.append(table, pa.table({"a": [3], "b": [5], "c": [0]}))
    assert spark.sql(f"SELECT count(*) FROM lake.{spelled}").first()[0] == 3_000 - 75 + 2 + 1
    svc.tables.recluster(table, Layout("sort", ("a",)))
    (run,) = svc.maintain(name)
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())
    # A drop removes the catalog's entry as spelled, not only this project's record of it.
    svc.drop_sketch(name)
    svc.tables.drop(table)
    assert spark.sql(f"SHOW TABLES IN lake.{ns.upper()}").count() == 0


def test_tables_whose_names_differ_only_in_case_are_refused_by_name(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    for spelled in (f"{ns.upper()}.Twin", f"{ns.upper()}.TWIN"):
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{ns.upper()}")
        spark.sql(f"CREATE TABLE lake.{spelled} (a BIGINT) USING iceberg")
    with pytest.raises(TableError, match="differ only in case"):
        spark_svc.tables.catalog.load_table(f"{ns}.twin")
    # Neither is recorded (their commits could not be told apart): a query names the table.
    with pytest.raises(TableError, match=f"{ns}.twin"):
        spark_svc.query(f"SELECT count(*) FROM {ns}.Twin")


def test_a_table_of_another_catalog_or_at_another_snapshot_is_refused_by_name(
    spark_svc: SketchService, ns: str
) -> None:
    spark_svc.tables.create(f"{ns}.t", pa.table({"a": [1, 2]}))
    with pytest.raises(QueryError, match="catalog other") as info:
        spark_svc.query(f"SELECT a FROM other.{ns}.t")
    assert "lake.ns.table" in (info.value.hint or "")
    with pytest.raises(QueryError, match="catalog other"):
        spark_svc.capture(f"SELECT a, COUNT(*) FROM other.{ns}.t GROUP BY a", name=f"{ns}_other")
    # Another state of the table: refused, not read as the pinned one (it was, silently).
    snapshot_id = spark_svc.tables.commits(f"{ns}.t")[-1].snapshot_id
    spark_svc.tables.append(f"{ns}.t", pa.table({"a": [3]}))
    with pytest.raises(UnsupportedQueryError, match="time travel"):
        spark_svc.query(f"SELECT COUNT(*) FROM {ns}.t VERSION AS OF {snapshot_id}")
