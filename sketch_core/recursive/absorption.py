"""A recursive view maintained with absorption provenance (Liu et al., Sec. 4.2 and 4.3).

Each row of the view keeps its formula (:mod:`.formulas`); so do the seeds and the edges
(:mod:`.rule`), from the base tuples they were made of.

* Insert: new seeds and edges, or new derivations of known ones, are ORed into their formulas;
  what changed travels as the *difference* (``new and not old``, Algorithm 1's deltaPv) through the
  joins, pipelined semi-naive: a row's difference joins the edges, an edge's difference joins
  the rows. A derivation whose formula is absorbed changes nothing and stops there, which is
  also what ends the iteration. Formulas that outgrow ``node_limit`` BDD nodes, or one change
  that takes longer than ``seconds_limit``, end it with
  :class:`.FormulasTooLargeError` (the view is then to be dropped, and maintained otherwise).
* Delete: the deleted base tuples' variables are set to false in every formula that mentions
  them (an index from base tuple to rows finds those); a row whose formula becomes false is
  removed. Nothing is derived again: a delete that leaves every row
  derivable removes none and forms no derivation (:class:`.Work` counts both).

Example (the paper's Figure 2): links p1 = A→B, p2 = B→C, p3 = C→A, p4 = C→B. Reachable
(C, B) gets ``p4 or (p1 and p3)``; deleting p4 leaves ``p1 and p3``: the row stays, and nothing is
re-derived, where DRed would over-delete every row and derive them all again.

With an aggregate selection (:mod:`.selection`, in ``rule.selection``), only each group's best
row is derived from: a row that does not beat its group's best is kept with its formula but
*held*. A delete that takes a group's best away elects the best of the rows left and derives
from it with its whole formula (Algorithm 4's release of the next best), so the view's best
rows are again those of the fixpoint. Every best row has been joined, with its whole formula,
with every edge it matches: that (with the principle of optimality) is what makes each group's
best the best of a full evaluation.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Hashable, Iterable

from sketch_core.recursive.formulas import Formula, Formulas
from sketch_core.recursive.rule import (
    DEFAULT_NODE_LIMIT,
    DEFAULT_SECONDS_LIMIT,
    Change,
    Derived,
    FormulasTooLargeError,
    Key,
    LinearRule,
    RecursionLimitError,
    Row,
)
from sketch_core.recursive.selection import AggregateSelection, CostOrder

_SEEDS, _EDGES, _ROWS = 0, 1, 2  # the stores a base tuple's variable may appear in


class AbsorptionView:
    """The view of ``rule`` over its seeds and edges, with a formula per row."""

    def __init__(
        self,
        rule: LinearRule,
        formulas: Formulas | None = None,
        node_limit: int = DEFAULT_NODE_LIMIT,
        seconds_limit: float | None = DEFAULT_SECONDS_LIMIT,
    ) -> None:
        self.rule = rule
        self.node_limit = node_limit
        self.seconds_limit = seconds_limit
        self._deadline = math.inf
        self._derived = 0  # derivations formed over the view's life
        self._next_count = 256  # ... when the node count is checked next
        self.formulas = formulas or Formulas(reordering=rule.selection is None)
        self.rows: dict[Row, Formula] = {}
        self.seeds: dict[Row, Formula] = {}
        self.edges: dict[Row, Formula] = {}
        self._rows_by_key: dict[Key, set[Row]] = {}
        self._edges_by_key: dict[Key, set[Row]] = {}
        # Base tuple -> the (store, row) whose formula may mention it, so a delete restricts
        # only those (entries go stale when absorption drops a variable; a delete skips them).
        self._mentions: dict[Hashable, set[tuple[int, Row]]] = {}
        # With an aggregate selection: per group, its rows, and the best one.
        self._groups: dict[Key, set[Row]] = {}
        self._best: dict[Key, Row] = {}

    def insert(self, seeds: Iterable[Derived] = (), edges: Iterable[Derived] = ()) -> Change:
        """Add derivations of seeds and edges, and propagate them to the fixpoint."""
        change = Change()
        self._deadline = time.monotonic() + self.seconds_limit if self.seconds_limit else math.inf
        queue: deque[tuple[Row, Formula]] = deque()
        false = self.formulas.false
        grown: list[tuple[Row, Formula]] = []
        for edge, keys in edges:
            old = self.edges.get(edge, false)
            new = old | self.formulas.conjunction(keys)
            if new != old:
                self.edges[edge] = new
                self._mention(keys, _EDGES, edge)
                self._edges_by_key.setdefault(self.rule.other_key(edge), set()).add(edge)
                grown.append((edge, self.formulas.difference(new, old)))
        # An edge's new derivations meet every row it joins, with the row's whole formula.
        self._derive(
            [
                (row, self.rows[row], edge, difference)
                for edge, difference in grown
                for row in self._rows_by_key.get(self.rule.other_key(edge), ())
                if self._derives(row)
            ],
            queue,
            change,
        )
        for seed, keys in seeds:
            formula = self.formulas.conjunction(keys)
            self.seeds[seed] = self.seeds.get(seed, false) | formula
            self._mention(keys, _SEEDS, seed)
            self._add(seed, formula, queue, change)
        self._propagate(queue, change)
        return change

    def _propagate(self, queue: deque[tuple[Row, Formula]], change: Change) -> None:
        """A row's new derivations meet every edge it joins, with the edge's whole formula:
        round by round (semi-naive), each round's differences in one batch; under an
        aggregate selection, best costs first (:class:`.selection.CostOrder`)."""
        order = CostOrder(self.rule.selection) if self.rule.selection is not None else None
        while queue or order:
            if order is None:
                waiting = list(queue)
            else:
                for row, difference in queue:
                    order.push(row, difference)
                waiting = order.pop_batch()
            queue.clear()
            batch = [(row, difference) for row, difference in waiting if self._derives(row)]
            self._derive(
                [
                    (row, difference, edge, self.edges[edge])
                    for row, difference in batch
                    for edge in self._edges_by_key.get(self.rule.own_key(row), ())
                ],
                queue,
                change,
            )

    def _derives(self, row: Row) -> bool:
        """Whether ``row`` is derived from: always, except under an aggregate selection,
        where only its group's best row is."""
        selection = self.rule.selection
        return selection is None or self._best.get(selection.group(row)) == row

    def delete(self, keys: Iterable[Hashable]) -> Change:
        """Remove the base tuples ``keys``: every formula loses their variables, and rows whose
        formula becomes false leave the view (seeds and edges likewise)."""
        keys = list(keys)
        change = Change()
        stores = {_SEEDS: self.seeds, _EDGES: self.edges, _ROWS: self.rows}
        indexes = {
            _EDGES: (self._edges_by_key, self.rule.other_key),
            _ROWS: (self._rows_by_key, self.rule.own_key),
        }
        touched: set[tuple[int, Row]] = set()
        orphaned: set[Key] = set()  # groups whose best row left
        for key in keys:
            touched |= self._mentions.pop(key, set())
        for which, row in touched:
            store = stores[which]
            formula = store.get(row)
            if formula is None:
                continue  # gone already
            restricted = self.formulas.without(formula, keys)
            if restricted == formula:
                continue
            if which == _ROWS:
                change.work.changed += 1
            if restricted != self.formulas.false:
                store[row] = restricted
                continue
            del store[row]
            if which in indexes:
                index, key_of = indexes[which]
                index[key_of(row)].discard(row)
            if which == _ROWS:
                change.removed.add(row)
                change.work.removed += 1
                orphaned |= self._leave(row)
        if orphaned:
            self._release(orphaned, change)
        return change

    def _leave(self, row: Row) -> set[Key]:
        """Take a removed row out of its group; the group, if the row was its best."""
        selection = self.rule.selection
        if selection is None:
            return set()
        group = selection.group(row)
        self._groups[group].discard(row)
        return {group} if self._best.get(group) == row else set()

    def _release(self, groups: set[Key], change: Change) -> None:
        """Elect the best row left in each of ``groups`` and derive from it (its whole formula:
        it was held, so its derivations may never have been formed), to the fixpoint. Rows a
        delete removed and this derives again are neither removed nor added."""
        self._deadline = time.monotonic() + self.seconds_limit if self.seconds_limit else math.inf
        queue: deque[tuple[Row, Formula]] = deque()
        for group in groups:
            if not self._groups.get(group):
                self._groups.pop(group, None)
                self._best.pop(group, None)
                continue
            best = self._selection().best(self._groups[group])
            self._best[group] = best
            queue.append((best, self.rows[best]))
        self._propagate(queue, change)
        back = change.added & change.removed
        change.added -= back
        change.removed -= back
        change.work.rederived += len(back)
        change.work.removed = len(change.removed)

    def _selection(self) -> AggregateSelection:
        assert self.rule.selection is not None  # called on views with one only
        return self.rule.selection

    def restore(self, rows: dict[Row, Formula], seeds: dict[Row, Formula], edges: dict[Row, Formula]) -> None:
        """Take stored formulas (:mod:`.state`) as the view's, with their indexes rebuilt."""
        self.rows, self.seeds, self.edges = rows, seeds, edges
        for row in rows:
            self._rows_by_key.setdefault(self.rule.own_key(row), set()).add(row)
        for edge in edges:
            self._edges_by_key.setdefault(self.rule.other_key(edge), set()).add(edge)
        if (selection := self.rule.selection) is not None:
            for row in rows:
                self._groups.setdefault(selection.group(row), set()).add(row)
            self._best = {group: selection.best(members) for group, members in self._groups.items()}
        for which, store in ((_SEEDS, seeds), (_EDGES, edges), (_ROWS, rows)):
            for row, formula in store.items():
                self._mention(self.formulas.keys(formula), which, row)

    def best_rows(self) -> list[Row]:
        """The rows an outer query reads: each group's best under an aggregate selection,
        else every row."""
        return list(self._best.values()) if self.rule.selection is not None else list(self.rows)

    def support(self) -> set[Hashable]:
        """The base tuples some row of the view can be derived from (its minimal derivations)."""
        out: set[Hashable] = set()
        for formula in self.rows.values():
            out |= self.formulas.keys(formula)
        return out

    def state_size(self) -> int:
        """Nodes in every row's formula, counted per row (shared nodes counted each time)."""
        return sum(self.formulas.size(f) for f in self.rows.values())

    def _derive(
        self,
        pairs: list[tuple[Row, Formula, Row, Formula]],
        queue: deque[tuple[Row, Formula]],
        change: Change,
    ) -> None:
        """Derive from each (row, its formula, edge, its formula) and add what comes out."""
        change.work.derivations += len(pairs)
        if change.work.derivations > self.rule.limit:
            raise RecursionLimitError(self.rule.limit)
        outs = self.rule.derive([(row, edge) for row, _, edge, _ in pairs])
        for i, ((_, formula, _, edge_formula), out) in enumerate(zip(pairs, outs, strict=True)):
            if out is not None:
                self._add(out, formula & edge_formula, queue, change)
            if i % 16 == 15:  # one operation on large formulas can take milliseconds
                if time.monotonic() > self._deadline:
                    raise FormulasTooLargeError(self.node_limit, self.seconds_limit)
                self._derived += 16
                if self._derived >= self._next_count:
                    self._check_nodes()
        self._derived += len(pairs) % 16

    def _check_nodes(self) -> None:
        """End with :class:`FormulasTooLargeError` past the node limit. Counting CUDD's live
        nodes visits every node (tens of milliseconds in a large view), so it is done after
        256 derivations, then after twice as many, and so on up to every million: rarely
        enough to cost nothing, often enough to stop a view that explodes early."""
        self._next_count = self._derived + min(max(self._derived, 256), 1_000_000)
        if self.formulas.nodes() > self.node_limit:
            raise FormulasTooLargeError(self.node_limit)

    def _add(self, row: Row, formula: Formula, queue: deque[tuple[Row, Formula]], change: Change) -> None:
        old = self.rows.get(row, self.formulas.false)
        new = old | formula
        if new == old:
            return  # absorbed: no new derivation
        selection = self.rule.selection
        if old == self.formulas.false:
            self._rows_by_key.setdefault(self.rule.own_key(row), set()).add(row)
            change.added.add(row)
            if selection is not None:
                self._groups.setdefault(selection.group(row), set()).add(row)
        else:
            change.work.changed += 1
        self.rows[row] = new
        difference = self.formulas.difference(new, old)
        self._mention(self.formulas.keys(difference), _ROWS, row)
        if selection is None:
            queue.append((row, difference))
            return
        group = selection.group(row)
        best = self._best.get(group)
        if best == row:
            queue.append((row, difference))
        elif best is None or selection.better(row, best):
            self._best[group] = row  # held until now (or new): derived from whole
            queue.append((row, new))

    def _mention(self, keys: Iterable[Hashable], store: int, row: Row) -> None:
        for key in keys:
            self._mentions.setdefault(key, set()).add((store, row))
