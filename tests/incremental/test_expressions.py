"""Arrow translations of IR expressions agree with Spark, value for value, NULLs included."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from decimal import Decimal

import pyarrow as pa
import pytest
import sqlglot
from pyspark.sql import SparkSession
from sqlglot import exp

from sketch_core.errors import UnsupportedQueryError
from sketch_core.incremental.expressions import ExpressionTranslator, Translated, evaluate, filter_rows

ROWS = pa.table(
    {
        "i": pa.array([1, 2, None, -4, 0, 7], pa.int64()),
        "j": pa.array([3, 0, 5, None, 2, -7], pa.int64()),
        "d": pa.array(
            [Decimal("0.05"), Decimal("0.10"), None, Decimal("-1.25"), Decimal("0.00"), Decimal("9.99")],
            pa.decimal128(15, 2),
        ),
        "f": pa.array([1.5, float("nan"), None, -2.0, 0.0, 3.25], pa.float64()),
        "s": pa.array(["PROMO a", "13-x", None, "forest green", "SM BOX", "%_"], pa.string()),
        "t": pa.array(
            [
                dt.date(1994, 1, 1),
                dt.date(1995, 6, 30),
                None,
                dt.date(1993, 12, 31),
                dt.date(1996, 2, 29),
                None,
            ]
        ),
        # Padded, empty and tab-led strings: Spark's TRIM removes spaces only.
        "p": pa.array([" a ", "b  ", None, "\tc", "", "  "], pa.string()),
    }
)

EXPRESSIONS = [
    "i + j",
    "i - 1",
    "i * j",
    "i / (j + 10)",
    "d * (1 - d)",
    "CAST(d AS DECIMAL(30, 2)) * CAST(d AS DECIMAL(20, 4))",
    "CAST(d AS DECIMAL(30, 2)) * CAST(d AS DECIMAL(20, 2)) * d",
    "100.00 * d",
    # TPC-H Q11's HAVING: decimal(36, 2) against decimal(38, 6), compared in decimal(38, 6)
    "CAST(d AS DECIMAL(36, 2)) > CAST(d * 0.0001 AS DECIMAL(38, 6))",
    "CAST(d AS DECIMAL(36, 2)) = CAST(d AS DECIMAL(38, 6))",
    "d + 1",
    "d / 4",
    "f * 2 + i",
    "-i",
    "i > 1 AND j < 5",
    "i > 1 OR j IS NULL",
    "NOT (i = 2)",
    "i <=> j",
    "i BETWEEN 0 AND 2",
    "i IN (1, 2, 3)",
    "i NOT IN (1, 2)",
    "i IN (1, NULL)",
    "i NOT IN (1, NULL)",
    "s LIKE 'PROMO%'",
    "s NOT LIKE '%green%'",
    "s LIKE '_3%'",
    "CASE WHEN s LIKE 'PROMO%' THEN d ELSE 0 END",
    "CASE WHEN i > 0 THEN 'pos' WHEN i < 0 THEN 'neg' END",
    "IF(i > 0, j, NULL)",
    "t < DATE '1995-01-01'",
    "t >= CAST('1994-01-01' AS DATE) AND t < CAST('1995-01-01' AS DATE)",
    # TPC-H's ranges: constant dates shifted by intervals (months cut to the month's end).
    "t < DATE '1994-12-01' + INTERVAL 3 MONTHS",
    "t < DATE '1995-05-31' + INTERVAL '1' MONTH",
    "t >= DATE '1996-02-29' - INTERVAL 2 YEARS",
    "t <= DATE '1998-12-01' - INTERVAL '90' DAY",
    "t > DATE '1993-12-24' + INTERVAL 1 WEEK",
    # A date plus or minus days (Spark's date_add and date_sub), as reports shift dates.
    "t - 1",
    "t + CAST(j AS INT)",
    "7 + t",
    "t - CAST(i AS SMALLINT) > DATE '1994-01-01'",
    "YEAR(t)",
    "EXTRACT(YEAR FROM t)",
    "SUBSTRING(s, 1, 2)",
    "SUBSTRING(s, 3)",
    "COALESCE(i, j, 0)",
    "d > 0.06",
    "f > 1",
    "CAST(i AS DOUBLE) / 3",
    "CAST(d AS DECIMAL(20, 4))",
    # The built-in functions reports use (sketch_core.incremental.functions).
    "MONTH(t)",
    "DAY(t)",
    "DAYOFMONTH(t)",
    "QUARTER(t)",
    "DAYOFWEEK(t)",
    "EXTRACT(MONTH FROM t)",
    "EXTRACT(DAY FROM t)",
    "EXTRACT(QUARTER FROM t)",
    "EXTRACT(DOW FROM t)",
    "DATE_ADD(t, 40)",
    "DATE_SUB(t, 400)",
    "DATE_ADD(t, CAST(i AS INT))",
    "DATEDIFF(t, DATE '1994-02-01')",
    "UPPER(s)",
    "LOWER(s)",
    "TRIM(p)",
    "LTRIM(p)",
    "RTRIM(p)",
    "LENGTH(s)",
    "LENGTH(p)",
    "CONCAT(s, '-', p)",
    "s || p",
    "ABS(i)",
    "ABS(d)",
    "ABS(f)",
    "FLOOR(i)",
    "CEIL(i)",
    "ROUND(d, 1)",
    "ROUND(d)",
    "ROUND(i, 0)",
    "NULLIF(i, 2)",
    "NVL(i, 0)",
    "GREATEST(i, j)",
    "LEAST(i, j, 0)",
    "s RLIKE '^[0-9]+'",
    "CAST(d AS INT)",
]


def ROWS_SCHEMA(spark: SparkSession):  # type: ignore[no-untyped-def]
    from pyspark.sql import types as T

    return T.StructType(
        [
            T.StructField("i", T.LongType()),
            T.StructField("j", T.LongType()),
            T.StructField("d", T.DecimalType(15, 2)),
            T.StructField("f", T.DoubleType()),
            T.StructField("s", T.StringType()),
            T.StructField("t", T.DateType()),
            T.StructField("p", T.StringType()),
        ]
    )


def same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, Decimal):  # decimal quotients come as doubles
        return abs(a - float(b)) <= 1e-9 * max(1.0, abs(a))
    if isinstance(a, float) and isinstance(b, float):
        return (a != a and b != b) or abs(a - b) <= 1e-12 * max(1.0, abs(a))
    return a == b


@pytest.fixture(scope="module")
def frame(spark: SparkSession):  # type: ignore[no-untyped-def]
    return spark.createDataFrame([tuple(r.values()) for r in ROWS.to_pylist()], ROWS_SCHEMA(spark))


@pytest.fixture(scope="module")
def spark_values(frame) -> dict[str, list[object]]:  # type: ignore[no-untyped-def]
    """Every expression's values as Spark computes them, in one job (a job each costs a second)."""
    rows = frame.selectExpr(*(f"{e} AS `e{i}`" for i, e in enumerate(EXPRESSIONS))).collect()
    return {e: [row[i] for row in rows] for i, e in enumerate(EXPRESSIONS)}


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_values_match_spark(spark_values: dict[str, list[object]], expression: str) -> None:
    expected = spark_values[expression]
    parsed = sqlglot.parse_one(expression, read="spark")
    translated = ExpressionTranslator(ROWS.schema)(parsed)
    got = evaluate(ROWS, {"v": translated}).column("v").to_pylist()
    assert len(got) == len(expected)
    assert all(same(g, e) for g, e in zip(got, expected, strict=True)), (got, expected)


