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

With an aggregate selection (``rule.selection``, :mod:`.selection`) rows are derived from each
group's best row only, as in :mod:`.absorption`; the others are kept, and a delete that takes
a group's best away (over-deleted and not derived again) elects the best row left and derives
from it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator

from sketch_core.recursive.rule import Change, Derived, Key, LinearRule, RecursionLimitError, Row
from sketch_core.recursive.selection import CostOrder


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
        # With an aggregate selection: per group, its rows, and the best one.
        self._groups: dict[Key, set[Row]] = {}
        self._best: dict[Key, Row] = {}

    def insert(self, seeds: Iterable[Derived] = (), edges: Iterable[Derived] = ()) -> Change:
        change = Change()
        new_edges = []
        for edge, keys in edges:
            if edge not in self.edges:
                new_edges.append(edge)
                self._edges_by_key.setdefault(self.rule.other_key(edge), set()).add(edge)
                self._edges_by_copy.setdefault(self._edge_copy(edge), set()).add(edge)
            self.edges.setdefault(edge, set()).add(keys)
        best = [(row, edge) for row, edge in self._with_rows(new_edges) if self._derives(row)]
        frontier = {out for out in self._derived(best, change) if out not in self.rows}
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
        orphaned = {group for row in doomed if (group := self._remove(row)) is not None}
        change.work.overdeleted = len(doomed)
        # 2. Derive again what has a derivation from what is left, and propagate it.
        again = {row for row in doomed if row in self.seeds}
        tried = [(row, pair) for row in doomed - again for pair in self._could_give(row)]
        self._count(change, len(tried))
        outs = self.rule.derive([pair for _, pair in tried])
        again |= {row for (row, _), out in zip(tried, outs, strict=True) if out == row}
        for row in again:
            self._add(row)
        back = self._propagate(again | self._elect(orphaned), change, added=set(again))
        change.work.rederived = len(back & doomed)
        change.removed = doomed - back
        change.added = back - doomed  # under a selection, rows derived from a released best
        change.work.removed = len(change.removed)
        return change

    def _derives(self, row: Row) -> bool:
        """Whether ``row`` is derived from: under an aggregate selection, only its group's best."""
        selection = self.rule.selection
        return selection is None or self._best.get(selection.group(row)) == row

    def _elect(self, groups: set[Key]) -> set[Row]:
        """The best row left in each of ``groups`` (whose best went), made its best: of every
        row of the group, not only of those derived again."""
        selection = self.rule.selection
        elected = set()
        for group in groups:
            if not self._groups.get(group):
                self._best.pop(group, None)
                continue
            assert selection is not None  # groups exist under a selection only
            best = selection.best(self._groups[group])
            self._best[group] = best
            elected.add(best)
        return elected

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

    def _propagate(self, frontier: set[Row], change: Change, added: set[Row] | None = None) -> set[Row]:
        """Add ``frontier`` and everything derivable from it; the rows that were not in the
        view (with ``added``, those of the frontier added already)."""
        added = set(added or ())
        order = CostOrder(self.rule.selection) if self.rule.selection is not None else None
        while frontier or order:
            for row in frontier:
                if row not in self.rows:
                    self._add(row)
                    added.add(row)
            if order is not None:  # best costs first, as in :mod:`.absorption`
                for row in frontier:
                    order.push(row)
                frontier = {row for row, _ in order.pop_batch()}
            best = [row for row in frontier if self._derives(row)]
            frontier = {out for out in self._derived(self._with_edges(best), change) if out not in self.rows}
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
        if (selection := self.rule.selection) is not None:
            group = selection.group(row)
            self._groups.setdefault(group, set()).add(row)
            best = self._best.get(group)
            if best is None or selection.better(row, best):
                self._best[group] = row

    def _remove(self, row: Row) -> Key | None:
        """Take ``row`` out; its group, if it was the group's best."""
        self.rows.discard(row)
        self._rows_by_key[self.rule.own_key(row)].discard(row)
        if self.copied:
            self._rows_by_copy[tuple(row[own] for _, own in self.copied)].discard(row)
        if (selection := self.rule.selection) is None:
            return None
        group = selection.group(row)
        self._groups[group].discard(row)
        if self._best.get(group) != row:
            return None
        del self._best[group]
        return group

    def best_rows(self) -> list[Row]:
        """Each group's best row under an aggregate selection, else every row."""
        return list(self._best.values()) if self.rule.selection is not None else list(self.rows)

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
