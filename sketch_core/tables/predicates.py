"""Translate a Spark SQL row predicate into a PyIceberg expression (pure, no I/O).

Deletes and overwrites take predicates as Spark SQL text. PyIceberg evaluates its own
expression tree against file statistics and rows, so the text is parsed with sqlglot and
rebuilt from a deliberately small grammar: comparisons of a column with a literal, combined by
AND / OR / NOT, plus IN, BETWEEN, IS [NOT] NULL and LIKE 'prefix%'. Anything else is refused
with the construct named, instead of being guessed at; columns are checked against the table.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

import sqlglot
from pyiceberg import expressions as ice
from pyiceberg.expressions.visitors import bind
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BooleanType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    StringType,
)
from sqlglot import exp
from sqlglot.errors import ParseError

from sketch_core.errors import InvalidPredicateError

_FLIPPED: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.LT: exp.GT,
    exp.LTE: exp.GTE,
    exp.GT: exp.LT,
    exp.GTE: exp.LTE,
    exp.EQ: exp.EQ,
    exp.NEQ: exp.NEQ,
}
_NEGATED: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.LT: exp.GTE,
    exp.LTE: exp.GT,
    exp.GT: exp.LTE,
    exp.GTE: exp.LT,
    exp.EQ: exp.NEQ,
    exp.NEQ: exp.EQ,
}
_COMPARISONS: dict[type[exp.Expr], Any] = {
    exp.EQ: ice.EqualTo,
    exp.NEQ: ice.NotEqualTo,
    exp.LT: ice.LessThan,
    exp.LTE: ice.LessThanOrEqual,
    exp.GT: ice.GreaterThan,
    exp.GTE: ice.GreaterThanOrEqual,
}


class _Unsupported(Exception):
    pass


def to_iceberg_expression(predicate: str, schema: Schema, table: str) -> ice.BooleanExpression:
    """Parse ``predicate`` and return an equivalent, schema-checked PyIceberg expression."""
    if not predicate or not predicate.strip():
        raise InvalidPredicateError(table, predicate, "the predicate is empty")
    try:
        parsed = sqlglot.parse(predicate, read="spark")
    except ParseError as exc:
        first = exc.errors[0]["description"] if exc.errors else str(exc)
        raise InvalidPredicateError(table, predicate, f"it does not parse ({first})") from exc
    if len(parsed) != 1 or parsed[0] is None:
        raise InvalidPredicateError(table, predicate, "it must be a single expression")
    translator = _Translator(schema)
    try:
        result = translator.condition(parsed[0])
    except _Unsupported as exc:
        raise InvalidPredicateError(table, predicate, str(exc)) from exc
    except RecursionError as exc:
        raise InvalidPredicateError(table, predicate, "it is nested too deeply") from exc
    try:
        bind(schema, result, case_sensitive=True)
    except (ValueError, TypeError) as exc:
        raise InvalidPredicateError(table, predicate, f"its literals do not fit the columns ({exc})") from exc
    return result


class _Translator:
    """Builds, for each SQL condition p, the pair (rows where p is TRUE, rows where p is FALSE).

    SQL has three truth values: a comparison with a NULL column is UNKNOWN, and NOT UNKNOWN is
    still UNKNOWN. Iceberg's evaluator is two-valued (``x <> 1`` holds for a NULL ``x``), so
    translating NOT naively would delete rows the same SQL would keep. Carrying both sides
    through NOT/AND/OR (NOT swaps them) keeps SQL's meaning exactly.
    """

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.columns = {field.name.lower(): field for field in schema.fields}

    def condition(self, node: exp.Expr) -> ice.BooleanExpression:
        return self._pair(node)[0]

    def _pair(self, node: exp.Expr) -> tuple[ice.BooleanExpression, ice.BooleanExpression]:
        true, false = self._positive(node)
        return (false, true) if node.args.get("negate") else (true, false)

    def _positive(self, node: exp.Expr) -> tuple[ice.BooleanExpression, ice.BooleanExpression]:
        if isinstance(node, exp.Paren):
            return self._pair(node.this)
        if isinstance(node, exp.Not):
            true, false = self._pair(node.this)
            return false, true
        if isinstance(node, exp.And):
            (lt, lf), (rt, rf) = self._pair(node.left), self._pair(node.right)
            return ice.And(lt, rt), ice.Or(lf, rf)
        if isinstance(node, exp.Or):
            (lt, lf), (rt, rf) = self._pair(node.left), self._pair(node.right)
            return ice.Or(lt, rt), ice.And(lf, rf)
        if isinstance(node, exp.Boolean):
            return (
                (ice.AlwaysTrue(), ice.AlwaysFalse()) if node.this else (ice.AlwaysFalse(), ice.AlwaysTrue())
            )
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise _Unsupported(f"IS {node.expression.sql('spark')} is not supported")
            name = self._column(node.this)[0]
            return ice.IsNull(name), ice.NotNull(name)
        if type(node) in _COMPARISONS:
            return self._comparison(node)
        if isinstance(node, exp.In):
            name, kind = self._column(node.this)
            values = {self._literal(v, kind) for v in self._in_values(node)}
            return self._known(name, ice.In(name, values), ice.NotIn(name, values))
        if isinstance(node, exp.Between):
            name, kind = self._column(node.this)
            low, high = self._literal(node.args["low"], kind), self._literal(node.args["high"], kind)
            return self._known(
                name,
                ice.And(ice.GreaterThanOrEqual(name, low), ice.LessThanOrEqual(name, high)),
                ice.Or(ice.LessThan(name, low), ice.GreaterThan(name, high)),
            )
        if isinstance(node, exp.Like):
            name, prefix = self._like_prefix(node)
            return self._known(name, ice.StartsWith(name, prefix), ice.NotStartsWith(name, prefix))
        raise _Unsupported(f"{node.key.upper()} ({node.sql('spark')}) is not supported in a predicate")

    @staticmethod
    def _known(
        name: str, true: ice.BooleanExpression, false: ice.BooleanExpression
    ) -> tuple[ice.BooleanExpression, ice.BooleanExpression]:
        """Both sides require a non-NULL column: with NULL the condition is UNKNOWN."""
        return ice.And(ice.NotNull(name), true), ice.And(ice.NotNull(name), false)

    def _comparison(self, node: exp.Expr) -> tuple[ice.BooleanExpression, ice.BooleanExpression]:
        left, right = node.this, node.expression
        op: type[exp.Expr] = type(node)
        if not isinstance(left, exp.Column) and isinstance(right, exp.Column):
            left, right, op = right, left, _FLIPPED[op]
        name, kind = self._column(left)
        if isinstance(right, exp.Null):
            raise _Unsupported(f"comparison with NULL ({node.sql('spark')}) is never true; use IS NULL")
        value = self._literal(right, kind)
        return self._known(name, _COMPARISONS[op](name, value), _COMPARISONS[_NEGATED[op]](name, value))

    def _in_values(self, node: exp.In) -> list[exp.Expr]:
        if node.args.get("query") is not None:
            raise _Unsupported("IN with a subquery is not supported in a predicate")
        values = list(node.expressions)
        if any(isinstance(v, exp.Null) for v in values):
            raise _Unsupported("NULL in an IN list never matches; use IS NULL")
        return values

    def _like_prefix(self, node: exp.Like) -> tuple[str, str]:
        name, kind = self._column(node.this)
        if not isinstance(kind, StringType):
            raise _Unsupported(f"LIKE needs a string column, {name} is {kind}")
        pattern = node.expression
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            raise _Unsupported("LIKE needs a string literal pattern")
        text = str(pattern.this)
        body = text[:-1] if text.endswith("%") else None
        if body is None or "%" in body or "_" in body:
            raise _Unsupported(f"only prefix patterns like 'abc%' are supported, got {text!r}")
        return name, body

    def _column(self, node: exp.Expr) -> tuple[str, IcebergType]:
        if not isinstance(node, exp.Column):
            raise _Unsupported(f"expected a column, got {node.sql('spark')!r}")
        if node.table:
            raise _Unsupported(f"qualified column {node.sql('spark')!r}; use the bare column name")
        field = self.columns.get(node.name.lower())
        if field is None:
            known = ", ".join(f.name for f in self.schema.fields)
            raise _Unsupported(f"unknown column {node.name!r} (columns: {known})")
        return field.name, field.field_type

    def _literal(self, node: exp.Expr, kind: IcebergType) -> Any:
        if isinstance(node, exp.Paren):
            return self._literal(node.this, kind)
        if isinstance(node, exp.Cast | exp.TryCast) and isinstance(node.this, exp.Literal):
            node = node.this
        negative = False
        if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
            negative, node = True, node.this
        if isinstance(node, exp.Boolean) and isinstance(kind, BooleanType):
            return bool(node.this)
        if not isinstance(node, exp.Literal):
            raise _Unsupported(f"expected a literal, got {node.sql('spark')!r}")
        raw = ("-" if negative else "") + str(node.this)
        return _coerce(raw, node.is_string, kind)


def _coerce(raw: str, is_string: bool, kind: IcebergType) -> Any:
    try:
        if isinstance(kind, IntegerType | LongType):
            value = Decimal(raw)
            if value != value.to_integral_value():
                raise _Unsupported(f"{raw} is not an integer, but the column is {kind}")
            return int(value)
        if isinstance(kind, FloatType | DoubleType):
            return float(raw)
        if isinstance(kind, DecimalType):
            return Decimal(raw)
    except (InvalidOperation, ValueError) as exc:
        raise _Unsupported(f"{raw!r} is not a number, but the column is {kind}") from exc
    if isinstance(kind, BooleanType):
        if raw.lower() not in ("true", "false"):
            raise _Unsupported(f"{raw!r} is not a boolean")
        return raw.lower() == "true"
    if isinstance(kind, StringType) and not is_string:
        raise _Unsupported(f"compare string columns with quoted strings, got {raw}")
    # Dates, timestamps, strings: PyIceberg converts ISO strings when it binds to the column.
    return raw
