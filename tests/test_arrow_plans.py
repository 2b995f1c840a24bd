"""Filters and projections of in-memory tables (sketch_core/arrow/plans.py) over tables in many
chunks, as deltas gathered from many files come, and the recorded rows of a delete, written in
one piece."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from sketch_core.arrow.plans import THREADED_ROWS, filter_table, project_table
from sketch_core.tables.deltas import RecordedRows


def _chunked(rows: int, chunks: int) -> pa.Table:
    values = list(range(rows))
    whole = pa.table({"k": values, "v": [f"s{v % 7}" for v in values]})
    step = -(-rows // chunks)
    return pa.concat_tables([whole.slice(i, step) for i in range(0, rows, step)])


def test_a_table_in_many_chunks_is_filtered_and_projected_in_order() -> None:
    table = _chunked(1000, 83)
    assert table.column(0).num_chunks > 50
    condition = (pc.field("k") >= 300) & (pc.field("v") != "s1")
    kept = filter_table(table, condition)
    expected = [(k, v) for k, v in zip(table["k"].to_pylist(), table["v"].to_pylist(), strict=True)]
    assert list(zip(kept["k"].to_pylist(), kept["v"].to_pylist(), strict=True)) == [
        (k, v) for k, v in expected if k >= 300 and v != "s1"
    ]
    doubled = project_table(table, {"twice": pc.field("k") * 2})
    assert doubled["twice"].to_pylist() == [2 * k for k in range(1000)]


def test_a_big_table_keeps_its_chunks_and_its_rows() -> None:
    table = _chunked(THREADED_ROWS + 10, 4)
    kept = filter_table(table, pc.field("k") >= THREADED_ROWS)
    assert kept["k"].to_pylist() == list(range(THREADED_ROWS, THREADED_ROWS + 10))


def test_recorded_rows_are_read_back_in_one_piece(tmp_path: Path) -> None:
    recorded = RecordedRows(tmp_path)
    deleted = _chunked(1000, 83)
    recorded.write("ns.t", 7, {"deleted": deleted})
    back = recorded.read("ns.t", 7, "deleted")
    assert back is not None
    assert back.equals(deleted)
    assert back.column(0).num_chunks == 1
