"""The relational-algebra IR: immutable nodes that check their invariants and derive their schema.

Every column in a plan has a name that is unique in the whole plan (``l_orderkey``,
``n_name_2`` for the second scan of nation), so rewrites and the SMT checks never have to
resolve scopes. Scalar expressions are sqlglot trees whose columns are those unique names,
unqualified. The IR knows nothing about Spark; :mod:`sketch_core.algebra.printer` does.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlglot import exp

from sketch_core.algebra.dialect import SPARK

AggFunc = Literal["count", "sum", "avg", "min", "max", "opaque", "collect_set", "union_sets"]
JoinKind = Literal["inner", "cross", "semi", "anti", "left", "full", "scalar"]

# Aggregates users write; collect_set and union_sets only appear in capture plans. An
# ``opaque`` call is any other aggregate function users write (STDDEV, MAX_BY,
# APPROX_COUNT_DISTINCT, ...): its ``arg`` is the whole call, which Spark evaluates as written.
# Nothing in this project computes its value; see ``frontend``'s ``_opaque_call`` for where it
# may stand.
USER_AGGREGATES: frozenset[str] = frozenset({"count", "sum", "avg", "min", "max", "opaque"})


class PlanError(ValueError):
    """A plan violates an IR invariant: a bug in the front end or a rewrite, not user input."""


# SQL comparisons as Python's operators, which backends' terms (z3, Arrow expressions) overload.
COMPARISON_OPERATORS: dict[type[exp.Expr], Callable[[Any, Any], Any]] = {
    exp.EQ: operator.eq,
    exp.NEQ: operator.ne,
    exp.GT: operator.gt,
    exp.GTE: operator.ge,
    exp.LT: operator.lt,
    exp.LTE: operator.le,
}


def _label(func: str, arg: exp.Expr | None) -> str:
    if func == "opaque" and arg is not None:
        return arg.sql(dialect=SPARK).split("(", 1)[0].lower()
    return func


def column(name: str) -> exp.Column:
    return exp.column(exp.to_identifier(name))


def bare_column(expression: exp.Expr) -> str | None:
    """The name of a plain, unqualified column reference (None for anything else)."""
    return expression.name if isinstance(expression, exp.Column) and not expression.table else None


def referenced(expression: exp.Expr) -> set[str]:
    return {c.name for c in expression.find_all(exp.Column)}


def conjuncts(condition: exp.Expr | None) -> list[exp.Expr]:
    """The conjuncts of an AND tree (parentheses looked through); none for a missing condition."""
    if condition is None:
        return []
    if isinstance(condition, exp.And):
        return conjuncts(condition.this) + conjuncts(condition.expression)
    if isinstance(condition, exp.Paren):
        return conjuncts(condition.this)
    return [condition]


def _check_refs(what: str, expression: exp.Expr, available: tuple[str, ...]) -> None:
    missing = referenced(expression) - set(available)
    if missing:
        raise PlanError(f"{what} references {sorted(missing)}, not among {list(available)}")


def _check_unique(names: tuple[str, ...]) -> None:
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise PlanError(f"column names must be unique, got duplicates {dupes}")


class Relation:
    """Base of all plan nodes."""

    @property
    def columns(self) -> tuple[str, ...]:
        raise NotImplementedError

    @property
    def children(self) -> tuple[Relation, ...]:
        return ()

    def walk(self) -> Iterator[Relation]:
        """Pre-order traversal."""
        yield self
        for child in self.children:
            yield from child.walk()


@dataclass(frozen=True, eq=False)
class Scan(Relation):
    """Read ``columns`` of ``table`` (``ns.table``) under the unique names ``names``."""

    table: str
    alias: str
    source_columns: tuple[str, ...]
    names: tuple[str, ...]
    types: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.source_columns) != len(self.names) or not self.names:
            raise PlanError(f"scan of {self.table} needs one name per column, and at least one")
        if self.types and len(self.types) != len(self.names):
            raise PlanError(f"scan of {self.table} needs one type per column")
        _check_unique(self.names)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.names

    def name_of(self, source_column: str) -> str | None:
        for source, name in zip(self.source_columns, self.names, strict=True):
            if source == source_column:
                return name
        return None

    def type_of(self, name: str) -> str | None:
        if not self.types:
            return None
        return dict(zip(self.names, self.types, strict=True)).get(name)


@dataclass(frozen=True, eq=False)
class Select(Relation):
    child: Relation
    condition: exp.Expr

    def __post_init__(self) -> None:
        _check_refs("selection", self.condition, self.child.columns)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.child.columns

    @property
    def children(self) -> tuple[Relation, ...]:
        return (self.child,)


@dataclass(frozen=True, eq=False)
class Project(Relation):
    child: Relation
    outputs: tuple[tuple[str, exp.Expr], ...]

    def __post_init__(self) -> None:
        if not self.outputs:
            raise PlanError("a projection needs at least one output")
        _check_unique(self.columns)
        for name, expression in self.outputs:
            _check_refs(f"projection of {name}", expression, self.child.columns)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.outputs)

    @property
    def children(self) -> tuple[Relation, ...]:
        return (self.child,)


@dataclass(frozen=True, eq=False)
class Join(Relation):
    """Inner/cross joins output both sides; semi and anti joins output the left side only.
    Left and full outer joins output both sides, a side without a match padded with NULLs
    (RIGHT JOIN is a left join with its inputs swapped). A scalar join is a cross product with
    a right side of exactly one row: the value of an uncorrelated scalar subquery, read whole.

    ``null_aware`` marks an anti join that came from ``NOT IN``: a NULL on either side of its
    single equality makes the row disappear, as in SQL.
    """

    left: Relation
    right: Relation
    kind: JoinKind
    condition: exp.Expr | None = None
    null_aware: bool = False

    def __post_init__(self) -> None:
        both = self.left.columns + self.right.columns
        _check_unique(both)
        if self.kind in ("cross", "scalar") and self.condition is not None:
            raise PlanError(f"a {self.kind} join has no condition")
        if self.kind not in ("cross", "scalar") and self.condition is None:
            raise PlanError(f"a {self.kind} join needs a condition")
        if self.condition is not None:
            _check_refs(f"{self.kind} join condition", self.condition, both)
        if self.null_aware and (self.kind != "anti" or not isinstance(self.condition, exp.EQ)):
            raise PlanError("only an anti join on one equality can be null-aware")

    @property
    def columns(self) -> tuple[str, ...]:
        if self.kind in ("semi", "anti"):
            return self.left.columns
        return self.left.columns + self.right.columns

    @property
    def children(self) -> tuple[Relation, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class AggCall:
    func: AggFunc
    arg: exp.Expr | None = None  # None only for count(*)
    distinct: bool = False

    def __post_init__(self) -> None:
        if self.arg is None and self.func != "count":
            raise PlanError(f"{self.func} needs an argument")

    @property
    def label(self) -> str:
        """The function's name, in lower case: Spark's for an ``opaque`` call (``max_by``)."""
        return _label(self.func, self.arg)


@dataclass(frozen=True, eq=False)
class Aggregate(Relation):
    """GROUP BY ``groups``, computing ``aggregates``; the output is groups then aggregates."""

    child: Relation
    groups: tuple[tuple[str, exp.Expr], ...]
    aggregates: tuple[tuple[str, AggCall], ...]

    def __post_init__(self) -> None:
        if not self.groups and not self.aggregates:
            raise PlanError("an aggregation needs groups or aggregates")
        _check_unique(self.columns)
        for name, expression in self.groups:
            _check_refs(f"group {name}", expression, self.child.columns)
        for name, call in self.aggregates:
            if call.arg is not None:
                _check_refs(f"aggregate {name}", call.arg, self.child.columns)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.groups) + tuple(n for n, _ in self.aggregates)

    @property
    def children(self) -> tuple[Relation, ...]:
        return (self.child,)


@dataclass(frozen=True)
class SortKey:
    column: str
    descending: bool = False
    nulls_first: bool | None = None  # None: the SQL default (first when ascending, in Spark)

    @property
    def effective_nulls_first(self) -> bool:
        return (not self.descending) if self.nulls_first is None else self.nulls_first


def _check_order(order: tuple[SortKey, ...], available: tuple[str, ...]) -> None:
    if not order:
        raise PlanError("ordering needs at least one key")
    missing = [k.column for k in order if k.column not in available]
    if missing:
        raise PlanError(f"ordering references {missing}, not among {list(available)}")


@dataclass(frozen=True, eq=False)
class TopK(Relation):
    """ORDER BY ``order`` LIMIT ``limit`` OFFSET ``offset``."""

    child: Relation
    order: tuple[SortKey, ...]
    limit: int
    offset: int = 0

    def __post_init__(self) -> None:
        _check_order(self.order, self.child.columns)
        if self.limit < 0 or self.offset < 0:
            raise PlanError("a limit or offset cannot be negative")

    @property
    def reach(self) -> int:
        """The first rows of the order the result depends on: those it skips decide where it
        starts, so their provenance is the result's too."""
        return self.limit + self.offset

    @property
    def columns(self) -> tuple[str, ...]:
        return self.child.columns

    @property
    def children(self) -> tuple[Relation, ...]:
        return (self.child,)


