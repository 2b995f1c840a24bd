"""Reports as BI tools print them for Spark (Tableau, Superset, Metabase, Looker, Power BI, dbt
models, hand-written texts with optimizer hints), checked against Spark's own answer for the
text as written (over the catalog's tables, not through this project), through the service's
plain path and the sketched one.

Metabase orders its nested `source` query and limits the outer one: Spark keeps that order
(a top-k), and the sketched path had read the LIMIT as keeping any rows.

Names in other scripts (`priorité`) must stay quoted: Spark takes only ASCII names bare.

Metabase qualifies columns with the full table name (`ns`.`table`.`column`): the plain path
bound the table to a view and Spark could not resolve them. A hint naming an alias
(``/*+ BROADCAST(c) */``) was taken for a table and the capture refused the text. ``ORDER BY
ABS(x)`` or ``ORDER BY p * 2`` over a selected ``x`` or alias ``p`` could not be resolved.
"""

from __future__ import annotations

import pytest

from sketch_core.errors import QueryError, SparkQueryError, UnsupportedQueryError
from sketch_core.service import SketchService
from tests.oracles.results import check_against_spark, sorted_rows

pytestmark = pytest.mark.spark

# Looker's hash of a row's primary key, which makes SUM(DISTINCT ...) count each row once.
_LOOKER_KEY = " + ".join(
    f"CAST(CONV(SUBSTRING(MD5(CAST(customer.c_custkey AS STRING)), {start}, {length}), 16, 10)"
    f" AS DECIMAL(38,0)){scale}"
    for start, length, scale in ((1, 15, " * 100000000"), (16, 8, ""))
)
# {t}: the catalog prefix for Spark's own run ("lake."), nothing for the service's.
REPORTS = {
    # Tableau's Top N filter: an inner join with the top keys, null-safe.
    "tableau_top_n": """
        SELECT `orders`.`o_orderpriority` AS `o_orderpriority`,
               SUM(`orders`.`o_totalprice`) AS `sum:o_totalprice:ok`
        FROM {t}`tpch`.`orders` `orders`
          INNER JOIN (
          SELECT `orders`.`o_custkey` AS `o_custkey`, SUM(`orders`.`o_totalprice`) AS `$__alias__0`
          FROM {t}`tpch`.`orders` `orders`
          GROUP BY 1
          ORDER BY `$__alias__0` DESC
          LIMIT 10
        ) `t0` ON (`orders`.`o_custkey` <=> `t0`.`o_custkey`)
        GROUP BY 1""",
    "tableau_count_distinct": """
        SELECT `customer`.`c_nationkey` AS `c_nationkey`,
               COUNT(DISTINCT `orders`.`o_orderkey`) AS `ctd:o_orderkey:ok`, SUM(1) AS `cnt:orders:ok`
        FROM {t}`tpch`.`orders` `orders`
          INNER JOIN {t}`tpch`.`customer` `customer` ON (`orders`.`o_custkey` = `customer`.`c_custkey`)
        WHERE (`orders`.`o_orderpriority` IN ('1-URGENT', '2-HIGH'))
        GROUP BY 1 HAVING (COUNT(1) > 0)""",
    # Superset's time series with a series limit (the top groups joined back).
    "superset_series_limit": """
        SELECT DATE_TRUNC('month', o_orderdate) AS __timestamp, o_orderpriority AS o_orderpriority,
               SUM(o_totalprice) AS `SUM(o_totalprice)`
        FROM {t}tpch.orders
        JOIN (SELECT o_orderpriority AS o_orderpriority__, SUM(o_totalprice) AS mme_inner__
              FROM {t}tpch.orders WHERE o_orderdate >= TIMESTAMP '1995-01-01 00:00:00'
              GROUP BY o_orderpriority ORDER BY mme_inner__ DESC LIMIT 3) AS anon_1
          ON o_orderpriority = o_orderpriority__
        WHERE o_orderdate >= TIMESTAMP '1995-01-01 00:00:00' AND o_orderdate < TIMESTAMP '1996-01-01 00:00:00'
        GROUP BY DATE_TRUNC('month', o_orderdate), o_orderpriority
        ORDER BY `SUM(o_totalprice)` DESC
        LIMIT 10000""",
    # Metabase: columns named with the full table name, a nested `source` query.
    "metabase_nested": """
        SELECT `source`.`c_mktsegment` AS `c_mktsegment`, `source`.`count` AS `count`
        FROM (SELECT {t}`tpch`.`customer`.`c_mktsegment` AS `c_mktsegment`, count(*) AS `count`
              FROM {t}`tpch`.`customer` WHERE {t}`tpch`.`customer`.`c_acctbal` > 9000
              GROUP BY {t}`tpch`.`customer`.`c_mktsegment`
              ORDER BY {t}`tpch`.`customer`.`c_mktsegment` ASC) `source`
        ORDER BY `source`.`count` DESC LIMIT 1048575""",
    # Metabase caps a question without a sort at 2000 rows: a LIMIT without ORDER BY.
    "metabase_capped_question": """
        SELECT `source`.`o_custkey` AS `o_custkey`, `source`.`sum` AS `sum`
        FROM (SELECT {t}`tpch`.`orders`.`o_custkey` AS `o_custkey`,
                     SUM({t}`tpch`.`orders`.`o_totalprice`) AS `sum`
              FROM {t}`tpch`.`orders` GROUP BY {t}`tpch`.`orders`.`o_custkey`
              ORDER BY {t}`tpch`.`orders`.`o_custkey` ASC) `source`
        WHERE `source`.`sum` > 500000 LIMIT 2000""",
    # Metabase's "top 10 by sum": the order in the nested `source` query, the LIMIT outside it.
    # Spark limits the ordered rows (a top-k); read as SQL says, the LIMIT kept any 10 groups.
    "metabase_top_by_sum": """
        SELECT `source`.`o_custkey` AS `o_custkey`, `source`.`sum` AS `sum`
        FROM (SELECT {t}`tpch`.`orders`.`o_custkey` AS `o_custkey`,
                     SUM({t}`tpch`.`orders`.`o_totalprice`) AS `sum`
              FROM {t}`tpch`.`orders` GROUP BY {t}`tpch`.`orders`.`o_custkey`
              ORDER BY `sum` DESC, {t}`tpch`.`orders`.`o_custkey` ASC) `source`
        LIMIT 10""",
    # A dbt model that orders its CTE, filtered and limited by the report over it.
    "ordered_cte_filtered_and_limited": """
        WITH ranked AS (SELECT o_custkey, SUM(o_totalprice) AS total FROM {t}tpch.orders
                        GROUP BY o_custkey ORDER BY total DESC, o_custkey)
        SELECT * FROM ranked WHERE o_custkey % 2 = 0 LIMIT 5""",
    "ordered_by_an_expression_the_source_does_not_return": """
        SELECT s.o_custkey FROM (SELECT o_custkey, SUM(o_totalprice) AS total FROM {t}tpch.orders
          GROUP BY o_custkey ORDER BY SUM(o_totalprice) * -1 ASC, o_custkey) s LIMIT 6""",
    "a_union_ordered_as_a_whole_then_limited": """
        SELECT * FROM (SELECT o_custkey AS k, o_totalprice AS v FROM {t}tpch.orders
          UNION ALL SELECT c_custkey, c_acctbal FROM {t}tpch.customer ORDER BY v DESC) u LIMIT 5""",
    "a_top_k_limited_again_outside": """
        SELECT x.l_orderkey, x.q FROM (SELECT l_orderkey, SUM(l_quantity) AS q FROM {t}tpch.lineitem
          GROUP BY l_orderkey ORDER BY q DESC, l_orderkey LIMIT 50) x LIMIT 7""",
    "metabase_join": """
        SELECT {t}`tpch`.`orders`.`o_orderpriority` AS `o_orderpriority`,
               `Customer`.`c_mktsegment` AS `Customer__c_mktsegment`,
               sum({t}`tpch`.`orders`.`o_totalprice`) AS `sum`
        FROM {t}`tpch`.`orders`
          LEFT JOIN {t}`tpch`.`customer` `Customer` ON {t}`tpch`.`orders`.`o_custkey` = `Customer`.`c_custkey`
        WHERE {t}`tpch`.`orders`.`o_orderdate` >= date '1996-01-01'
        GROUP BY {t}`tpch`.`orders`.`o_orderpriority`, `Customer`.`c_mktsegment`
        ORDER BY `sum` DESC, {t}`tpch`.`orders`.`o_orderpriority` ASC LIMIT 5""",
    # Looker's symmetric aggregate (a sum over a fanned-out join, made exact by hashing keys).
    "looker_symmetric_aggregate": f"""
        SELECT customer.c_mktsegment AS `customer.c_mktsegment`,
            COALESCE(CAST((SUM(DISTINCT (CAST(FLOOR(COALESCE(customer.c_acctbal, 0) * (1000000 * 1.0))
                AS DECIMAL(38,0))) + {_LOOKER_KEY}) - SUM(DISTINCT {_LOOKER_KEY})) AS DOUBLE)
                / CAST((1000000 * 1.0) AS DOUBLE), 0) AS `customer.total_balance`,
            COUNT(*) AS `orders.count`
        FROM {{t}}tpch.orders AS orders
        LEFT JOIN {{t}}tpch.customer AS customer ON orders.o_custkey = customer.c_custkey
        WHERE ((( orders.o_orderdate ) >= ((TIMESTAMP '1995-01-01'))))
        GROUP BY 1
        ORDER BY 3 DESC
        LIMIT 500""",
    # Power BI: a derived table, dates compared with strings.
    "power_bi_itbl": """
        select `o_orderpriority`, `C1` from (
          select `o_orderpriority`, sum(`o_totalprice`) as `C1` from {t}`tpch`.`orders`
          where `o_orderdate` >= '1995-01-01' group by `o_orderpriority`) as `ITBL`
        order by `C1` desc limit 1001""",
    # Joins nested in parentheses, as Access-style generators print them: the plain path read
    # the first table alone (the inner join's second table was dropped with the parentheses).
    "parenthesized_joins": """
        SELECT n.n_name, SUM(o.o_totalprice) AS s
        FROM (({t}tpch.orders o JOIN {t}tpch.customer c ON o.o_custkey = c.c_custkey)
          JOIN {t}tpch.nation n ON c.c_nationkey = n.n_nationkey)
        GROUP BY n.n_name ORDER BY s DESC LIMIT 3""",
    "parenthesized_join_read_through_one_side": """
        SELECT o.o_orderpriority, COUNT(*) AS n
        FROM ({t}tpch.orders o JOIN {t}tpch.customer c
          ON o.o_custkey = c.c_custkey AND c.c_mktsegment = 'BUILDING')
        GROUP BY o.o_orderpriority HAVING COUNT(*) > 10""",
    # ORDER BY expressions over select-list names (the front end could not resolve them).
    "order_by_a_function_of_a_selected_column": """
        SELECT o_custkey, o_totalprice FROM {t}tpch.orders
        ORDER BY ABS(o_totalprice - 200000), o_custkey LIMIT 10""",
    "order_by_an_expression_of_an_alias": """
        SELECT o_orderkey, o_totalprice * 0.9 AS net FROM {t}tpch.orders
        WHERE o_orderstatus = 'F' ORDER BY net * -1, o_orderkey LIMIT 10""",
    # Spark's higher-order functions, EXISTS among them (it was read as an EXISTS subquery).
    "higher_order_functions": """
        SELECT o_orderpriority, COUNT(*) AS n FROM {t}tpch.orders
        WHERE exists(split(o_comment, ' '), w -> w = 'final')
          AND forall(array(o_totalprice, o_shippriority), x -> x >= 0)
          AND NOT exists(array(o_custkey), c -> c % 7 = 0)
        GROUP BY o_orderpriority ORDER BY n DESC, o_orderpriority LIMIT 3""",
    # Optimizer hints: one naming an alias, one naming the table (both left to Spark).
    "hint_on_an_alias": """
        SELECT /*+ BROADCAST(c) */ c.c_name, SUM(o.o_totalprice) AS t
        FROM {t}tpch.orders o JOIN {t}tpch.customer c ON o.o_custkey = c.c_custkey
        GROUP BY c.c_name ORDER BY t DESC, c.c_name LIMIT 5""",
    # A dbt model's monthly rollup: keys computed by date_format and EXTRACT, a NOT LIKE filter.
    "dbt_monthly_top": """
        SELECT date_format(o_orderdate, 'yyyy-MM') AS month, EXTRACT(YEAR FROM o_orderdate) AS year,
               SUM(o_totalprice) AS revenue
        FROM {t}tpch.orders WHERE o_comment NOT LIKE '%special%requests%'
        GROUP BY date_format(o_orderdate, 'yyyy-MM'), EXTRACT(YEAR FROM o_orderdate)
        ORDER BY revenue DESC, month LIMIT 4""",
    # A hand-written ratio guarded by NULLIF, over a window given as date arithmetic.
    "nullif_ratio_over_an_interval": """
        SELECT l_partkey, SUM(l_extendedprice) / NULLIF(SUM(l_quantity), 0) AS unit_price
        FROM {t}tpch.lineitem WHERE l_shipdate >= DATE '1998-12-01' - INTERVAL 2 YEARS
        GROUP BY l_partkey HAVING COUNT(*) > 1
        ORDER BY unit_price DESC, l_partkey LIMIT 5""",
    "hints_on_a_table": """
        SELECT /*+ BROADCAST(customer), REPARTITION(4) */ customer.c_name, SUM(orders.o_totalprice) AS t
        FROM {t}tpch.orders JOIN {t}tpch.customer ON orders.o_custkey = customer.c_custkey
        GROUP BY customer.c_name ORDER BY t DESC, customer.c_name LIMIT 5""",
    # Names in other scripts, quoted as Spark needs them (the service printed `priorité` bare).
    "non_ascii_names": """
        WITH `données` AS (SELECT o_orderpriority AS `priorité`, o_totalprice AS `montant`
                           FROM {t}tpch.orders)
        SELECT `priorité`, SUM(`montant`) AS `чистый_доход` FROM `données`
        GROUP BY `priorité` ORDER BY 2 DESC LIMIT 2""",
}


