"""Differential fuzzing of the in-process expression engine against Spark (issue: users' SQL).

Hypothesis builds typed expression trees (numbers of three kinds, strings, dates, booleans)
over a table whose rows hold what reports meet: NULLs, NaN and infinities, integer extremes,
decimals at their precision's edge, empty and padded strings, non-ASCII text, leap days. Each
expression goes the way a query's expression goes in incremental maintenance: parsed, qualified
and coerced by the front end into the IR, translated to Arrow, evaluated over the table; and
Spark runs the same text over the same rows. Agreement means, per expression:

- both give the same value on every row (doubles to 1e-9 relative, NaN equal to NaN, decimals
  by value), or
- Spark fails (overflow, division by zero, a bad cast under ANSI) and so does the engine, or
- the engine refuses the expression up front (``UnsupportedQueryError``, which sends a sketch
  to a full recapture instead of a guess).

Anything else is a divergence and fails.

Integer overflow is the one thing left out by construction: whether ``a + b + c`` overflows at
the INT limits depends on the order of the additions, and both Spark's optimizer (its
ReorderAssociativeOperator plans ``k + (-7 + c)`` as ``(k + c) + -7``) and Arrow's expression
simplification reorder them. So the integer column stays near, not at, the limits (2^29 + 7:
products of two overflow, sums of three do not); overflow itself is checked by fixed cases in
``test_expressions.py``. Expressions are drawn in batches that Spark runs as
one query; a batch that fails in Spark is halved until each failing expression runs alone.

The count: ``FUZZ_BATCHES`` batches of ``BATCH`` (500 expressions) under the ``ci`` profile,
20,000 under ``SKETCH_HYPOTHESIS_PROFILE=long``; the draw is derandomized (one seed, the same
expressions every run) unless ``SKETCH_FUZZ_SEED`` gives another.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import os
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from sketch_core.algebra.frontend import to_ir
from sketch_core.algebra.ir import Project
from sketch_core.errors import SketchError, UnsupportedQueryError
from sketch_core.incremental.expressions import ExpressionTranslator, evaluate

pytestmark = pytest.mark.spark

BATCH = 25
LONG = os.environ.get("SKETCH_HYPOTHESIS_PROFILE") == "long"
FUZZ_BATCHES = 800 if LONG else 20
FUZZ_SEED = int(os.environ.get("SKETCH_FUZZ_SEED", "20261127"))

INT_NEAR = 2**29 + 7
ROWS = pa.table(
    {
        "id": pa.array(range(10), pa.int32()),
        "i": pa.array([1, -1, 0, None, 7, 12, -40, 3, 100, 2], pa.int64()),
        # Near, not at, the INT limits: see the module's note on overflow and evaluation order.
        "k": pa.array([INT_NEAR, -INT_NEAR, 0, 1, None, -1, 46341, 2, 65536, 10], pa.int32()),
        "d": pa.array(
            [0.5, -2.5, float("nan"), None, float("inf"), -0.0, 1e300, 2.675, -float("inf"), 3.0],
            pa.float64(),
        ),
        "m": pa.array(
            [
                Decimal("0.05"),
                Decimal("-1.25"),
                Decimal("2.50"),
                None,
                Decimal("9999999999.99"),
                Decimal("0.00"),
                Decimal("-0.5"),
                Decimal("123.45"),
                Decimal("-9999999999.99"),
                Decimal("1.00"),
            ],
            pa.decimal128(12, 2),
        ),
        "s": pa.array(
            ["PROMO x", "", " a ", None, "Ünïcode ß", "%_", "1995-03-15", "12", "  ", "forest green"],
            pa.string(),
        ),
        "t": pa.array(
            [
                dt.date(2000, 2, 29),
                dt.date(1970, 1, 1),
                dt.date(1995, 3, 15),
                None,
                dt.date(9999, 12, 31),
                dt.date(2024, 12, 31),
                dt.date(1900, 3, 1),
                dt.date(2023, 2, 28),
                dt.date(1996, 2, 29),
                dt.date(1, 1, 1),
            ]
        ),
        "b": pa.array([True, False, None, True, False, None, True, True, False, False]),
    }
)
COLUMNS = {
    "int": ["i", "k"],
    "double": ["d"],
    "decimal": ["m"],
    "string": ["s"],
    "date": ["t"],
    "bool": ["b"],
}
SCHEMA = [
    ("id", "int"),
    ("i", "bigint"),
    ("k", "int"),
    ("d", "double"),
    ("m", "decimal(12,2)"),
    ("s", "string"),
    ("t", "date"),
    ("b", "boolean"),
]


# -- the expression grammar ---------------------------------------------------------------------
Gen = st.SearchStrategy[str]


def _literal_int() -> Gen:
    return st.sampled_from(["0", "1", "-1", "2", "7", "100", "1000000", "-3"])


def _literal_double() -> Gen:
    return st.sampled_from(["0.5D", "1.0D", "-2.5D", "1e10D", "CAST('NaN' AS DOUBLE)"])


def _literal_decimal() -> Gen:
    return st.sampled_from(["0.05", "1.5", "-0.25", "100.00", "2.675"])


def _literal_string() -> Gen:
    return st.sampled_from(["''", "'a'", "'PROMO x'", "' a '", "'12'", "'1995-03-15'", "'Ünïcode ß'"])


def _literal_date() -> Gen:
    return st.sampled_from(
        [
            "DATE '1995-03-15'",
            "DATE '2000-02-29'",
            "TO_DATE('1995-3-1', 'yyyy-M-d')",
            "CAST('2024-12-31' AS DATE)",
            "DATE '1970-01-01'",
        ]
    )


def _grammar() -> Callable[[str, int], Gen]:
    """``of(type, depth)``: the strategy for expressions of a type, nested to ``depth``."""

    made: dict[tuple[str, int], Gen] = {}

    def of(kind: str, depth: int) -> Gen:
        # One strategy per (type, depth): Hypothesis walks the whole strategy graph (to tell
        # whether it can be empty), which fresh objects per use would make exponential.
        if (kind, depth) not in made:
            made[(kind, depth)] = st.deferred(lambda: builders[kind](depth))
        return made[(kind, depth)]

    def num(depth: int) -> Gen:
        return st.one_of(of("int", depth), of("double", depth), of("decimal", depth))

    def binary(kind: str, depth: int, ops: list[str]) -> Gen:
        return st.builds(
            lambda a, op, b: f"({a} {op} {b})", num(depth - 1), st.sampled_from(ops), num(depth - 1)
        )

    def integer(depth: int) -> Gen:
        leaves = st.one_of(st.sampled_from(COLUMNS["int"]), _literal_int())
        if depth <= 0:
            return leaves
        d = depth - 1
        return st.one_of(
            leaves,
            st.builds(
                lambda a, op, b: f"({a} {op} {b})",
                of("int", d),
                st.sampled_from(["+", "-", "*"]),
                of("int", d),
            ),
            st.builds(lambda a: f"-({a})", of("int", d)),
            st.builds(lambda f, a: f"{f}({a})", st.sampled_from(["ABS"]), of("int", d)),
            st.builds(lambda f, a: f"{f}({a})", st.sampled_from(["FLOOR", "CEIL"]), num(d)),
            st.builds(lambda a, n: f"ROUND({a}, {n})", of("int", d), st.sampled_from(["0", "-1", "1"])),
            st.builds(
                lambda f, a: f"{f}({a})",
                st.sampled_from(["YEAR", "MONTH", "DAY", "QUARTER", "DAYOFWEEK"]),
                of("date", d),
            ),
            st.builds(
                lambda f, a: f"EXTRACT({f} FROM {a})",
                st.sampled_from(["YEAR", "MONTH", "DAY"]),
                of("date", d),
            ),
            st.builds(lambda a, b: f"DATEDIFF({a}, {b})", of("date", d), of("date", d)),
            st.builds(lambda a: f"LENGTH({a})", of("string", d)),
            st.builds(lambda a, t: f"CAST({a} AS {t})", num(d), st.sampled_from(["INT", "BIGINT"])),
            *_shared(of, "int", d),
        )

    def double(depth: int) -> Gen:
        leaves = st.one_of(st.sampled_from(COLUMNS["double"]), _literal_double())
        if depth <= 0:
            return leaves
        d = depth - 1
        return st.one_of(
            leaves,
            st.builds(
                lambda a, op, b: f"({a} {op} {b})", of("double", d), st.sampled_from(["+", "-", "*"]), num(d)
            ),
            st.builds(lambda a, b: f"({a} / {b})", num(d), num(d)),
            st.builds(lambda a: f"ABS({a})", of("double", d)),
            st.builds(lambda a: f"CAST({a} AS DOUBLE)", num(d)),
            *_shared(of, "double", d),
        )

    def decimal(depth: int) -> Gen:
        leaves = st.one_of(st.sampled_from(COLUMNS["decimal"]), _literal_decimal())
        if depth <= 0:
            return leaves
        d = depth - 1
        return st.one_of(
            leaves,
            st.builds(
                lambda a, op, b: f"({a} {op} {b})",
                of("decimal", d),
                st.sampled_from(["+", "-", "*"]),
                st.one_of(of("decimal", d), of("int", d)),
            ),
            st.builds(lambda a: f"ABS({a})", of("decimal", d)),
            st.builds(
                lambda a, n: f"ROUND({a}, {n})", of("decimal", d), st.sampled_from(["0", "1", "2", "-1"])
            ),
            st.builds(
                lambda a, t: f"CAST({a} AS {t})",
                of("int", d),
                st.sampled_from(["DECIMAL(20, 2)", "DECIMAL(12, 4)"]),
            ),
            *_shared(of, "decimal", d),
        )

    def string(depth: int) -> Gen:
        leaves = st.one_of(st.sampled_from(COLUMNS["string"]), _literal_string())
        if depth <= 0:
            return leaves
        d = depth - 1
        return st.one_of(
            leaves,
            st.builds(
                lambda f, a: f"{f}({a})",
                st.sampled_from(["UPPER", "LOWER", "TRIM", "LTRIM", "RTRIM"]),
                of("string", d),
            ),
            st.builds(
                lambda a, p, n: f"SUBSTRING({a}, {p}{n})",
                of("string", d),
                st.sampled_from(["1", "2", "0", "-2", "-7"]),  # negative: from the end
                st.sampled_from(["", ", 1", ", 3", ", 0", ", -1"]),
            ),
            st.builds(lambda a, b: f"CONCAT({a}, {b})", of("string", d), of("string", d)),
            st.builds(lambda a, b: f"({a} || {b})", of("string", d), of("string", d)),
            *_shared(of, "string", d),
        )

    def date(depth: int) -> Gen:
        leaves = st.one_of(st.sampled_from(COLUMNS["date"]), _literal_date())
        if depth <= 0:
            return leaves
        d = depth - 1
        return st.one_of(
            leaves,
            st.builds(
                lambda f, a, n: f"{f}({a}, {n})",
                st.sampled_from(["DATE_ADD", "DATE_SUB"]),
                of("date", d),
                st.sampled_from(["1", "30", "365", "-1"]),
            ),
            # Calendar functions over leaves and literals: each repeats its argument several
            # times in Arrow (year, month and day of it), so nesting them grows the expression
            # geometrically and the run's time with it.
            st.builds(lambda a, n: f"ADD_MONTHS({a}, {n})", leaves, st.sampled_from(["1", "-13", "12", "k"])),
            st.builds(lambda a: f"LAST_DAY({a})", leaves),
            st.builds(
                lambda a, u: f"TRUNC({a}, '{u}')",
                leaves,
                st.sampled_from(["MM", "year", "QUARTER", "WEEK", "mon"]),
            ),
            st.builds(
                lambda a, op, n, u: f"({a} {op} INTERVAL '{n}' {u})",
                leaves,
                st.sampled_from(["+", "-"]),
                st.sampled_from(["1", "3", "29"]),
                st.sampled_from(["DAY", "WEEK", "MONTH", "YEAR"]),
            ),
            *_shared(of, "date", d),
        )

    def boolean(depth: int) -> Gen:
        leaves = st.one_of(st.sampled_from(COLUMNS["bool"]), st.sampled_from(["TRUE", "FALSE"]))
        if depth <= 0:
            return leaves
        d = depth - 1
        comparisons = st.sampled_from(["=", "<>", "<", "<=", ">", ">=", "<=>"])
        return st.one_of(
            leaves,
            st.builds(lambda a, op, b: f"({a} {op} {b})", num(d), comparisons, num(d)),
            st.builds(lambda a, op, b: f"({a} {op} {b})", of("string", d), comparisons, of("string", d)),
            st.builds(lambda a, op, b: f"({a} {op} {b})", of("date", d), comparisons, of("date", d)),
            # A date column against a string, as reports write it (cast implicitly by Spark).
            st.builds(
                lambda op, b: f"(t {op} {b})",
                comparisons,
                st.sampled_from(["'1995-03-15'", "'2000-2-29'", "'1996'"]),
            ),
            st.builds(
                lambda a, op, b: f"({a} {op} {b})",
                of("bool", d),
                st.sampled_from(["AND", "OR"]),
                of("bool", d),
            ),
            st.builds(lambda a: f"(NOT {a})", of("bool", d)),
            st.builds(
                lambda a, n: f"({a} IS {n}NULL)",
                st.one_of(num(d), of("string", d), of("date", d)),
                st.sampled_from(["", "NOT "]),
            ),
            st.builds(
                lambda a, n, xs: f"({a} {n}IN ({', '.join(xs)}))",
                of("int", d),
                st.sampled_from(["", "NOT "]),
                st.lists(st.sampled_from(["1", "0", "-1", "7", "NULL"]), min_size=1, max_size=3),
            ),
            st.builds(lambda a, lo, hi: f"({a} BETWEEN {lo} AND {hi})", num(d), num(d), num(d)),
            st.builds(
                lambda a, n, p: f"({a} {n}LIKE {p})",
                of("string", d),
                st.sampled_from(["", "NOT "]),
                st.sampled_from(["'PROMO%'", "'%a%'", "'_'", "''", "'%\\_%'", "'1995%'"]),
            ),
            st.builds(
                lambda a, p: f"({a} RLIKE {p})",
                of("string", d),
                st.sampled_from(["'^[0-9]+'", "'a'", "'^$'"]),
            ),
        )

    def _shared(of_: Callable[[str, int], Gen], kind: str, d: int) -> list[Gen]:
        """The forms every type has: COALESCE, CASE, IF, NULLIF, GREATEST/LEAST."""
        forms = [
            st.builds(lambda a, b: f"COALESCE({a}, {b})", of_(kind, d), of_(kind, d)),
            st.builds(
                lambda c, a, b: f"CASE WHEN {c} THEN {a} ELSE {b} END",
                of_("bool", d),
                of_(kind, d),
                of_(kind, d),
            ),
            st.builds(lambda c, a: f"CASE WHEN {c} THEN {a} END", of_("bool", d), of_(kind, d)),
            st.builds(lambda c, a, b: f"IF({c}, {a}, {b})", of_("bool", d), of_(kind, d), of_(kind, d)),
            st.builds(lambda a, b: f"NULLIF({a}, {b})", of_(kind, d), of_(kind, d)),
        ]
        if kind != "bool":
            forms.append(
                st.builds(
                    lambda f, a, b: f"{f}({a}, {b})",
                    st.sampled_from(["GREATEST", "LEAST"]),
                    of_(kind, d),
                    of_(kind, d),
                )
            )
        return forms

    builders: dict[str, Callable[[int], Gen]] = {
        "int": integer,
        "double": double,
        "decimal": decimal,
        "string": string,
        "date": date,
        "bool": boolean,
    }
    return of


_OF = _grammar()
EXPRESSION = st.one_of(*(_OF(kind, 3) for kind in ("int", "double", "decimal", "string", "date", "bool")))


# -- running both sides -------------------------------------------------------------------------
class _Failed:
    """An evaluation that raised (Spark's error or the engine's)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __repr__(self) -> str:
        return f"error({type(self.error).__name__}: {str(self.error).splitlines()[0][:200]})"


