"""DRed (Gupta, Mumick and Subrahmanian): the baseline for recursive view maintenance.

The view keeps only its rows (no formulas). Seeds and edges keep their derivations from base
tuples, so a delete knows which of them are gone. A delete then:

1. over-deletes: every row with some derivation that uses a gone seed or edge, and so on
   through the recursive member over the old edges, whether or not it has another derivation;
2. derives again each over-deleted row that has a derivation from the rows and edges left
   (a seed, or one step of the recursive member), and propagates those as inserts.

After one deleted link of a well-connected graph, step 1 removes nearly every row and step 2
derives them all again (the paper's Figure 5), which is what absorption provenance avoids.

``copied`` and ``edge_copied`` (optional) name the derived row's columns copied from the r row
and from the edge, as (derived position, r or edge position): re-derivation then looks up only
the edges and rows that could give each over-deleted row, as a DRed over indexes on those
columns would (for reachability, the links into its destination); without them, it steps
every row left.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator

from sketch_core.recursive.rule import Change, Derived, Key, LinearRule, RecursionLimitError, Row


class DRedView:
    def __init__(
        self,
        rule: LinearRule,
        copied: tuple[tuple[int, int], ...] = (),
        edge_copied: tuple[tuple[int, int], ...] = (),
    ) -> None:
        self.rule = rule
        self.copied = copied
        self.edge_copied = edge_copied
        self._edges_by_copy: dict[Key, set[Row]] = {}
        self.rows: set[Row] = set()
        self.seeds: dict[Row, set[frozenset[Hashable]]] = {}
        self.edges: dict[Row, set[frozenset[Hashable]]] = {}
        self._rows_by_key: dict[Key, set[Row]] = {}
        self._rows_by_copy: dict[Key, set[Row]] = {}
        self._edges_by_key: dict[Key, set[Row]] = {}

    def insert(self, seeds: Iterable[Derived] = (), edges: Iterable[Derived] = ()) -> Change:
        change = Change()
        new_edges = []
        for edge, keys in edges:
            if edge not in self.edges:
                new_edges.append(edge)
                self._edges_by_key.setdefault(self.rule.other_key(edge), set()).add(edge)
                self._edges_by_copy.setdefault(self._edge_copy(edge), set()).add(edge)
            self.edges.setdefault(edge, set()).add(keys)
        frontier = {out for out in self._derived(self._with_rows(new_edges), change) if out not in self.rows}
        for seed, keys in seeds:
            self.seeds.setdefault(seed, set()).add(keys)
            if seed not in self.rows:
                frontier.add(seed)
        change.added |= self._propagate(frontier, change)
        return change

    def delete(self, keys: Iterable[Hashable]) -> Change:
        gone_keys = set(keys)
        change = Change()
        gone_seeds = self._lose(self.seeds, gone_keys)
        gone_edges = self._lose(self.edges, gone_keys)
        # 1. Over-delete, through the old edges (the gone ones still indexed).
        doomed = {s for s in gone_seeds if s in self.rows}
        doomed |= {out for out in self._derived(self._with_rows(gone_edges), change) if out in self.rows}
        frontier = set(doomed)
        while frontier:
            found = {
                out
                for out in self._derived(self._with_edges(frontier), change)
                if out in self.rows and out not in doomed
            }
            doomed |= found
            frontier = found
        for edge in gone_edges:
            self._edges_by_key[self.rule.other_key(edge)].discard(edge)
            self._edges_by_copy[self._edge_copy(edge)].discard(edge)
        for row in doomed:
            self._remove(row)
        change.work.overdeleted = len(doomed)
        # 2. Derive again what has a derivation from what is left, and propagate it.
        again = {row for row in doomed if row in self.seeds}
        tried = [(row, pair) for row in doomed - again for pair in self._could_give(row)]
        self._count(change, len(tried))
        outs = self.rule.derive([pair for _, pair in tried])
        again |= {row for (row, _), out in zip(tried, outs, strict=True) if out == row}
        back = self._propagate(again, change)
        change.work.rederived = len(back)
        change.removed = doomed - back
        change.work.removed = len(change.removed)
        return change

    def _could_give(self, row: Row) -> list[tuple[Row, Row]]:
        """The (row, edge) pairs left that could derive ``row``: through the edges whose
        copied columns it holds, else the rows whose copied columns it holds, else all."""
        if self.edge_copied:
            edges = self._edges_by_copy.get(tuple(row[out] for out, _ in self.edge_copied), ())
            pairs = [(r, e) for e in edges for r in self._rows_by_key.get(self.rule.other_key(e), ())]
            return [(r, e) for r, e in pairs if all(r[own] == row[out] for out, own in self.copied)]
        if not self.copied:
            return list(self._with_edges(self.rows))
        return list(self._with_edges(self._rows_by_copy.get(tuple(row[out] for out, _ in self.copied), ())))

    def _edge_copy(self, edge: Row) -> Key:
        return tuple(edge[e] for _, e in self.edge_copied)

    def _propagate(self, frontier: set[Row], change: Change) -> set[Row]:
        """Add ``frontier`` (rows not in the view) and everything derivable from it."""
        added: set[Row] = set()
        while frontier:
            for row in frontier:
                self._add(row)
            added |= frontier
            frontier = {
                out for out in self._derived(self._with_edges(frontier), change) if out not in self.rows
            }
        return added

    def _with_edges(self, rows: Iterable[Row]) -> Iterator[tuple[Row, Row]]:
        """Each of ``rows`` with each edge it joins."""
        for row in rows:
            for edge in self._edges_by_key.get(self.rule.own_key(row), ()):
                yield row, edge

    def _with_rows(self, edges: Iterable[Row]) -> Iterator[tuple[Row, Row]]:
        """Each row of the view with each of ``edges`` it joins."""
        for edge in edges:
            for row in self._rows_by_key.get(self.rule.other_key(edge), ()):
                yield row, edge

    def _derived(self, pairs: Iterable[tuple[Row, Row]], change: Change) -> Iterator[Row]:
        """The rows the recursive member derives from ``pairs`` (each one counted)."""
        batch = list(pairs)
        self._count(change, len(batch))
        return (out for out in self.rule.derive(batch) if out is not None)

    def _add(self, row: Row) -> None:
        self.rows.add(row)
        self._rows_by_key.setdefault(self.rule.own_key(row), set()).add(row)
        if self.copied:
            self._rows_by_copy.setdefault(tuple(row[own] for _, own in self.copied), set()).add(row)

    def _remove(self, row: Row) -> None:
        self.rows.discard(row)
        self._rows_by_key[self.rule.own_key(row)].discard(row)
        if self.copied:
            self._rows_by_copy[tuple(row[own] for _, own in self.copied)].discard(row)

    def _count(self, change: Change, derivations: int) -> None:
        change.work.derivations += derivations
        if change.work.derivations > self.rule.limit:
            raise RecursionLimitError(self.rule.limit)

    @staticmethod
    def _lose(store: dict[Row, set[frozenset[Hashable]]], gone: set[Hashable]) -> list[Row]:
        """Drop the derivations that use a gone base tuple; the rows left with none."""
        lost = []
        for row, derivations in list(store.items()):
            kept = {d for d in derivations if not d & gone}
            if kept:
                store[row] = kept
            else:
                del store[row]
                lost.append(row)
        return lost