@pytest.mark.parametrize("label", sorted(REPORTS))
def test_bi_tool_reports_return_what_spark_returns(tpch_svc: SketchService, label: str) -> None:
    check_against_spark(tpch_svc, REPORTS[label], f"bi_{label}")


def test_a_cap_below_the_answers_size_returns_that_many_of_its_rows(tpch_svc: SketchService) -> None:
    """A LIMIT without ORDER BY returns any rows of the answer: the sketched query returns as
    many as the cap, each one a row of the full answer."""
    svc, name = tpch_svc, "bi_capped_below"
    report = "SELECT o_custkey, COUNT(*) AS n FROM tpch.orders GROUP BY o_custkey HAVING COUNT(*) > 5"
    full = sorted_rows(svc.query(report, use_sketches=False).table)
    assert len(full) > 7, "the cap must cut the answer"
    for capped in (f"{report} LIMIT 7", f"{report} LIMIT 7 OFFSET 3"):
        svc.capture(capped, name=name, fragments=50)
        try:
            sketched = svc.query(capped, use_sketches="always")
            assert sketched.sketch is not None and sketched.sketch[0] == name
            rows = sorted_rows(sketched.table)
            assert len(rows) == 7 and set(rows) <= set(full)
        finally:
            svc.drop_sketch(name)


