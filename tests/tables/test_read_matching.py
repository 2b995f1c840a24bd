"""Reads by key values, without Spark: a NULL among the values asks for the rows holding NULL
(a window's partition or an INTERSECT's key), and files are pruned by bounds and NULL counts."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sketch_core.tables.deltas import read_matching
from sketch_core.tables.file_cache import FileCache
from sketch_core.tables.pinned import DataFileInfo, PinnedSnapshot

SCHEMA = pa.schema([pa.field("k", pa.int64()), pa.field("v", pa.string())])


def data_file(tmp_path: Path, name: str, keys: list[int | None]) -> DataFileInfo:
    path = tmp_path / name
    pq.write_table(pa.table({"k": keys, "v": [f"v{k}" for k in keys]}, schema=SCHEMA), path)
    present = [k for k in keys if k is not None]
    nulls = len(keys) - len(present)
    return DataFileInfo(
        f"file://{path}",
        len(keys),
        path.stat().st_size,
        {"k": min(present)},
        {"k": max(present)},
        {"k": nulls},
    )


def test_a_null_key_reads_the_null_rows_and_skips_files_without_nulls(tmp_path: Path) -> None:
    with_null = data_file(tmp_path, "a.parquet", [1, None, 3])
    without = data_file(tmp_path, "b.parquet", [10, 11])
    missing = tmp_path / "gone.parquet"  # listed, never opened: its bounds and NULL count rule it out
    never = DataFileInfo(f"file://{missing}", 2, 1, {"k": 50}, {"k": 60}, {"k": 0})
    pin = PinnedSnapshot("ns.t", 1, 1, (with_null, without, never), SCHEMA)
    for cache in (None, FileCache(1 << 20)):
        with_nulls = read_matching(pin, ["k", "v"], {"k": pa.array([None, 11], pa.int64())}, cache)
        assert sorted(with_nulls["v"].to_pylist()) == ["v11", "vNone"]
        only_null = read_matching(pin, ["k", "v"], {"k": pa.array([None], pa.int64())}, cache)
        assert only_null["v"].to_pylist() == ["vNone"]
        # Without NULL among the values, NULL rows are not read (an equality never matches them).
        assert read_matching(pin, ["k"], {"k": pa.array([1, 3], pa.int64())}, cache)["k"].to_pylist() == [
            1,
            3,
        ]
