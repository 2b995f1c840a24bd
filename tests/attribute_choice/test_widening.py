"""Candidate attributes carried from the scans up to the aggregation (pure): through the
projections of derived tables, and refused with a reason where a row of the aggregation's input
does not come from one row of the table."""

from __future__ import annotations

import pytest

from sketch_core.algebra.frontend import to_ir
from sketch_core.algebra.ir import Project
from sketch_core.attribute_choice.query import NotEstimable, _widened
from sketch_core.attribute_choice.sampling import SAMPLE_ROW
from sketch_core.attribute_choice.shape import aggregation_shape

SCHEMAS = {
    "s.sales": [("sale_id", "bigint"), ("store_id", "bigint"), ("amount", "double"), ("day", "date")],
    "s.stores": [("store_id", "bigint"), ("city", "string"), ("region", "string")],
}
CANDIDATES = {"s.sales": ["sale_id", "day"], "s.stores": ["store_id", "region"]}


def widened(sql: str):  # type: ignore[no-untyped-def]
    shape = aggregation_shape(to_ir(sql, SCHEMAS).plan)
    assert not isinstance(shape, str)
    return _widened(shape.aggregate.child, "s.sales", CANDIDATES)


def test_candidates_are_carried_through_derived_tables() -> None:
    plan, names, unreached = widened(
        "SELECT stores.city, SUM(sales.amount) AS s "
        "FROM (SELECT store_id, amount FROM s.sales) AS sales "
        "JOIN (SELECT store_id, city FROM s.stores WHERE region = 'north') AS stores "
        "ON sales.store_id = stores.store_id GROUP BY stores.city"
    )
    wanted = {(t, a) for t, attrs in CANDIDATES.items() for a in attrs}
    assert set(names) == wanted | {("s.sales", SAMPLE_ROW)}
    assert unreached == {}
    assert set(names.values()) <= set(plan.columns)  # every name reaches the aggregation's input
    assert isinstance(plan, Project) or any(isinstance(n, Project) for n in plan.walk())


def test_candidates_below_a_nested_aggregation_or_a_semi_join_are_refused_with_why() -> None:
    plan, names, unreached = widened(
        "SELECT sales.store_id, SUM(sales.amount) AS s FROM (SELECT store_id, amount FROM s.sales) AS sales "
        "WHERE sales.store_id IN (SELECT store_id FROM s.stores WHERE region = 'east') "
        "GROUP BY sales.store_id"
    )
    assert ("s.sales", "day") in names
    assert set(unreached) == {("s.stores", "store_id"), ("s.stores", "region")}
    assert all("semi join" in why for why in unreached.values())
    assert set(names.values()) <= set(plan.columns)


def test_a_sampled_table_that_does_not_reach_the_aggregation_is_not_estimable() -> None:
    with pytest.raises(NotEstimable, match="DISTINCT"):
        widened(
            "SELECT d.store_id, COUNT(*) AS n FROM (SELECT DISTINCT store_id, day FROM s.sales) AS d "
            "GROUP BY d.store_id"
        )
