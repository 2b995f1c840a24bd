"""Spark's built-in functions that reports use, as Arrow compute expressions.

Each rule reproduces Spark 4's result, NULLs included (every function here returns NULL for a
NULL argument unless said otherwise):

- dates: ``YEAR``/``MONTH``/``DAY``/``QUARTER``/``DAYOFWEEK`` and ``EXTRACT`` of those fields
  (``DAYOFWEEK`` counts from Sunday = 1, as Spark does); ``DATE_ADD``/``DATE_SUB`` by days;
  ``DATEDIFF(end, start)`` in days; ``ADD_MONTHS``, ``LAST_DAY`` and ``TRUNC(date, unit)``
  (:mod:`sketch_core.incremental.dates`); a date column plus or minus an ``INTERVAL`` of days,
  weeks, months or years;
- strings: ``UPPER``, ``LOWER``, ``TRIM``/``LTRIM``/``RTRIM`` (spaces only, as Spark trims),
  ``LENGTH`` (characters), ``CONCAT`` and ``||`` (NULL when any part is NULL), ``RLIKE``;
- numbers: ``ABS`` (overflow fails, as under ANSI), ``FLOOR``/``CEIL`` (a double's result is a
  BIGINT), ``ROUND(x, n)`` of integers and decimals (half away from zero), ``GREATEST``/``LEAST``
  (NULLs skipped);
- ``NULLIF(a, b)``.

A function not listed is refused by :class:`~sketch_core.incremental.expressions.ExpressionTranslator`
with :class:`~sketch_core.errors.UnsupportedQueryError` naming it (and then evaluated by Spark on
the delta rows, see :mod:`~sketch_core.incremental.remote`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from sketch_core.incremental.dates import TRUNC_UNITS, add_months, last_day, trunc_date

if TYPE_CHECKING:
    from sketch_core.incremental.expressions import ExpressionTranslator

Rule = Callable[["ExpressionTranslator", exp.Expr], pc.Expression | None]


def _call(name: str, args: list[pc.Expression], options: pc.FunctionOptions | None = None) -> pc.Expression:
    return pc.Expression._call(name, args, options)


def _date_part(kernel: str, options: pc.FunctionOptions | None = None) -> Rule:
    def rule(t: ExpressionTranslator, node: exp.Expr) -> pc.Expression:
        return _call(kernel, [t.translate(node.this)], options).cast(pa.int32())

    return rule


_DAY_OF_WEEK = pc.DayOfWeekOptions(count_from_zero=False, week_start=7)  # Sunday = 1, as Spark
_EXTRACT_FIELDS: dict[str, tuple[str, pc.FunctionOptions | None]] = {
    "YEAR": ("year", None),
    "YEARS": ("year", None),
    "YEAR_OF_WEEK": ("iso_year", None),
    "MONTH": ("month", None),
    "MONTHS": ("month", None),
    "DAY": ("day", None),
    "DAYS": ("day", None),
    "DAY_OF_MONTH": ("day", None),
    "QUARTER": ("quarter", None),
    "DOW": ("day_of_week", _DAY_OF_WEEK),
    "DAYOFWEEK": ("day_of_week", _DAY_OF_WEEK),
    "DOY": ("day_of_year", None),
}


def _extract(t: ExpressionTranslator, node: exp.Expr) -> pc.Expression | None:
    field = node.this.name.upper()
    if field not in _EXTRACT_FIELDS:
        return None
    value = t.translate(node.expression)
    if not pa.types.is_date(t.type_of(value)):
        return None  # a timestamp's fields depend on the session time zone
    kernel, options = _EXTRACT_FIELDS[field]
    return _call(kernel, [value], options).cast(pa.int32())


def _days(value: pc.Expression) -> pc.Expression:
    return value.cast(pa.int32())


def _date_add(t: ExpressionTranslator, node: exp.Expr) -> pc.Expression | None:
    unit = node.args.get("unit")
    if unit is not None and unit.name.upper() not in ("DAY", "DAYS"):
        return None
    start = t.translate(node.this)
    if not pa.types.is_date(t.type_of(start)):
        return None
    amount = t.translate(node.expression)
    if not pa.types.is_integer(t.type_of(amount)):
        return None
    return _call("add_checked", [_days(start), amount.cast(pa.int32())]).cast(pa.date32())


def _date_diff(t: ExpressionTranslator, node: exp.Expr) -> pc.Expression | None:
    unit = node.args.get("unit")
    if unit is not None and unit.name.upper() not in ("DAY", "DAYS"):
        return None
    end, start = t.translate(node.this), t.translate(node.expression)
    if not (pa.types.is_date(t.type_of(end)) and pa.types.is_date(t.type_of(start))):
        return None
    return _call("subtract_checked", [_days(end), _days(start)])


def _add_months(t: ExpressionTranslator, node: exp.Expr) -> pc.Expression | None:
    start, months = t.translate(node.this), t.translate(node.expression)
    if not (pa.types.is_date(t.type_of(start)) and pa.types.is_integer(t.type_of(months))):
        return None
    return add_months(start, months)


def _last_day(t: ExpressionTranslator, node: exp.Expr) -> pc.Expression | None:
    value = t.translate(node.this)
    return last_day(value) if pa.types.is_date(t.type_of(value)) else None


def _trunc(t: ExpressionTranslator, node: exp.Expr) -> pc.Expression | None:
    """``TRUNC(date, 'MM')`` (a date; ``DATE_TRUNC`` gives a timestamp, and is refused)."""
    unit = node.args.get("unit")
    if not (isinstance(unit, exp.Literal) and unit.is_string and unit.this.upper() in TRUNC_UNITS):
        return None  # a unit from a column, or one that makes Spark return NULL
    value = t.translate(node.this)
    if not pa.types.is_date(t.type_of(value)):
        return None
    return trunc_date(value, TRUNC_UNITS[unit.this.upper()])


def _trim(t: ExpressionTranslator, node: exp.Expr) -> pc.Expression | None:
    if node.expression is not None:  # TRIM(chars FROM s)
        chars = node.expression
        if not (isinstance(chars, exp.Literal) and chars.is_string):
            return None
        characters = chars.this
    else:
        characters = " "
    kernel = {"LEADING": "utf8_ltrim", "TRAILING": "utf8_rtrim"}.get(
        str(node.args.get("position") or "").upper(), "utf8_trim"
    )
    return _call(kernel, [t.translate(node.this)], pc.TrimOptions(characters))


def _concat(t: ExpressionTranslator, node: exp.Expr) -> pc.Expression:
    parts = [
        t.translate(e)
        for e in (node.expressions if isinstance(node, exp.Concat) else (node.this, node.expression))
    ]
    parts = [p if pa.types.is_string(t.type_of(p)) else p.cast(pa.string()) for p in parts]
    options = pc.JoinOptions(null_handling="emit_null")
    return _call("binary_join_element_wise", [*parts, pc.scalar("")], options)


def _floor_or_ceil(kernel: str) -> Rule:
    def rule(t: ExpressionTranslator, node: exp.Expr) -> pc.Expression | None:
        if node.args.get("decimals") is not None or node.expression is not None:
            return None  # FLOOR(x, scale)
        value = t.translate(node.this)
        kind = t.type_of(value)
        if pa.types.is_integer(kind):
            return value.cast(pa.int64())
        if pa.types.is_floating(kind):
            return _double_to_long(_call(kernel, [value.cast(pa.float64())]))
        if pa.types.is_decimal(kind) and kind.precision < 38:
            # Spark's type is decimal(p - s + 1, 0): one more integer digit (CEIL(9.5) = 10).
            wider = value.cast(pa.decimal128(kind.precision + 1, kind.scale))
            return _call(kernel, [wider]).cast(pa.decimal128(kind.precision - kind.scale + 1, 0))
        return None

    return rule


_LONG_LIMIT = 9.223372036854775807e18  # 2**63 as a double


def _double_to_long(value: pc.Expression) -> pc.Expression:
    """Java's ``(long) x``, which Spark's FLOOR and CEIL of a double use: NaN is 0, values
    beyond the range are the range's ends (no error, even under ANSI)."""
    high = value >= pc.scalar(_LONG_LIMIT)
    low = value <= pc.scalar(-_LONG_LIMIT)
    nan = _call("is_nan", [value])
    inside = _call("if_else", [high | low | nan, pc.scalar(0.0), value]).cast(pa.int64())
    return _call(
        "if_else",
        [high, pc.scalar(2**63 - 1), _call("if_else", [low, pc.scalar(-(2**63)), inside])],
    )


