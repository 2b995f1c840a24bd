"""Spark's implicit casts written out by the front end, checked against Spark's analyzed plans
(the expected texts are what Spark 4 in ANSI mode inserts, see the module docstring)."""

from __future__ import annotations

import datetime as dt

import pytest

from sketch_core.algebra.coercion import formatted_date, spark_date
from sketch_core.algebra.frontend import to_ir
from sketch_core.algebra.ir import Select
from sketch_core.algebra.printer import to_sql

SCHEMAS = {
    "g.sales": [
        ("sale_id", "bigint"),
        ("sale_date", "date"),
        ("amount", "decimal(12,2)"),
        ("channel", "string"),
        ("stamp", "timestamp"),
        ("q", "int"),
        ("p", "double"),
    ]
}


def condition(where: str) -> str:
    plan = to_ir(f"SELECT sale_id FROM g.sales WHERE {where}", SCHEMAS).plan
    selection = next(node for node in plan.walk() if isinstance(node, Select))
    return selection.condition.sql(dialect="spark")


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("sale_date > '2024-1-5'", "sale_date > CAST('2024-01-05' AS DATE)"),
        ("'2024-01-05' <= sale_date", "CAST('2024-01-05' AS DATE) <= sale_date"),
        # Spark's string-to-date keeps the day of a timestamp text.
        ("sale_date = '2024-01-05 12:00:00'", "sale_date = CAST('2024-01-05' AS DATE)"),
        (
            "sale_date BETWEEN '2024-01-01' AND TO_DATE('2024-6-30', 'yyyy-M-d')",
            "sale_date BETWEEN CAST('2024-01-01' AS DATE) AND CAST('2024-06-30' AS DATE)",
        ),
        ("sale_date < TO_DATE('2024-02-01')", "sale_date < CAST('2024-02-01' AS DATE)"),
        ("sale_date < DATE '2024-2-1'", "sale_date < CAST('2024-02-01' AS DATE)"),
        ("q IN ('1', '2')", "q IN (CAST('1' AS INT), CAST('2' AS INT))"),
        ("p < '3.5'", "p < CAST('3.5' AS DOUBLE)"),
        # Against a decimal, Spark compares both sides as doubles.
        ("amount > '2.4'", "CAST(amount AS DOUBLE) > CAST('2.4' AS DOUBLE)"),
        ("sale_date < stamp", "CAST(sale_date AS TIMESTAMP) < stamp"),
        ("channel = 'web'", "channel = 'web'"),
        ("q > 2", "q > 2"),
    ],
)
def test_implicit_casts_are_written_out(where: str, expected: str) -> None:
    assert condition(where) == expected


def test_casts_reach_through_derived_tables() -> None:
    sql = (
        "SELECT s.d FROM (SELECT sale_id, sale_date AS d FROM g.sales) AS s "
        "WHERE s.d >= '2024-01-05' AND s.d < TO_DATE('2024/2/1', 'yyyy/M/d')"
    )
    printed = to_sql(to_ir(sql, SCHEMAS).plan)
    assert "d >= CAST('2024-01-05' AS DATE) AND d < CAST('2024-02-01' AS DATE)" in printed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-05", dt.date(2024, 1, 5)),
        ("2024-1-5", dt.date(2024, 1, 5)),
        (" 2024-1-5 ", dt.date(2024, 1, 5)),
        ("2024-02", dt.date(2024, 2, 1)),
        ("2024", dt.date(2024, 1, 1)),
        ("2024-01-05T10:00:00", dt.date(2024, 1, 5)),
        ("2024-02-29", dt.date(2024, 2, 29)),
        ("2023-02-29", None),
        ("20240105", None),
        ("", None),
    ],
)
def test_spark_string_to_date(text: str, expected: dt.date | None) -> None:
    assert spark_date(text) == expected


@pytest.mark.parametrize(
    ("text", "strftime", "expected"),
    [
        ("1995-3-15", "%Y-%-m-%-d", dt.date(1995, 3, 15)),
        ("1995-03-15", "%Y-%-m-%-d", dt.date(1995, 3, 15)),
        ("1995-03-15", "%Y-%m-%d", dt.date(1995, 3, 15)),
        ("1995-3-15", "%Y-%m-%d", None),  # MM needs two digits
        ("15/03/1995", "%d/%m/%Y", dt.date(1995, 3, 15)),
        ("1995-02-30", "%Y-%m-%d", None),
        ("1995-03", "%Y-%m", None),  # no day: left to Spark
        ("1995-03-15 10:00", "%Y-%m-%d %H:%M", None),
    ],
)
def test_formatted_dates_fold_only_when_certain(text: str, strftime: str, expected: dt.date | None) -> None:
    assert formatted_date(text, strftime) == expected
