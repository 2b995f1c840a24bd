"""The in-process look at a table's first files that spares Spark counting every group."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sketch_core.attribute_choice.group_probe import more_groups_than
from sketch_core.tables.file_columns import NAMES_CHANGED
from sketch_core.tables.pinned import DataFileInfo, PinnedSnapshot


def pinned(tmp_path: Path, *parts: pa.Table, deletes: tuple[int, ...] = ()) -> PinnedSnapshot:
    files = []
    for i, part in enumerate(parts):
        path = tmp_path / f"part-{i}.parquet"
        pq.write_table(part, path, row_group_size=1_000)
        dels = ("deletes.parquet",) if i in deletes else ()
        files.append(DataFileInfo(str(path), part.num_rows, path.stat().st_size, deletes=dels))
    return PinnedSnapshot("ns.t", 1, 1, tuple(files), parts[0].schema)


def keys(values: np.ndarray | list[int | None], other: int = 0) -> pa.Table:
    g = pa.array(values, pa.int64())
    return pa.table({"g": g, "h": pa.array(np.full(len(g), other)), "v": pa.array(np.arange(len(g)))})


def test_more_groups_in_the_first_files_than_the_limit_prove_it(tmp_path: Path) -> None:
    table = pinned(tmp_path, keys(np.arange(3_000)), keys(np.arange(3_000, 6_000)))
    assert more_groups_than(table, ["g"], 5_999)
    assert not more_groups_than(table, ["g"], 6_000)  # exactly 6,000 groups: not more
    assert more_groups_than(table, ["g"], 2_999)  # the first file alone shows it


def test_groups_are_counted_over_every_key_column_and_null_is_one_group(tmp_path: Path) -> None:
    values = [None] * 500 + list(range(1, 501)) * 2  # 501 groups of g
    table = pinned(tmp_path, keys(values, other=0), keys(values, other=1))  # (g, h): 1,002
    assert more_groups_than(table, ["g"], 500) and not more_groups_than(table, ["g"], 501)
    assert more_groups_than(table, ["g", "h"], 1_001)
    assert not more_groups_than(table, ["g", "h"], 1_002)


def test_it_reads_no_more_than_it_is_allowed(tmp_path: Path) -> None:
    table = pinned(tmp_path, keys(np.zeros(5_000, dtype=np.int64)), keys(np.arange(5_000)))
    # The distinct keys are past the first 5,000 rows: a read of 5,000 rows cannot tell.
    assert not more_groups_than(table, ["g"], 1_000, max_rows=5_000)
    assert more_groups_than(table, ["g"], 1_000, max_rows=10_000)


def test_what_could_overcount_is_no_proof(tmp_path: Path) -> None:
    many = keys(np.arange(4_000))
    # A file with merge-on-read deletes: its deleted rows' keys may be gone from the table.
    assert not more_groups_than(pinned(tmp_path, many, deletes=(0,)), ["g"], 10)
    # Floating keys: Spark groups NaNs and signed zeros that Arrow may count apart.
    floats = pa.table({"f": pa.array(np.arange(4_000, dtype=np.float64))})
    assert not more_groups_than(pinned(tmp_path, floats), ["f"], 10)
    # A column no file has under that name, or no group columns at all.
    assert not more_groups_than(pinned(tmp_path, many), ["missing"], 10)
    assert not more_groups_than(pinned(tmp_path, many), [], 0)


def test_a_file_written_before_the_column_was_added_is_passed_over(tmp_path: Path) -> None:
    old = pa.table({"v": pa.array(np.arange(3_000))})
    new = keys(np.arange(3_000))
    table = pinned(tmp_path, old, new)
    table = PinnedSnapshot(table.table, 1, 1, table.files, new.schema)
    assert more_groups_than(table, ["g"], 2_999)


def test_a_table_whose_names_changed_is_left_to_spark(tmp_path: Path) -> None:
    # Files read by name would find a dropped column's values under a name given to a new one.
    table = pinned(tmp_path, keys(np.arange(3_000)))
    assert more_groups_than(table, ["g"], 100)
    renamed = dataclasses.replace(table, schema=table.schema.with_metadata({NAMES_CHANGED: b"1"}))
    assert not more_groups_than(renamed, ["g"], 100)
