"""Capture instrumentation (PBDS Sec. 4, Fig. 3, with the delay method of Sec. 4.3).

Each sketched scan reads an annotated view whose extra column ``__fragment`` holds the row's
fragment id (INIT, binary search on Spark). The id travels as a plain integer through
selections, projections, joins and top-k (rules r1, r2, r4, r5), and becomes a set only where
an aggregation or DISTINCT merges rows (r3, with collect_set instead of bit-or). Outer joins
pass their preserved side's ids on (a padded row's provenance is its preserved row alone). A
window function's row takes the set of its partition's ids. Where the group
key fixes the sketch attribute's value (the attribute, or a column a selection or inner join
equates with it, is a group column), every row of a group has the same fragment and the id stays
an integer (MIN): no arrays to build and merge, the common case for GROUP BY key. For min/max-only
aggregations only the rows holding the extreme value contribute. Semi joins carry the matching
right rows' fragments (grouped by key, or by a row number where the condition relates the sides
beyond equalities); anti joins' right sides are never sketched. The result is one row with
one array of fragment ids per sketched scan (r7).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace

from sqlglot import exp

from sketch_core.algebra.dialect import SPARK
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
    Window,
    WindowCall,
    bare_column,
    column,
    conjuncts,
    positive_scans,
)
from sketch_core.algebra.top_rows import TopRows, top_rows
from sketch_core.errors import UnsupportedQueryError
from sketch_core.rewrites.semi_joins import Keys, key_equality, null_safe_semi_join, split_semi_condition

FRAGMENT_COLUMN = "__fragment"


@dataclass(frozen=True)
class Annotation:
    table: str
    is_set: bool  # an array of fragment ids (after an aggregation) or a single id
    # Columns known to hold the row's sketch-attribute value: a group on one of them holds
    # one fragment. Empty once the attribute is projected away or merged.
    keys: frozenset[str] = field(default_factory=frozenset)
    # No column: the row's id is the fragment of its keys' value, computed on the result rows
    # (the scan's annotation is delayed to there, see ``instrument_capture``).
    delayed: bool = False


@dataclass(frozen=True)
class CapturePlan:
    """The query's result rows annotated: column ``name`` of ``rows`` holds the fragment ids of
    ``tables[name]`` (an array where ``name`` is in ``sets``, else one id), except the
    ``delayed`` annotations, whose ids are the fragments of the value in column
    ``delayed[name]`` of ``tables[name]``'s partition. The sketch of a table is the union of its
    annotations over the rows."""

    rows: Relation
    tables: dict[str, str]
    sets: frozenset[str] = frozenset()
    delayed: dict[str, str] = field(default_factory=dict)

    def unions(self) -> tuple[tuple[str, AggCall], ...]:
        """Each annotation's union over the rows (a delayed one is an id per row once computed)."""
        return tuple((n, _union_call(n, n in self.sets)) for n in self.tables)

    def most_rows(self) -> int | None:
        """The most rows ``rows`` can have: a top-k's reach under projections, selections and
        sorts (None: not bounded by the plan)."""
        node = self.rows
        while isinstance(node, Project | Select | Sort):
            node = node.child
        return node.reach if isinstance(node, TopK) else None


Annotations = dict[str, Annotation]


def _columns(annotations: Annotations) -> list[str]:
    """The annotations that are columns (not delayed)."""
    return [n for n, a in annotations.items() if not a.delayed]


def _union_call(name: str, is_set: bool) -> AggCall:
    return AggCall("union_sets" if is_set else "collect_set", column(name))


def _as_sets(annotations: Annotations) -> Annotations:
    return {n: Annotation(a.table, True) for n, a in annotations.items()}


def _equated_columns(condition: exp.Expr | None, types: Mapping[str, str]) -> list[tuple[str, str]]:
    """Pairs of columns ``a = b`` in ``condition``'s conjuncts. Only same-typed pairs: a
    comparison through a widening cast (bigint = double) can equate several distinct values."""
    pairs = []
    for conjunct in conjuncts(condition) if condition is not None else ():
        if isinstance(conjunct, exp.EQ):
            left, right = bare_column(conjunct.this), bare_column(conjunct.expression)
            if left and right and types.get(left) is not None and types.get(left) == types.get(right):
                pairs.append((left, right))
    return pairs