@dataclass(frozen=True, eq=False)
class Sort(Relation):
    """ORDER BY without LIMIT: it orders the result and does not change which rows are in it."""

    child: Relation
    order: tuple[SortKey, ...]

    def __post_init__(self) -> None:
        _check_order(self.order, self.child.columns)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.child.columns

    @property
    def children(self) -> tuple[Relation, ...]:
        return (self.child,)


# Window functions users write; collect_set and union_sets only appear in capture plans. An
# ``opaque`` call is any other (LAG, NTILE, FIRST_VALUE, STDDEV, ...): its ``arg`` is the whole
# function, which Spark evaluates as written.
WindowFunc = Literal[
    "row_number",
    "rank",
    "dense_rank",
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "opaque",
    "collect_set",
    "union_sets",
]
RANKING_FUNCTIONS: frozenset[str] = frozenset({"row_number", "rank", "dense_rank"})


@dataclass(frozen=True)
class WindowCall:
    func: WindowFunc
    arg: exp.Expr | None = None  # None for the ranking functions and COUNT(*)

    def __post_init__(self) -> None:
        if self.func in RANKING_FUNCTIONS and self.arg is not None:
            raise PlanError(f"{self.func} takes no argument")
        if self.func not in RANKING_FUNCTIONS and self.func != "count" and self.arg is None:
            raise PlanError(f"{self.func} needs an argument")

    @property
    def label(self) -> str:
        """The function's name, in lower case: Spark's for an ``opaque`` call (``lag``)."""
        return _label(self.func, self.arg)


