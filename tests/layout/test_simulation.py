"""Files and row groups a sketch reads under a simulated layout (pure)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sketch_core.errors import ConfigurationError
from sketch_core.layout.simulation import Layout, SketchOnSample, row_order, units_read, zorder_keys


def _sketch(fragments: list[int] | np.ndarray, kept: set[int], null_fragment: int = 100) -> SketchOnSample:
    return SketchOnSample("a", np.asarray(fragments, dtype=np.int64), null_fragment, frozenset(kept))


def test_the_docstring_example_one_file_once_sorted_on_the_sketch_attribute() -> None:
    sketch = _sketch([5, 2, 7, 0, 3, 6, 1, 4], {1}, null_fragment=8)
    as_loaded = units_read(np.arange(8), sketch, files=2, row_groups_per_file=1)
    assert (as_loaded.files, as_loaded.files_total) == (2, 2)
    order = row_order(Layout("sort", ("customer",)), {"customer": sketch.fragments})
    assert units_read(order, sketch, files=2, row_groups_per_file=1).files == 1


def _naive_read(fragments: np.ndarray, runs: int, sketch: SketchOnSample) -> list[bool]:
    edges = np.linspace(0, len(fragments), runs + 1).astype(int)
    read = []
    for start, stop in itertools.pairwise(edges):
        chunk = [int(f) for f in fragments[start:stop]]
        values = [f for f in chunk if f != sketch.null_fragment]
        hit = bool(values) and any(
            min(values) <= k <= max(values) for k in sketch.kept if k != sketch.null_fragment
        )
        read.append(hit or (sketch.null_fragment in sketch.kept and sketch.null_fragment in chunk))
    return read


@settings(max_examples=200, derandomize=True, deadline=None)
@given(
    st.lists(st.integers(0, 20), min_size=40, max_size=300),
    st.sets(st.integers(0, 20), max_size=6),
    st.integers(1, 8),
    st.integers(1, 4),
)
def test_runs_read_agree_with_reading_each_run_s_bounds(
    fragments: list[int], kept: set[int], files: int, groups: int
) -> None:
    sketch = _sketch(fragments, kept, null_fragment=20)  # fragment 20 stands for NULL
    got = units_read(np.arange(len(fragments)), sketch, files, groups)
    naive = _naive_read(sketch.fragments, files * groups, sketch)
    assert got.row_groups == sum(naive)
    per_file = np.asarray(naive).reshape(files, groups).any(axis=1)
    assert got.files == int(per_file.sum())
    assert got.files <= got.row_groups <= got.files * groups


def test_a_sort_serves_its_own_column_best_and_a_zorder_serves_both() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 1000, 20_000), rng.integers(0, 1000, 20_000)
    on_a = SketchOnSample("a", a, 1000, frozenset(range(100, 110)))
    on_b = SketchOnSample("b", b, 1000, frozenset(range(500, 510)))
    ranks = {"a": a, "b": b}
    read = {
        str(layout): (units_read(order, on_a, 64, 1).files, units_read(order, on_b, 64, 1).files)
        for layout in (Layout("sort", ("a",)), Layout("sort", ("b",)), Layout("zorder", ("a", "b")))
        for order in [row_order(layout, ranks)]
    }
    assert read["sort(a)"][0] <= 2 and read["sort(a)"][1] == 64
    assert read["sort(b)"][1] <= 2 and read["sort(b)"][0] == 64
    z_a, z_b = read["zorder(a, b)"]
    assert z_a < 64 / 2 and z_b < 64 / 2, read


def test_nulls_are_read_only_when_the_sketch_keeps_the_null_fragment() -> None:
    fragments = [10] * 50 + [3] * 50  # NULLs (fragment 10) in the first file only
    assert units_read(np.arange(100), _sketch(fragments, {3}, 10), 2, 1).files == 1
    assert units_read(np.arange(100), _sketch(fragments, {3, 10}, 10), 2, 1).files == 2
    assert units_read(np.arange(100), _sketch(fragments, {10}, 10), 2, 1).files == 1


def test_a_sample_smaller_than_the_runs_still_covers_every_file() -> None:
    sketch = _sketch([0, 1, 2], {0, 1, 2}, null_fragment=3)
    assert units_read(np.arange(3), sketch, files=6, row_groups_per_file=2).files == 6


def test_zorder_keys_interleave_the_columns_bits() -> None:
    keys = [np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])]
    z = zorder_keys(keys)
    assert list(np.argsort(z)) == [0, 1, 2, 3]  # (0,0) (0,1) (1,0) (1,1): the first column leads
    assert z[1] < z[2]


def test_layouts_name_what_iceberg_takes_and_refuse_bad_shapes() -> None:
    assert Layout("sort", ("a", "b")).sort_order == "a ASC NULLS FIRST, b ASC NULLS FIRST"
    assert Layout("zorder", ("a", "b")).sort_order == "zorder(a, b)"
    with pytest.raises(ConfigurationError, match="unknown layout kind"):
        Layout("hilbert", ("a",))
    with pytest.raises(ConfigurationError, match="at least one column"):
        Layout("sort", ())
    with pytest.raises(ConfigurationError, match="at most 4 columns"):
        Layout("zorder", ("a", "b", "c", "d", "e"))


def test_layouts_are_read_as_users_write_them() -> None:
    assert Layout.parse("sort(a, b)") == Layout("sort", ("a", "b"))
    assert Layout.parse(" ZORDER(a,b) ") == Layout("zorder", ("a", "b"))
    assert Layout.parse("customer") == Layout("sort", ("customer",))
    assert Layout.parse(str(Layout("zorder", ("a", "c")))) == Layout("zorder", ("a", "c"))
    for bad in ("", "sort()", "a; DROP TABLE t", "sort(a"):
        with pytest.raises(ConfigurationError, match="cannot read the layout"):
            Layout.parse(bad)
    with pytest.raises(ConfigurationError, match="unknown layout kind 'hilbert'"):
        Layout.parse("hilbert(a, b)")
