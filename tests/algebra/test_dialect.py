"""Texts printed for Spark keep the functions Spark 3.3+ runs as written (sqlglot's Spark
printer turned them into others: see ``sketch_core/algebra/dialect.py``); Spark's answers for
them are checked in ``tests/oracles/test_spark_functions.py``."""

from __future__ import annotations

import pytest
import sqlglot

from sketch_core.algebra.dialect import SPARK
from sketch_core.algebra.query_text import query_text


@pytest.mark.parametrize(
    "expression",
    [
        "PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY x)",
        "PERCENTILE_DISC(0.25) WITHIN GROUP (ORDER BY x DESC)",
        "TO_CHAR(x, '999,999.00')",
        "LISTAGG(s, ',') WITHIN GROUP (ORDER BY s)",
        "FIRST(x) IGNORE NULLS",
    ],
)
def test_functions_print_as_written(expression: str) -> None:
    tree = sqlglot.parse_one(f"SELECT {expression} FROM t", read="spark")
    assert tree.sql(dialect=SPARK) == f"SELECT {expression} FROM t"


def test_the_plain_path_binds_tables_without_rewriting_functions() -> None:
    text = query_text(
        "SELECT g, PERCENTILE_DISC(0.9) WITHIN GROUP (ORDER BY x DESC) AS p FROM ns.t GROUP BY g"
    )
    bound = text.bound_to_snapshots("lake", {"ns.t": 7})
    assert "PERCENTILE_DISC(0.9) WITHIN GROUP (ORDER BY x DESC)" in bound
    assert "PERCENTILE_APPROX" not in bound and "lake.ns.t VERSION AS OF 7" in bound


def test_names_spark_takes_only_quoted_are_printed_quoted() -> None:
    """Spark's parser takes only ASCII letters, digits and underscores bare; sqlglot left any
    letter bare (``\\w``), and Spark refused the printed text."""
    tree = sqlglot.parse_one("SELECT `priorité`, `чистый`, `2nd`, plain, `Mixed` FROM t", read="spark")
    assert tree.sql(dialect=SPARK) == "SELECT `priorité`, `чистый`, `2nd`, plain, `Mixed` FROM t"
    built = sqlglot.exp.select(sqlglot.exp.column("priorité"), sqlglot.exp.column("plain_1")).from_("t")
    assert built.sql(dialect=SPARK) == "SELECT `priorité`, plain_1 FROM t"
