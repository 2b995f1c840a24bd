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
        self.formulas = formulas or Formulas()
        self.rows: dict[Row, Formula] = {}
        self.seeds: dict[Row, Formula] = {}
        self.edges: dict[Row, Formula] = {}
        self._rows_by_key: dict[Key, set[Row]] = {}
        self._edges_by_key: dict[Key, set[Row]] = {}
        # Base tuple -> the (store, row) whose formula may mention it, so a delete restricts
        # only those (entries go stale when absorption drops a variable; a delete skips them).
        self._mentions: dict[Hashable, set[tuple[int, Row]]] = {}

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
            ],
            queue,
            change,
        )
        for seed, keys in seeds:
            formula = self.formulas.conjunction(keys)
            self.seeds[seed] = self.seeds.get(seed, false) | formula
            self._mention(keys, _SEEDS, seed)
            self._add(seed, formula, queue, change)
        # A row's new derivations meet every edge it joins, with the edge's whole formula:
        # round by round (semi-naive), each round's differences in one batch.
        while queue:
            batch = list(queue)
            queue.clear()
            self._derive(
                [
                    (row, difference, edge, self.edges[edge])
                    for row, difference in batch
                    for edge in self._edges_by_key.get(self.rule.own_key(row), ())
                ],
                queue,
                change,
            )
        return change

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
        return change

    def restore(self, rows: dict[Row, Formula], seeds: dict[Row, Formula], edges: dict[Row, Formula]) -> None:
        """Take stored formulas (:mod:`.state`) as the view's, with their indexes rebuilt."""
        self.rows, self.seeds, self.edges = rows, seeds, edges
        for row in rows:
            self._rows_by_key.setdefault(self.rule.own_key(row), set()).add(row)
        for edge in edges:
            self._edges_by_key.setdefault(self.rule.other_key(edge), set()).add(edge)
        for which, store in ((_SEEDS, seeds), (_EDGES, edges), (_ROWS, rows)):
            for row, formula in store.items():
                self._mention(self.formulas.keys(formula), which, row)

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
                if i % 256 == 255 and self.formulas.nodes() > self.node_limit:
                    raise FormulasTooLargeError(self.node_limit)
        if self.formulas.nodes() > self.node_limit:
            raise FormulasTooLargeError(self.node_limit)

    def _add(self, row: Row, formula: Formula, queue: deque[tuple[Row, Formula]], change: Change) -> None:
        old = self.rows.get(row, self.formulas.false)
        new = old | formula
        if new == old:
            return  # absorbed: no new derivation
        if old == self.formulas.false:
            self._rows_by_key.setdefault(self.rule.own_key(row), set()).add(row)
            change.added.add(row)
        else:
            change.work.changed += 1
        self.rows[row] = new
        difference = self.formulas.difference(new, old)
        self._mention(self.formulas.keys(difference), _ROWS, row)
        queue.append((row, difference))

    def _mention(self, keys: Iterable[Hashable], store: int, row: Row) -> None:
        for key in keys:
            self._mentions.setdefault(key, set()).add((store, row))
