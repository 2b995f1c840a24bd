"""Membership of a column's values in a large set (pure): the bitset lookup answers as Arrow's
hashing ``is_in`` does, for every integer type, NULLs, chunks, and the sets it leaves to
hashing."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from sketch_core.arrow import membership
from sketch_core.arrow.membership import MIN_BITSET_VALUES, is_in


def column_and_values(kind: pa.DataType, seed: int, nulls: bool) -> tuple[pa.ChunkedArray, pa.Array]:
    rng = np.random.default_rng(seed)
    info = np.iinfo(kind.to_pandas_dtype())
    low, high = max(int(info.min), -50_000), min(int(info.max), 50_000)
    data = rng.integers(low, high + 1, 60_000)
    data[:3] = [low, high, (low + high) // 2]  # the type's (or range's) ends
    mask = rng.random(len(data)) < 0.05 if nulls else None
    column = pa.chunked_array(
        [
            pa.array(data[:20_000], kind, mask=None if mask is None else mask[:20_000]),
            pa.array(data[20_000:], kind, mask=None if mask is None else mask[20_000:]),
        ]
    )
    wanted = np.unique(rng.choice(data[data % 3 != 0], 9_000))  # multiples of 3 never wanted
    return column, pa.array(wanted, kind)


@pytest.mark.parametrize("kind", [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint32()])
@pytest.mark.parametrize("nulls", [False, True])
def test_the_bitset_answers_as_hashing_does(kind: pa.DataType, nulls: bool) -> None:
    column, values = column_and_values(kind, 1, nulls)
    assert membership._bitset(kind, values) is not None or len(values) < MIN_BITSET_VALUES
    got = is_in(column, values)
    expected = pc.is_in(column, value_set=values)
    assert got.to_pylist() == expected.to_pylist()
    assert any(got.to_pylist()) and not all(got.to_pylist())


@pytest.mark.parametrize(
    "values",
    [
        pa.array([*range(0, 20_000, 2), None], pa.int64()),  # a NULL wanted matches NULLs
        pa.array(list(range(10)), pa.int64()),  # few values
        pa.array(np.arange(0, 5_000 * 2**20, 2**20), pa.int64()),  # a range too wide
        pa.array(np.arange(5_000, dtype=np.uint64), pa.uint64()),
    ],
)
def test_sets_left_to_hashing_answer_the_same(values: pa.Array) -> None:
    assert membership._bitset(values.type, values) is None
    column = pa.array([0, 2, 3, None, 2**20, 4_999, 19_998], values.type)
    assert is_in(column, values).to_pylist() == pc.is_in(column, value_set=values).to_pylist()


def test_values_outside_the_wanted_range_are_out() -> None:
    values = pa.array(np.arange(1_000_000, 1_010_000), pa.int64())
    column = pa.array([-(2**63), 999_999, 1_000_000, 1_009_999, 1_010_000, 2**63 - 1, None], pa.int64())
    assert is_in(column, values).to_pylist() == [False, False, True, True, False, False, False]