def _with_equalities(annotations: Annotations, pairs: Iterable[tuple[str, str]]) -> Annotations:
    """Each annotation's keys closed under the equalities (rows failing them are gone)."""
    pairs = list(pairs)
    out: Annotations = {}
    for name, annotation in annotations.items():
        keys = set(annotation.keys)
        grown = bool(keys)
        while grown:
            grown = False
            for left, right in pairs:
                if (left in keys) != (right in keys):
                    keys |= {left, right}
                    grown = True
        out[name] = replace(annotation, keys=frozenset(keys))
    return out


def _renamed(annotations: Annotations, outputs: Iterable[tuple[str, exp.Expr]]) -> Annotations:
    """Keys after a projection: the output names of the key columns it passes on."""
    outputs = list(outputs)
    return {
        name: replace(a, keys=frozenset(out for out, e in outputs if bare_column(e) in a.keys))
        for name, a in annotations.items()
    }


def _null_of(annotation: Annotation) -> exp.Expr:
    kind = "array<int>" if annotation.is_set else "int"
    return exp.cast(exp.Null(), exp.DataType.build(kind, dialect=SPARK))


class _Instrumenter:
    def __init__(
        self,
        sketched: Collection[Scan],
        attributes: Mapping[str, str],
        names: Mapping[int, str] | None = None,
        *,
        skip_implied: bool = False,
        delayed: Collection[int] = (),
    ) -> None:
        self.sketched = {id(scan) for scan in sketched}
        # Whether a semi join's right side may go unannotated where the left side's annotation
        # already holds its fragments (see ``implied``): for the capture, which only wants each
        # table's fragments, not for callers that read every scan's annotation column.
        self.skip_implied = skip_implied
        self.delayed = set(delayed)  # ids of the scans whose annotations are delayed
        self.scan_of: dict[str, int] = {}  # annotation name -> id(scan)
        # A delayed annotation reached an operator that needs its column: the delay is off.
        self.lost = False
        self.attributes = attributes
        self.names = names or {}  # id(scan) -> the annotation column's name, where it is given
        self.types: dict[str, str] = {}  # column name -> type, where known (names are unique)
        self.counter = 0
        self.top: dict[int, TopRows] = {}  # id(window) -> its top-N filter, from the filter above

    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"__{base}_{self.counter}"

    def run(self, node: Relation) -> tuple[Relation, Annotations]:
        if isinstance(node, Scan):
            self.types.update(zip(node.names, node.types, strict=False))
            if id(node) not in self.sketched:
                return node, {}
            name = self.names.get(id(node)) or self.fresh("ps")
            self.scan_of[name] = id(node)
            attribute = node.name_of(self.attributes[node.table])
            keys = frozenset({attribute} if attribute else ())
            if id(node) in self.delayed:
                return node, {name: Annotation(node.table, False, keys, delayed=True)}
            types = (*node.types, "int") if node.types else ()
            annotated = Scan(
                node.table, node.alias, (*node.source_columns, FRAGMENT_COLUMN), (*node.names, name), types
            )
            return annotated, {name: Annotation(node.table, False, keys)}
        if isinstance(node, Select):
            if (shape := top_rows(node)) is not None:  # (the window below is reached next)
                self.top[id(shape.window)] = shape
            child, annotations = self.run(node.child)
            pairs = _equated_columns(node.condition, self.types)
            return Select(child, node.condition), _with_equalities(annotations, pairs)
        if isinstance(node, Project):
            child, annotations = self.run(node.child)
            for out, expression in node.outputs:
                source = bare_column(expression)
                if source in self.types:
                    self.types[out] = self.types[source]
            outputs = node.outputs + tuple((a, column(a)) for a in _columns(annotations))
            return Project(child, outputs), _renamed(annotations, node.outputs)
        if isinstance(node, Join):
            return self.join(node)
        if isinstance(node, Aggregate):
            return self.aggregate(node)
        if isinstance(node, Distinct):
            child, annotations = self.run(node.child)
            groups = tuple((c, column(c)) for c in node.child.columns)
            unions, merged = self.merge_groups(groups, annotations)
            if not unions:
                return Distinct(child), merged
            return Aggregate(child, groups, unions), merged
        if isinstance(node, TopK):
            child, annotations = self.run(node.child)
            # The rows an OFFSET skips decide which rows come out: a top-k of them all.
            return TopK(child, node.order, node.reach), annotations
        if isinstance(node, Sort):
            return self.run(node.child)  # ordering does not change which rows are in the result
        if isinstance(node, Union):
            return self.union(node)
        if isinstance(node, Window):
            return self.window(node, self.top.get(id(node)))
        raise UnsupportedQueryError(f"{type(node).__name__} in capture", type(node).__name__)

    def window(self, node: Window, top: TopRows | None = None) -> tuple[Relation, Annotations]:
        """A window function's value depends on its whole partition (its frame is a part of it,
        so the partition is a superset of its provenance): each row takes the fragments of its
        partition's rows. Where a partition key fixes the attribute, the partition lies in one
        fragment and the row's own id is already that. Under a top-N filter (``top``, see
        :mod:`sketch_core.algebra.top_rows`), the fragments of its partition's rows ranked at
        most N."""
        child, annotations = self.run(node.child)
        window: Relation = Window(child, node.partition, node.order, node.calls, node.frame)
        keys = set(node.partition)
        spread = {n: a for n, a in annotations.items() if a.is_set or not a.keys & keys}
        self.lose(spread.values())
        spread = {n: a for n, a in spread.items() if not a.delayed}
        if not spread:
            return window, annotations

        def ranked_first(name: str) -> exp.Expr:  # (collect_set and collect_list skip NULLs)
            if top is None:
                return column(name)
            kept = exp.LTE(this=column(top.rank), expression=exp.Literal.number(top.limit))
            return exp.Case(ifs=[exp.If(this=kept, true=column(name))])

        merged = tuple(
            (self.fresh("part"), WindowCall("union_sets" if a.is_set else "collect_set", ranked_first(n)))
            for n, a in spread.items()
        )
        whole = Window(window, node.partition, (), merged)
        outputs = tuple((c, column(c)) for c in window.columns if c not in spread) + tuple(
            (n, column(m)) for n, (m, _) in zip(spread, merged, strict=True)
        )
        sets = {n: Annotation(a.table, True) for n, a in spread.items()}
        return Project(whole, outputs), {**annotations, **sets}

    def join(self, node: Join) -> tuple[Relation, Annotations]:
        left, left_annotations = self.run(node.left)
        if node.kind == "anti":
            # The right side stays whole: restricting it would let more left rows through.
            return Join(left, node.right, "anti", node.condition, node.null_aware), left_annotations
        right, right_annotations = self.run(node.right)
        if node.kind in ("left", "full", "scalar"):
            # The padded sides and scalar subqueries are never sketched (positive_scans), so only
            # the left side brings annotations; an outer join's equalities fail on padded rows,
            # so no key grows through them.
            return Join(left, right, node.kind, node.condition), {**left_annotations, **right_annotations}
        if node.kind in ("inner", "cross"):
            pairs = _equated_columns(node.condition, self.types)
            joined = _with_equalities({**left_annotations, **right_annotations}, pairs)
            return Join(left, right, node.kind, node.condition), joined
        assert node.condition is not None
        if not _columns(right_annotations):
            self.lose(right_annotations.values())
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
        """L semi-join R as L joined with R grouped by its join keys, so L's rows keep their
        count; or, where the condition relates the sides beyond equalities, by row."""
        assert node.condition is not None
        null_safe = null_safe_semi_join(node)
        keys, left_only, right_only, mixed = split_semi_condition(
            node,
            "capture",
            "sketch only the outer tables, or rewrite the condition as equalities",
            null_safe=null_safe,
            mixed_ok=True,
        )
        if self.skip_implied:
            right_annotations = {
                n: a for n, a in right_annotations.items() if not self.implied(a, keys, left_annotations)
            }
            if not right_annotations:
                return Join(left, node.right, "semi", node.condition), left_annotations
        self.lose(right_annotations.values())
        right_annotations = {n: a for n, a in right_annotations.items() if not a.delayed}
        if right_only:
            right = Select(right, exp.and_(*right_only))
        unions = tuple((a, _union_call(a, ann.is_set)) for a, ann in right_annotations.items())
        if mixed:
            matched = self.matches_by_row(node.condition, left, right, unions)
        else:
            groups = tuple((self.fresh("key"), r) for _, r in keys)
            matches = Aggregate(right, groups, unions)
            condition = exp.and_(
                *(
                    key_equality(lk, column(g), null_safe)
                    for (lk, _), (g, _) in zip(keys, groups, strict=True)
                ),
                *left_only,
            )
            matched = Join(left, matches, "inner", condition)
        outputs = tuple((c, column(c)) for c in left.columns) + tuple(
            (a, column(a)) for a in right_annotations
        )
        return Project(matched, outputs), {**left_annotations, **_as_sets(right_annotations)}

    def implied(self, right: Annotation, keys: Keys, left_annotations: Annotations) -> bool:
        """Whether every right row a left row matches lies in the left row's own fragment of
        the same table, so the right side's fragments add nothing to the left side's: a key
        equality (same types) between a column holding the right row's attribute value and
        one holding a left row's value of the same table's attribute. Equal values fall in
        one fragment of the table's partition (NULLs, for an INTERSECT's ``<=>``, in its NULL
        fragment), and every operator above carries both annotations through the same rows.
        TPC-H Q18: ``o_orderkey IN (SELECT l_orderkey FROM lineitem GROUP BY l_orderkey ...)``
        over orders joined with lineitem on ``o_orderkey = l_orderkey``, lineitem sketched on
        ``l_orderkey``: the subquery's 60M-row scan need not be annotated at all."""
        if right.is_set:
            return False
        for left_key, right_key in keys:
            lk, rk = bare_column(left_key), bare_column(right_key)
            if rk is None or rk not in right.keys or self.types.get(lk or "") != self.types.get(rk):
                continue
            if any(
                a.table == right.table and not a.is_set and lk in a.keys for a in left_annotations.values()
            ):
                return True
        return False

    def lose(self, annotations: Iterable[Annotation]) -> None:
        """Note delayed annotations an operator would merge or drop the keys of."""
        self.lost = self.lost or any(a.delayed for a in annotations)

    def matches_by_row(
        self, condition: exp.Expr, left: Relation, right: Relation, unions: tuple[tuple[str, AggCall], ...]
    ) -> Relation:
        """The rows of ``left`` that match in ``right``, each once with the ``unions`` of its
        matches' fragments, for a condition that relates the sides beyond equalities (TPC-H
        Q21's ``l2.l_orderkey = l1.l_orderkey AND l2.l_suppkey <> l1.l_suppkey``): which right
        rows match depends on the left row, not on its key alone, so R cannot be grouped first.
        Each left row is numbered, joined with every right row it matches, and the pairs are
        grouped back by the row (its number and columns). E.g. l1 row (o=7, s=1) with l2 rows
        (7, 1) in fragment 3 and (7, 2) in 5: only (7, 2) matches, and the row comes out once
        with {5}."""
        row = self.fresh("row")
        number = exp.Anonymous(this="monotonically_increasing_id", expressions=[])
        numbered = Project(left, (*((c, column(c)) for c in left.columns), (row, number)))
        pairs = Join(numbered, right, "inner", condition)
        return Aggregate(pairs, tuple((c, column(c)) for c in numbered.columns), unions)

    def aggregate(self, node: Aggregate) -> tuple[Relation, Annotations]:
        child, annotations = self.run(node.child)
        unions, merged = self.merge_groups(node.groups, annotations)
        if not unions:
            return Aggregate(child, node.groups, node.aggregates), merged
        extremes_only = bool(node.aggregates) and all(c.func in ("min", "max") for _, c in node.aggregates)
        if extremes_only:
            child = self.extreme_rows(node, child)
        return Aggregate(child, node.groups, node.aggregates + unions), merged

    def merge_groups(
        self, groups: tuple[tuple[str, exp.Expr], ...], annotations: Annotations
    ) -> tuple[tuple[tuple[str, AggCall], ...], Annotations]:
        """Each annotation's aggregate over a group, and the annotations after it: a single id
        (MIN) where a group column fixes the attribute, else the set of the group's ids. A
        delayed annotation needs no aggregate while a group column fixes it."""
        calls: list[tuple[str, AggCall]] = []
        merged: Annotations = {}
        for name, annotation in annotations.items():
            fixed = [out for out, e in groups if bare_column(e) in annotation.keys]
            if annotation.delayed:
                if fixed:
                    merged[name] = replace(annotation, keys=frozenset(fixed))
                else:
                    self.lose([annotation])
            elif fixed and not annotation.is_set:
                calls.append((name, AggCall("min", column(name))))
                merged[name] = Annotation(annotation.table, False, frozenset(fixed))
            else:
                calls.append((name, _union_call(name, annotation.is_set)))
                merged[name] = Annotation(annotation.table, True)
        return tuple(calls), merged

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
        for _, found in results:  # keys name columns inside one input: not visible above
            self.lose(found.values())
            merged.update({n: replace(a, keys=frozenset()) for n, a in found.items() if not a.delayed})
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


