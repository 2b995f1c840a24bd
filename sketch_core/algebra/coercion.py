"""Spark's implicit coercions made explicit, and constant dates written one way (pure).

Reports compare date columns with strings (``o_orderdate < '1995-03-15'``), numbers with
quoted numbers, and write dates as ``TO_DATE('1995-3-15', 'yyyy-M-d')``. Spark casts these
implicitly; every other evaluator of the query (the in-process engine, the SMT checks, the
estimates) would have to repeat Spark's rules. This pass, run on the qualified query before it
becomes IR, writes those casts out as Spark 4 (ANSI mode) inserts them, so that the IR holds
only explicit ones:

- a comparison, ``BETWEEN`` or ``IN`` list between a string and a date, timestamp, integer or
  double casts the string to the other side's type; against a decimal both sides become
  doubles (``d > '2.4'`` is ``CAST(d AS DOUBLE) > CAST('2.4' AS DOUBLE)`` in Spark's plan);
- a date compared with a timestamp is cast to a timestamp;
- ``TO_DATE('1995-3-15', 'yyyy-M-d')`` and ``CAST('1995-3-15' AS DATE)`` on constants become
  ``CAST('1995-03-15' AS DATE)`` when the text parses under Spark's rules (otherwise they are
  left as written, and Spark decides).

Example: ``x.d BETWEEN '2024-1-1' AND TO_DATE('2024-06-30', 'yyyy-MM-dd')`` over a date
column becomes ``x.d BETWEEN CAST('2024-01-01' AS DATE) AND CAST('2024-06-30' AS DATE)``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping

from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types

from sketch_core.algebra.dialect import SPARK

T = exp.DType
_INTEGERS = {T.TINYINT, T.SMALLINT, T.INT, T.BIGINT}
_FLOATS = {T.FLOAT, T.DOUBLE}
_DATES = {T.DATE}
_TIMESTAMPS = {T.TIMESTAMP, T.TIMESTAMPTZ, T.TIMESTAMPNTZ, T.TIMESTAMPLTZ, T.DATETIME}
_STRINGS = {T.VARCHAR, T.TEXT, T.CHAR}
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ)

# Spark's string-to-date: yyyy, yyyy-[m]m, yyyy-[m]m-[d]d, then optionally a space or 'T' and
# anything (a time), surrounding whitespace ignored.
_SPARK_DATE = re.compile(r"^\s*(\d{4})(?:-(\d{1,2})(?:-(\d{1,2})(?:[ T].*)?)?)?\s*$", re.DOTALL)
# sqlglot's spelling of Spark's date patterns -> a regular expression for the part.
_FORMAT_PARTS = {
    "%Y": r"(?P<year>\d{4})",
    "%m": r"(?P<month>\d{2})",
    "%-m": r"(?P<month>\d{1,2})",
    "%d": r"(?P<day>\d{2})",
    "%-d": r"(?P<day>\d{1,2})",
}


def spark_date(text: str) -> dt.date | None:
    """The date Spark's ``CAST(text AS DATE)`` gives, or None where this cannot tell."""
    found = _SPARK_DATE.match(text)
    if found is None:
        return None
    year, month, day = (int(part) if part else 1 for part in found.groups())
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


def formatted_date(text: str, strftime: str) -> dt.date | None:
    """The date ``TO_DATE(text, format)`` gives for a format of year, month and day parts and
    separators (``strftime`` as sqlglot spells Spark's pattern), or None for anything else."""
    pattern = ""
    for token in re.split(r"(%-?[A-Za-z])", strftime):
        if not token:
            continue
        if token.startswith("%"):
            if token not in _FORMAT_PARTS or f"(?P<{_FORMAT_PARTS[token][4:9]}" in pattern:
                return None
            pattern += _FORMAT_PARTS[token]
        else:
            pattern += re.escape(token)
    found = re.fullmatch(pattern, text)
    if found is None or set(found.groupdict()) != {"year", "month", "day"}:
        return None
    try:
        return dt.date(int(found["year"]), int(found["month"]), int(found["day"]))
    except ValueError:
        return None