def _round(t: ExpressionTranslator, node: exp.Expr) -> pc.Expression | None:
    digits = node.args.get("decimals")
    if digits is not None and not (isinstance(digits, exp.Literal) and not digits.is_string):
        return None
    places = int(digits.this) if digits is not None else 0
    value = t.translate(node.this)
    kind = t.type_of(value)
    if pa.types.is_integer(kind) and places >= 0:
        return value
    if pa.types.is_decimal(kind) and places >= 0 and kind.precision < 38:
        # Spark's type is decimal(p - s + 1 + n', n') with n' = min(s, n): room for the carry
        # (ROUND(9.95, 1) = 10.0), ties away from zero; a cast to it rounds so (cast_to).
        kept = min(kind.scale, places)
        return t.cast_to(value, pa.decimal128(min(kind.precision - kind.scale + 1 + kept, 38), kept))
    # A double is rounded by Spark at its shortest decimal form (ROUND(1.005, 2) is 1.01), and
    # by Arrow at its binary value (1.0): refused rather than guessed.
    return None


def _nullif(t: ExpressionTranslator, node: exp.Expr) -> pc.Expression:
    # Spark's NULLIF(a, b) is IF(a = b, NULL, a): the comparison as any other (NaN equals NaN).
    equal = t.translate(exp.EQ(this=node.this, expression=node.expression))
    left = t.translate(node.this)
    return _call(
        "if_else",
        [_call("coalesce", [equal, pc.scalar(False)]), pc.scalar(pa.scalar(None, t.type_of(left))), left],
    )


