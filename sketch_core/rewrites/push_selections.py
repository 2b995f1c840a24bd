"""Push selections into joins: ``select[a=b and p(l) and q(r)](l cross r)`` becomes
``select[p](l) join[a=b] select[q](r)``.

The front end keeps comma joins as cross products under one selection, as SQL wrote them;
Spark's optimizer pushes the conjuncts down, but the in-process incremental engine evaluates
the plan as it is, and a cross product of two tables' rows is not something to build. The
rewrite keeps the result and each row's lineage (and hence every sketch) unchanged: it only
moves conjuncts next to the columns they read. Above an outer join, only conjuncts on a left
join's preserved side move (one on the padded side also filters the padded rows).
"""

from __future__ import annotations

from sqlglot import exp

from sketch_core.algebra.ir import Join, Relation, Select, conjuncts, referenced, replace_children


def _disjuncts(condition: exp.Expr) -> list[exp.Expr]:
    if isinstance(condition, exp.Or):
        return _disjuncts(condition.this) + _disjuncts(condition.expression)
    if isinstance(condition, exp.Paren):
        return _disjuncts(condition.this)
    return [condition]


def _factored(part: exp.Expr) -> list[exp.Expr]:
    """``(a and b) or (a and c)`` as ``a`` and ``b or c`` (TPC-H Q19 repeats its join
    condition in every branch of an OR; factored out, it becomes the join's equality)."""
    branches = _disjuncts(part)
    if len(branches) < 2:
        return [part]
    parts = [conjuncts(b) for b in branches]
    common = [c for c in parts[0] if all(any(c == d for d in other) for other in parts[1:])]
    if not common:
        return [part]
    rests = [[c for c in branch if not any(c == d for d in common)] for branch in parts]
    if any(not rest for rest in rests):  # one branch is just the common part: the OR holds
        return common
    return [*common, exp.or_(*(exp.and_(*rest) for rest in rests))]


def _select(child: Relation, parts: list[exp.Expr]) -> Relation:
    return push_selections(Select(child, exp.and_(*parts))) if parts else child


def _into_join(join: Join, parts: list[exp.Expr]) -> Relation:
    left_columns, right_columns = set(join.left.columns), set(join.right.columns)
    to_left, to_right, to_join, keep = [], [], [], []
    for part in parts:
        refs = referenced(part)
        if not refs:
            keep.append(part)
        elif refs <= left_columns and join.kind != "full":  # a full join pads left rows too
            to_left.append(part)
        elif refs <= right_columns and join.kind in ("inner", "cross"):  # (a scalar's value: kept)
            to_right.append(part)
        elif refs <= left_columns | right_columns and join.kind in ("inner", "cross"):
            to_join.append(part)
        else:
            keep.append(part)
    condition = exp.and_(*conjuncts(join.condition), *to_join) if (to_join or join.condition) else None
    kind = (
        join.kind if join.kind not in ("inner", "cross") else ("inner" if condition is not None else "cross")
    )
    pushed: Relation = Join(
        _select(join.left, to_left), _select(join.right, to_right), kind, condition, join.null_aware
    )
    return Select(pushed, exp.and_(*keep)) if keep else pushed


def push_selections(plan: Relation) -> Relation:
    if isinstance(plan, Select):
        child = plan.child
        parts = conjuncts(plan.condition)
        while isinstance(child, Select):  # select[p](select[q](x)) = select[p and q](x)
            parts = conjuncts(child.condition) + parts
            child = child.child
        parts = [factor for part in parts for factor in _factored(part)]
        if isinstance(child, Join):
            join = Join(
                push_selections(child.left),
                push_selections(child.right),
                child.kind,
                child.condition,
                child.null_aware,
            )
            return _into_join(join, parts)
        return Select(push_selections(child), exp.and_(*parts))
    return replace_children(plan, tuple(push_selections(c) for c in plan.children))
