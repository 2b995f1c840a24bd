"""Safety of sketch attributes (PBDS Sec. 6): does running the query on any sketch's data give Q(D)?

The check builds gc(Q, X) bottom-up. Every column ``c`` has a copy ``c@ps`` for its value over
the sketch instance; Psi (relations between the copies) and conds (selection conditions, the
projections' definitions, and min/max statistics from Iceberg) are z3 premises. Rules:

* scan: every column equals its copy; the sketched attribute joins X;
* selection and (semi) join: each conjunct over the sketch instance must imply the conjunct
  over the full data, so no tuple appears only on the sketch;
* aggregation: the group-by expressions must be equal on both sides; an aggregate result is
  equal when each sketched attribute equals a group-by expression, at most the full value
  for count, max, and sum over non-negative input, at least for min and sum over
  non-positive input, and unrelated otherwise (avg). (PBDS also asks for non-negative input
  for max, but the max of part of a group can never exceed the group's max.) An aggregate
  that is NULL on the full data is NULL on any part of the group, which is what
  ``COALESCE(SUM(x), 0)`` (Looker's measures) needs: with x >= 0 it is at most the full value.
* top-k: each ascending key on the sketch must be no smaller than on the full data (no larger
  for descending keys), so rows left out of the top-k on the full data stay out;
* DISTINCT and anti joins need the relevant columns equal; anti joins' right sides are never
  sketched;
* scalar subqueries: their input is never sketched, so their value is the same;
* windows: equal over whole partitions (a sketched attribute equal to a partition key), else
  bounded like aggregates (ranks and counts of part of a partition are at most the full ones);
  under a top-N filter, ranks equal (the sketch holds each partition's first N rows);
* outer joins: the padded sides are never sketched, and the preserved side's columns the
  condition reads must be equal (a row must find the same matches, or none, on both).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import z3
from sqlglot import exp

from sketch_core.algebra.dialect import SPARK
from sketch_core.algebra.ir import (
    RANKING_FUNCTIONS,
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
    conjuncts,
    referenced,
)
from sketch_core.algebra.top_rows import top_rows
from sketch_core.analysis.smt import Term, Translator, proves, sort_for, within_bounds

# table -> column -> (min, max), from Iceberg's per-file statistics
Statistics = Mapping[str, Mapping[str, tuple[Any, Any]]]


class _Unsafe(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class SafetyResult:
    safe: bool
    reason: str | None = None


@dataclass
class _Facts:
    premises: list[Term] = field(default_factory=list)
    sketched: list[str] = field(default_factory=list)  # X: columns holding sketch attributes


def _sql(node: exp.Expr) -> str:
    return node.sql(dialect=SPARK)[:160]


class _Checker:
    def __init__(self, attributes: Mapping[str, str], statistics: Statistics) -> None:
        self.attributes = {t.lower(): a for t, a in attributes.items()}
        self.statistics = statistics
        self.top: set[int] = set()  # id() of the windows under a top-N filter
        self.sorts: dict[str, z3.SortRef] = {}
        self.full_vars: dict[str, Term] = {}
        self.ps_vars: dict[str, Term] = {}
        # Aggregate values' NULL flags on the full data and on the sketch's (see ``aggregate``).
        self.nulls: dict[str, tuple[Term, Term]] = {}
        self.full = Translator(
            self.full_var, lambda n: self.nulls.get(n, (None, None))[0], unknown_nulls=True
        )
        self.ps = Translator(self.ps_var, lambda n: self.nulls.get(n, (None, None))[1], unknown_nulls=True)

    def full_var(self, name: str) -> Term:
        if name not in self.full_vars:
            self.full_vars[name] = z3.Const(name, self.sorts.get(name, z3.RealSort()))
        return self.full_vars[name]

    def ps_var(self, name: str) -> Term:
        if name not in self.ps_vars:
            self.ps_vars[name] = z3.Const(f"{name}@ps", self.sorts.get(name, z3.RealSort()))
        return self.ps_vars[name]

    def equal(self, facts: _Facts, name: str) -> bool:
        return proves(facts.premises, self.ps_var(name) == self.full_var(name))

    def all_equal(self, facts: _Facts, names: Iterable[str]) -> bool:
        return all(self.equal(facts, n) for n in names)

    def define(self, facts: _Facts, name: str, expression: exp.Expr) -> None:
        """Add ``name = expression`` on both sides (a projection or a group-by expression)."""
        if isinstance(expression, exp.Column) and expression.name == name:
            return
        if isinstance(expression, exp.Column) and expression.name in self.nulls:
            self.nulls[name] = self.nulls[expression.name]
        full, ps = self.full(expression), self.ps(expression)
        if full is not None and ps is not None:
            self.sorts.setdefault(name, full.sort())
            facts.premises += [self.full_var(name) == full, self.ps_var(name) == ps]
            if expression.find(exp.Coalesce) is None:
                return
        # Equal columns give equal values (a COALESCE's terms hold an unknown choice each side).
        if self.all_equal(facts, referenced(expression)):
            facts.premises.append(self.ps_var(name) == self.full_var(name))

    def implied(self, facts: _Facts, condition: exp.Expr, what: str) -> None:
        """Each conjunct over the sketch instance must imply it over the full data."""
        ps_terms = [self.ps(c) for c in conjuncts(condition)]
        for conjunct in conjuncts(condition):
            full = self.full(conjunct)
            if full is not None and proves([*facts.premises, *ps_terms], full):
                continue
            if self.all_equal(facts, referenced(conjunct)):
                continue
            raise _Unsafe(f"{what} {_sql(conjunct)!r} may hold on the sketch's data and not on the full data")
        facts.premises += [t for t in ps_terms if t is not None]
        facts.premises += [t for t in (self.full(c) for c in conjuncts(condition)) if t is not None]

    # -- rules ------------------------------------------------------------------------------
    def visit(self, node: Relation, sketching: bool = True) -> _Facts:
        if isinstance(node, Scan):
            return self.scan(node, sketching)
        if isinstance(node, Select):
            if (shape := top_rows(node)) is not None:  # (the window below is visited next)
                self.top.add(id(shape.window))
            facts = self.visit(node.child, sketching)
            self.implied(facts, node.condition, "the condition")
            return facts
        if isinstance(node, Project):
            facts = self.visit(node.child, sketching)
            for name, expression in node.outputs:
                self.define(facts, name, expression)
            return facts
        if isinstance(node, Join):
            return self.join(node, sketching)
        if isinstance(node, Aggregate):
            return self.aggregate(node, sketching)
        if isinstance(node, TopK):
            return self.top_k(node, sketching)
        if isinstance(node, Sort):
            return self.visit(node.child, sketching)
        if isinstance(node, Distinct):
            facts = self.visit(node.child, sketching)
            unequal = [c for c in node.columns if not self.equal(facts, c)]
            if unequal:
                raise _Unsafe(f"DISTINCT over {unequal}, which may differ on the sketch's data")
            return facts
        if isinstance(node, Union):
            return self.union(node, sketching)
        if isinstance(node, Window):
            return self.window(node, sketching, top=id(node) in self.top)
        raise _Unsafe(f"no safety rule for {type(node).__name__}")

    def scan(self, node: Scan, sketching: bool) -> _Facts:
        facts = _Facts()
        stats = self.statistics.get(node.table, {})
        for source, name, kind in zip(
            node.source_columns, node.names, node.types or [None] * len(node.names), strict=True
        ):
            self.sorts[name] = sort_for(kind)
            full, ps = self.full_var(name), self.ps_var(name)
            facts.premises.append(ps == full)
            facts.premises += within_bounds((full, ps), *stats.get(source, (None, None)))
        attribute = self.attributes.get(node.table)
        if sketching and attribute is not None:
            facts.sketched.append(node.name_of(attribute) or f"{node.names[0]}__{attribute}")
        return facts

    def join(self, node: Join, sketching: bool) -> _Facts:
        if node.kind in ("left", "full"):
            return self.outer_join(node, sketching)
        if node.kind == "scalar":  # the value is computed from its whole input (positive_scans)
            left, right = self.visit(node.left, sketching), self.visit(node.right, False)
            return _Facts(left.premises + right.premises, left.sketched + right.sketched)
        left = self.visit(node.left, sketching)
        right = self.visit(node.right, sketching and node.kind != "anti")
        facts = _Facts(left.premises + right.premises, left.sketched + right.sketched)
        if node.condition is None:
            return facts
        if node.kind == "anti":
            unequal = [
                c for c in referenced(node.condition) & set(node.left.columns) if not self.equal(facts, c)
            ]
            if unequal:
                raise _Unsafe(f"the anti join compares {unequal}, which may differ on the sketch's data")
            return facts
        self.implied(facts, node.condition, "the join condition")
        return facts

    def outer_join(self, node: Join, sketching: bool) -> _Facts:
        """A left join's right side and both sides of a full join are read whole (see
        ``positive_scans``). The rows the preserved side brings are its rows on the full data, so
        the output rows are too, provided each of them finds the same matches: the columns the
        condition reads on the preserved side must be equal, or a row could come out padded
        with NULLs on the sketch and matched on the full data."""
        left = self.visit(node.left, sketching and node.kind == "left")
        right = self.visit(node.right, False)
        facts = _Facts(left.premises + right.premises, left.sketched + right.sketched)
        assert node.condition is not None
        unequal = [c for c in referenced(node.condition) & set(node.left.columns) if not self.equal(facts, c)]
        if unequal:
            raise _Unsafe(
                f"the outer join matches on {unequal}, which may differ on the sketch's data "
                "(a row could come out padded with NULLs)"
            )
        return facts

    def aggregate(self, node: Aggregate, sketching: bool) -> _Facts:
        facts = self.visit(node.child, sketching)
        for _, expression in node.groups:
            full, ps = self.full(expression), self.ps(expression)
            same = (
                full is not None and ps is not None and proves(facts.premises, ps == full)
            ) or self.all_equal(facts, referenced(expression))
            if not same:
                raise _Unsafe(f"the group-by expression {_sql(expression)!r} may differ on the sketch's data")
        group_terms = [self.full(e) for _, e in node.groups]
        for name, expression in node.groups:
            self.define(facts, name, expression)
        # case (i): every sketched attribute is equal to a group-by expression, so each group
        # lies inside one fragment and is either wholly in the sketch or not at all.
        whole_groups = self.whole(facts, group_terms)
        outputs: list[Term] = []
        for name, call in node.aggregates:
            if call.func == "opaque":  # nothing is known of its value but this: over the same
                # rows, the same (the front end refuses those Spark computes arbitrarily)
                full, ps = self.value_vars(name, call.func, None)
                if whole_groups:
                    outputs.append(ps == full)
                continue
            argument = self.full(call.arg) if call.arg is not None else None
            full, ps = self.value_vars(name, call.func, argument)
            if call.func != "count":
                # NULL when every value is: on the full data, then on any part of the group too.
                flags = z3.Bool(f"{name}#null"), z3.Bool(f"{name}#null@ps")
                self.nulls[name] = flags
                outputs.append(flags[0] == flags[1] if whole_groups else z3.Implies(*flags))
            if call.func == "sum" and argument is not None and z3.is_arith(argument):
                if proves(facts.premises, argument >= 0):  # a sum has its values' sign
                    outputs += [full >= 0, ps >= 0]
                elif proves(facts.premises, argument <= 0):
                    outputs += [full <= 0, ps <= 0]
            if whole_groups:
                outputs.append(ps == full)
                continue
            bound = self.part_bound(facts, call.func, argument, full, ps)
            if bound is not None:
                outputs.append(bound)
            if call.func == "count":
                outputs += [full >= 0, ps >= 0]
        facts.premises += outputs
        return facts

    def whole(self, facts: _Facts, keys: Sequence[Term | None]) -> bool:
        """Whether every sketched attribute equals one of ``keys`` (group or partition keys):
        each group then lies in one fragment, wholly in the sketch or not at all."""
        return all(
            any(
                k is not None
                and k.sort() == self.full_var(x).sort()
                and proves(facts.premises, self.full_var(x) == k)
                for k in keys
            )
            for x in facts.sketched
        )

    def value_vars(self, name: str, func: str, argument: Term | None) -> tuple[Term, Term]:
        """The full and sketch copies of an aggregate's or window function's value ``name``:
        integers for counts and ranks, reals for averages, else the argument's sort."""
        if func == "count" or func in RANKING_FUNCTIONS:
            self.sorts[name] = z3.IntSort()
        elif func == "avg" or argument is None:
            self.sorts[name] = z3.RealSort()
        else:
            self.sorts[name] = argument.sort()
        return self.full_var(name), self.ps_var(name)

    def part_bound(
        self, facts: _Facts, func: str, argument: Term | None, full: Term, ps: Term
    ) -> Term | None:
        """How ``func`` over part of a group (or partition) compares with it over the whole:
        a count, rank or max (a sum of non-negative values) is at most it, a min (a sum of
        non-positive values) at least; None: unrelated (an average)."""
        if func in ("count", "max", *RANKING_FUNCTIONS):
            return ps <= full
        if func == "min":
            return ps >= full
        if func != "sum" or argument is None or not z3.is_arith(argument):
            return None
        if proves(facts.premises, argument >= 0):
            return ps <= full
        if proves(facts.premises, argument <= 0):
            return ps >= full
        return None

    def window(self, node: Window, sketching: bool, top: bool = False) -> _Facts:
        """A window's value is equal when each sketched attribute is equal to a partition key
        (each partition lies in one fragment: wholly in the sketch or not at all). Otherwise,
        over part of a partition with the same order-key values and SQL's default frame, a rank
        or a count (max, a sum of non-negative values) is at most the full one, a min (a sum of
        non-positive values) at least; other values are unrelated. Rows whose order keys tie
        must not make ROW_NUMBER pick among them (Spark's choice there is arbitrary).

        Under a top-N filter (``top``), the rank of every row the filter keeps is equal on any
        sketch that holds the partition's first N rows, which the capture keeps (see
        :mod:`sketch_core.algebra.top_rows`), and a row it drops stays dropped: the rank is
        taken as equal, given equal partition and order keys."""
        facts = self.visit(node.child, sketching)
        unequal = [c for c in node.partition if not self.equal(facts, c)]
        if unequal:
            raise _Unsafe(f"the window's PARTITION BY {unequal} may differ on the sketch's data")
        whole = self.whole(facts, [self.full_var(c) for c in node.partition])
        comparable = node.frame is None and all(self.equal(facts, k.column) for k in node.order)
        if top and not comparable:
            raise _Unsafe(
                f"the window's ORDER BY {[k.column for k in node.order]} may differ on the sketch's data"
            )
        for name, call in node.calls:
            opaque = call.func == "opaque"  # (nothing is known of it but on whole partitions)
            argument = self.full(call.arg) if call.arg is not None and not opaque else None
            full, ps = self.value_vars(name, call.func, argument)
            if opaque:
                if whole:
                    facts.premises.append(ps == full)
            elif whole or top:
                facts.premises.append(ps == full)
            elif comparable and (bound := self.part_bound(facts, call.func, argument, full, ps)) is not None:
                facts.premises.append(bound)
        return facts

    def top_k(self, node: TopK, sketching: bool) -> _Facts:
        facts = self.visit(node.child, sketching)
        for key in node.order:
            full, ps = self.full_var(key.column), self.ps_var(key.column)
            try:
                goal = full >= ps if key.descending else full <= ps
            except z3.Z3Exception:
                goal = full == ps
            if not proves(facts.premises, goal) and not self.equal(facts, key.column):
                direction = "larger" if key.descending else "smaller"
                raise _Unsafe(
                    f"ORDER BY {key.column}: a group cut short by the sketch may rank {direction} "
                    "than on the full data"
                )
        return facts

    def union(self, node: Union, sketching: bool) -> _Facts:
        parts = [self.visit(i, sketching) for i in node.inputs]
        facts = _Facts([p for f in parts for p in f.premises], [x for f in parts for x in f.sketched])
        for position, name in enumerate(node.names):
            if all(self.equal(f, i.columns[position]) for f, i in zip(parts, node.inputs, strict=True)):
                facts.premises.append(self.ps_var(name) == self.full_var(name))
        return facts


