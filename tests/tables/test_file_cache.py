"""The in-memory column cache of data files."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from sketch_core.tables.file_cache import FileCache

FILE = pa.table({"a": list(range(1000)), "b": [float(i) for i in range(1000)], "c": ["x"] * 1000})


def test_columns_are_read_once_and_only_the_missing_ones_later() -> None:
    loads: list[tuple[str, list[str]]] = []

    def load(path: str, columns: list[str]) -> pa.Table:
        loads.append((path, columns))
        return FILE.select(columns)

    cache = FileCache(max_bytes=1 << 20)
    assert cache.read("f1", ["a", "b"], load) == FILE.select(["a", "b"])
    assert cache.read("f1", ["b", "a"], load) == FILE.select(["b", "a"])
    assert cache.read("f1", ["a", "c"], load) == FILE.select(["a", "c"])
    assert loads == [("f1", ["a", "b"]), ("f1", ["c"])]


def test_least_recently_used_columns_are_dropped_past_the_budget() -> None:
    loads: list[str] = []

    def load(path: str, columns: list[str]) -> pa.Table:
        loads.append(path)
        return FILE.select(columns)

    one_column = FILE.column("a").nbytes
    cache = FileCache(max_bytes=2 * one_column)
    for path in ("f1", "f2", "f1", "f3", "f1", "f2"):
        cache.read(path, ["a"], load)
    assert loads == ["f1", "f2", "f3", "f2"], "f1 was used last before f3 came, so f2 went"
    assert cache.bytes <= 2 * one_column


def test_matching_rows_are_the_same_whether_the_column_is_sorted_or_not() -> None:
    cache = FileCache(max_bytes=1 << 20)
    wanted = pa.array([5, 7, 7, 999, 2000, -1])
    for path, values in (("sorted", [1, 5, 5, 6, 7, 999, 1000]), ("shuffled", [7, 1, 5, 1000, 5, 999, 6])):
        column = pa.chunked_array([values])
        expected = pc.is_in(column, value_set=wanted)
        for _ in range(2):  # the second time from the remembered order
            assert cache.matching(path, column, "k", wanted).to_pylist() == expected.to_pylist()