def test_a_text_the_sketch_front_end_cannot_read_runs_plain_by_default(tpch_svc: SketchService) -> None:
    """Spark names ``COUNT(*)``'s column ``count(1)``, and a tool may order by that name: the
    front end does not resolve it, so the default query failed with a QueryError where Spark
    answers. It runs plain now; capturing it is what fails, and says why."""
    svc = tpch_svc
    report = (
        "SELECT o_custkey, COUNT(*) FROM {t}tpch.orders GROUP BY o_custkey "
        "ORDER BY `count(1)` DESC, o_custkey LIMIT 5"
    )
    expected = sorted_rows(svc.spark.sql(report.format(t=f"{svc.settings.catalog_name}.")).toArrow())
    plain = svc.query(report.format(t=""))
    assert plain.sketch is None and sorted_rows(plain.table) == expected
    with pytest.raises(QueryError, match="count\\(1\\)"):
        svc.capture(report.format(t=""), name="bi_unresolved")


def test_a_pivot_runs_plain_by_default_and_its_capture_is_refused_by_name(tpch_svc: SketchService) -> None:
    svc = tpch_svc
    report = """SELECT * FROM (SELECT o_orderpriority, o_orderstatus, o_totalprice FROM {t}tpch.orders)
        PIVOT (SUM(o_totalprice) FOR o_orderstatus IN ('F', 'O', 'P'))"""
    # The PIVOT straight after the table: the plain path dropped it and returned the table's rows.
    on_the_table = """SELECT * FROM {t}tpch.customer
        PIVOT (SUM(c_acctbal) FOR c_mktsegment IN ('BUILDING', 'MACHINERY'))"""
    for text in (report, on_the_table):
        expected = sorted_rows(svc.spark.sql(text.format(t=f"{svc.settings.catalog_name}.")).toArrow())
        plain = svc.query(text.format(t=""))  # the default use: no sketch applies, so it runs plain
        assert plain.sketch is None and sorted_rows(plain.table) == expected
    with pytest.raises(UnsupportedQueryError) as refused:
        svc.capture(report.format(t=""), name="bi_pivot")
    assert refused.value.construct == "PIVOT"


