"""A recursion evaluated from scratch: semi-naive iteration to the fixpoint, set semantics.
The oracle the maintained views are checked against, and the in-process recomputation."""

from __future__ import annotations

from collections.abc import Iterable

from sketch_core.recursive.rule import Key, LinearRule, RecursionLimitError, Row
from sketch_core.recursive.selection import AggregateSelection, CostOrder


def fixpoint(rule: LinearRule, seeds: Iterable[Row], edges: Iterable[Row]) -> set[Row]:
    """Every row derivable from ``seeds`` through ``edges`` (see :mod:`.rule`); under an
    aggregate selection, each group's best row (derived from best rows only: Bellman-Ford)."""
    by_key: dict[Key, list[Row]] = {}
    for edge in set(edges):
        by_key.setdefault(rule.other_key(edge), []).append(edge)
    if rule.selection is not None:
        return _best_rows(rule, rule.selection, seeds, by_key)
    rows = set(seeds)
    frontier = set(rows)
    derivations = 0
    while frontier:
        pairs = [(row, edge) for row in frontier for edge in by_key.get(rule.own_key(row), ())]
        derivations += len(pairs)
        if derivations > rule.limit:
            raise RecursionLimitError(rule.limit)
        found = {out for out in rule.derive(pairs) if out is not None and out not in rows}
        rows |= found
        frontier = found
    return rows


def _best_rows(
    rule: LinearRule, selection: AggregateSelection, seeds: Iterable[Row], by_key: dict[Key, list[Row]]
) -> set[Row]:
    best: dict[Key, Row] = {}

    def improves(row: Row) -> bool:
        group = selection.group(row)
        if group in best and not selection.better(row, best[group]):
            return False
        best[group] = row
        return True

    order = CostOrder(selection)
    for row in {row for row in set(seeds) if improves(row)}:
        order.push(row)
    derivations = 0
    while order:
        pairs = [
            (row, edge)
            for row, _ in order.pop_batch()
            if best[selection.group(row)] == row  # beaten since: not derived from
            for edge in by_key.get(rule.own_key(row), ())
        ]
        derivations += len(pairs)
        if derivations > rule.limit:
            raise RecursionLimitError(rule.limit)
        for out in rule.derive(pairs):
            if out is not None and improves(out):
                order.push(out)
    return set(best.values())