def _extreme(kernel: str) -> Rule:
    def rule(t: ExpressionTranslator, node: exp.Expr) -> pc.Expression:
        values = t.common_type([node.this, *node.expressions])
        options = pc.ElementWiseAggregateOptions(skip_nulls=True)
        if not pa.types.is_floating(t.type_of(values[0])):
            return _call(kernel, values, options)
        # Spark orders NaN above every number: GREATEST is NaN when any argument is, LEAST
        # only when every argument that is not NULL is. Arrow's kernels order NaN their own
        # way, so NaNs are taken out (as NULLs) and put back by that rule.
        nans = [_call("coalesce", [_call("is_nan", [v]), pc.scalar(False)]) for v in values]
        numbers = [
            _call("if_else", [is_nan, pc.scalar(pa.scalar(None, pa.float64())), v.cast(pa.float64())])
            for v, is_nan in zip(values, nans, strict=True)
        ]
        if kernel == "max_element_wise":
            nan = nans[0]
            for more in nans[1:]:
                nan = nan | more
        else:
            nan = ~_all_null(values)
            for v, is_nan in zip(values, nans, strict=True):
                nan = nan & (is_nan | v.is_null())
        return _call("if_else", [nan, pc.scalar(float("nan")), _call(kernel, numbers, options)])

    return rule


def _all_null(values: list[pc.Expression]) -> pc.Expression:
    missing = values[0].is_null()
    for v in values[1:]:
        missing = missing & v.is_null()
    return missing


def _regexp_like(t: ExpressionTranslator, node: exp.Expr) -> pc.Expression | None:
    pattern = node.expression
    if not (isinstance(pattern, exp.Literal) and pattern.is_string) or node.args.get("flag") is not None:
        return None
    return _call("match_substring_regex", [t.translate(node.this)], pc.MatchSubstringOptions(pattern.this))


def _simple(kernel: str) -> Rule:
    def rule(t: ExpressionTranslator, node: exp.Expr) -> pc.Expression:
        return _call(kernel, [t.translate(node.this)])

    return rule


# Java's toUpperCase writes these as several letters; Arrow's utf8_upper maps them to one.
_UPPER_EXPANSIONS = {"ß": "SS", "ﬀ": "FF", "ﬁ": "FI", "ﬂ": "FL", "ﬃ": "FFI", "ﬄ": "FFL", "ﬅ": "ST", "ﬆ": "ST"}


def _upper(t: ExpressionTranslator, node: exp.Expr) -> pc.Expression:
    value = t.translate(node.this)
    for letter, letters in _UPPER_EXPANSIONS.items():
        value = _call("replace_substring", [value], pc.ReplaceSubstringOptions(letter, letters))
    return _call("utf8_upper", [value])


def _length(t: ExpressionTranslator, node: exp.Expr) -> pc.Expression | None:
    value = t.translate(node.this)
    if not pa.types.is_string(t.type_of(value)):
        return None
    return _call("utf8_length", [value]).cast(pa.int32())


RULES: dict[type[exp.Expr], Rule] = {
    exp.Year: _date_part("year"),
    exp.Month: _date_part("month"),
    exp.Day: _date_part("day"),
    exp.DayOfMonth: _date_part("day"),
    exp.Quarter: _date_part("quarter"),
    exp.DayOfWeek: _date_part("day_of_week", _DAY_OF_WEEK),
    exp.Extract: _extract,
    exp.TsOrDsAdd: _date_add,
    exp.DateDiff: _date_diff,
    exp.AddMonths: _add_months,
    exp.LastDay: _last_day,
    exp.DateTrunc: _trunc,
    exp.Upper: _upper,
    exp.Lower: _simple("utf8_lower"),
    exp.Trim: _trim,
    exp.Length: _length,
    exp.Concat: _concat,
    exp.DPipe: _concat,
    exp.Abs: _simple("abs_checked"),
    exp.Floor: _floor_or_ceil("floor"),
    exp.Ceil: _floor_or_ceil("ceil"),
    exp.Round: _round,
    exp.Nullif: _nullif,
    exp.Greatest: _extreme("max_element_wise"),
    exp.Least: _extreme("min_element_wise"),
    exp.RegexpLike: _regexp_like,
}


def translate_function(t: ExpressionTranslator, node: exp.Expr) -> pc.Expression | None:
    """``node`` as an Arrow expression when a rule covers it (None: refuse it)."""
    rule = RULES.get(type(node))
    return None if rule is None else rule(t, node)
