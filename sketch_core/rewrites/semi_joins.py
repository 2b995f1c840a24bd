"""A semi join as an inner join with the right side's distinct join keys.

``L ⋉(l = r ∧ p(L) ∧ q(R)) R`` keeps each left row once if some right row matches. Grouping
the (filtered) right side by its key expressions gives at most one partner per left row, so
``project[L](L ⋈(l = key ∧ p) group[key](select[q](R)))`` returns the same rows, and its
lineage is the left row with all matching right rows, which is the provenance the capture
rewrite gives a semi join (it uses the same construction). The incremental engine maintains
the grouped side like any aggregation.
"""

from __future__ import annotations

from sqlglot import exp

from sketch_core.algebra.dialect import SPARK
from sketch_core.algebra.ir import Aggregate, Join, Project, Relation, Select, column, conjuncts, referenced
from sketch_core.errors import UnsupportedQueryError

Keys = list[tuple[exp.Expr, exp.Expr]]


def key_equality(left: exp.Expr, right: exp.Expr, null_safe: bool) -> exp.Expr:
    return exp.NullSafeEQ(this=left, expression=right) if null_safe else exp.EQ(this=left, expression=right)


def split_semi_condition(
    join: Join, where: str, hint: str, *, null_safe: bool = False, mixed_ok: bool = False
) -> tuple[Keys, list[exp.Expr], list[exp.Expr], list[exp.Expr]]:
    """A semi join's condition as (left expr, right expr) equalities, left-only, right-only and
    mixed conjuncts (over both sides, beyond the equalities, such as TPC-H Q21's
    ``l2.l_suppkey <> l1.l_suppkey``). Mixed conjuncts are refused unless ``mixed_ok``, and
    a condition without an equality always is, naming ``where`` it was refused. With
    ``null_safe``, the keys are the null-safe equalities (``<=>``) of an INTERSECT."""
    equality = exp.NullSafeEQ if null_safe else exp.EQ
    assert join.condition is not None
    left_columns, right_columns = set(join.left.columns), set(join.right.columns)
    keys: Keys = []
    left_only: list[exp.Expr] = []
    right_only: list[exp.Expr] = []
    mixed: list[exp.Expr] = []
    for conjunct in conjuncts(join.condition):
        refs = referenced(conjunct)
        if refs <= left_columns:
            left_only.append(conjunct)
        elif refs <= right_columns:
            right_only.append(conjunct)
        elif (
            isinstance(conjunct, equality)
            and referenced(conjunct.this) <= left_columns
            and (referenced(conjunct.expression) <= right_columns)
        ):
            keys.append((conjunct.this, conjunct.expression))
        elif (
            isinstance(conjunct, equality)
            and referenced(conjunct.this) <= right_columns
            and (referenced(conjunct.expression) <= left_columns)
        ):
            keys.append((conjunct.expression, conjunct.this))
        elif mixed_ok:
            mixed.append(conjunct)
        else:
            raise UnsupportedQueryError(
                f"a non-equality correlation in a semi join ({where})",
                conjunct.sql(dialect=SPARK),
                hint=hint,
            )
    if not keys:
        raise UnsupportedQueryError(
            f"a semi join without an equality ({where})", join.condition.sql(dialect=SPARK), hint=hint
        )
    return keys, left_only, right_only, mixed


def null_safe_semi_join(join: Join) -> bool:
    """Whether ``join`` matches with null-safe equalities (an INTERSECT's)."""
    return join.condition is not None and join.condition.find(exp.NullSafeEQ) is not None


def semi_join_as_inner_join(join: Join) -> Relation:
    assert join.kind == "semi" and join.condition is not None
    if null_safe_semi_join(join):
        raise UnsupportedQueryError(
            "INTERSECT in incremental maintenance (not yet)",
            join.condition.sql(dialect=SPARK),
            hint="maintain this sketch with strategy='full'",
        )
    keys, left_only, right_only, _ = split_semi_condition(
        join, "incremental maintenance", "maintain this sketch with strategy='full'"
    )
    right = Select(join.right, exp.and_(*right_only)) if right_only else join.right
    # Deterministic names (operator state is stored by column name): the IR's column names are
    # unique, so the right side's key columns name the group keys uniquely too.
    groups = tuple(
        (f"__semi_{'_'.join(sorted(referenced(expression)))}_{i}", expression)
        for i, (_, expression) in enumerate(keys)
    )
    matches = Aggregate(right, groups, ())
    condition = exp.and_(
        *(
            exp.EQ(this=left, expression=column(name))
            for (left, _), (name, _) in zip(keys, groups, strict=True)
        ),
        *left_only,
    )
    joined = Join(join.left, matches, "inner", condition)
    return Project(joined, tuple((c, column(c)) for c in join.left.columns))
