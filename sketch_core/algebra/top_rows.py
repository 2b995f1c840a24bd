"""Top-N per partition: a ranking window under a filter that keeps its first ranks.

``SELECT ... FROM (SELECT ..., ROW_NUMBER() OVER (PARTITION BY g ORDER BY v DESC) AS rn FROM t)
WHERE rn <= 3`` (or QUALIFY) keeps each partition's top rows. A row's rank depends on the rows
ranked before it, and those rank no lower, so the rows ranked at most N decide every rank the
filter keeps: the provenance of a kept row is the rows of its partition ranked at most N, not
the whole partition (a window's general rule, see the capture rewrite's ``window``).

Why that is enough (for any sketch that keeps those rows, on any attribute): on the sketch's
data each kept row has the same rows ranked before it, so the same rank; and a row ranked
above N on the full data has at least N rows ranked before it among those kept (the first N
of its partition, which come before it), so it still ranks above N and stays out. RANK and
DENSE_RANK count the rows (the distinct order keys) before a row, and the same holds. E.g.
partition g = 1 holds v = 9 (fragment 4), 7 (fragment 2), 5 (fragment 4), 3 (fragment 8): with
``rn <= 2`` the kept rows are 9 and 7, each with provenance {2, 4}; on fragments {2, 4} the rows
are 9, 7, 5, and 9 and 7 are still the first two. Other conditions of the same filter (``rn <=
2 AND v > 8``) drop kept rows but not their part in the ranks: all rows ranked at most N stay
in the provenance.

Only one ranking function in the window, and a constant upper bound on it in a filter above
(with only projections between): anything else keeps the general rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from sketch_core.algebra.ir import RANKING_FUNCTIONS, Project, Relation, Select, Window, conjuncts


@dataclass(frozen=True)
class TopRows:
    """The window of a top-N-per-partition filter, its rank column, and N."""

    window: Window
    rank: str
    limit: int


def _upper_bound(conjunct: exp.Expr, rank: str) -> int | None:
    """N when ``conjunct`` keeps ranks at most N (``rank <= N``, ``rank < N + 1``, ``rank = 1``,
    written either way round), else None."""
    if isinstance(conjunct, exp.Paren):
        return _upper_bound(conjunct.this, rank)
    flipped: dict[type[exp.Expr], type[exp.Expr]] = {exp.GTE: exp.LTE, exp.GT: exp.LT, exp.EQ: exp.EQ}
    if not isinstance(conjunct, exp.LTE | exp.LT | exp.EQ | exp.GTE | exp.GT):
        return None
    kind: type[exp.Expr] = type(conjunct)
    left, right = conjunct.this, conjunct.expression
    if isinstance(right, exp.Column) and right.name == rank:
        left, right, kind = right, left, flipped.get(kind, kind)
    if not (isinstance(left, exp.Column) and left.name == rank and isinstance(right, exp.Literal)):
        return None
    if right.is_string or not right.name.lstrip("-").isdigit():
        return None
    value = int(right.name)
    if kind is exp.LTE:
        return value
    if kind is exp.LT:
        return value - 1
    return value if kind is exp.EQ and value == 1 else None


def top_rows(node: Relation) -> TopRows | None:
    """``node``'s top-N-per-partition shape, when it is a filter of that shape over a window
    (through projections that pass the rank on, as a derived table's select list does)."""
    if not isinstance(node, Select):
        return None
    below: Relation = node.child
    names: dict[str, str] = {c: c for c in below.columns}  # filter's column -> below's column
    while isinstance(below, Project):
        outputs = dict(below.outputs)
        names = {
            mine: e.name for mine, theirs in names.items() if isinstance(e := outputs.get(theirs), exp.Column)
        }
        below = below.child
    if not isinstance(below, Window):
        return None
    window = below
    if len(window.calls) != 1 or window.frame is not None or not window.order:
        return None
    rank, call = window.calls[0]
    if call.func not in RANKING_FUNCTIONS:
        return None
    mine = [m for m, theirs in names.items() if theirs == rank]
    bounds = [b for c in conjuncts(node.condition) for m in mine if (b := _upper_bound(c, m)) is not None]
    return TopRows(window, rank, min(bounds)) if bounds else None


def top_windows(plan: Relation) -> dict[int, TopRows]:
    """The windows of ``plan`` under a top-N filter, by ``id``."""
    found = (top_rows(node) for node in plan.walk())
    return {id(shape.window): shape for shape in found if shape is not None}
