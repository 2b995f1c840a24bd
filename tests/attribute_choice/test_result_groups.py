"""The groups a top-k returns from estimates (pure): the in-process chain over the estimated
aggregates, whose top-k first sets aside the rows that cannot lead, returns the groups a full
stable sort of every group returns."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from sketch_core.algebra.frontend import to_ir
from sketch_core.attribute_choice.shape import GROUP, aggregation_shape, result_groups

SCHEMAS = {"s.sales": [("store_id", "bigint"), ("amount", "double")]}


def estimates(groups: int, seed: int) -> pa.Table:
    """Estimated totals with many ties (few distinct values), three NaN and three NULL (fewer
    than the limit: with NULLS FIRST the first rows are NULLs, then numbers)."""
    rng = np.random.default_rng(seed)
    totals = rng.integers(0, 40, groups).astype(float)
    odd = rng.choice(groups, 6, replace=False)
    totals[odd[:3]] = np.nan
    nulls = np.isin(np.arange(groups), odd[3:])
    return pa.table(
        {
            "store_id": pa.array(rng.permutation(groups), pa.int64()),
            "total": pa.array(totals, pa.float64(), mask=nulls),
            GROUP: pa.array(np.arange(groups), pa.int64()),
        }
    )


def sorted_fully(table: pa.Table, order: list[tuple[str, str, str]], reach: int) -> np.ndarray:
    indices = pc.sort_indices(table, sort_keys=order)
    return np.asarray(table.column(GROUP).take(indices[:reach]).to_numpy(), dtype=np.int64)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(
    ("order_sql", "order"),
    [
        # Spark's defaults: NULLS LAST descending, NULLS FIRST ascending.
        ("total DESC", [("total", "descending", "at_end")]),
        ("total DESC NULLS FIRST", [("total", "descending", "at_start")]),
        ("total ASC", [("total", "ascending", "at_start")]),
        (
            "total ASC NULLS LAST, store_id DESC",
            [("total", "ascending", "at_end"), ("store_id", "descending", "at_end")],
        ),
        ("total DESC, store_id", [("total", "descending", "at_end"), ("store_id", "ascending", "at_start")]),
    ],
)
def test_a_top_k_returns_the_groups_a_full_sort_does(
    seed: int, order_sql: str, order: list[tuple[str, str, str]]
) -> None:
    sql = (
        f"SELECT store_id, SUM(amount) AS total FROM s.sales GROUP BY store_id ORDER BY {order_sql} LIMIT 10"
    )
    shape = aggregation_shape(to_ir(sql, SCHEMAS).plan)
    assert not isinstance(shape, str)
    table = estimates(2_000, seed)
    returned = result_groups(shape, table)
    assert len(returned) == 10
    assert list(returned) == list(sorted_fully(table, order, 10))


def test_a_top_k_over_fewer_numbers_than_its_limit_keeps_every_group() -> None:
    sql = "SELECT store_id, SUM(amount) AS total FROM s.sales GROUP BY store_id ORDER BY total DESC LIMIT 10"
    shape = aggregation_shape(to_ir(sql, SCHEMAS).plan)
    assert not isinstance(shape, str)
    table = estimates(100, 0)
    totals = np.full(100, np.nan)
    totals[:5] = [3.0, 1.0, 4.0, 1.0, 5.0]
    table = table.set_column(1, "total", pa.array(totals, pa.float64()))
    returned = result_groups(shape, table)
    assert list(returned[:5]) == [4, 2, 0, 1, 3]
    assert len(returned) == 10
