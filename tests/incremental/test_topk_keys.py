"""The keys a top-k state is restored with, built a column at a time, are the keys its
operator builds row by row: a restored entry that differed would never be found again when
its row is deleted."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pyarrow as pa
import pytest

from sketch_core.algebra.ir import SortKey
from sketch_core.incremental.stored_topk import id_tuples
from sketch_core.incremental.topk import entry_keys, sort_key, tiebreak

COLUMNS = [
    [3, None, -1, 3, True, 0],
    [2.5, math.nan, None, -0.0, 1e300, 2.5],
    ["b", None, "a", "", "é", "b"],
    [Decimal("1.10"), Decimal("-2"), None, Decimal("0"), Decimal("1.1"), Decimal("7")],
    [dt.date(2024, 1, 2), None, dt.date(1970, 1, 1), dt.date(2024, 1, 2), dt.date(2000, 2, 29), None],
]
ORDERS = [
    [SortKey("c0", descending=True), SortKey("c2")],
    [SortKey("c1", descending=True, nulls_first=True), SortKey("c3", descending=True)],
    [SortKey("c2", descending=True), SortKey("c4", nulls_first=False), SortKey("c0")],
    [SortKey("c4", descending=True, nulls_first=False)],
]


@pytest.mark.parametrize("order", ORDERS, ids=lambda o: ",".join(repr(k) for k in o))
def test_keys_built_a_column_at_a_time_equal_the_row_keys(order: list[SortKey]) -> None:
    positions = [(int(k.column[1:]), k) for k in order]
    rows = list(zip(*COLUMNS, strict=True))
    annotations = [((i, 7),) for i in range(len(rows))]
    expected = [
        (sort_key(row, positions), tiebreak(row), a) for row, a in zip(rows, annotations, strict=True)
    ]
    built = entry_keys(COLUMNS, positions, annotations)
    assert built == expected
    assert [hash(k) for k in built] == [hash(k) for k in expected]
    # ... and they order the rows alike (NaN is one value, above every number, in Spark).
    assert sorted(range(len(rows)), key=built.__getitem__) == sorted(
        range(len(rows)), key=expected.__getitem__
    )


def test_stored_fragment_id_lists_read_back_as_tuples() -> None:
    lists = [[4, 1], [], None, [7], [2, 2, 9]]
    array = pa.array(lists, pa.list_(pa.int32()))
    expected = [tuple(ids) if ids else () for ids in lists]
    assert id_tuples(pa.chunked_array([array])) == expected
    without_nulls = pa.array([ids or [] for ids in lists], pa.list_(pa.int32()))
    chunked = pa.chunked_array([without_nulls.slice(0, 2), without_nulls.slice(2)])
    assert id_tuples(chunked) == expected
    assert id_tuples(pa.chunked_array([without_nulls.slice(3)])) == expected[3:]
    assert id_tuples(pa.chunked_array([], pa.list_(pa.int32()))) == []
