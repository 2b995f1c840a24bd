"""The fragments a top-k report's sketch keeps, bounded from its plan alone (pure)."""

from __future__ import annotations

from sketch_core.algebra.frontend import to_ir
from sketch_core.attribute_choice.bounds import top_k_bound
from sketch_core.datasets.generator_style import tpch_schemas
from sketch_core.datasets.tpch_queries import TPCH_QUERIES

TPCH = {t: [(c, "bigint" if c.endswith("key") else "string") for c in cs] for t, cs in tpch_schemas().items()}
SALES = {"s.sales": [("sale_id", "bigint"), ("customer", "bigint"), ("amount", "bigint")]}
SALES |= {"s.customers": [("cid", "bigint"), ("region", "string")]}


def _bound(sql: str, schemas: dict = SALES):  # type: ignore[no-untyped-def,type-arg]
    return top_k_bound(to_ir(sql, schemas).plan)


def test_a_top_k_over_groups_bounds_what_its_group_key_fixes() -> None:
    # Q3 keeps 10 orders: their lines and the orders themselves (tied to l_orderkey by the
    # join) lie in at most 10 fragments; their customers are not tied to the group key.
    q3 = _bound(TPCH_QUERIES[3], TPCH)
    assert q3 is not None and q3.rows == 10
    assert q3.fragments_at_most("tpch.lineitem", "l_orderkey") == 10
    assert q3.fragments_at_most("tpch.orders", "o_orderkey") == 10
    assert q3.fragments_at_most("tpch.lineitem", "l_shipdate") is None
    assert q3.fragments_at_most("tpch.customer", "c_custkey") is None
    # Q10 groups by customer: its orders are tied through o_custkey, its lines are not.
    q10 = _bound(TPCH_QUERIES[10], TPCH)
    assert q10 is not None
    assert q10.fragments_at_most("tpch.customer", "c_custkey") == 20
    assert q10.fragments_at_most("tpch.orders", "o_custkey") == 20
    assert q10.fragments_at_most("tpch.orders", "o_orderkey") is None
    assert q10.fragments_at_most("tpch.lineitem", "l_orderkey") is None


def test_a_semi_joins_right_side_is_bounded_on_its_key_for_each_scan() -> None:
    # Q18 reads lineitem twice (the IN subquery's groups by l_orderkey): 100 orders a scan.
    q18 = _bound(TPCH_QUERIES[18], TPCH)
    assert q18 is not None
    assert q18.scans["tpch.lineitem"] == 2
    assert q18.fragments_at_most("tpch.lineitem", "l_orderkey") == 200
    assert q18.fragments_at_most("tpch.lineitem", "l_quantity") is None
    rows = _bound(
        "SELECT sale_id, amount FROM s.sales WHERE customer IN (SELECT cid FROM s.customers "
        "WHERE region = 'EU') ORDER BY amount DESC LIMIT 5"
    )
    assert rows is not None
    assert rows.fragments_at_most("s.sales", "amount") == 5  # one row per result row
    assert rows.fragments_at_most("s.customers", "cid") == 5  # tied to the kept rows' customer
    assert rows.fragments_at_most("s.customers", "region") is None  # any matching row is kept


def test_a_top_k_over_rows_bounds_every_column_and_offsets_count() -> None:
    bound = _bound(
        "SELECT s.sale_id, c.region FROM s.sales s JOIN s.customers c ON s.customer = c.cid "
        "ORDER BY s.amount DESC LIMIT 10 OFFSET 5"
    )
    assert bound is not None and bound.rows == 15
    assert {t: sorted(c) for t, c in bound.bounded.items()} == {
        "s.sales": ["amount", "customer", "sale_id"],
        "s.customers": ["cid", "region"],
    }


def test_plans_the_bound_does_not_follow() -> None:
    assert _bound("SELECT customer, sum(amount) AS total FROM s.sales GROUP BY customer") is None
    assert _bound("SELECT customer FROM s.sales ORDER BY amount") is None  # no limit
    # An outer join, a window, a scalar subquery: no bound.
    assert (
        _bound(
            "SELECT s.sale_id FROM s.sales s LEFT JOIN s.customers c ON s.customer = c.cid "
            "ORDER BY s.amount LIMIT 3"
        )
        is None
    )
    assert (
        _bound("SELECT sale_id, rank() OVER (ORDER BY amount) AS r FROM s.sales ORDER BY r LIMIT 3") is None
    )
    assert (
        _bound(
            "SELECT sale_id FROM s.sales WHERE amount > (SELECT avg(amount) FROM s.sales) ORDER BY 1 LIMIT 3"
        )
        is None
    )
    # A group key that is an expression fixes no column.
    bucket = _bound(
        "SELECT customer % 10 AS b, sum(amount) AS t FROM s.sales GROUP BY customer % 10 "
        "ORDER BY t DESC LIMIT 3"
    )
    assert bucket is None or bucket.fragments_at_most("s.sales", "customer") is None


def test_an_anti_joins_right_side_is_not_reached() -> None:
    bound = _bound(
        "SELECT customer, count(*) AS n FROM s.sales WHERE customer NOT IN (SELECT cid FROM s.customers) "
        "GROUP BY customer ORDER BY n DESC LIMIT 3"
    )
    assert bound is not None
    assert "s.customers" not in bound.scans
    assert bound.fragments_at_most("s.sales", "customer") == 3
