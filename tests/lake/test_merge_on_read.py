"""Merge-on-read tables: Spark's DELETE, UPDATE and MERGE leave the data files and write which
rows are gone (position-delete files in format v2, deletion vectors in v3). The project's own
reads, its deltas, its sketches' maintenance and its garbage collection honour them.

Oracles: the project's read at each sequence equals Spark's read of the same snapshot; each
delta equals the bag difference of the two snapshots' rows as Spark reads them; a maintained
sketch equals a fresh capture; the sketched query equals the plain one.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from sketch_core.datasets import synthetic_table
from sketch_core.errors import SnapshotExpiredError, UnsupportedTableFeatureError
from sketch_core.service.facade import SketchService
from sketch_core.tables.deltas import read_files
from tests.lake.conftest import spark_sql_during
from tests.oracles.results import sorted_rows
from tests.service.test_maintain import HAVING, TOPK, fresh_fragments, maintained

pytestmark = pytest.mark.spark

MERGE_ON_READ = ", ".join(f"'write.{kind}.mode' = 'merge-on-read'" for kind in ("delete", "update", "merge"))


def spark_rows(spark: SparkSession, table: str, snapshot_id: int | None) -> list[tuple[object, ...]]:
    if snapshot_id is None:
        return []
    frame = spark.sql(f"SELECT * FROM lake.{table} VERSION AS OF {snapshot_id}")
    return sorted_rows(pa.Table.from_pandas(frame.toPandas(), preserve_index=False))


def own_rows(svc: SketchService, table: str, sequence: int) -> list[tuple[object, ...]]:
    pin = svc.tables.pin(table, sequence)
    return sorted_rows(read_files(pin.files, pin.schema))


def make_merge_on_read(spark: SparkSession, table: str, format_version: int) -> None:
    spark.sql(
        f"ALTER TABLE lake.{table} SET TBLPROPERTIES ('format-version' = '{format_version}', {MERGE_ON_READ})"
    )


def check_commit(
    svc: SketchService, spark: SparkSession, table: str, before: int, sketch: str, sql: str
) -> int:
    """The oracles after one commit (``before``: the sequence of the commit before it)."""
    after = svc.latest_sequence()
    assert after > before
    old, new = (svc.tables.pin(table, s).snapshot_id for s in (before, after))
    expected_new = spark_rows(spark, table, new)
    assert own_rows(svc, table, after) == expected_new
    delta = svc.tables.delta(table, before, after)
    gone = Counter(spark_rows(spark, table, old)) - Counter(expected_new)
    came = Counter(expected_new) - Counter(spark_rows(spark, table, old))
    assert Counter(sorted_rows(delta.deleted)) == gone
    assert Counter(sorted_rows(delta.inserted)) == came
    svc.maintain(sketch)
    assert maintained(svc, sketch) == fresh_fragments(svc, sql, sketch, after)
    sketched = svc.query(sql, use_sketches="always")
    assert sketched.sketch is not None and sketched.sketch[0] == sketch
    assert sorted_rows(sketched.table) == sorted_rows(svc.query(sql, use_sketches=False).table)
    return after


@pytest.mark.parametrize("format_version", [2, 3], ids=["position-deletes", "deletion-vectors"])
def test_merge_on_read_commits_are_read_delta_d_maintained_and_sketched(
    spark_svc: SketchService, spark: SparkSession, ns: str, format_version: int
) -> None:
    svc, table = spark_svc, f"{ns}.facts"
    svc.tables.create(table, synthetic_table(3000, 30, seed=31), sort_by=["a"])
    sql, sketch = HAVING.format(t=table), f"{ns}_having"
    svc.capture(sql, name=sketch, attributes={table: "a"}, fragments=15)
    make_merge_on_read(spark, table, format_version)
    statements = [
        f"DELETE FROM lake.{table} WHERE a = 5",
        f"UPDATE lake.{table} SET b = b DIV 2 WHERE a = 7",
        # The same data file gets more deletes: the delta is the newly deleted positions only.
        f"DELETE FROM lake.{table} WHERE a = 7 AND c < 0",
        f"""MERGE INTO lake.{table} t
            USING (SELECT key, a FROM lake.{table} WHERE a IN (9, 11) ORDER BY key LIMIT 40) s
            ON t.key = s.key
            WHEN MATCHED AND s.a = 9 THEN DELETE
            WHEN MATCHED THEN UPDATE SET t.b = t.b DIV 3""",
        f"INSERT INTO lake.{table} SELECT key + 100000, a, b, c, d, e, f, g, h, i, j "
        f"FROM lake.{table} WHERE a < 4",
    ]
    seq = svc.latest_sequence()
    for statement in statements:
        spark.sql(statement)
        seq = check_commit(svc, spark, table, seq, sketch, sql)
    pin = svc.tables.pin(table)
    deletes = {d for f in pin.files for d in f.deletes}
    suffix = ".puffin" if format_version == 3 else ".parquet"
    assert deletes and all(d.endswith(suffix) for d in deletes), deletes
    assert spark.table(f"lake.{table}").count() == svc.tables.commits(table)[-1].total_rows


@pytest.mark.parametrize("format_version", [2, 3], ids=["position-deletes", "deletion-vectors"])
def test_garbage_collection_keeps_the_delete_files_the_kept_snapshots_read(
    spark_svc: SketchService, spark: SparkSession, ns: str, format_version: int
) -> None:
    """Expiring snapshots (with PyIceberg, or with Spark's procedure for v3 tables, which
    PyIceberg cannot commit to) and removing unreferenced files keep every file a kept
    snapshot reads, delete files included."""
    svc, table = spark_svc, f"{ns}.facts"
    first = svc.tables.create(table, synthetic_table(2000, 20, seed=32), sort_by=["a"])
    first_list = svc.catalog.load_table(table).metadata.snapshots[0].manifest_list
    make_merge_on_read(spark, table, format_version)
    spark.sql(f"DELETE FROM lake.{table} WHERE a = 3")
    middle = svc.latest_sequence()
    spark.sql(f"DELETE FROM lake.{table} WHERE a = 4")
    latest = svc.latest_sequence()
    expected = own_rows(svc, table, latest)
    assert svc.tables.expire_snapshots(table, middle) == 1
    svc.tables.remove_unreferenced_files(table, older_than=time.time() + 1)
    assert not Path(urlparse(first_list).path).exists(), "the expired snapshot's files are gone"
    other = SketchService(svc.settings, svc.engine, svc.catalog, svc.spark)  # loaded after it
    with pytest.raises(SnapshotExpiredError):
        other.tables.pin(table, first)
    for sequence in (middle, latest):
        at = svc.tables.pin(table, sequence).snapshot_id
        assert own_rows(svc, table, sequence) == spark_rows(spark, table, at)
    assert own_rows(svc, table, latest) == expected
    delta = svc.tables.delta(table, middle, latest)
    assert set(delta.deleted["a"].to_pylist()) == {4} and delta.inserted.num_rows == 0


def test_a_format_v3_table_refuses_arrow_writes_by_name_and_takes_spark_frames(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    svc, table = spark_svc, f"{ns}.facts"
    svc.tables.create(table, pa.table({"k": [1, 2, 3], "v": ["a", "b", "c"]}), sort_by=["k"])
    make_merge_on_read(spark, table, 3)
    before = svc.tables.commits(table)
    with pytest.raises(UnsupportedTableFeatureError, match=f"{table} is an Iceberg format v3 table"):
        svc.tables.append(table, pa.table({"k": [4], "v": ["d"]}))
    with pytest.raises(UnsupportedTableFeatureError, match="format v3"):
        svc.tables.delete(table, "k = 1")
    assert svc.tables.commits(table) == before, "nothing published"
    seq = svc.tables.append(table, spark.createDataFrame([(4, "d")], "k INT, v STRING"))
    assert sorted(own_rows(svc, table, seq)) == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]


def commit_equality_delete(spark: SparkSession, table: str, keys: list[int], folder: Path) -> None:
    """An equality-delete file (rows whose ``key`` is in ``keys``), committed with Iceberg's Java
    API: Spark's SQL writes position deletes only (streaming writers such as Flink write these)."""
    path = folder / "eq-deletes.parquet"
    pq.write_table(pa.table({"key": pa.array(keys, pa.int64())}), path)
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    iceberg = jvm.org.apache.iceberg
    loaded = iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, f"lake.{table}")
    field_ids = spark.sparkContext._gateway.new_array(jvm.int, 1)  # type: ignore[attr-defined]
    field_ids[0] = loaded.schema().findField("key").fieldId()
    delete_file = (
        iceberg.FileMetadata.deleteFileBuilder(loaded.spec())
        .ofEqualityDeletes(field_ids)
        .withPath(f"file://{path}")
        .withFormat("parquet")
        .withFileSizeInBytes(path.stat().st_size)
        .withRecordCount(len(keys))
        .build()
    )
    loaded.newRowDelta().addDeletes(delete_file).commit()


