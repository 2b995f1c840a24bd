"""Which filters over a ranking window make a top-N-per-partition shape (pure)."""

from __future__ import annotations

import pytest

from sketch_core.algebra.frontend import to_ir
from sketch_core.algebra.top_rows import top_windows
from tests.algebra.test_frontend import SCHEMAS

RANKED = (
    "SELECT id, region FROM (SELECT id, region, {func}() OVER (PARTITION BY region ORDER BY amount DESC) "
    "AS rn{more} FROM s.sales) x WHERE {condition}"
)


@pytest.mark.parametrize(
    ("condition", "limit"),
    [
        ("rn <= 3", 3),
        ("3 >= rn", 3),
        ("rn < 4", 3),
        ("rn = 1", 1),
        ("rn <= 5 AND rn <= 2 AND id > 7", 2),
        ("rn = 2", None),  # a rank other than the first needs the rows before it: not this shape
        ("rn > 1", None),
        ("rn >= 2 AND rn <= 4", 4),  # the first four decide ranks 2 to 4 as well
        ("rn <= 2 OR id > 7", None),
    ],
)
def test_upper_bounds_on_the_rank_make_the_shape(condition: str, limit: int | None) -> None:
    plan = to_ir(RANKED.format(func="ROW_NUMBER", more="", condition=condition), SCHEMAS).plan
    found = top_windows(plan)
    assert [shape.limit for shape in found.values()] == ([] if limit is None else [limit])


@pytest.mark.parametrize(
    ("func", "more"),
    [
        ("RANK", ""),
        ("DENSE_RANK", ""),
    ],
)
def test_every_ranking_function_makes_it(func: str, more: str) -> None:
    plan = to_ir(RANKED.format(func=func, more=more, condition="rn <= 2"), SCHEMAS).plan
    assert len(top_windows(plan)) == 1


def test_a_second_window_function_or_a_running_count_does_not() -> None:
    two = RANKED.format(func="RANK", more=", COUNT(*) OVER (PARTITION BY region) AS n", condition="rn <= 2")
    assert top_windows(to_ir(two, SCHEMAS).plan) == {}
    counted = (
        "SELECT id FROM (SELECT id, COUNT(*) OVER (PARTITION BY region ORDER BY amount) AS n "
        "FROM s.sales) x WHERE n <= 2"
    )
    assert top_windows(to_ir(counted, SCHEMAS).plan) == {}