CONDITIONS = [
    "i > 1 AND j < 5",
    "i > 1 OR j IS NULL",
    "NOT (i = 2)",
    "i <=> j",
    "i NOT IN (1, 2)",
    "i NOT IN (1, NULL)",
    "s NOT LIKE '%green%'",
    "NOT (s LIKE '_3%') OR f >= 1.5",
    "t < DATE '1995-01-01'",
    "d > 0.06 AND f <> 0",
    "f > 1",
    "NOT (f < 2)",
    "f = CAST('NaN' AS DOUBLE)",
]


@pytest.mark.parametrize("condition", CONDITIONS)
def test_filters_keep_the_rows_spark_keeps(frame, condition: str) -> None:  # type: ignore[no-untyped-def]
    expected = sorted(str(tuple(r)) for r in frame.where(condition).collect())
    translated = ExpressionTranslator(ROWS.schema)(sqlglot.parse_one(condition, read="spark"))
    kept = filter_rows(ROWS, translated)
    assert sorted(str(tuple(r.values())) for r in kept.to_pylist()) == expected


def test_unknown_functions_are_refused_with_the_fallback_named() -> None:
    with pytest.raises(UnsupportedQueryError) as info:
        ExpressionTranslator(ROWS.schema)(sqlglot.parse_one("levenshtein(s, 'x') > 1", read="spark"))
    assert "strategy='full'" in str(info.value)