class _Refused(_Failed):
    pass


def in_process(expression: str) -> list[object] | _Failed:
    """The expression as incremental maintenance evaluates it: front end, IR, Arrow."""
    try:
        parsed = to_ir(f"SELECT {expression} AS v FROM fuzz.t", {"fuzz.t": SCHEMA})
        assert isinstance(parsed.plan, Project)
        (_, ir_expression), *_ = parsed.plan.outputs
        translated = ExpressionTranslator(ROWS.schema)(ir_expression)
    except UnsupportedQueryError as exc:
        return _Refused(exc)
    try:
        return evaluate(ROWS, {"v": translated}).column("v").to_pylist()
    except (pa.ArrowException, ArithmeticError, ValueError, SketchError) as exc:
        return _Failed(exc)


def on_spark(spark: SparkSession, view: str, expressions: list[str]) -> list[list[object] | _Failed]:
    """Each expression's values by row on Spark; one query for the batch; when it fails,
    when the batch fails (an error anywhere fails Spark's whole query), halved until
    each failing expression runs alone."""
    columns = ", ".join(f"{e} AS v{n}" for n, e in enumerate(expressions))
    try:
        # One small file in one partition: rows come back in the file's order, by id.
        rows = spark.sql(f"SELECT id, {columns} FROM {view}").collect()
        assert [row[0] for row in rows] == ROWS.column("id").to_pylist()
        return [[row[n + 1] for row in rows] for n in range(len(expressions))]
    except Exception as exc:
        if len(expressions) == 1:
            return [_Failed(exc)]
    half = len(expressions) // 2  # halves until the failing expressions are alone
    return on_spark(spark, view, expressions[:half]) + on_spark(spark, view, expressions[half:])


