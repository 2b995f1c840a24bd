"""Arrow conversion and schema conformance (pure)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sketch_core.errors import InvalidDataError, InvalidTableNameError, SchemaMismatchError
from sketch_core.tables.data import conform, portable, sort_rows, to_arrow
from sketch_core.tables.names import normalize_table_name

TARGET = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.large_string())])


def test_conform_reorders_and_widens() -> None:
    data = pa.table({"name": pa.array(["a"], pa.string_view()), "id": pa.array([1], pa.int32())})
    out = conform(data, TARGET, "t.x")
    assert out.schema == TARGET
    assert out.to_pylist() == [{"id": 1, "name": "a"}]


def test_conform_names_every_problem() -> None:
    data = pa.table({"id": pa.array(["x"]), "extra": pa.array([1])})
    with pytest.raises(SchemaMismatchError) as info:
        conform(data, TARGET, "t.x")
    problems = " | ".join(info.value.problems)
    assert "missing columns name" in problems
    assert "unexpected columns extra" in problems
    assert "column id is string" in problems


def test_portable_replaces_view_and_unsigned_types() -> None:
    data = pa.table({"s": pa.array(["a"], pa.string_view()), "u": pa.array([1], pa.uint32())})
    assert portable(data).schema == pa.schema([("s", pa.string()), ("u", pa.int64())])


def test_to_arrow_reads_parquet_and_rejects_unknown(tmp_path: Path) -> None:
    path = tmp_path / "x.parquet"
    pq.write_table(pa.table({"id": [1, 2]}), path)
    assert to_arrow(path).num_rows == 2
    with pytest.raises(InvalidDataError, match="no such file"):
        to_arrow(tmp_path / "missing.parquet")
    with pytest.raises(InvalidDataError, match="cannot use data of type int"):
        to_arrow(42)


def test_sort_rows_orders_by_all_keys() -> None:
    data = pa.table({"a": [2, 1, 2, 1], "b": [1, 2, 0, 1]})
    assert sort_rows(data, ("a", "b")).to_pylist() == [
        {"a": 1, "b": 1},
        {"a": 1, "b": 2},
        {"a": 2, "b": 0},
        {"a": 2, "b": 1},
    ]


@pytest.mark.parametrize("name", ["x", "a.b.c", "1a.b", "a.b;drop", "a .b", ""])
def test_invalid_table_names(name: str) -> None:
    with pytest.raises(InvalidTableNameError):
        normalize_table_name(name)


def test_table_names_are_lower_cased() -> None:
    assert normalize_table_name("TPCH.LineItem") == "tpch.lineitem"
