"""Which annotations a capture delays to the result rows: those a result column still keys
(it holds the row's attribute value), so their scans are read without a fragment column. The
accuracy oracle (tests/oracles/test_accuracy.py) checks the sketches stay exact on Spark."""

from __future__ import annotations

import pytest

from sketch_core.algebra.frontend import to_ir
from sketch_core.algebra.printer import to_sql
from sketch_core.rewrites.capture import FRAGMENT_COLUMN, CapturePlan, instrument_capture

SCHEMAS = {
    "s.orders": [("okey", "bigint"), ("cust", "bigint"), ("day", "date")],
    "s.items": [("okey", "bigint"), ("qty", "bigint"), ("price", "double")],
}
Q3_SHAPE = (
    "SELECT i.okey, o.day, SUM(i.price) AS revenue FROM s.orders o JOIN s.items i ON o.okey = i.okey "
    "WHERE i.qty > 3 GROUP BY i.okey, o.day ORDER BY revenue DESC, o.day LIMIT 10"
)


def capture(sql: str, attributes: dict[str, str]) -> CapturePlan:
    return instrument_capture(to_ir(sql, SCHEMAS).plan, attributes=attributes)


def delayed_tables(plan: CapturePlan) -> dict[str, str]:
    return {plan.tables[n]: column for n, column in plan.delayed.items()}


def test_a_group_on_the_attribute_delays_both_joined_tables() -> None:
    plan = capture(Q3_SHAPE, {"s.orders": "okey", "s.items": "okey"})
    assert set(delayed_tables(plan)) == {"s.orders", "s.items"}
    assert FRAGMENT_COLUMN not in to_sql(plan.rows)  # neither scan computes fragment ids
    assert set(plan.delayed.values()) <= set(plan.rows.columns)


def test_an_annotation_the_group_does_not_fix_stays_a_column() -> None:
    plan = capture(Q3_SHAPE, {"s.orders": "cust", "s.items": "okey"})
    assert set(delayed_tables(plan)) == {"s.items"}
    assert to_sql(plan.rows).count(FRAGMENT_COLUMN) == 1  # orders' scan
    assert [plan.tables[n] for n in plan.sets] == ["s.orders"]


@pytest.mark.parametrize(
    "sql",
    [
        # The attribute is not in the result.
        "SELECT cust, day FROM s.orders WHERE day > DATE '2024-01-01' ORDER BY day DESC LIMIT 5",
        # A union forgets which column holds the attribute.
        "SELECT okey FROM s.orders WHERE cust = 1 UNION ALL SELECT okey FROM s.orders WHERE cust = 2",
        # A window over other partitions merges rows of several fragments.
        "SELECT okey, SUM(cust) OVER (PARTITION BY day) AS s FROM s.orders",
    ],
)
def test_an_annotation_without_a_result_column_holding_the_attribute_is_read(sql: str) -> None:
    plan = capture(sql, {"s.orders": "okey"})
    assert plan.delayed == {}
    assert FRAGMENT_COLUMN in to_sql(plan.rows)


def test_a_top_k_without_grouping_that_returns_the_attribute_is_delayed() -> None:
    plan = capture("SELECT okey, cust FROM s.orders ORDER BY day DESC, okey LIMIT 5", {"s.orders": "okey"})
    assert delayed_tables(plan) == {"s.orders": "okey"}


@pytest.mark.parametrize(
    ("sql", "most"),
    [
        (Q3_SHAPE, 10),
        ("SELECT okey FROM s.orders ORDER BY day LIMIT 5 OFFSET 20", 25),
        (
            "SELECT okey, n FROM (SELECT okey, COUNT(*) AS n FROM s.orders GROUP BY okey "
            "ORDER BY n DESC LIMIT 7) t WHERE n > 1",
            7,
        ),
        ("SELECT okey, COUNT(*) AS n FROM s.orders GROUP BY okey HAVING COUNT(*) > 1", None),
        ("SELECT okey FROM s.orders ORDER BY day", None),
    ],
)
def test_a_plan_is_bounded_by_its_top_k_only(sql: str, most: int | None) -> None:
    """A capture collects a plan's rows when a top-k bounds them (its reach, offset included)."""
    assert capture(sql, {"s.orders": "okey"}).most_rows() == most
