"""The SQL front end: names, parameters, and typed refusals."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlglot import exp

from sketch_core.algebra.frontend import decode_params, encode_params, to_ir
from sketch_core.algebra.ir import (
    Aggregate,
    Distinct,
    Join,
    Project,
    Scan,
    TopK,
    Window,
    positive_scans,
    scans,
    scans_below_joins,
)
from sketch_core.algebra.printer import to_sql
from sketch_core.algebra.query_text import template_key
from sketch_core.errors import MissingParameterError, QueryError, TableNotFoundError, UnsupportedQueryError
from sketch_core.rewrites.prune_outputs import prune_outputs

SCHEMAS = {
    "s.sales": [("id", "bigint"), ("region", "string"), ("amount", "double"), ("day", "date")],
    "s.regions": [("region", "string"), ("country", "string")],
}


def test_an_in_over_several_columns_is_a_semi_join_on_each() -> None:
    plan = to_ir(
        "SELECT id FROM s.sales WHERE (region, id) IN (SELECT region, LENGTH(country) FROM s.regions)",
        SCHEMAS,
    ).plan
    joins = [n for n in plan.walk() if isinstance(n, Join)]
    assert [j.kind for j in joins] == ["semi"] and joins[0].condition is not None
    assert len(list(joins[0].condition.find_all(exp.EQ))) == 2
    with pytest.raises(QueryError, match="as many columns"):
        to_ir("SELECT id FROM s.sales WHERE (region, id) IN (SELECT region FROM s.regions)", SCHEMAS)


def test_self_join_gets_unique_names_and_stars_expand() -> None:
    parsed = to_ir("SELECT * FROM s.regions a JOIN s.regions b ON a.region = b.country", SCHEMAS)
    names = [n for s in scans(parsed.plan) for n in s.names]
    assert len(names) == len(set(names)) == 4
    assert parsed.output_names == ("region", "country", "region", "country")


def test_in_and_exists_become_semi_and_anti_joins() -> None:
    sql = (
        "SELECT country FROM s.regions r WHERE region IN (SELECT region FROM s.sales) "
        "AND NOT EXISTS (SELECT 1 FROM s.sales s WHERE s.region = r.region AND s.amount < 0)"
    )
    plan = to_ir(sql, SCHEMAS).plan
    kinds = [n.kind for n in plan.walk() if isinstance(n, Join)]
    assert sorted(kinds) == ["anti", "semi"]
    # The NOT EXISTS side is never sketched.
    assert [s.table for s in positive_scans(plan)].count("s.sales") == 1
    # Spark's higher-order EXISTS(array, lambda) is a condition on the row, not a subquery.
    plan = to_ir("SELECT id FROM s.sales WHERE NOT EXISTS(ARRAY(amount, 1), x -> x > 1)", SCHEMAS).plan
    assert not any(isinstance(n, Join) for n in plan.walk())
    assert "NOT EXISTS(ARRAY(amount, 1), x -> x > 1)" in to_sql(plan)


def test_scans_below_joins_are_those_a_join_reads() -> None:
    alone = to_ir("SELECT region, SUM(amount) AS t FROM s.sales GROUP BY region", SCHEMAS).plan
    assert scans_below_joins(alone) == []
    sql = (
        "SELECT r.country, SUM(x.t) AS t FROM (SELECT region, SUM(amount) AS t FROM s.sales "
        "GROUP BY region) x JOIN s.regions r ON x.region = r.region GROUP BY r.country"
    )
    joined = to_ir(sql, SCHEMAS).plan
    assert sorted(s.table for s in scans_below_joins(joined)) == ["s.regions", "s.sales"]


def test_aggregates_in_having_and_order_are_computed_once() -> None:
    sql = (
        "SELECT region, SUM(amount) AS t FROM s.sales GROUP BY region HAVING SUM(amount) > 1 "
        "ORDER BY SUM(amount) DESC LIMIT 2"
    )
    plan = to_ir(sql, SCHEMAS).plan
    assert isinstance(plan, TopK)
    aggregates = [n for n in plan.walk() if isinstance(n, Aggregate)]
    assert len(aggregates) == 1 and len(aggregates[0].aggregates) == 1


def test_other_aggregate_functions_are_printed_as_written_and_pruned_when_shown() -> None:
    sql = (
        "SELECT region, SUM(amount) AS t, STDDEV(amount) AS sd, MAX_BY(day, amount) AS best_day, "
        "PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY amount DESC) AS med, FIRST(id) IGNORE NULLS AS one "
        "FROM s.sales GROUP BY region ORDER BY t DESC LIMIT 2"
    )
    parsed = to_ir(sql, SCHEMAS)
    (aggregate,) = [n for n in parsed.plan.walk() if isinstance(n, Aggregate)]
    assert [c.func for _, c in aggregate.aggregates] == ["sum", "opaque", "opaque", "opaque", "opaque"]
    assert [c.label for _, c in aggregate.aggregates] == [
        "sum",
        "stddev",
        "max_by",
        "percentile_cont",
        "first",
    ]
    printed = to_sql(parsed.plan)
    for call in ("STDDEV(", "MAX_BY(", "WITHIN GROUP (ORDER BY amount DESC)", "FIRST(id) IGNORE NULLS"):
        assert call in printed
    # Only shown: what evaluates provenance never computes them.
    (pruned,) = [n for n in prune_outputs(parsed.plan).walk() if isinstance(n, Aggregate)]
    assert [c.func for _, c in pruned.aggregates] == ["sum"]


def test_other_window_functions_are_printed_as_written() -> None:
    sql = (
        "SELECT region, day, amount - LAG(amount, 1, 0) OVER (PARTITION BY region ORDER BY day) AS change, "
        "NTILE(4) OVER (ORDER BY amount) AS quartile, "
        "FIRST_VALUE(amount) IGNORE NULLS OVER (PARTITION BY region ORDER BY day) AS opening FROM s.sales"
    )
    parsed = to_ir(sql, SCHEMAS)
    calls = [c for n in parsed.plan.walk() if isinstance(n, Window) for _, c in n.calls]
    assert sorted(c.label for c in calls) == ["first_value", "lag", "ntile"]
    assert {c.func for c in calls} == {"opaque"}
    printed = to_sql(parsed.plan)
    assert "LAG(amount, 1, 0) OVER (PARTITION BY" in printed and "NTILE(4) OVER (ORDER BY" in printed
    assert "FIRST_VALUE(amount) IGNORE NULLS OVER (PARTITION BY" in printed


def test_parameters_are_bound_as_typed_literals() -> None:
    sql = "SELECT id FROM s.sales WHERE day > :d AND region = :r"
    parsed = to_ir(sql, SCHEMAS, {"d": dt.date(2024, 1, 31), "r": "x' OR '1'='1"})
    assert "CAST('2024-01-31' AS DATE)" in parsed.sql
    assert "'x'' OR ''1''=''1'" in parsed.sql or "'x\\' OR \\'1\\'=\\'1'" in parsed.sql
    assert template_key(sql) == template_key(sql.replace("  ", " "))
    with pytest.raises(MissingParameterError) as info:
        to_ir(sql, SCHEMAS, {"d": dt.date(2024, 1, 1)})
    assert info.value.name == "r"


def test_a_positional_parameter_is_refused_with_named_ones_as_the_fix() -> None:
    with pytest.raises(QueryError, match="positional") as refused:
        to_ir("SELECT id FROM s.sales WHERE region = ?", SCHEMAS, {"region": "EU"})
    assert "params={'day'" in (refused.value.hint or "")


def test_params_round_trip_through_json() -> None:
    params = {"d": dt.date(2024, 1, 1), "t": dt.datetime(2024, 1, 1, 3), "n": -5, "s": "a"}
    assert decode_params(encode_params(params)) == params


@pytest.mark.parametrize(
    ("sql", "construct"),
    [
        ("SELECT id, x FROM s.sales LATERAL VIEW explode(array(1)) e AS x", "LATERAL VIEW"),
        (
            "SELECT * FROM (SELECT region, day, amount FROM s.sales) PIVOT (SUM(amount) FOR day IN (1, 2))",
            "PIVOT",
        ),
        ("SELECT * FROM s.regions UNPIVOT (v FOR k IN (region, country))", "UNPIVOT"),
        (
            "SELECT id FROM s.sales WHERE (region, id) NOT IN "
            "(SELECT region, LENGTH(country) FROM s.regions)",
            "NOT IN with several columns",
        ),
        (
            "SELECT region FROM s.regions WHERE region IN (SELECT region FROM s.sales LIMIT 3)",
            "LIMIT without ORDER BY in a subquery",
        ),
        (
            "SELECT id, SUM(id) OVER w2 AS n FROM s.sales WINDOW w1 AS (PARTITION BY region), "
            "w2 AS (w1 ORDER BY id)",
            "a named window defined over another one",
        ),
        ("SELECT r.id FROM range(3) r JOIN s.sales s ON r.id = s.id", "table-valued function RANGE(3)"),
        (
            "SELECT a.id FROM s.sales a JOIN (s.regions b JOIN s.regions c ON b.region = c.region) "
            "ON a.region = b.region",
            "a join in parentheses on a join's right side",
        ),
        ("SELECT id FROM s.sales ORDER BY id OFFSET 3", "OFFSET without LIMIT"),
        (
            "SELECT id FROM s.sales x WHERE id NOT IN "
            "(SELECT MAX(y.id) FROM s.sales y WHERE y.region = x.region)",
            "correlated NOT IN subquery",
        ),
        (
            "SELECT id FROM s.sales x WHERE EXISTS "
            "(SELECT 1 FROM s.sales y WHERE y.day < x.day GROUP BY y.region HAVING COUNT(*) > 1)",
            "an EXISTS over an aggregation correlated by more than equalities",
        ),
        (
            "SELECT id FROM s.sales x WHERE EXISTS "
            "(SELECT 1 FROM s.sales y WHERE y.region = x.region HAVING COUNT(*) < 3)",
            "an EXISTS over an aggregation without GROUP BY whose HAVING may hold on no rows",
        ),
        (
            "SELECT SUM(DISTINCT id, amount) AS x FROM s.sales",
            "DISTINCT over several columns in an aggregate",
        ),
        (
            "SELECT id FROM s.sales WHERE amount > (SELECT amount FROM s.sales ORDER BY id LIMIT 1)",
            "a scalar subquery that may return no row or several",
        ),
        # A membership test is no scalar: named as what it is (it was "a scalar subquery that
        # may return no row or several", with a hint to aggregate it).
        (
            "SELECT id FROM s.sales WHERE id IN (SELECT id FROM s.sales WHERE amount > 5) OR amount < 0",
            "IN (subquery) inside an expression (under OR, in CASE or the select list)",
        ),
        (
            "SELECT CASE WHEN id IN (SELECT id FROM s.sales WHERE amount > 5) THEN 1 END AS k FROM s.sales",
            "IN (subquery) inside an expression (under OR, in CASE or the select list)",
        ),
        (
            "SELECT id, EXISTS (SELECT 1 FROM s.sales y WHERE y.id = x.id + 1) AS e FROM s.sales x",
            "EXISTS inside an expression (under OR, in CASE or the select list)",
        ),
        (
            "SELECT id FROM s.sales x WHERE amount > (SELECT COUNT(*) FROM s.sales y WHERE y.id = x.id)",
            "COUNT in a correlated scalar subquery",
        ),
        (
            "SELECT id FROM s.sales x WHERE amount > (SELECT MAX(amount) FROM s.sales y WHERE y.id < x.id)",
            "a non-equality correlation in a scalar subquery",
        ),
        # Other aggregate functions are shown as Spark computes them (tests/oracles), but one
        # whose value Spark picks arbitrarily decides no rows, and one whose arguments would
        # not print as written is refused.
        (
            "SELECT id, FIRST(amount) AS f FROM s.sales GROUP BY id ORDER BY f DESC LIMIT 3",
            "FIRST in a condition, an order or a join",
        ),
        ("SELECT id, TRY_SUM(amount) AS s FROM s.sales GROUP BY id", "aggregate function TRY_SUM"),
        (
            "SELECT id, MAX_BY(day, amount, 2) AS d FROM s.sales GROUP BY id",
            "aggregate function MAX_BY with these arguments",
        ),
        # Values that change from run to run: the same text asks another query tomorrow.
        (
            "SELECT id, SUM(amount) AS s FROM s.sales WHERE day >= date_add(current_date(), -6) GROUP BY id",
            "CURRENT_DATE, whose value changes from run to run",
        ),
        ("SELECT id FROM s.sales WHERE rand() < 0.1", "RAND, whose value changes from run to run"),
        ("SELECT id, now() AS at FROM s.sales", "NOW, whose value changes from run to run"),
    ],
)
def test_unsupported_constructs_are_named(sql: str, construct: str) -> None:
    with pytest.raises(UnsupportedQueryError) as info:
        to_ir(sql, SCHEMAS)
    assert info.value.construct == construct
    assert info.value.location


def test_bad_queries_get_typed_errors() -> None:
    with pytest.raises(TableNotFoundError):
        to_ir("SELECT * FROM s.nope", SCHEMAS)
    with pytest.raises(QueryError):
        to_ir("SELEC id FROM s.sales", SCHEMAS)
    with pytest.raises(QueryError):
        to_ir("SELECT nope FROM s.sales", SCHEMAS)


def test_scans_read_only_referenced_columns() -> None:
    plan = to_ir("SELECT COUNT(*) AS n FROM s.sales WHERE amount > 0", SCHEMAS).plan
    (scan,) = [n for n in plan.walk() if isinstance(n, Scan)]
    assert scan.source_columns == ("amount",)


def test_outer_joins_keep_the_preserved_side_positive() -> None:
    left = to_ir("SELECT r.region, s.id FROM s.regions r LEFT JOIN s.sales s ON r.region = s.region", SCHEMAS)
    (join,) = [n for n in left.plan.walk() if isinstance(n, Join)]
    assert join.kind == "left"
    assert [s.table for s in positive_scans(left.plan)] == ["s.regions"]
    # RIGHT JOIN: the same left join with the inputs swapped.
    right = to_ir(
        "SELECT r.region, s.id FROM s.regions r RIGHT JOIN s.sales s ON r.region = s.region", SCHEMAS
    )
    (join,) = [n for n in right.plan.walk() if isinstance(n, Join)]
    assert join.kind == "left" and [s.table for s in positive_scans(right.plan)] == ["s.sales"]
    full = to_ir("SELECT r.region FROM s.regions r FULL JOIN s.sales s ON r.region = s.region", SCHEMAS)
    assert positive_scans(full.plan) == []
    # USING: an equality, and the shared column once.
    using = to_ir("SELECT region, id FROM s.regions JOIN s.sales USING (region)", SCHEMAS)
    (join,) = [n for n in using.plan.walk() if isinstance(n, Join)]
    assert join.kind == "inner" and isinstance(join.condition, exp.EQ)
    assert using.output_names == ("region", "id")


def test_scalar_subqueries_become_joins_with_their_value() -> None:
    # Uncorrelated: a scalar join with a one-row aggregation, its input never sketched.
    plan = to_ir("SELECT id FROM s.sales WHERE amount > (SELECT AVG(amount) FROM s.sales)", SCHEMAS).plan
    (join,) = [n for n in plan.walk() if isinstance(n, Join)]
    assert join.kind == "scalar" and isinstance(join.right, Project | Aggregate)
    assert len(positive_scans(plan)) == 1
    # Correlated through an equality: its aggregation grouped by the subquery's side, joined
    # inner under a comparison in WHERE and left in the select list.
    correlated = "(SELECT MAX(y.amount) FROM s.sales y WHERE y.region = x.region)"
    where = to_ir(f"SELECT id FROM s.sales x WHERE amount >= {correlated}", SCHEMAS).plan
    (join,) = [n for n in where.walk() if isinstance(n, Join)]
    groups = [n for n in join.right.walk() if isinstance(n, Aggregate)]
    assert join.kind == "inner" and len(groups) == 1 and len(groups[0].groups) == 1
    listed = to_ir(f"SELECT id, {correlated} AS top FROM s.sales x", SCHEMAS).plan
    assert [n.kind for n in listed.walk() if isinstance(n, Join)] == ["left"]


def test_windows_intersect_and_offset_have_plans() -> None:
    ranked = to_ir(
        "SELECT region, id FROM s.sales "
        "QUALIFY ROW_NUMBER() OVER (PARTITION BY region ORDER BY amount DESC) <= 2",
        SCHEMAS,
    ).plan
    (window,) = [n for n in ranked.walk() if isinstance(n, Window)]
    assert window.partition and window.calls[0][1].func == "row_number"
    both = to_ir("SELECT region FROM s.sales INTERSECT SELECT region FROM s.regions", SCHEMAS).plan
    assert isinstance(both, Distinct) and isinstance(both.child, Join) and both.child.kind == "semi"
    paged = to_ir("SELECT id FROM s.sales ORDER BY id LIMIT 5 OFFSET 10", SCHEMAS).plan
    (top,) = [n for n in paged.walk() if isinstance(n, TopK)]
    assert (top.limit, top.offset, top.reach) == (5, 10, 15)


def test_fetch_first_rows_only_is_a_limit() -> None:
    """``FETCH FIRST n ROWS ONLY`` (ANSI generators' limit; one row when n is left out), with
    an ``OFFSET n ROWS`` before it: the same top-k as ``LIMIT``/``OFFSET``."""
    for text, expected in (
        ("SELECT id FROM s.sales ORDER BY id FETCH FIRST 5 ROWS ONLY", (5, 0)),
        ("SELECT id FROM s.sales ORDER BY id FETCH NEXT ROW ONLY", (1, 0)),
        ("SELECT id FROM s.sales ORDER BY id OFFSET 10 ROWS FETCH NEXT 5 ROWS ONLY", (5, 10)),
    ):
        (top,) = [n for n in to_ir(text, SCHEMAS).plan.walk() if isinstance(n, TopK)]
        assert (top.limit, top.offset) == expected, text
    capped = to_ir("SELECT region FROM s.sales FETCH FIRST 3 ROWS ONLY", SCHEMAS)
    assert capped.row_cap is not None and (capped.row_cap.limit, capped.row_cap.offset) == (3, 0)


@pytest.mark.parametrize("clause", ["FETCH FIRST 10 PERCENT ROWS ONLY", "FETCH FIRST 2 ROWS WITH TIES"])
def test_fetch_by_percent_or_with_ties_is_refused_by_name(clause: str) -> None:
    with pytest.raises(QueryError, match=r"PERCENT|WITH TIES") as info:
        to_ir(f"SELECT id FROM s.sales ORDER BY amount {clause}", SCHEMAS)
    assert "FETCH FIRST n ROWS ONLY" in (info.value.hint or "")


@pytest.mark.parametrize(
    ("text", "named", "fixed"),
    [
        ('SELECT "sales"."region" FROM s.sales "sales"', '"sales"."region"', "`sales`.`region`"),
        ('SELECT x."amount" FROM s.sales x', 'x."amount"', "x.`amount`"),
        ('SELECT id FROM s.sales WHERE "sales".day IS NULL', '"sales".day', "`sales`.day"),
    ],
)
def test_names_in_double_quotes_are_refused_with_the_backticked_spelling(
    text: str, named: str, fixed: str
) -> None:
    """ANSI generators quote names in double quotes; Spark reads those as strings and reported
    only a syntax error near one."""
    with pytest.raises(QueryError) as info:
        to_ir(text, SCHEMAS)
    assert str(info.value).startswith(named) and fixed in (info.value.hint or "")


def test_a_string_in_double_quotes_is_still_a_string() -> None:
    plan = to_ir('SELECT id FROM "s"."sales" WHERE region = "north"', SCHEMAS).plan
    assert "'north'" in to_sql(plan)


def test_the_whole_querys_limit_without_order_is_a_row_cap_outside_the_plan() -> None:
    """As Metabase caps every question (``LIMIT 2000``): any rows of the answer are an answer,
    so the plan is the query without it, and its sketch serves the capped query."""
    plain = to_ir("SELECT region, SUM(amount) AS s FROM s.sales GROUP BY region", SCHEMAS)
    capped = to_ir("SELECT region, SUM(amount) AS s FROM s.sales GROUP BY region LIMIT 2000", SCHEMAS)
    assert to_sql(capped.plan) == to_sql(plain.plan) and plain.row_cap is None
    assert capped.row_cap is not None and (capped.row_cap.limit, capped.row_cap.offset) == (2000, 0)
    printed = to_sql(plain.plan, source=str, output_names=plain.output_names)
    assert plain.runnable(plain.plan, str) == printed
    assert capped.runnable(capped.plan, str) == f"SELECT * FROM ({printed}) LIMIT 2000"
    paged = to_ir("SELECT id FROM s.sales LIMIT 5 OFFSET 10", SCHEMAS)
    assert paged.row_cap is not None and paged.row_cap.applied("q") == "SELECT * FROM (q) LIMIT 5 OFFSET 10"
    # LIMIT ALL limits nothing: ordered, it is the ORDER BY alone.
    everything = to_ir("SELECT id FROM s.sales ORDER BY id LIMIT ALL", SCHEMAS)
    assert everything.row_cap is None and not any(isinstance(n, TopK) for n in everything.plan.walk())
    assert to_ir("SELECT id FROM s.sales LIMIT ALL", SCHEMAS).row_cap is None


@pytest.mark.parametrize(
    "group_by",
    [
        "ROLLUP (region, day)",
        "CUBE (region, day)",
        "GROUPING SETS ((region, day), (region), ())",
        "region, ROLLUP (day)",
        "ROLLUP (region), CUBE (day)",
    ],
)
def test_subtotals_are_refused_with_what_to_sketch_instead(group_by: str) -> None:
    """A subtotal depends on every row the WHERE clause keeps: the hint names the finest
    grouping as the report to sketch."""
    with pytest.raises(UnsupportedQueryError) as refused:
        to_ir(f"SELECT region, day, SUM(amount) AS s FROM s.sales GROUP BY {group_by}", SCHEMAS)
    assert refused.value.construct == "ROLLUP/CUBE/GROUPING SETS"
    assert "finest grouping" in (refused.value.hint or "")
