"""The rewrites behind correlated NOT IN, EXISTS over an aggregation, INTERSECT/EXCEPT ALL,
COUNT(DISTINCT x, y) and the engine's split of DISTINCT aggregates: the IR printed back returns
what Spark returns for the original text, on TPC-H SF0.01, with NULLs made by CASE (TPC-H has
none) on both sides of every comparison the rewrites change."""

from __future__ import annotations

from collections import Counter

import pytest

from sketch_core.algebra.ir import Aggregate, Relation, replace_children
from sketch_core.rewrites.distinct_aggregates import distinct_rows_first
from sketch_core.service import SketchService
from tests.algebra.printed import spark_and_printed

pytestmark = pytest.mark.spark

# A NULL nation key for customers with a negative balance, a NULL region for two nations.
NULLABLE_NATION = "CASE WHEN c.c_acctbal > 0 THEN c.c_nationkey END"
NULLABLE_REGION = "CASE WHEN n.n_nationkey NOT IN (3, 17) THEN n.n_regionkey END"

QUERIES = {
    # NULL probes (negative balances), a NULL in region 1's sets (nations 3 and 17), and
    # empty sets (no region 5).
    "correlated_not_in": (
        f"SELECT c.c_mktsegment, c.c_nationkey % 6 AS r, COUNT(*) AS n FROM tpch.customer c "
        f"WHERE {NULLABLE_NATION} % 7 NOT IN (SELECT CASE WHEN n.n_nationkey NOT IN (3, 17) "
        "THEN n.n_nationkey % 7 END FROM tpch.nation n WHERE n.n_regionkey = c.c_nationkey % 6) "
        "GROUP BY 1, 2"
    ),
    "exists_over_grouped_aggregation": (
        "SELECT n.n_name FROM tpch.nation n WHERE EXISTS (SELECT 1 FROM tpch.customer c "
        "WHERE c.c_nationkey = n.n_nationkey GROUP BY c.c_mktsegment HAVING COUNT(*) > 14)"
    ),
    "not_exists_over_global_aggregation": (
        "SELECT n.n_name FROM tpch.nation n WHERE NOT EXISTS (SELECT 1 FROM tpch.customer c "
        "WHERE c.c_nationkey = n.n_nationkey HAVING SUM(c.c_acctbal) > 280000)"
    ),
    "uncorrelated_exists_over_aggregation": (
        "SELECT n_name FROM tpch.nation WHERE EXISTS "
        "(SELECT c_nationkey FROM tpch.customer GROUP BY c_nationkey HAVING COUNT(*) > 70)"
    ),
    "intersect_all": (
        f"SELECT {NULLABLE_NATION} % 5 AS r FROM tpch.customer c WHERE c.c_acctbal < 300 "
        f"INTERSECT ALL SELECT {NULLABLE_REGION} FROM tpch.nation n"
    ),
    "except_all": (
        f"SELECT {NULLABLE_REGION} AS r FROM tpch.nation n EXCEPT ALL "
        f"SELECT {NULLABLE_NATION} % 5 FROM tpch.customer c WHERE c.c_custkey < 12"
    ),
    "count_distinct_columns": (
        f"SELECT c.c_mktsegment, COUNT(DISTINCT c.c_nationkey % 3, {NULLABLE_NATION} % 2) AS n "
        "FROM tpch.customer c GROUP BY c.c_mktsegment"
    ),
    # Through the engine's split (checked by printing it): NULL groups join with <=>.
    "distinct_beside_others": (
        f"SELECT {NULLABLE_NATION} AS k, COUNT(DISTINCT c.c_mktsegment) AS segments, "
        "SUM(c.c_acctbal) AS total, COUNT(*) AS n, COUNT(DISTINCT c.c_custkey % 7, c.c_mktsegment) AS pairs "
        "FROM tpch.customer c GROUP BY 1"
    ),
    "distinct_beside_others_global": (
        "SELECT COUNT(*) AS n, COUNT(DISTINCT c_nationkey) AS nations, MAX(c_acctbal) AS top "
        "FROM tpch.customer"
    ),
}


def _split(node: Relation) -> Relation:
    """``node`` with every aggregation in the form the incremental engine maintains."""
    children = tuple(_split(child) for child in node.children)
    node = replace_children(node, children) if children else node
    return distinct_rows_first(node) if isinstance(node, Aggregate) else node


@pytest.mark.parametrize("label", sorted(QUERIES))
def test_printed_ir_returns_what_spark_returns(tpch_svc: SketchService, label: str) -> None:
    tables = ("tpch.nation", "tpch.customer")
    expected, printed = spark_and_printed(tpch_svc, QUERIES[label], tables, (lambda plan: plan, _split))
    assert expected, f"{label} returns nothing at SF0.01; the test would be vacuous"
    assert [Counter(rows) for rows in printed] == [Counter(expected)] * 2  # (no ORDER BY: bags)