def same_value(got: object, expected: object) -> bool:
    if got is None or expected is None:
        return got is None and expected is None
    if isinstance(expected, float) or isinstance(got, float):
        a, b = float(got), float(expected)  # type: ignore[arg-type]
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        if math.isinf(a) or math.isinf(b):
            return a == b
        return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
    if isinstance(expected, Decimal) or isinstance(got, Decimal):
        return Decimal(str(got)) == Decimal(str(expected))
    return got == expected


def divergence(expression: str, engine: list[object] | _Failed, spark: list[object] | _Failed) -> str | None:
    """Why the two outcomes disagree, or None when they agree (see the module's rules)."""
    if isinstance(engine, _Refused):
        return None
    if isinstance(spark, _Failed):
        return (
            None
            if isinstance(engine, _Failed)
            else f"{expression}: Spark fails ({spark!r}), the engine gives {engine}"
        )
    if isinstance(engine, _Failed):
        return f"{expression}: the engine fails ({engine!r}), Spark gives {spark}"
    wrong = [
        (ROWS.column("id")[n].as_py(), g, e)
        for n, (g, e) in enumerate(zip(engine, spark, strict=True))
        if not same_value(g, e)
    ]
    return f"{expression}: rows (id, engine, spark) {wrong}" if wrong else None


