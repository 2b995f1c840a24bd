"""Reusing a sketch across instances of one parameterized query (PBDS Sec. 7, Fig. 5).

Q is the instance a sketch was captured for, Q' the new one; both come from the same template,
so their plans have the same shape and differ only in literals. The sketch can answer Q' when
Q''s provenance is contained in Q's for every database, which holds when ge(Q', Q) and
uconds(Q', Q) hold:

* Psi relates each column c of Q to its copy c' in Q' (equal at scans; for aggregates equal,
  smaller or larger depending on whether Q''s groups hold the same or fewer rows);
* ge requires the group-by values (and DISTINCT's columns) to be equal, and a top-k's input to
  be the same relation with k' <= k;
* uconds: Psi and all of Q''s conditions imply all of Q's conditions.
Anti joins are not monotone, so their right sides must be identical in both instances; so must
an outer join's padded side and condition.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import z3
from sqlglot import exp

from sketch_core.algebra.dialect import SPARK
from sketch_core.algebra.ir import (
    Aggregate,
    Distinct,
    Join,
    Project,
    Relation,
    Scan,
    Select,
    Sort,
    TopK,
    Union,
    conjuncts,
    referenced,
)
from sketch_core.algebra.printer import to_sql
from sketch_core.analysis.safety import Statistics
from sketch_core.analysis.smt import Term, Translator, proves, sort_for, within_bounds


@dataclass(frozen=True)
class ReuseResult:
    reusable: bool
    reason: str | None = None


class _NotReusable(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class _State:
    psi: list[Term] = field(default_factory=list)
    # (condition in Q, in Q', columns it reads, whether both instances spell it the same)
    preds: list[tuple[Term | None, Term | None, frozenset[str], bool]] = field(default_factory=list)
    exprs: list[Term] = field(default_factory=list)  # projection definitions and statistics, both sides


def _literal_free(node: exp.Expr) -> str:
    """The expression's shape with literals blanked, to compare two instances of a template."""
    return node.transform(lambda n: exp.Literal.string("?") if isinstance(n, exp.Literal) else n).sql()