def test_fetch_first_rows_only_is_a_limit_and_fetch_percent_or_with_ties_is_refused(
    tpch_svc: SketchService,
) -> None:
    """ANSI SQL generators print a limit as ``FETCH FIRST n ROWS ONLY``: the capture refused it
    as "a LIMIT that is not a number". ``PERCENT`` and ``WITH TIES`` reached Spark as ``LIMIT n``
    (the text Spark runs is printed from the parsed one), another answer without an error."""
    svc, name = tpch_svc, "bi_fetch_first"
    report = """
        WITH order_facts AS (
          SELECT o_custkey, COUNT(*) AS orders, SUM(o_totalprice) AS spend FROM {t}tpch.orders
          WHERE o_orderdate >= DATE '1995-01-01' GROUP BY o_custkey)
        SELECT c.c_name, f.orders, f.spend FROM order_facts f JOIN {t}tpch.customer c
          ON c.c_custkey = f.o_custkey
        WHERE f.orders > 1 ORDER BY f.spend DESC NULLS LAST, c.c_name FETCH FIRST 10 ROWS ONLY"""
    check_against_spark(svc, report, name, as_spark=report.replace("FETCH FIRST 10 ROWS ONLY", "LIMIT 10"))
    sql = report.format(t="")
    for clause, named in (
        ("FETCH FIRST 10 PERCENT ROWS ONLY", "PERCENT"),
        ("FETCH FIRST 10 ROWS WITH TIES", "WITH TIES"),
    ):
        with pytest.raises(QueryError, match=named):
            svc.query(sql.replace("FETCH FIRST 10 ROWS ONLY", clause))


def test_a_text_quoting_names_in_double_quotes_is_refused_with_the_spelling_spark_takes(
    tpch_svc: SketchService,
) -> None:
    """A BI tool on a generic ANSI dialect prints ``"orders"."o_totalprice"``: Spark answered
    with a syntax error near a string; the service names the column and the fix, and the same
    text with backticks runs."""
    text = (
        "SELECT {q}customer{q}.{q}c_mktsegment{q} AS {q}c_mktsegment{q}, "
        "SUM({q}orders{q}.{q}o_totalprice{q}) AS s "
        "FROM {q}tpch{q}.{q}orders{q} {q}orders{q} INNER JOIN {q}tpch{q}.{q}customer{q} {q}customer{q} "
        "ON ({q}orders{q}.{q}o_custkey{q} = {q}customer{q}.{q}c_custkey{q}) "
        "GROUP BY 1 ORDER BY 2 DESC LIMIT 3"
    )
    with pytest.raises(QueryError) as info:
        tpch_svc.query(text.format(q='"'))
    assert not isinstance(info.value, SparkQueryError)
    assert "`customer`.`c_mktsegment`" in (info.value.hint or "")
    assert tpch_svc.query(text.format(q="`")).table.num_rows == 3