def _date_literal(value: dt.date) -> exp.Expr:
    return exp.cast(exp.Literal.string(value.isoformat()), exp.DataType.build("date"))


def _fold_date(node: exp.Expr) -> exp.Expr:
    """Constant dates written as ``CAST('yyyy-mm-dd' AS DATE)``."""
    if isinstance(node, exp.TsOrDsToDate) and isinstance(node.this, exp.Literal) and node.this.is_string:
        fmt = node.args.get("format")
        if fmt is None:
            value = spark_date(node.this.this)
        elif isinstance(fmt, exp.Literal) and fmt.is_string:
            value = formatted_date(node.this.this, fmt.this)
        else:
            value = None
        return node if value is None else _date_literal(value)
    if (
        isinstance(node, exp.Cast)
        and node.to.this == T.DATE
        and isinstance(node.this, exp.Literal)
        and node.this.is_string
    ):
        value = spark_date(node.this.this)
        return node if value is None else _date_literal(value)
    return node


def _kind(node: exp.Expr) -> exp.DType | None:
    kind = node.type
    return None if kind is None else kind.this


def _cast(node: exp.Expr, to: exp.DataType | str) -> exp.Expr:
    target = exp.DataType.build(to) if isinstance(to, str) else to.copy()
    if isinstance(node, exp.Literal) and node.is_string and target.this == T.DATE:
        value = spark_date(node.this)
        if value is not None:
            return _date_literal(value)
    cast = exp.Cast(this=node, to=target)
    cast.type = target.copy()
    return cast


def _coerce_pair(left: exp.Expr, right: exp.Expr) -> tuple[exp.Expr, exp.Expr]:
    """Both operands of a comparison with Spark's implicit casts written out."""
    a, b = _kind(left), _kind(right)
    if a in _STRINGS and b not in _STRINGS and b is not None:
        right_, left_ = _coerce_string(right, left)
        return left_, right_
    if b in _STRINGS and a not in _STRINGS and a is not None:
        return _coerce_string(left, right)
    if a in _DATES and b in _TIMESTAMPS:
        return _cast(left, right.type), right  # type: ignore[arg-type]
    if b in _DATES and a in _TIMESTAMPS:
        return left, _cast(right, left.type)  # type: ignore[arg-type]
    return left, right


def _coerce_string(typed: exp.Expr, string: exp.Expr) -> tuple[exp.Expr, exp.Expr]:
    """``typed`` (not a string) against ``string``: the pair as Spark compares them."""
    kind = _kind(typed)
    assert typed.type is not None
    if kind in _DATES or kind in _TIMESTAMPS or kind in _INTEGERS or kind in _FLOATS:
        return typed, _cast(string, typed.type)
    if kind == T.DECIMAL:
        return _cast(typed, "double"), _cast(string, "double")
    return typed, string


def _coerce(node: exp.Expr) -> exp.Expr:
    if isinstance(node, _COMPARISONS):
        left, right = _coerce_pair(node.this, node.expression)
        node.set("this", left)
        node.set("expression", right)
    elif isinstance(node, exp.Between):
        value = node.this
        for bound in ("low", "high"):
            value, coerced = _coerce_pair(node.this, node.args[bound])
            node.set(bound, coerced)
        node.set("this", value)
    elif isinstance(node, exp.In) and node.expressions and node.args.get("query") is None:
        items = []
        value = node.this
        for item in node.expressions:
            value, coerced = _coerce_pair(node.this, item)
            items.append(coerced)
        node.set("expressions", items)
        node.set("this", value)
    return node


def coerce(tree: exp.Expr, schema: Mapping[str, object]) -> exp.Expr:
    """``tree`` (qualified) with Spark's implicit casts explicit and constant dates folded;
    ``schema`` is the nested ``{namespace: {table: {column: type}}}`` the query was qualified
    with."""
    folded = tree.transform(_fold_date)
    annotated = annotate_types(folded, schema=dict(schema), dialect=SPARK)
    return annotated.transform(_coerce, copy=False)
