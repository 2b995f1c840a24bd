"""Names resolved as Spark resolves them: the IR printed back returns what Spark returns for the
original text, on TPC-H SF0.01, for the shapes generators print (derived tables aliased by their
base table's name, column lists, the same table under several aliases with renamed columns,
qualified and unqualified references at every level, CTEs over earlier CTEs)."""

from __future__ import annotations

import pytest

from sketch_core.service import SketchService
from tests.algebra.printed import spark_and_printed

QUERIES = {
    "alias_is_the_base_table": (
        "SELECT nation.n_name, COUNT(*) AS n FROM (SELECT n_name, n_nationkey FROM tpch.nation) AS nation "
        "JOIN (SELECT c_nationkey FROM tpch.customer) AS customer "
        "ON nation.n_nationkey = customer.c_nationkey GROUP BY nation.n_name"
    ),
    "inner_references_qualified_by_the_same_name": (
        "SELECT nation.n_name, SUM(customer.c_acctbal) AS s "
        "FROM (SELECT nation.n_name, nation.n_nationkey FROM tpch.nation nation) nation, "
        "(SELECT customer.c_nationkey, customer.c_acctbal FROM tpch.customer customer) customer "
        "WHERE nation.n_nationkey = customer.c_nationkey GROUP BY nation.n_name"
    ),
    "select_alias_equal_to_a_table_alias": (
        "SELECT profit.nation, SUM(profit.amount) AS s FROM (SELECT nation.n_name AS nation, "
        "customer.c_acctbal AS amount FROM (SELECT n_name, n_nationkey FROM tpch.nation) AS nation "
        "JOIN (SELECT c_nationkey, c_acctbal FROM tpch.customer) AS customer "
        "ON nation.n_nationkey = customer.c_nationkey) AS profit GROUP BY profit.nation ORDER BY nation"
    ),
    "column_list_on_a_derived_table": (
        "SELECT t.k, t.n FROM (SELECT nation.n_name, COUNT(*) FROM (SELECT n_name, n_nationkey "
        "FROM tpch.nation) nation JOIN tpch.customer AS c ON nation.n_nationkey = c.c_nationkey "
        "GROUP BY nation.n_name) AS t (k, n) WHERE t.n > 50"
    ),
    "one_table_twice_with_renamed_columns": (
        "SELECT n1.n1_name, n2.n2_name FROM (SELECT n_name AS n1_name, n_regionkey AS n1_region "
        "FROM tpch.nation) AS n1 JOIN (SELECT n_name AS n2_name, n_regionkey AS n2_region FROM tpch.nation) "
        "AS n2 ON n1.n1_region = n2.n2_region WHERE n1.n1_name < n2.n2_name"
    ),
    "ctes_over_earlier_ctes": (
        "WITH nation AS (SELECT n_name, n_nationkey FROM tpch.nation), "
        "rich AS (SELECT c_nationkey, c_acctbal FROM tpch.customer WHERE c_acctbal > 5000), "
        "per_nation AS (SELECT nation.n_name, COUNT(*) AS n FROM nation JOIN rich "
        "ON nation.n_nationkey = rich.c_nationkey GROUP BY nation.n_name) "
        "SELECT per_nation.n_name, per_nation.n FROM per_nation ORDER BY per_nation.n DESC, n_name LIMIT 5"
    ),
    "unqualified_at_every_level": (
        "SELECT n_name, n FROM (SELECT n_name, COUNT(*) AS n FROM (SELECT n_name, n_nationkey "
        "FROM tpch.nation) nation JOIN (SELECT c_nationkey FROM tpch.customer) customer "
        "ON n_nationkey = c_nationkey GROUP BY n_name) nation ORDER BY nation.n DESC, n_name LIMIT 3"
    ),
    "shadowing_inside_a_correlated_exists": (
        "SELECT nation.n_name FROM (SELECT n_name, n_nationkey, n_regionkey FROM tpch.nation) nation "
        "WHERE EXISTS (SELECT 1 FROM (SELECT c_nationkey FROM tpch.customer) customer "
        "WHERE customer.c_nationkey = nation.n_nationkey)"
    ),
    "backquoted_mixed_case": (
        "SELECT `Nation`.`N_NAME` AS `Name`, COUNT(1) AS `Cnt` FROM (SELECT `N_NAME`, `N_NATIONKEY` "
        "FROM `TPCH`.`NATION`) AS `Nation` INNER JOIN (SELECT `C_NATIONKEY` FROM `tpch`.`customer`) "
        "AS `Customer` ON (`Nation`.`N_NATIONKEY` = `Customer`.`C_NATIONKEY`) GROUP BY `Nation`.`N_NAME` "
        "HAVING (COUNT(1) > 50)"
    ),
}


@pytest.mark.parametrize("label", sorted(QUERIES))
def test_printed_ir_returns_what_spark_returns(tpch_svc: SketchService, label: str) -> None:
    expected, (printed,) = spark_and_printed(tpch_svc, QUERIES[label], ("tpch.nation", "tpch.customer"))
    assert expected, f"{label} returns nothing at SF0.01; the test would be vacuous"
    assert printed == expected