class _Checker:
    def __init__(self, statistics: Statistics) -> None:
        self.statistics = statistics
        self.sorts: dict[str, z3.SortRef] = {}
        self.vars: dict[str, Term] = {}
        self.q = Translator(lambda n: self.var(n, ""))
        self.q2 = Translator(lambda n: self.var(n, "'"))

    def var(self, name: str, suffix: str) -> Term:
        key = name + suffix
        if key not in self.vars:
            self.vars[key] = z3.Const(key, self.sorts.get(name, z3.RealSort()))
        return self.vars[key]

    def premises(self, state: _State) -> list[Term]:
        return [*state.psi, *state.exprs]

    def all_preds(self, state: _State, side: int) -> list[Term]:
        return [p[side] for p in state.preds if p[side] is not None]

    def equal(self, state: _State, name: str, extra: Iterable[Term] = ()) -> bool:
        return proves([*self.premises(state), *extra], self.var(name, "") == self.var(name, "'"))

    def condition(self, state: _State, q: exp.Expr, q2: exp.Expr) -> None:
        for a, b in zip(conjuncts(q), conjuncts(q2), strict=True):
            same = a.sql(dialect=SPARK) == b.sql(dialect=SPARK)
            state.preds.append((self.q(a), self.q2(b), frozenset(referenced(a)), same))

    def define(self, state: _State, name: str, q: exp.Expr, q2: exp.Expr) -> None:
        if isinstance(q, exp.Column) and q.name == name:
            return
        a, b = self.q(q), self.q2(q2)
        if a is not None and b is not None:
            self.sorts.setdefault(name, a.sort())
            state.exprs += [self.var(name, "") == a, self.var(name, "'") == b]

    def visit(self, q: Relation, q2: Relation) -> _State:
        if type(q) is not type(q2) or q.columns != q2.columns:
            raise _NotReusable("the two queries have different shapes")
        if isinstance(q, Scan):
            return self.scan(q)
        children = [self.visit(a, b) for a, b in zip(q.children, q2.children, strict=True)]
        state = _State(
            [p for c in children for p in c.psi],
            [p for c in children for p in c.preds],
            [p for c in children for p in c.exprs],
        )
        if isinstance(q, Select):
            assert isinstance(q2, Select)
            self._same_shape(q.condition, q2.condition)
            self.condition(state, q.condition, q2.condition)
        elif isinstance(q, Project):
            assert isinstance(q2, Project)
            for (name, a), (_, b) in zip(q.outputs, q2.outputs, strict=True):
                self._same_shape(a, b)
                self.define(state, name, a, b)
                if self.equal(state, name):
                    state.psi.append(self.var(name, "") == self.var(name, "'"))
        elif isinstance(q, Join):
            assert isinstance(q2, Join)
            self.join(state, q, q2)
        elif isinstance(q, Aggregate):
            assert isinstance(q2, Aggregate)
            self.aggregate(state, q, q2)
        elif isinstance(q, TopK):
            assert isinstance(q2, TopK)
            self.top_k(state, q, q2)
        elif isinstance(q, Distinct):
            unequal = [c for c in q.columns if not self.equal(state, c, self._conds(state))]
            if unequal:
                raise _NotReusable(f"DISTINCT over {unequal}, which may differ between the instances")
        elif isinstance(q, Union):
            for name, *inputs in zip(q.columns, *(i.columns for i in q.children), strict=True):
                if all(self.equal(state, c) for c in inputs):
                    state.psi.append(self.var(name, "") == self.var(name, "'"))
        elif not isinstance(q, Sort):
            raise _NotReusable(f"no reuse rule for {type(q).__name__}")
        return state

    def _conds(self, state: _State) -> list[Term]:
        return [*self.all_preds(state, 0), *self.all_preds(state, 1)]

    def _same_shape(self, a: exp.Expr, b: exp.Expr) -> None:
        if _literal_free(a) != _literal_free(b):
            raise _NotReusable("the two queries have different shapes")

    def scan(self, q: Scan) -> _State:
        state = _State()
        stats = self.statistics.get(q.table, {})
        for source, name, kind in zip(
            q.source_columns, q.names, q.types or [None] * len(q.names), strict=True
        ):
            self.sorts[name] = sort_for(kind)
            a, b = self.var(name, ""), self.var(name, "'")
            state.psi.append(a == b)
            state.exprs += within_bounds((a, b), *stats.get(source, (None, None)))
        return state

    def join(self, state: _State, q: Join, q2: Join) -> None:
        if q.kind == "scalar":
            if to_sql(q.right) != to_sql(q2.right):
                raise _NotReusable("the scalar subqueries differ between the instances")
            return
        if q.kind in ("left", "full"):
            # The padded side is read whole, and which rows get padded depends on it and on
            # the condition: both must be the same in the two instances, and the matches too.
            same_right = to_sql(q.right) == to_sql(q2.right)
            same_left = q.kind == "left" or to_sql(q.left) == to_sql(q2.left)
            assert q.condition is not None and q2.condition is not None
            if not (same_right and same_left and q.condition.sql() == q2.condition.sql()):
                raise _NotReusable("the outer join's padded side differs between the instances")
            matched = referenced(q.condition) & set(q.left.columns)
            if not all(self.equal(state, c, self._conds(state)) for c in matched):
                raise _NotReusable("the outer join may match other rows in the two instances")
            return
        if q.kind == "anti":
            if to_sql(q.right) != to_sql(q2.right) or (
                q.condition and q2.condition and q.condition.sql() != q2.condition.sql()
            ):
                raise _NotReusable("NOT EXISTS / NOT IN parts differ between the instances")
            return
        if q.condition is not None and q2.condition is not None:
            self._same_shape(q.condition, q2.condition)
            self.condition(state, q.condition, q2.condition)

    def aggregate(self, state: _State, q: Aggregate, q2: Aggregate) -> None:
        conds = [*self.premises(state), *self._conds(state)]
        for (name, a), (_, b) in zip(q.groups, q2.groups, strict=True):
            self._same_shape(a, b)
            ta, tb = self.q(a), self.q2(b)
            proven = ta is not None and tb is not None and proves(conds, ta == tb)
            if not proven and not all(self.equal(state, c, self._conds(state)) for c in referenced(a)):
                raise _NotReusable(f"group-by {a.sql(dialect='spark')!r} may differ between the instances")
            self.define(state, name, a, b)
            state.psi.append(self.var(name, "") == self.var(name, "'"))
        group_columns = set().union(*(referenced(e) for _, e in q.groups)) if q.groups else set()
        non_group_q = [p[0] for p in state.preds if p[0] is not None and not p[2] <= group_columns]
        non_group_q2 = [p[1] for p in state.preds if p[1] is not None and not p[2] <= group_columns]
        base = self.premises(state)
        q_in_q2 = all(proves([*base, *non_group_q], c) for c in non_group_q2)  # (1)
        q2_in_q = all(proves([*base, *non_group_q2], c) for c in non_group_q)  # (2)
        if any(p[0] is None and not p[3] and not p[2] <= group_columns for p in state.preds):
            q_in_q2 = q2_in_q = False  # an untranslatable condition: nothing is known about the groups
        for name, call in q.aggregates:
            # (an opaque call's value is known only to be equal when the groups are)
            argument = self.q(call.arg) if call.arg is not None and call.func != "opaque" else None
            self.sorts[name] = (
                z3.IntSort()
                if call.func == "count"
                else z3.RealSort()
                if call.func == "avg" or argument is None
                else argument.sort()
            )
            a, b = self.var(name, ""), self.var(name, "'")
            if q_in_q2 and q2_in_q:
                state.psi.append(a == b)
                continue
            if not q2_in_q:
                continue
            non_negative = argument is not None and z3.is_arith(argument) and proves(conds, argument >= 0)
            non_positive = argument is not None and z3.is_arith(argument) and proves(conds, argument <= 0)
            if call.func in ("count", "max") or (call.func == "sum" and non_negative):
                state.psi.append(b <= a)
            elif call.func == "min" or (call.func == "sum" and non_positive):
                state.psi.append(b >= a)

    def top_k(self, state: _State, q: TopK, q2: TopK) -> None:
        if q.order != q2.order:
            raise _NotReusable("the instances order differently")
        if q2.reach > q.reach:
            raise _NotReusable(f"LIMIT/OFFSET reach {q2.reach} rows, more than the sketch's {q.reach}")
        base = self.premises(state)
        q_preds, q2_preds = self.all_preds(state, 0), self.all_preds(state, 1)
        if any((p[0] is None or p[1] is None) and not p[3] for p in state.preds):
            raise _NotReusable("a condition below the top-k cannot be compared between the instances")
        same_input = all(proves([*base, *q_preds], c) for c in q2_preds) and all(
            proves([*base, *q2_preds], c) for c in q_preds
        )
        if not same_input or not all(self.equal(state, c) for c in q.columns):
            raise _NotReusable("the top-k ranks different rows in the two instances")


def can_reuse(captured: Relation, new: Relation, statistics: Statistics) -> ReuseResult:
    """Whether a sketch captured for ``captured`` is safe to use for ``new`` (same template)."""
    checker = _Checker(statistics)
    try:
        state = checker.visit(captured, new)
    except _NotReusable as refusal:
        return ReuseResult(False, refusal.reason)
    premises = [*checker.premises(state), *checker.all_preds(state, 1)]
    for q_pred, _, refs, same in state.preds:
        if q_pred is None and same and all(checker.equal(state, c) for c in refs):
            continue  # spelled the same over columns equal in both instances
        if q_pred is None:
            return ReuseResult(
                False, f"a condition over {sorted(refs)} cannot be compared between the instances"
            )
        if not proves(premises, q_pred):
            return ReuseResult(False, f"the new binding admits rows the sketch's binding excludes ({q_pred})")
    return ReuseResult(True)
