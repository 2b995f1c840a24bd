"""Scalar expressions of the IR as z3 terms, for the safety and reuse checks (PBDS Sec. 6 and 7).

Each column is a z3 constant; a second copy (suffix ``@ps`` for the sketch instance, ``@q2``
for a second query) models the same column evaluated elsewhere. Expressions z3 cannot model
(LIKE, string functions, NULL tests) translate to ``None``: a premise that is ``None`` is
dropped, which only weakens what can be proven, so the checks stay sound.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any

import z3
from sqlglot import exp

from sketch_core.algebra.ir import COMPARISON_OPERATORS
from sketch_core.lru import LruMap

_EPOCH = dt.date(1970, 1, 1)
# IN lists longer than this are not translated (a BI tool's filter on thousands of values made
# each safety check take seconds in the solver): unknown to the proofs, which then rest on its
# columns being equal on the sketch's data and the full data, as for any predicate over rows.
MAX_IN_OPTIONS = 64
_EPOCH_TS = dt.datetime(1970, 1, 1)

Term = Any  # a z3 expression


def sort_for(spark_type: str | None) -> z3.SortRef:
    kind = (spark_type or "double").lower()
    if kind in ("bigint", "int", "smallint", "tinyint", "date") or kind.startswith("timestamp"):
        return z3.IntSort()
    if kind == "string" or kind.startswith("varchar") or kind.startswith("char"):
        return z3.StringSort()
    if kind == "boolean":
        return z3.BoolSort()
    return z3.RealSort()


def value_term(value: Any) -> Term | None:
    """A Python value (a statistic or literal) as a z3 constant."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None  # NaN, and an infinite bound, say nothing z3 can use
    if isinstance(value, bool):
        return z3.BoolVal(value)
    if isinstance(value, int):
        return z3.IntVal(value)
    if isinstance(value, float | Decimal):
        return z3.RealVal(str(value))
    if isinstance(value, dt.datetime):
        return z3.IntVal((value - _EPOCH_TS) // dt.timedelta(microseconds=1))
    if isinstance(value, dt.date):
        return z3.IntVal((value - _EPOCH).days)
    if isinstance(value, str):
        return z3.StringVal(value)
    return None


def _cast_literal(node: exp.Cast) -> Term | None:
    inner = node.this
    if not isinstance(inner, exp.Literal) or not inner.is_string:
        return None
    target = node.to.this
    try:
        if target == exp.DataType.Type.DATE:
            return value_term(dt.date.fromisoformat(inner.name))
        if target in (exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPNTZ):
            return value_term(dt.datetime.fromisoformat(inner.name))
    except ValueError:
        return None
    return None


def _numeric(a: Term, b: Term) -> bool:
    return all(z3.is_arith(t) for t in (a, b))


def _comparable(a: Term, b: Term) -> bool:
    return _numeric(a, b) or (a.sort() == b.sort())


_ARITHMETIC: dict[type[exp.Expr], Callable[[Term, Term], Term]] = {
    exp.Add: lambda a, b: a + b,
    exp.Sub: lambda a, b: a - b,
    exp.Mul: lambda a, b: a * b,
}


class Translator:
    """Translates expressions over columns named by :meth:`var` (a name -> z3 constant map)."""

    def __init__(
        self,
        var: Callable[[str], Term | None],
        null: Callable[[str], Term | None] | None = None,
        *,
        unknown_nulls: bool = False,
    ) -> None:
        self.var = var
        # A column's NULL flag, where the caller models one (an aggregate's value): then
        # COALESCE(column, fallback) translates; elsewhere values are taken as non-NULL.
        self.null = null
        # COALESCE over values without a NULL flag: one of its arguments, which one unknown (a
        # fresh flag per translation). Only for callers that fall back to comparing such an
        # expression by its columns: two translations of one text are not provably equal.
        self.unknown_nulls = unknown_nulls

    def __call__(self, node: exp.Expr) -> Term | None:
        try:
            return self._term(node)
        except (z3.Z3Exception, TypeError, ValueError, ArithmeticError):
            return None

    def _term(self, node: exp.Expr) -> Term | None:
        if isinstance(node, exp.Paren):
            return self._term(node.this)
        if isinstance(node, exp.Column):
            return self.var(node.name)
        if isinstance(node, exp.Literal):
            if node.is_string:
                return z3.StringVal(node.name)
            text = node.name
            return z3.IntVal(int(text)) if text.lstrip("-").isdigit() else z3.RealVal(text)
        if isinstance(node, exp.Boolean):
            return z3.BoolVal(bool(node.this))
        if isinstance(node, exp.Cast):
            literal = _cast_literal(node)
            if literal is not None:
                return literal
            inner = self._term(node.this)
            target = node.to.this
            real = (exp.DataType.Type.DOUBLE, exp.DataType.Type.DECIMAL, exp.DataType.Type.FLOAT)
            if inner is not None and z3.is_arith(inner) and target in real:
                return z3.ToReal(inner) if z3.is_int(inner) else inner
            if inner is not None and z3.is_int(inner) and target == exp.DataType.Type.BIGINT:
                # No integer is wider than BIGINT: the value is unchanged (Tableau prints every
                # SUM of an integer column as SUM(CAST(x AS BIGINT))). Narrower targets may wrap.
                return inner
            return None
        if isinstance(node, exp.Neg):
            inner = self._term(node.this)
            return -inner if inner is not None and z3.is_arith(inner) else None
        if type(node) in COMPARISON_OPERATORS:
            a, b = self._term(node.this), self._term(node.expression)
            if a is None or b is None or not _comparable(a, b):
                return None
            return COMPARISON_OPERATORS[type(node)](a, b)
        if type(node) in _ARITHMETIC or isinstance(node, exp.Div):
            a, b = self._term(node.this), self._term(node.expression)
            if a is None or b is None or not _numeric(a, b):
                return None
            if isinstance(node, exp.Div):
                return z3.ToReal(a) / z3.ToReal(b) if z3.is_int(a) and z3.is_int(b) else a / b
            return _ARITHMETIC[type(node)](a, b)
        if isinstance(node, exp.And | exp.Or):
            a, b = self._term(node.this), self._term(node.expression)
            if a is None or b is None:
                return None
            return z3.And(a, b) if isinstance(node, exp.And) else z3.Or(a, b)
        if isinstance(node, exp.Not):
            inner = self._term(node.this)
            return z3.Not(inner) if inner is not None and z3.is_bool(inner) else None
        if isinstance(node, exp.Between):
            x, low, high = self._term(node.this), self._term(node.args["low"]), self._term(node.args["high"])
            if x is None or low is None or high is None or not (_comparable(x, low) and _comparable(x, high)):
                return None
            return z3.And(x >= low, x <= high)
        if isinstance(node, exp.In) and not node.args.get("query"):
            if len(node.expressions) > MAX_IN_OPTIONS:
                return None  # unknown: a weaker premise, and goals on its columns' equality
            x = self._term(node.this)
            options = [self._term(o) for o in node.expressions]
            if x is None or any(o is None or not _comparable(x, o) for o in options):
                return None
            return z3.Or(*(x == o for o in options))
        if isinstance(node, exp.Coalesce):
            return self._coalesce(node)
        if isinstance(node, exp.If):
            return self._case([(node.this, node.args["true"])], node.args.get("false"))
        if isinstance(node, exp.Case) and node.this is None:
            return self._case([(w.this, w.args["true"]) for w in node.args["ifs"]], node.args.get("default"))
        return None

    def _coalesce(self, node: exp.Coalesce) -> Term | None:
        """``COALESCE(column, fallback)`` over a column with a NULL flag: the fallback where the
        flag holds (Looker prints every measure as ``COALESCE(SUM(x), 0)``). Elsewhere one of
        the arguments, which one unknown (a fresh flag per argument): ``IFNULL(x, 0) >= 0``
        follows from ``x >= 0``, as a SUM over it needs (BI tools print ``SUM(IFNULL(x, 0))``)."""
        arguments = [node.this, *node.expressions]
        terms = [self._term(a) for a in arguments]
        if any(t is None for t in terms) or not all(_comparable(terms[0], t) for t in terms[1:]):
            return None
        column = node.this.name if isinstance(node.this, exp.Column) else None
        flag = self.null(column) if self.null is not None and column is not None else None
        if flag is not None and len(terms) == 2:
            return _branches(flag, terms[1], terms[0])
        if not self.unknown_nulls:
            return None
        result = terms[-1]
        for term in reversed(terms[:-1]):
            result = _branches(z3.FreshBool("null"), result, term)
        return result

    def _case(self, branches: Iterable[tuple[exp.Expr, exp.Expr]], default: exp.Expr | None) -> Term | None:
        if default is None:
            return None  # CASE without ELSE yields NULL
        result = self._term(default)
        for condition, value in reversed(list(branches)):
            c, v = self._term(condition), self._term(value)
            if c is None or v is None or result is None or not _comparable(v, result):
                return None
            result = _branches(c, v, result)
        return result


def _branches(condition: Term, then: Term, otherwise: Term) -> Term:
    """``If(condition, then, otherwise)``, an integer branch widened to the other's reals."""
    if z3.is_int(then) and z3.is_real(otherwise):
        then = z3.ToReal(then)
    elif z3.is_real(then) and z3.is_int(otherwise):
        otherwise = z3.ToReal(otherwise)
    return z3.If(condition, then, otherwise)


def within_bounds(terms: Iterable[Term], low: Any, high: Any) -> list[Term]:
    """``low <= t <= high`` for each term: a column's min/max statistics, where z3 can use them."""
    premises: list[Term] = []
    for bound, above in ((value_term(low), True), (value_term(high), False)):
        for term in terms:
            if bound is not None and z3.is_arith(bound) and z3.is_arith(term):
                premises.append(term >= bound if above else term <= bound)
    return premises


class _ProofMemo:
    """Answers of :func:`proves`, by the z3 terms asked about.

    The safety checks of a query's candidate attributes differ only where the sketched
    attribute matters (an aggregation's groups); every selection and join rule asks the same
    questions again, and asking z3 costs about a millisecond each. z3 hash-conses terms, so a
    term's id names its structure for as long as the term lives: an entry keeps its terms
    alive, which keeps its key meaning what it meant."""

    def __init__(self, size: int) -> None:
        self._answers: LruMap[tuple[int, ...], tuple[bool, list[Term]]] = LruMap(size)

    def get(self, key: tuple[int, ...]) -> bool | None:
        found = self._answers.get(key)
        return None if found is None else found[0]

    def put(self, key: tuple[int, ...], answer: bool, terms: list[Term]) -> None:
        self._answers.put(key, (answer, terms))


_MEMO = _ProofMemo(4096)


def proves(premises: Iterable[Term], goal: Term, *, timeout_ms: int = 2000) -> bool:
    """True when the premises imply the goal for every assignment (its negation is unsatisfiable)."""
    terms = [p for p in premises if p is not None]
    key = (*(t.get_id() for t in terms), -1, goal.get_id(), timeout_ms)
    known = _MEMO.get(key)
    if known is not None:
        return known
    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    solver.add(*terms)
    solver.add(z3.Not(goal))
    answer = bool(solver.check() == z3.unsat)
    _MEMO.put(key, answer, [*terms, goal])
    return answer
