"""A recursion evaluated from scratch: semi-naive iteration to the fixpoint, set semantics.
The oracle the maintained views are checked against, and the in-process recomputation."""

from __future__ import annotations

from collections.abc import Iterable

from sketch_core.recursive.rule import Key, LinearRule, RecursionLimitError, Row


def fixpoint(rule: LinearRule, seeds: Iterable[Row], edges: Iterable[Row]) -> set[Row]:
    """Every row derivable from ``seeds`` through ``edges`` (see :mod:`.rule`)."""
    by_key: dict[Key, list[Row]] = {}
    for edge in set(edges):
        by_key.setdefault(rule.other_key(edge), []).append(edge)
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