def test_equality_deletes_are_refused_by_name_and_their_sketches_do_not_drift(
    spark_svc: SketchService, spark: SparkSession, ns: str, tmp_path: Path
) -> None:
    svc, table = spark_svc, f"{ns}.facts"
    svc.tables.create(table, synthetic_table(1000, 10, seed=33), sort_by=["a"])
    sketch = f"{ns}_having"
    svc.capture(HAVING.format(t=table), name=sketch, attributes={table: "a"}, fragments=5)
    commit_equality_delete(spark, table, [1, 2, 3], tmp_path)
    (commit,) = svc.tables.commits(table)[-1:]
    assert commit.operation in ("delete", "overwrite"), "numbered like any commit"
    with pytest.raises(UnsupportedTableFeatureError, match=f"{table} has equality delete files"):
        svc.tables.pin(table)
    with pytest.raises(UnsupportedTableFeatureError, match="equality delete"):
        svc.maintain(sketch, "incremental")
    assert svc.sketches.versions(sketch) == [1], "nothing published"


def test_a_sketched_report_over_deleted_rows_skips_files_by_its_range_condition(
    spark_svc: SketchService, spark: SparkSession, ns: str
) -> None:
    """Files with merge-on-read deletes are read through Iceberg's source, over the snapshot:
    only the sketch's range condition makes that scan skip files. It must reach the query even
    where, over plain Parquet files, the condition would not be worth evaluating."""
    svc, table = spark_svc, f"{ns}.facts"
    rows = synthetic_table(4000, 40, seed=35).sort_by("a")
    svc.tables.create(table, rows.slice(0, 1000), sort_by=["a"])
    for start in range(1000, 4000, 1000):  # four files, each holding its own range of a
        svc.tables.append(table, rows.slice(start, 1000))
    sql = TOPK.format(t=table)
    sketch = f"{ns}_topk"
    svc.capture(sql, name=sketch, attributes={table: "a"}, fragments=40)
    make_merge_on_read(spark, table, 2)
    spark.sql(f"DELETE FROM lake.{table} WHERE key % 7 = 0")  # a deleted row in every file
    svc.maintain(sketch)
    assert svc.tables.pin(table).has_deletes

    sketched, ran = spark_sql_during(spark, lambda: svc.query(sql, use_sketches="always"))
    assert sketched.sketch is not None and sketched.files_read < sketched.files_total
    (query,) = [text for text in ran if "GROUP BY" in text]
    assert re.search(r"\ba (>=|<=|>|<|BETWEEN|IN)", query), query
    assert sorted_rows(sketched.table) == sorted_rows(svc.query(sql, use_sketches=False).table)