def test_translations_are_made_once_per_schema_and_agree_with_a_fresh_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    condition = sqlglot.parse_one("i > 1 AND f >= 1.5", read="spark")
    memo = Translated({"c": condition})
    made: list[pa.Schema] = []
    real_init = ExpressionTranslator.__init__

    def counting(self: ExpressionTranslator, schema: pa.Schema, ansi: bool = True) -> None:
        made.append(schema)
        real_init(self, schema, ansi)

    monkeypatch.setattr(ExpressionTranslator, "__init__", counting)
    first = memo(ROWS.schema)["c"]
    again = memo(ROWS.schema)["c"]
    assert again is first and len(made) == 1  # the second batch reuses the first's translation
    fresh = filter_rows(ROWS, ExpressionTranslator(ROWS.schema)(condition))
    assert str(filter_rows(ROWS, first).to_pylist()) == str(fresh.to_pylist())  # str: NaN == NaN
    narrower = ROWS.select(["i", "f"])
    assert filter_rows(narrower, memo(narrower.schema)["c"]).num_rows == filter_rows(ROWS, first).num_rows
    assert len(made) == 3  # the fresh one above, and one for the other schema


def test_a_refused_expression_is_evaluated_remotely_row_for_row_and_an_empty_batch_asks_nothing() -> None:
    calls: list[tuple[int, list[str]]] = []

    def remote(table: pa.Table, expressions: Mapping[str, exp.Expr]) -> pa.Table:
        calls.append((table.num_rows, table.column_names))
        (name,) = expressions
        lengths = [None if s is None else len(s) * 10 for s in table.column("s").to_pylist()]
        return pa.table({name: pa.array(lengths, pa.int32())})

    refused = sqlglot.parse_one("SOUNDEX(s) > 'A'", read="spark")
    with pytest.raises(UnsupportedQueryError, match="Soundex"):
        Translated({"c": refused})(ROWS.schema)  # without a remote evaluator: refused
    translated = Translated({"n": refused, "k": sqlglot.parse_one("i + 1")}, remote)
    assert translated.remote_names(ROWS.schema) == ["n"]
    table, expressions = translated.over(ROWS)
    out = evaluate(table, expressions)
    assert out.column("n").to_pylist() == [70, 40, None, 120, 60, 20]  # its rows, in their order
    assert out.column("k").to_pylist() == [2, 3, None, -3, 1, 8]  # the rest stays in-process
    assert calls == [(ROWS.num_rows, ["s"])]  # only the columns the expression reads
    empty, expressions = translated.over(ROWS.schema.empty_table())
    assert evaluate(empty, expressions).schema.field("n").type == pa.int32()
    assert len(calls) == 1  # the type was known: no remote call for no rows
