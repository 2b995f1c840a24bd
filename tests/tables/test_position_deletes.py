"""Merge-on-read deletes in the service's own reads, without Spark: a data file and position-
delete files written here, in Iceberg's layout (``file_path``, ``pos``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sketch_core.tables.deltas import read_files, read_matching, snapshot_delta
from sketch_core.tables.file_cache import FileCache
from sketch_core.tables.pinned import DataFileInfo, PinnedSnapshot
from sketch_core.tables.position_deletes import changed_positions, deleted_positions, live_mask

SCHEMA = pa.schema([pa.field("k", pa.int64()), pa.field("v", pa.string())])


def data_file(tmp_path: Path, name: str, keys: list[int]) -> DataFileInfo:
    path = tmp_path / name
    pq.write_table(pa.table({"k": keys, "v": [f"v{k}" for k in keys]}, schema=SCHEMA), path)
    return DataFileInfo(f"file://{path}", len(keys), path.stat().st_size)


def position_deletes(tmp_path: Path, name: str, deleted: dict[str, list[int]]) -> str:
    """A position-delete file naming rows of several data files (as Iceberg v2 writes them)."""
    paths = [p for p, positions in deleted.items() for _ in positions]
    positions = [q for qs in deleted.values() for q in qs]
    path = tmp_path / name
    pq.write_table(pa.table({"file_path": paths, "pos": pa.array(positions, pa.int64())}), path)
    return f"file://{path}"


def pin(sequence: int, *files: DataFileInfo) -> PinnedSnapshot:
    return PinnedSnapshot("ns.t", sequence, sequence, files, SCHEMA)


def test_a_mask_keeps_all_but_the_deleted_positions() -> None:
    assert live_mask(5, np.array([0, 3, 9])).tolist() == [False, True, True, False, True]


def test_reads_drop_the_positions_every_delete_file_names_for_the_file(tmp_path: Path) -> None:
    first = data_file(tmp_path, "a.parquet", [10, 11, 12, 13, 14])
    other = data_file(tmp_path, "b.parquet", [20, 21])
    shared = position_deletes(tmp_path, "d1.parquet", {first.path: [1], other.path: [0]})
    more = position_deletes(tmp_path, "d2.parquet", {first.path: [3, 1]})
    deleted = DataFileInfo(first.path, 5, first.size_bytes, deletes=(shared, more))
    assert deleted_positions(deleted).tolist() == [1, 3]
    assert read_files([deleted], SCHEMA)["k"].to_pylist() == [10, 12, 14]
    assert read_files([deleted], SCHEMA, ["k"], pc.field("k") > 10)["k"].to_pylist() == [12, 14]
    keys = {"k": pa.array([11, 12, 13])}
    assert read_matching(pin(1, deleted), ["k", "v"], keys)["v"].to_pylist() == ["v12"]
    cached = read_matching(pin(1, deleted), ["k", "v"], keys, FileCache(1 << 20))
    assert cached["v"].to_pylist() == ["v12"]


def test_a_delta_over_a_file_whose_deletes_grew_is_the_rows_at_the_new_positions(tmp_path: Path) -> None:
    file = data_file(tmp_path, "a.parquet", [10, 11, 12, 13, 14])
    before = DataFileInfo(
        file.path, 5, file.size_bytes, deletes=(position_deletes(tmp_path, "d1.parquet", {file.path: [1]}),)
    )
    # Iceberg 1.12 rewrites a file's position deletes into one file as they grow.
    after = DataFileInfo(
        file.path,
        5,
        file.size_bytes,
        deletes=(position_deletes(tmp_path, "d2.parquet", {file.path: [1, 2, 4]}),),
    )
    assert [p.tolist() for p in changed_positions(before, after)] == [[2, 4], []]
    appended = data_file(tmp_path, "c.parquet", [30])
    delta = snapshot_delta(pin(1, before), pin(2, after, appended))
    assert sorted(delta.deleted["k"].to_pylist()) == [12, 14]
    assert delta.inserted["k"].to_pylist() == [30]
    assert delta.files_read == 2
    # From the empty table: the live rows only.
    assert sorted(snapshot_delta(None, pin(2, after)).inserted["k"].to_pylist()) == [10, 13]
