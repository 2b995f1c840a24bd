"""Aggregate selection (Liu et al., Sec. 6; Sudarshan and Ramakrishnan's aggregate selections):
a recursion whose outer query reads one of its columns only through MIN (or only through MAX)
need not follow a derivation that cannot beat its group's best.

Recognised shape (anything else is evaluated without it, as before):

* The outer query reads the CTE once, ``FROM cte [WHERE ...]`` without joins or subqueries,
  and one CTE column, the *cost*, only as ``MIN(cost)`` (or only as ``MAX(cost)``); its other
  aggregates are MIN, MAX or COUNT(DISTINCT ...). Every other CTE column is a *group* column.
  The query then reads, per group, only the best cost: the row with it is the group's *best*.
* The recursive member derives the cost as ``r.cost + e`` (or ``e + r.cost``), where ``e``
  reads only the other table and constants; the group columns do not read ``r.cost``; and a
  condition on ``r.cost`` is an upper bound for MIN (``r.cost < x``, ``r.cost <= x``) or a
  lower bound for MAX.

Why pruning is then exact (the principle of optimality): a derived row's group depends on its
parent's group and the edge only, and its cost is nondecreasing in the parent's cost, so
a better parent of the same group derives a row of the same group that is at least as good,
and passes every condition the worse one passes. Deriving only from each group's best row
therefore reaches every group's best cost. NULL is the worst cost (MIN and MAX skip it, and
``NULL + e`` is NULL), so a group whose rows all have a NULL cost still exists. Negative
terms need no refusal: a recursion that keeps improving around a cycle is stopped by its
depth or derivation limit, as it would be without pruning.

Example: least-cost paths from node 0, ``WITH RECURSIVE p(node, cost) AS (SELECT dst, w FROM
links WHERE src = 0 UNION ALL SELECT l.dst, p.cost + l.w FROM p JOIN links l ON l.src =
p.node) SELECT node, MIN(cost) FROM p GROUP BY node``: the cost is ``cost``, the group
``node``; it ends on graphs with cycles, where the query as written never does.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlglot import exp

from sketch_core.algebra.ir import conjuncts
from sketch_core.recursive.outer import ancestors, outside_definition
from sketch_core.recursive.query import RecursiveQuery

Row = tuple[Any, ...]
Kind = Literal["min", "max"]
_AGGREGATES: dict[type[exp.Expr], Kind] = {exp.Min: "min", exp.Max: "max"}


@dataclass(frozen=True)
class AggregateSelection:
    kind: Kind
    cost: int  # the cost column's position in the CTE
    groups: tuple[int, ...]  # the other columns' positions

    def group(self, row: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(row[i] for i in self.groups)

    def best(self, rows: Iterable[Row]) -> Row:
        """The best of ``rows`` (one group's, not none)."""
        it = iter(rows)
        best = next(it)
        for row in it:
            if self.better(row, best):
                best = row
        return best

    def better(self, row: Sequence[Any], than: Sequence[Any]) -> bool:
        """``row``'s cost strictly better than ``than``'s (NULL is the worst)."""
        a, b = row[self.cost], than[self.cost]
        if a is None:
            return False
        if b is None:
            return True
        return bool(a < b) if self.kind == "min" else bool(a > b)


def find_selection(query: RecursiveQuery, edge_columns: Sequence[str]) -> AggregateSelection | None:
    """The aggregate selection ``query`` allows (see the module docstring), or None.
    ``edge_columns``: the columns of the table its recursive member joins (to tell whose an
    unqualified column is)."""
    found = outer_aggregate(query)
    if found is None:
        return None
    kind, cost_name = found
    cost = query.columns.index(cost_name)
    step = query.step
    own = next((t.alias_or_name for t in step.find_all(exp.Table) if not t.db and t.name == query.name), None)
    if own is None:
        return None

    def is_own(column: exp.Column) -> bool:
        if column.table:
            return column.table == own
        return column.name in query.columns and column.name not in edge_columns

    def reads_cost(node: exp.Expr) -> bool:
        return any(is_own(c) and c.name == cost_name for c in node.find_all(exp.Column))

    def is_cost(node: exp.Expr) -> bool:
        return isinstance(node, exp.Column) and is_own(node) and node.name == cost_name

    for i, expression in enumerate(e.unalias() for e in step.expressions):
        if i != cost:
            if reads_cost(expression):
                return None
            continue
        if not isinstance(expression, exp.Add):
            return None
        left, right = expression.this, expression.expression
        term = right if is_cost(left) else left if is_cost(right) else None
        if term is None or any(is_own(c) for c in term.find_all(exp.Column)):
            return None
    conditions = conjuncts(step.args["where"].this if step.args.get("where") else None)
    for join in step.args.get("joins") or []:
        conditions += conjuncts(join.args.get("on"))
    for condition in conditions:
        if reads_cost(condition) and not _bound(condition, kind, is_cost, is_own):
            return None
    groups = tuple(i for i in range(len(query.columns)) if i != cost)
    return AggregateSelection(kind, cost, groups)


def _bound(
    condition: exp.Expr, kind: Kind, is_cost: Callable[[exp.Expr], bool], is_own: Callable[[exp.Column], bool]
) -> bool:
    """``condition`` keeps a better cost wherever it keeps a worse one: ``cost < x`` or
    ``cost <= x`` for MIN (either way round), ``x`` reading no CTE column."""
    upper: dict[type[exp.Expr], bool] = {exp.LT: True, exp.LTE: True, exp.GT: False, exp.GTE: False}
    if type(condition) not in upper:
        return False
    left, right = condition.this, condition.expression
    if is_cost(left):
        bounded_above, other = upper[type(condition)], right
    elif is_cost(right):
        bounded_above, other = not upper[type(condition)], left
    else:
        return False
    if any(is_own(c) for c in other.find_all(exp.Column)):
        return False
    return bounded_above == (kind == "min")


def outer_aggregate(query: RecursiveQuery) -> tuple[Kind, str] | None:
    """(MIN or MAX, the cost column) when the outer query reads the CTE as the module
    docstring says; else None."""
    reads = [t for t in outside_definition(query) if not t.db and t.name == query.name]
    if len(reads) != 1:
        return None
    select = reads[0].find_ancestor(exp.Select)
    source = select.args.get("from_") if select is not None else None
    if select is None or source is None or source.this is not reads[0] or select.args.get("joins"):
        return None
    with_ = select.args.get("with_")
    inside = [n for n in select.find_all(exp.Select, exp.Window) if n is not select]
    if any(with_ is None or with_ not in ancestors(n) for n in inside):
        return None  # a subquery or a window function beside the CTE's rows
    alias = reads[0].alias_or_name
    outputs = {e.alias for e in select.expressions if e.alias}
    order = select.args.get("order")
    kinds: dict[str, set[Kind | None]] = {}
    for column in select.find_all(exp.Column):
        if with_ is not None and with_ in ancestors(column):
            continue
        if (column.table and column.table != alias) or column.name not in query.columns:
            continue
        if order is not None and column.name in outputs and order in ancestors(column):
            continue  # ORDER BY an output's alias, not the CTE's column
        parent = column.parent
        kind = _AGGREGATES.get(type(parent)) if parent is not None and parent.this is column else None
        kinds.setdefault(column.name, set()).add(kind)
    for aggregate in select.find_all(exp.AggFunc):
        if with_ is not None and with_ in ancestors(aggregate):
            continue
        counts_distinct = isinstance(aggregate, exp.Count) and isinstance(aggregate.this, exp.Distinct)
        if type(aggregate) not in _AGGREGATES and not counts_distinct:
            return None  # COUNT(*), SUM, AVG, ...: they read every row, not each group's best
    costs = [(k.pop(), name) for name, k in kinds.items() if len(k) == 1 and None not in k]
    if len(costs) != 1:
        return None
    kind, name = costs[0]
    assert kind is not None
    return kind, name


class CostOrder:
    """Rows waiting to be derived from, taken best cost first (with non-negative terms each
    group's best is then final when first taken: Dijkstra's order rather than Bellman-Ford's
    rounds, which may improve a group's best once per round). Any order is correct; this one
    does the least work."""

    def __init__(self, selection: AggregateSelection) -> None:
        self.selection = selection
        self._heap: list[tuple[tuple[bool, Any], int, Sequence[Any], Any]] = []
        self._pushed = 0

    def __bool__(self) -> bool:
        return bool(self._heap)

    def push(self, row: Sequence[Any], payload: Any = None) -> None:
        cost = row[self.selection.cost]
        key = (cost is None, 0 if cost is None else cost if self.selection.kind == "min" else -cost)
        heapq.heappush(self._heap, (key, self._pushed, row, payload))
        self._pushed += 1

    def pop_batch(self, least: int = 256) -> list[tuple[Any, Any]]:
        """The waiting rows of the best costs, whole cost levels at a time until there are
        ``least`` (a batch is derived in one go; rows of a few costs more are derived a little
        early, which may cost work but never correctness), with their payloads."""
        out: list[tuple[Any, Any]] = []
        while self._heap and len(out) < least:
            key = self._heap[0][0]
            while self._heap and self._heap[0][0] == key:
                _, _, row, payload = heapq.heappop(self._heap)
                out.append((row, payload))
        return out
