"""Pins of merge-on-read commits (Spark's DELETE and MERGE write position-delete files) are
derived from their parents' without planning the table, and equal a full plan."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from sketch_core.datasets import synthetic_table
from sketch_core.service.facade import SketchService
from sketch_core.tables import snapshot_files
from sketch_core.tables.service import TableService
from tests.tables.full_plans import counting_full_plans

pytestmark = pytest.mark.spark


def _merge_on_read(svc: SketchService, table: str) -> None:
    modes = ", ".join(f"'write.{kind}.mode' = 'merge-on-read'" for kind in ("delete", "update", "merge"))
    svc.spark.sql(f"ALTER TABLE {svc.settings.catalog_name}.{table} SET TBLPROPERTIES ({modes})")


def test_merge_on_read_pins_are_derived_and_equal_a_full_plan(
    spark_svc: SketchService, spark: SparkSession, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc, table = spark_svc, f"{ns}.facts"
    target = f"{svc.settings.catalog_name}.{table}"
    sequences = [svc.tables.create(table, synthetic_table(6000, 20, seed=5), sort_by=["key"])]
    _merge_on_read(svc, table)
    svc.spark.sql(f"DELETE FROM {target} WHERE key % 7 = 0")  # position deletes in every file
    sequences.append(svc.latest_sequence())
    sequences.append(
        svc.tables.append(
            table,
            synthetic_table(500, 20, seed=6).set_column(
                0, "key", pa.array(range(10_000, 10_500), pa.int64())
            ),
        )
    )
    svc.spark.sql(f"DELETE FROM {target} WHERE key % 7 = 1 AND key < 3000")  # a second delete file
    sequences.append(svc.latest_sequence())
    new_rows = synthetic_table(40, 20, seed=7).set_column(
        0, "key", pa.array(range(20_000, 20_040), pa.int64())
    )
    frame = spark.createDataFrame(new_rows.to_pandas())
    sequences.append(svc.tables.overwrite(table, frame, where="key BETWEEN 10000 AND 10100"))  # MERGE
    pinned_files = svc.tables.catalog.load_table(table)
    assert len(set(sequences)) == len(sequences)

    snapshot_files.SHARED.clear()
    with counting_full_plans(monkeypatch) as full_plans:
        pins = [svc.tables.pin(table, seq) for seq in sequences]
    # The first from the files its commit row records, each later one from its parent's.
    assert full_plans == [], "no commit was planned in full"
    assert any(f.deletes for f in pins[1].files)
    # The second DELETE gave files that had deletes new ones: Spark merges a file's deletes
    # into one new delete file, and the commit removes the old one.
    had = {f.path: f.deletes for f in pins[2].files if f.deletes}
    assert any(f.deletes and f.deletes != had.get(f.path) for f in pins[3].files if f.path in had)
    for seq, pin in zip(sequences, pins, strict=True):
        assert pin.snapshot_id is not None
        assert pin.files == TableService._planned_files(table, pinned_files, pin.snapshot_id), seq
    # The rows read through the derived pins are the table's at each commit.
    for seq in sequences[1:]:
        expected = spark.sql(
            f"SELECT count(*) FROM {target} VERSION AS OF {svc.tables.pin(table, seq).snapshot_id}"
        ).collect()[0][0]
        assert svc.tables.read_arrow(table, seq).num_rows == expected


def test_a_compaction_of_delete_files_is_planned_in_full(
    spark_svc: SketchService, spark: SparkSession, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit that removes delete files (here every data file rewritten with its deletes
    applied) is not derived: which deletes still apply only a plan says."""
    svc, table = spark_svc, f"{ns}.facts"
    target = f"{svc.settings.catalog_name}.{table}"
    svc.tables.create(table, synthetic_table(3000, 10, seed=8), sort_by=["key"])
    _merge_on_read(svc, table)
    svc.spark.sql(f"DELETE FROM {target} WHERE key % 5 = 0")
    before = svc.tables.pin(table, svc.latest_sequence())
    assert any(f.deletes for f in before.files)
    catalog = svc.settings.catalog_name
    svc.spark.sql(
        f"CALL {catalog}.system.rewrite_data_files(table => '{table}', "
        "options => map('rewrite-all', 'true', 'delete-file-threshold', '1'))"
    )
    after_seq = svc.latest_sequence()
    with counting_full_plans(monkeypatch) as full_plans:
        after = svc.tables.pin(table, after_seq)
    assert len(full_plans) == 1
    assert not any(f.deletes for f in after.files)
    assert svc.tables.read_arrow(table, after_seq).num_rows == 3000 - 600
