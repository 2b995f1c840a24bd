"""How many fragments a top-k report's sketch keeps on an attribute, from the plan alone (pure).

A report that keeps its first ``k`` groups keeps the rows of ``k`` groups: on an attribute whose
value the group key fixes (a group column, or a column an equality in a selection or an inner or
semi join's condition ties to one), every row of a group lies in one fragment, so the sketch
keeps at most ``k`` fragments, however the rows lie. A report that keeps its first ``k`` rows
(no aggregation) keeps one row of each table it reads per result row: at most ``k`` fragments
on any attribute. The rows a semi join's right side matches are the provenance too, as many as
match: only the attributes tied to its condition are bounded there.

The bound tells a choice, without a sample, how few fragments a candidate keeps (and so how
few files its sketch reads); the candidates it does not bound are left to the estimates. Ties
at the k-th place can keep a few more groups than ``k``: the bound is an estimate's input, not a
guarantee the capture relies on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlglot import exp

from sketch_core.algebra.ir import (
    Aggregate,
    Join,
    Project,
    Relation,
    Scan,
    Select,
    Sort,
    TopK,
    bare_column,
    conjuncts,
)


@dataclass(frozen=True)
class TopKBound:
    rows: int  # the top-k's reach: its limit plus its offset
    # table -> its columns a sketch on which keeps at most ``rows`` fragments per scan of it
    bounded: dict[str, frozenset[str]]
    scans: dict[str, int]  # table -> the scans of it the plan reads rows through

    def fragments_at_most(self, table: str, attribute: str) -> int | None:
        """The most fragments a sketch of ``table`` on ``attribute`` keeps (None: no bound)."""
        if attribute in self.bounded.get(table, frozenset()):
            return self.rows * self.scans[table]
        return None


class _Classes:
    """Columns known equal on every row that reaches the top-k (union-find over names, which
    are unique in a plan)."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, name: str) -> str:
        root = self.parent.setdefault(name, name)
        if root != name:
            root = self.parent[name] = self.find(root)
        return root

    def union(self, a: str, b: str) -> None:
        self.parent[self.find(a)] = self.find(b)

    def equate(self, condition: exp.Expr | None) -> None:
        for conjunct in conjuncts(condition) if condition is not None else ():
            if isinstance(conjunct, exp.EQ):
                left, right = bare_column(conjunct.this), bare_column(conjunct.expression)
                if left and right:
                    self.union(left, right)


def _renames(classes: _Classes, outputs: Iterable[tuple[str, exp.Expr]]) -> None:
    for name, expression in outputs:
        source = bare_column(expression)
        if source is not None:
            classes.union(name, source)


def top_k_bound(plan: Relation) -> TopKBound | None:
    """The bound of ``plan``'s top-k (see the module docstring); None when the plan is no top-k,
    or reads its rows through an operator the bound does not follow (an outer or scalar join, a
    window, a union, DISTINCT, a nested top-k or aggregation outside a semi join's right side)."""
    node = plan
    while isinstance(node, Project | Sort):
        node = node.child
    if not isinstance(node, TopK):
        return None
    below = node.child
    while isinstance(below, Project | Select):  # a HAVING, or the projection of the groups
        below = below.child
    classes = _Classes()
    fixed: list[str] | None = None  # None: a top-k over rows
    if isinstance(below, Aggregate):
        fixed = [name for name, expression in below.groups if bare_column(expression)]
        _renames(classes, below.groups)
        below = below.child
    reached: list[tuple[Scan, bool]] = []  # each scan, and whether it is a semi join's right side
    if not _collect(below, classes, reached, semi_right=False):
        return None
    over_rows = fixed is None
    if fixed is None:  # each result row has one row of each scan outside a semi join's right side
        fixed = [name for scan, semi_right in reached if not semi_right for name in scan.names]
    roots = {classes.find(name) for name in fixed}
    bounded: dict[str, frozenset[str]] = {}
    counts: dict[str, int] = {}
    for scan, semi_right in reached:
        columns = frozenset(
            source
            for source, name in zip(scan.source_columns, scan.names, strict=True)
            if (over_rows and not semi_right) or classes.find(name) in roots
        )
        bounded[scan.table] = bounded[scan.table] & columns if scan.table in bounded else columns
        counts[scan.table] = counts.get(scan.table, 0) + 1
    return TopKBound(node.reach, bounded, counts)


def _collect(node: Relation, classes: _Classes, reached: list[tuple[Scan, bool]], semi_right: bool) -> bool:
    """Gather ``node``'s scans and equalities; False where an operator is not followed."""
    if isinstance(node, Scan):
        reached.append((node, semi_right))
        return True
    if isinstance(node, Select):
        classes.equate(node.condition)
        return _collect(node.child, classes, reached, semi_right)
    if isinstance(node, Project):
        _renames(classes, node.outputs)
        return _collect(node.child, classes, reached, semi_right)
    if isinstance(node, Aggregate) and semi_right:
        # The rows of a group the semi join matches share its key: only keys are tied.
        _renames(classes, node.groups)
        return _collect(node.child, classes, reached, semi_right)
    if isinstance(node, Join) and node.kind in ("inner", "cross", "semi"):
        classes.equate(node.condition)
        return _collect(node.left, classes, reached, semi_right) and _collect(
            node.right, classes, reached, semi_right or node.kind == "semi"
        )
    if isinstance(node, Join) and node.kind == "anti":  # its right side is never sketched
        return _collect(node.left, classes, reached, semi_right)
    return False