def check_safety(plan: Relation, attributes: Mapping[str, str], statistics: Statistics) -> SafetyResult:
    """Whether sketches on ``attributes`` ({table: attribute}) are safe for ``plan``."""
    try:
        _Checker(attributes, statistics).visit(plan)
    except _Unsafe as unsafe:
        return SafetyResult(False, unsafe.reason)
    return SafetyResult(True)


@dataclass(frozen=True)
class AttributeChoice:
    chosen: dict[str, str]
    refused: dict[str, list[tuple[str, str]]]  # table -> [(attribute, reason)]


def choose_attributes(
    plan: Relation, candidates: Mapping[str, Sequence[str]], statistics: Statistics
) -> AttributeChoice:
    """Per table (in the given order), the first candidate that keeps the whole set safe."""
    chosen: dict[str, str] = {}
    refused: dict[str, list[tuple[str, str]]] = {}
    for table, options in candidates.items():
        for attribute in options:
            result = check_safety(plan, {**chosen, table: attribute}, statistics)
            if result.safe:
                chosen[table] = attribute
                break
            refused.setdefault(table, []).append((attribute, result.reason or "unsafe"))
    return AttributeChoice(chosen, refused)


def _table_columns(plan: Relation, names: Iterable[str]) -> dict[str, list[str]]:
    """Per table, the columns (in first-seen order, once each) behind those of ``names`` that
    are scan outputs (names are unique in a plan)."""
    origin: dict[str, tuple[str, str]] = {}
    for node in plan.walk():
        if isinstance(node, Scan):
            for source, name in zip(node.source_columns, node.names, strict=True):
                origin[name] = (node.table, source)
    found: dict[str, list[str]] = {}
    for name in names:
        if name in origin:
            table, source = origin[name]
            if source not in found.setdefault(table, []):
                found[table].append(source)
    return found


def ordering_attributes(plan: Relation) -> dict[str, list[str]]:
    """Per table, the columns its scans feed directly into the ordering of a top-k over rows
    (no aggregation or window below it): the heuristic's last resort where a table has no sort
    key and no group-by column, as a report's top rows by a column sit at one end of its range."""
    keys = [
        key.column
        for node in plan.walk()
        if isinstance(node, TopK) and not any(isinstance(n, Aggregate | Window) for n in node.child.walk())
        for key in node.order
    ]
    return _table_columns(plan, keys)


def group_by_attributes(plan: Relation) -> dict[str, list[str]]:
    """Per table, the columns its scans feed directly into a GROUP BY (PBDS Sec. 9.2's fallback)
    or a window's PARTITION BY (a window is safe on its partition keys, as an aggregation on its
    groups)."""
    keys: list[str] = []
    for node in plan.walk():
        if isinstance(node, Aggregate):
            keys += [expression.name for _, expression in node.groups if isinstance(expression, exp.Column)]
        elif isinstance(node, Window):
            keys += list(node.partition)
    return _table_columns(plan, keys)