def instrument_capture(plan: Relation, *, attributes: Mapping[str, str]) -> CapturePlan:
    """The capture plan for the sketched tables (``{table: partition attribute}``): every
    positive scan of them is annotated with its rows' fragment ids.

    A scan whose annotation reaches the result with its keys (a result column holds the row's
    attribute value: GROUP BY the attribute or a column a join equates with it, as in TPC-H
    Q3 and Q18) is not annotated at all: its ids are the fragments of that column's values in
    the result rows, computed on those rows only (the delay of PBDS Sec. 4.3, taken to the
    end). The first pass finds those scans; the second instruments the others."""
    wanted = {t.lower(): a for t, a in attributes.items()}
    sketched = [s for s in positive_scans(plan) if s.table in wanted]
    first = _Instrumenter(sketched, wanted, skip_implied=True)
    instrumented, annotations = first.run(plan)
    if not annotations:
        raise UnsupportedQueryError(
            "a query that reads none of the sketched tables in a positive position",
            ", ".join(sorted(wanted)),
            hint="sketch a table the query reads outside NOT IN / NOT EXISTS",
        )
    keyed = [first.scan_of[n] for n, a in annotations.items() if a.keys & set(instrumented.columns)]
    if keyed:
        # The same names in both passes: the second must meet the same annotations.
        names = {scan: name for name, scan in first.scan_of.items()}
        second = _Instrumenter(sketched, wanted, names, skip_implied=True, delayed=keyed)
        rows, delayed = second.run(plan)
        delays_hold = delayed.keys() == annotations.keys() and all(
            a.keys == annotations[n].keys for n, a in delayed.items()
        )
        if not second.lost and delays_hold:  # (always: the passes follow the same keys)
            instrumented, annotations = rows, delayed
    return CapturePlan(
        instrumented,
        {n: a.table for n, a in annotations.items()},
        frozenset(n for n, a in annotations.items() if a.is_set),
        {n: min(a.keys & set(instrumented.columns)) for n, a in annotations.items() if a.delayed},
    )


def instrument_annotations(
    plan: Relation, names: Mapping[int, str], attributes: Mapping[str, str]
) -> Relation:
    """``plan`` with its rows annotated but not merged: for each sketched scan (``names``:
    id(scan) -> column), a column holding the fragment id of the row the output row came from.
    For plans without aggregations, DISTINCT or semi joins, where each annotation is one id;
    this is the input an incremental aggregation's state is computed from on Spark."""
    wanted = {t.lower(): a for t, a in attributes.items()}
    sketched = [s for s in positive_scans(plan) if id(s) in names]
    instrumented, annotations = _Instrumenter(sketched, wanted, names).run(plan)
    merged = [a for a, annotation in annotations.items() if annotation.is_set]
    if merged:
        raise UnsupportedQueryError("an aggregation below the annotated plan", ", ".join(merged))
    return instrumented