@dataclass(frozen=True, eq=False)
class Window(Relation):
    """``calls`` over the rows of each partition (the rows equal on ``partition``), ordered by
    ``order``; ``frame`` is the frame clause as written (None: SQL's default). The output is
    the child's columns, then one per call."""

    child: Relation
    partition: tuple[str, ...]
    order: tuple[SortKey, ...]
    calls: tuple[tuple[str, WindowCall], ...]
    frame: str | None = None

    def __post_init__(self) -> None:
        if not self.calls:
            raise PlanError("a window needs at least one function")
        _check_unique(self.columns)
        missing = [c for c in self.partition if c not in self.child.columns]
        if missing:
            raise PlanError(f"window partition references {missing}, not among {list(self.child.columns)}")
        if self.order:
            _check_order(self.order, self.child.columns)
        for name, call in self.calls:
            if call.arg is not None:
                _check_refs(f"window function {name}", call.arg, self.child.columns)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.child.columns + tuple(n for n, _ in self.calls)

    @property
    def children(self) -> tuple[Relation, ...]:
        return (self.child,)


@dataclass(frozen=True, eq=False)
class Union(Relation):
    """UNION ALL of inputs with the same arity, matched by position, output as ``names``."""

    inputs: tuple[Relation, ...]
    names: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if len(self.inputs) < 2:
            raise PlanError("a union needs two inputs or more")
        arity = {len(i.columns) for i in self.inputs}
        if len(arity) != 1 or arity != {len(self.names)}:
            raise PlanError(f"union inputs and names differ in arity: {sorted(arity)} vs {len(self.names)}")
        _check_unique(self.names)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.names

    @property
    def children(self) -> tuple[Relation, ...]:
        return self.inputs


