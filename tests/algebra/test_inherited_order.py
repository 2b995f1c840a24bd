"""A subquery's ORDER BY carried to the query that limits it, as Spark plans it (the answers are
checked against Spark's in ``tests/oracles/test_bi_tool_texts.py``)."""

from __future__ import annotations

from sketch_core.algebra.frontend import to_ir
from sketch_core.algebra.ir import TopK

SCHEMAS = {
    "s.sales": [("id", "bigint"), ("region", "string"), ("amount", "double"), ("day", "date")],
    "s.regions": [("region", "string"), ("country", "string")],
}


def _top(sql: str) -> TopK | None:
    parsed = to_ir(sql, SCHEMAS)
    tops = [n for n in parsed.plan.walk() if isinstance(n, TopK)]
    assert len(tops) <= 1
    return tops[0] if tops else None


def test_metabases_limit_over_its_ordered_source_is_a_top_k() -> None:
    sql = (
        "SELECT `source`.`region` AS `region`, `source`.`sum` AS `sum` FROM "
        "(SELECT `s`.`sales`.`region` AS `region`, SUM(`s`.`sales`.`amount`) AS `sum` FROM `s`.`sales` "
        "GROUP BY `s`.`sales`.`region` ORDER BY `sum` DESC, `s`.`sales`.`region` ASC) `source` LIMIT 10"
    )
    parsed = to_ir(sql, SCHEMAS)
    top = _top(sql)
    assert parsed.row_cap is None and top is not None and top.limit == 10
    assert [(k.descending, k.nulls_first) for k in top.order] == [(True, False), (False, True)]
    assert parsed.output_names == ("region", "sum")


def test_the_order_passes_a_filter_a_cte_and_several_layers() -> None:
    through_a_filter = (
        "WITH t AS (SELECT region, SUM(amount) AS total FROM s.sales GROUP BY region ORDER BY total DESC) "
        "SELECT * FROM t WHERE region <> 'x' LIMIT 3"
    )
    layered = (
        "SELECT a.id FROM (SELECT * FROM (SELECT id, amount FROM s.sales ORDER BY amount DESC) b "
        "WHERE id > 5) a LIMIT 4"
    )
    for sql, limit in ((through_a_filter, 3), (layered, 4)):
        top = _top(sql)
        assert top is not None and top.limit == limit and top.order[0].descending


def test_a_union_ordered_as_a_whole_orders_the_query_that_limits_it() -> None:
    sql = (
        "SELECT * FROM (SELECT region AS k, amount AS v FROM s.sales UNION ALL "
        "SELECT country, 0.0 FROM s.regions ORDER BY v DESC) u LIMIT 5"
    )
    top = _top(sql)
    assert top is not None and top.limit == 5 and top.order[0].descending


def test_a_key_the_source_does_not_return_orders_without_showing() -> None:
    sql = "SELECT t.region FROM (SELECT region, amount FROM s.sales ORDER BY amount * -1, id) t LIMIT 6"
    parsed = to_ir(sql, SCHEMAS)
    top = _top(sql)
    assert top is not None and len(top.order) == 2 and parsed.output_names == ("region",)


def test_a_limited_subquery_over_an_ordered_one_is_a_top_k_not_a_refusal() -> None:
    sql = (
        "SELECT region FROM s.regions WHERE region IN "
        "(SELECT r.region FROM (SELECT region FROM s.sales ORDER BY amount DESC) r LIMIT 3)"
    )
    top = _top(sql)
    assert top is not None and top.limit == 3


def test_joins_aggregations_and_distinct_lose_the_order() -> None:
    ordered = "(SELECT region, amount FROM s.sales ORDER BY amount DESC)"
    for sql in (
        f"SELECT t.region FROM {ordered} t JOIN s.regions r ON t.region = r.region LIMIT 5",
        f"SELECT t.region, COUNT(*) AS n FROM {ordered} t GROUP BY t.region LIMIT 5",
        f"SELECT DISTINCT t.region FROM {ordered} t LIMIT 5",
    ):
        parsed = to_ir(sql, SCHEMAS)
        assert _top(sql) is None and parsed.row_cap is not None and parsed.row_cap.limit == 5


def test_the_querys_own_order_wins() -> None:
    sql = (
        "SELECT t.region, t.amount FROM (SELECT region, amount FROM s.sales ORDER BY amount DESC) t "
        "ORDER BY t.region LIMIT 2"
    )
    top = _top(sql)
    assert top is not None and len(top.order) == 1 and not top.order[0].descending
