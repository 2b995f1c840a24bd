"""Capture instrumentation (PBDS Sec. 4, Fig. 3, with the delay method of Sec. 4.3).

Each sketched scan reads an annotated view whose extra column ``__fragment`` holds the row's
fragment id (INIT, binary search on Spark). The id travels as a plain integer through
selections, projections, joins and top-k (rules r1, r2, r4, r5), and becomes a set only where
an aggregation or DISTINCT merges rows (r3, with collect_set instead of bit-or). For min/max-only
aggregations only the rows holding the extreme value contribute. Semi joins carry the matching
right rows' fragments; anti joins' right sides are never sketched. The result is one row with
one array of fragment ids per sketched scan (r7).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from sqlglot import exp

from sketch_core.algebra.ir import (
    AggCall,
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
    column,
    conjuncts,
    positive_scans,
    referenced,
)
from sketch_core.errors import UnsupportedQueryError

FRAGMENT_COLUMN = "__fragment"


@dataclass(frozen=True)
class Annotation:
    table: str
    is_set: bool  # an array of fragment ids (after an aggregation) or a single id


@dataclass(frozen=True)
class CapturePlan:
    """A one-row plan; column ``name`` holds the fragment ids of ``tables[name]``."""

    plan: Relation
    tables: dict[str, str]


Annotations = dict[str, Annotation]


def _union_call(name: str, annotation: Annotation) -> AggCall:
    return AggCall("union_sets" if annotation.is_set else "collect_set", column(name))


def _as_sets(annotations: Annotations) -> Annotations:
    return {n: Annotation(a.table, True) for n, a in annotations.items()}


def _null_of(annotation: Annotation) -> exp.Expr:
    kind = "array<int>" if annotation.is_set else "int"
    return exp.cast(exp.Null(), exp.DataType.build(kind, dialect="spark"))


class _Instrumenter:
    def __init__(self, sketched: Collection[Scan]) -> None:
        self.sketched = {id(scan) for scan in sketched}
        self.counter = 0

    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"__{base}_{self.counter}"

    def run(self, node: Relation) -> tuple[Relation, Annotations]:
        if isinstance(node, Scan):
            if id(node) not in self.sketched:
                return node, {}
            name = self.fresh("ps")
            types = (*node.types, "int") if node.types else ()
            annotated = Scan(
                node.table, node.alias, (*node.source_columns, FRAGMENT_COLUMN), (*node.names, name), types
            )
            return annotated, {name: Annotation(node.table, False)}
        if isinstance(node, Select):
            child, annotations = self.run(node.child)
            return Select(child, node.condition), annotations
        if isinstance(node, Project):
            child, annotations = self.run(node.child)
            return Project(child, node.outputs + tuple((a, column(a)) for a in annotations)), annotations
        if isinstance(node, Join):
            return self.join(node)
        if isinstance(node, Aggregate):
            return self.aggregate(node)
        if isinstance(node, Distinct):
            child, annotations = self.run(node.child)
            if not annotations:
                return Distinct(child), {}
            groups = tuple((c, column(c)) for c in node.child.columns)
            unions = tuple((a, _union_call(a, ann)) for a, ann in annotations.items())
            return Aggregate(child, groups, unions), _as_sets(annotations)
        if isinstance(node, TopK):
            child, annotations = self.run(node.child)
            return TopK(child, node.order, node.limit), annotations
        if isinstance(node, Sort):
            return self.run(node.child)  # ordering does not change which rows are in the result
        if isinstance(node, Union):
            return self.union(node)
        raise UnsupportedQueryError(f"{type(node).__name__} in capture", type(node).__name__)

    def join(self, node: Join) -> tuple[Relation, Annotations]:
        left, left_annotations = self.run(node.left)
        if node.kind == "anti":
            # The right side stays whole: restricting it would let more left rows through.
            return Join(left, node.right, "anti", node.condition, node.null_aware), left_annotations
        right, right_annotations = self.run(node.right)
        if node.kind in ("inner", "cross"):
            return Join(left, right, node.kind, node.condition), {**left_annotations, **right_annotations}
        assert node.condition is not None
        if not right_annotations:
            return Join(left, right, "semi", node.condition), left_annotations
        return self.semi_join(node, left, right, left_annotations, right_annotations)

    def semi_join(
        self,
        node: Join,
        left: Relation,
        right: Relation,
        left_annotations: Annotations,
        right_annotations: Annotations,
    ) -> tuple[Relation, Annotations]:
        """L semi-join R as L joined with R grouped by its join keys, so L's rows keep their count."""
        assert node.condition is not None
        left_columns, right_columns = set(left.columns), set(right.columns)
        keys: list[tuple[exp.Expr, exp.Expr]] = []
        left_only: list[exp.Expr] = []
        right_only: list[exp.Expr] = []
        for conjunct in conjuncts(node.condition):
            refs = referenced(conjunct)
            if refs <= left_columns:
                left_only.append(conjunct)
            elif refs <= right_columns:
                right_only.append(conjunct)
            elif (
                isinstance(conjunct, exp.EQ)
                and referenced(conjunct.this) <= left_columns
                and referenced(conjunct.expression) <= right_columns
            ):
                keys.append((conjunct.this, conjunct.expression))
            elif (
                isinstance(conjunct, exp.EQ)
                and referenced(conjunct.this) <= right_columns
                and referenced(conjunct.expression) <= left_columns
            ):
                keys.append((conjunct.expression, conjunct.this))
            else:
                raise UnsupportedQueryError(
                    "a non-equality correlation in a semi join (capture)",
                    conjunct.sql(dialect="spark"),
                    hint="sketch only the outer tables, or rewrite the condition as equalities",
                )
        if not keys:
            raise UnsupportedQueryError(
                "a semi join without an equality (capture)", node.condition.sql(dialect="spark")
            )
        if right_only:
            right = Select(right, exp.and_(*right_only))
        groups = tuple((self.fresh("key"), r) for _, r in keys)
        unions = tuple((a, _union_call(a, ann)) for a, ann in right_annotations.items())
        matches = Aggregate(right, groups, unions)
        condition = exp.and_(
            *(exp.EQ(this=lk, expression=column(g)) for (lk, _), (g, _) in zip(keys, groups, strict=True)),
            *left_only,
        )
        joined = Join(left, matches, "inner", condition)
        outputs = tuple((c, column(c)) for c in left.columns) + tuple(
            (a, column(a)) for a in right_annotations
        )
        return Project(joined, outputs), {**left_annotations, **_as_sets(right_annotations)}

    def aggregate(self, node: Aggregate) -> tuple[Relation, Annotations]:
        child, annotations = self.run(node.child)
        if not annotations:
            return Aggregate(child, node.groups, node.aggregates), {}
        unions = tuple((a, _union_call(a, ann)) for a, ann in annotations.items())
        extremes_only = bool(node.aggregates) and all(c.func in ("min", "max") for _, c in node.aggregates)
        if extremes_only:
            child = self.extreme_rows(node, child)
        return Aggregate(child, node.groups, node.aggregates + unions), _as_sets(annotations)

    def extreme_rows(self, node: Aggregate, child: Relation) -> Relation:
        """The rows of each group that hold one of its min/max values (r3, first case).

        Recomputing min/max over these rows gives the same values, so the aggregation above can
        stay as it is. A group whose extreme is NULL keeps all its rows.
        """
        groups = tuple((self.fresh("grp"), e) for _, e in node.groups)
        extremes = tuple((self.fresh("ext"), c) for _, c in node.aggregates)
        per_group = Aggregate(child, groups, extremes)
        same_group = [exp.NullSafeEQ(this=e, expression=column(g)) for g, e in groups]
        holds_extreme = exp.or_(
            *(
                exp.or_(
                    exp.EQ(this=c.arg, expression=column(m)),
                    exp.Is(this=column(m), expression=exp.Null()),
                )
                for m, c in extremes
                if c.arg is not None
            )
        )
        return Project(
            Join(child, per_group, "inner", exp.and_(*same_group, holds_extreme)),
            tuple((c, column(c)) for c in child.columns),
        )

    def union(self, node: Union) -> tuple[Relation, Annotations]:
        results = [self.run(i) for i in node.inputs]
        merged: Annotations = {}
        for _, found in results:
            merged.update(found)
        if not merged:
            return Union(tuple(r for r, _ in results), node.names), {}
        inputs = []
        for (rel, own), original in zip(results, node.inputs, strict=True):
            outputs = tuple((c, column(c)) for c in original.columns) + tuple(
                (a, column(a) if a in own else _null_of(ann)) for a, ann in merged.items()
            )
            inputs.append(Project(rel, outputs))
        # One annotation comes from one input; pad it in the others with a NULL of its type.
        return Union(tuple(inputs), node.names + tuple(merged)), merged


def instrument_capture(plan: Relation, *, tables: Collection[str]) -> CapturePlan:
    """The capture plan for the sketched ``tables``: every positive scan of them is annotated."""
    wanted = {t.lower() for t in tables}
    sketched = [s for s in positive_scans(plan) if s.table in wanted]
    instrumenter = _Instrumenter(sketched)
    instrumented, annotations = instrumenter.run(plan)
    if not annotations:
        raise UnsupportedQueryError(
            "a query that reads none of the sketched tables in a positive position",
            ", ".join(sorted(wanted)),
            hint="sketch a table the query reads outside NOT IN / NOT EXISTS",
        )
    final = Aggregate(instrumented, (), tuple((a, _union_call(a, ann)) for a, ann in annotations.items()))
    return CapturePlan(final, {a: ann.table for a, ann in annotations.items()})