@dataclass(frozen=True, eq=False)
class Distinct(Relation):
    child: Relation

    @property
    def columns(self) -> tuple[str, ...]:
        return self.child.columns

    @property
    def children(self) -> tuple[Relation, ...]:
        return (self.child,)


def scans(plan: Relation) -> list[Scan]:
    return [node for node in plan.walk() if isinstance(node, Scan)]


def positive_scans(plan: Relation) -> list[Scan]:
    """Scans whose rows can only add to the result: all but those under an anti join's right
    side or an outer join's NULL-padded side.

    Restricting the right input of an anti join to a sketch would let more rows through, so
    those scans are never sketched and always read in full. The same holds for the side an
    outer join pads: a left row whose matches were left out of the sketch comes out padded
    with NULLs, a row the full data never had (``WHERE o.id IS NULL`` above it keeps exactly
    such rows). A left join's left side is positive: each of its rows gives the same output
    rows whatever other left rows there are. A full join pads both sides, so neither is. A
    scalar subquery's input is read whole too: its value depends on all of it, and a sketch
    could leave out rows of it that no result row shows (``x > (SELECT AVG(y) FROM t)``).
    """
    found: list[Scan] = []

    def visit(node: Relation) -> None:
        if isinstance(node, Scan):
            found.append(node)
        elif isinstance(node, Join) and node.kind in ("anti", "left", "scalar"):
            visit(node.left)
        elif isinstance(node, Join) and node.kind == "full":
            return
        else:
            for child in node.children:
                visit(child)

    visit(plan)
    return found


def scans_below_joins(plan: Relation) -> list[Scan]:
    """Scans with a join (of any kind) among their ancestors: rows dropped there shrink the join."""
    found: list[Scan] = []

    def visit(node: Relation, below_join: bool) -> None:
        if isinstance(node, Scan):
            if below_join:
                found.append(node)
            return
        for child in node.children:
            visit(child, below_join or isinstance(node, Join))

    visit(plan, False)
    return found


def replace_children(node: Relation, children: tuple[Relation, ...]) -> Relation:
    """A copy of ``node`` over new children (same arity, same column names expected)."""
    if isinstance(node, Scan):
        return node
    if isinstance(node, Select):
        return Select(children[0], node.condition)
    if isinstance(node, Project):
        return Project(children[0], node.outputs)
    if isinstance(node, Join):
        return Join(children[0], children[1], node.kind, node.condition, node.null_aware)
    if isinstance(node, Aggregate):
        return Aggregate(children[0], node.groups, node.aggregates)
    if isinstance(node, TopK):
        return TopK(children[0], node.order, node.limit, node.offset)
    if isinstance(node, Sort):
        return Sort(children[0], node.order)
    if isinstance(node, Union):
        return Union(children, node.names)
    if isinstance(node, Distinct):
        return Distinct(children[0])
    if isinstance(node, Window):
        return Window(children[0], node.partition, node.order, node.calls, node.frame)
    raise PlanError(f"no rule for {type(node).__name__}")
