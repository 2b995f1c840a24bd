"""Spark SQL shorthands written out for the front end (differentially checked against Spark in
tests/oracles/test_report_constructs.py)."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from sketch_core.algebra.dialect import SPARK
from sketch_core.algebra.shorthands import written_out
from sketch_core.errors import UnsupportedQueryError


def _out(sql: str) -> str:
    return written_out(sqlglot.parse_one(sql, read="spark")).sql(dialect=SPARK)


def test_aggregate_filters_become_conditional_arguments() -> None:
    assert _out(
        "SELECT COUNT(*) FILTER (WHERE c = 1) AS n, SUM(x) FILTER (WHERE c > 2) AS s, "
        "COUNT(DISTINCT x, y) FILTER (WHERE c < 0) AS d FROM t"
    ) == (
        "SELECT COUNT(CASE WHEN c = 1 THEN 1 END) AS n, SUM(CASE WHEN c > 2 THEN x END) AS s, "
        "COUNT(DISTINCT CASE WHEN c < 0 THEN x END, CASE WHEN c < 0 THEN y END) AS d FROM t"
    )


def test_a_filter_on_an_ordered_set_aggregate_filters_its_ordered_values() -> None:
    assert _out(
        "SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY x DESC) FILTER (WHERE c > 1) AS m FROM t"
    ) == ("SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY CASE WHEN c > 1 THEN x END DESC) AS m FROM t")


def test_group_by_all_groups_by_the_items_without_aggregates() -> None:
    assert _out("SELECT a + 1 AS b, UPPER(c), SUM(x) AS s FROM t GROUP BY ALL HAVING s > 1") == (
        "SELECT a + 1 AS b, UPPER(c), SUM(x) AS s FROM t GROUP BY a + 1, UPPER(c) HAVING s > 1"
    )
    assert _out("SELECT SUM(x), COUNT(*) + 1 FROM t GROUP BY ALL") == "SELECT SUM(x), COUNT(*) + 1 FROM t"


def test_a_tree_without_shorthands_is_returned_as_it_is() -> None:
    tree = sqlglot.parse_one("SELECT a, SUM(x) FROM t GROUP BY a", read="spark")
    assert written_out(tree) is tree
    with_filter = sqlglot.parse_one("SELECT SUM(x) FILTER (WHERE a > 1) FROM t", read="spark")
    printed = with_filter.sql(dialect="spark")
    assert written_out(with_filter) is not with_filter
    assert with_filter.sql(dialect="spark") == printed  # the caller's tree is left unchanged


def test_a_filter_on_an_aggregate_with_more_arguments_is_refused_by_name() -> None:
    with pytest.raises(UnsupportedQueryError, match="FILTER"):
        _out("SELECT PERCENTILE_APPROX(x, 0.5) FILTER (WHERE a > 1) FROM t")


def test_order_by_all_orders_by_every_select_position_in_the_direction_given() -> None:
    assert _out("SELECT a, SUM(x) AS s FROM t GROUP BY a ORDER BY ALL DESC LIMIT 3") == (
        "SELECT a, SUM(x) AS s FROM t GROUP BY a ORDER BY 1 DESC, 2 DESC LIMIT 3"
    )
    assert _out("SELECT a FROM t UNION ALL SELECT b FROM u ORDER BY ALL NULLS LAST") == (
        "SELECT a FROM t UNION ALL SELECT b FROM u ORDER BY 1 NULLS LAST"
    )
    assert _out("SELECT a FROM t ORDER BY a") == "SELECT a FROM t ORDER BY a"  # not a shorthand


def test_count_if_counts_the_rows_where_its_condition_holds() -> None:
    assert _out("SELECT g, COUNT_IF(x > 1 AND y IS NULL) AS n FROM t GROUP BY g") == (
        "SELECT g, COUNT(CASE WHEN x > 1 AND y IS NULL THEN 1 END) AS n FROM t GROUP BY g"
    )


def test_percent_rank_and_cume_dist_become_ranks_and_counts_over_the_partition() -> None:
    assert _out("SELECT PERCENT_RANK() OVER (PARTITION BY a ORDER BY b DESC) AS pr FROM t") == (
        "SELECT CASE WHEN COUNT(*) OVER (PARTITION BY a) > 1 THEN CAST(RANK() OVER (PARTITION BY a "
        "ORDER BY b DESC) - 1 AS DOUBLE) / CAST(COUNT(*) OVER (PARTITION BY a) - 1 AS DOUBLE) "
        "ELSE CAST(0 AS DOUBLE) END AS pr FROM t"
    )
    assert _out("SELECT CUME_DIST() OVER (ORDER BY b) AS cd FROM t") == (
        "SELECT CAST(COUNT(*) OVER (ORDER BY b RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) "
        "AS DOUBLE) / CAST(COUNT(*) OVER () AS DOUBLE) AS cd FROM t"
    )
    named = "SELECT PERCENT_RANK() OVER w AS pr FROM t WINDOW w AS (ORDER BY b)"
    assert _out(named) == _out("SELECT PERCENT_RANK() OVER (ORDER BY b) AS pr FROM t")  # spelled out first


def test_a_leading_parenthesized_join_is_written_out_flat() -> None:
    assert _out(
        "SELECT 1 FROM ((a x JOIN b y ON x.k = y.k) LEFT JOIN c z ON y.k = z.k) JOIN d ON d.k = x.k"
    ) == ("SELECT 1 FROM a AS x JOIN b AS y ON x.k = y.k LEFT JOIN c AS z ON y.k = z.k JOIN d ON d.k = x.k")
    # A derived table first in the parentheses stays a derived table.
    assert _out("SELECT 1 FROM ((SELECT k FROM a) s JOIN b ON s.k = b.k) WHERE s.k > 1") == (
        "SELECT 1 FROM (SELECT k FROM a) AS s JOIN b ON s.k = b.k WHERE s.k > 1"
    )
    # Parentheses around one derived table, or on a join's right side, are not a leading group.
    assert _out("SELECT 1 FROM (SELECT 1 AS k) s") == "SELECT 1 FROM (SELECT 1 AS k) AS s"
    assert _out("SELECT 1 FROM a JOIN (b JOIN c ON b.k = c.k) ON a.k = b.k") == (
        "SELECT 1 FROM a JOIN (b JOIN c ON b.k = c.k) ON a.k = b.k"
    )


def test_the_higher_order_exists_is_a_function_not_a_subquery() -> None:
    tree = sqlglot.parse_one(
        "SELECT a FROM t WHERE EXISTS(xs, x -> x > 1) AND EXISTS (SELECT 1 FROM u WHERE u.b = t.a)",
        read="spark",
    )
    out = written_out(tree)
    (subquery,) = out.find_all(exp.Exists)  # the subquery stays one
    assert isinstance(subquery.this, exp.Select)
    (function,) = [f for f in out.find_all(exp.Anonymous) if f.name.lower() == "exists"]
    assert function.sql(dialect=SPARK) == "EXISTS(xs, x -> x > 1)"


def test_a_named_window_is_spelled_out_where_it_is_used() -> None:
    assert _out(
        "SELECT * FROM (SELECT g, ROW_NUMBER() OVER w AS r, "
        "SUM(v) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS run, "
        "COUNT(*) OVER (PARTITION BY k) AS n FROM t WINDOW W AS (PARTITION BY g ORDER BY v DESC)) AS x "
        "WHERE r <= 3"
    ) == (
        "SELECT * FROM (SELECT g, ROW_NUMBER() OVER (PARTITION BY g ORDER BY v DESC) AS r, "
        "SUM(v) OVER (PARTITION BY g ORDER BY v DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) "
        "AS run, COUNT(*) OVER (PARTITION BY k) AS n FROM t) AS x WHERE r <= 3"
    )
    # A reference may add the ordering its definition lacks; each query's names are its own.
    assert _out(
        "SELECT SUM(v) OVER (w ORDER BY id) AS s, (SELECT MAX(u) OVER w FROM u WINDOW w AS (ORDER BY u)) "
        "FROM t WINDOW w AS (PARTITION BY g)"
    ) == (
        "SELECT SUM(v) OVER (PARTITION BY g ORDER BY id) AS s, "
        "(SELECT MAX(u) OVER (ORDER BY u) FROM u) FROM t"
    )


def test_a_named_window_over_another_or_an_undefined_one_is_refused_by_name() -> None:
    with pytest.raises(UnsupportedQueryError, match="defined over another"):
        _out("SELECT SUM(v) OVER w2 FROM t WINDOW w1 AS (PARTITION BY g), w2 AS (w1 ORDER BY v)")
    with pytest.raises(UnsupportedQueryError, match="window w3"):
        _out("SELECT SUM(v) OVER w3 FROM t WINDOW w1 AS (PARTITION BY g)")