@pytest.fixture(scope="module")
def fuzz_view(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path: Path = tmp_path_factory.mktemp("fuzz") / "rows.parquet"
    pq.write_table(ROWS, path)
    spark.read.parquet(str(path)).createOrReplaceTempView("fuzz_rows")
    # Spark logs every failing task at error level, with its stack: most batches have one.
    quiet = logging.getLogger("pyspark")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    spark.sparkContext.setLogLevel("OFF")
    yield "fuzz_rows"
    spark.sparkContext.setLogLevel("WARN")
    quiet.setLevel(level)


REFUSED: list[str] = []


@seed(FUZZ_SEED)
@settings(
    max_examples=FUZZ_BATCHES,
    deadline=None,
    derandomize="SKETCH_FUZZ_SEED" not in os.environ,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(batch=st.lists(EXPRESSION, min_size=BATCH, max_size=BATCH))
def test_the_engine_agrees_with_spark_on_generated_expressions(
    spark: SparkSession, fuzz_view: str, batch: list[str]
) -> None:
    spark_outcomes = on_spark(spark, fuzz_view, batch)
    problems = []
    for expression, expected in zip(batch, spark_outcomes, strict=True):
        outcome = in_process(expression)
        if isinstance(outcome, _Refused):
            REFUSED.append(expression)
        problem = divergence(expression, outcome, expected)
        if problem is not None:
            problems.append(problem)
    assert not problems, "\n".join(problems)
