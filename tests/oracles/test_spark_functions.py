"""Reports with Spark functions that sqlglot's Spark printer rewrote or the front end refused,
checked against Spark's own answer for the text as written (over the catalog's tables, not
through this project), through the service's plain path and, where a sketch applies, its
sketched path.

sqlglot printed ``PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY x [DESC])`` and
``PERCENTILE_DISC`` as ``PERCENTILE_APPROX(x, q)`` (approximate, direction dropped), and
``TO_CHAR(x, fmt)`` as a cast: the plain path returned other values than Spark. Aggregate
and window functions the project does not compute (``STDDEV``, ``MAX_BY``, ``LAG``, ``NTILE``,
...) were refused.
"""

from __future__ import annotations

import pytest

from sketch_core.service import SketchService
from tests.oracles.results import check_against_spark

pytestmark = pytest.mark.spark

# {t}: the table prefix (the catalog's, for Spark's own run; the service reads ns.table).
REPORTS = {
    "percentile_cont_per_segment": """
        SELECT c_mktsegment, PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY c_acctbal) AS median_balance,
               PERCENTILE_DISC(0.9) WITHIN GROUP (ORDER BY c_acctbal DESC) AS low_decile,
               PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY c_acctbal) FILTER (WHERE c_nationkey < 10) AS m,
               COUNT(*) AS n
        FROM {t}tpch.customer GROUP BY c_mktsegment""",
    "percentile_in_a_top_k": """
        SELECT o_custkey, SUM(o_totalprice) AS spent,
               PERCENTILE_CONT(0.25) WITHIN GROUP (ORDER BY o_totalprice DESC) AS q
        FROM {t}tpch.orders GROUP BY o_custkey ORDER BY spent DESC, o_custkey LIMIT 10""",
    "to_char_of_numbers": """
        SELECT n_name, TO_CHAR(n_nationkey * 1000.5, '999,999.00') AS shown
        FROM {t}tpch.nation WHERE n_regionkey = 1""",
    "shown_statistics_in_a_top_k": """
        SELECT l_orderkey, SUM(l_extendedprice) AS revenue, ROUND(STDDEV(l_quantity), 4) AS sd,
               MAX_BY(l_linenumber, l_extendedprice) AS priciest_line, MEDIAN(l_discount) AS md,
               APPROX_COUNT_DISTINCT(l_suppkey) AS suppliers, EVERY(l_quantity > 0) AS all_positive
        FROM {t}tpch.lineitem GROUP BY l_orderkey ORDER BY revenue DESC, l_orderkey LIMIT 10""",
    "lag_per_customer": """
        SELECT o_custkey, o_orderdate, o_totalprice - LAG(o_totalprice, 1, 0)
                 OVER (PARTITION BY o_custkey ORDER BY o_orderdate, o_orderkey) AS change
        FROM {t}tpch.orders WHERE o_custkey < 40""",
    "top_decile": """
        SELECT c_custkey, c_acctbal FROM (
            SELECT c_custkey, c_acctbal, NTILE(10) OVER (ORDER BY c_acctbal DESC, c_custkey) AS decile
            FROM {t}tpch.customer) WHERE decile = 1""",
}
SKETCHED = ("percentile_in_a_top_k", "shown_statistics_in_a_top_k", "lag_per_customer")


@pytest.mark.parametrize("label", sorted(REPORTS))
def test_plain_and_sketched_reports_return_what_spark_returns(tpch_svc: SketchService, label: str) -> None:
    check_against_spark(tpch_svc, REPORTS[label], f"functions_{label}" if label in SKETCHED else None)
