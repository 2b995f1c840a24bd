"""A linear recursion, as the engines here see it: ``r = seeds UNION derive(r JOIN edges)``.

``seeds`` are the rows of the non-recursive member; ``edges`` are the rows of the other tables
of the recursive member (already joined and filtered, each with the base tuples it was made
of); one application of the recursive member joins an ``r`` row with an edge where the r row's
columns ``own`` equal the edge's columns ``other`` and derives a new r row (or none, where the
member's condition drops it). Example, reachability over ``link(src, dst)``: seeds and edges
are the links, ``own = (1,)`` (r.dst), ``other = (0,)`` (link.src), and ``derive`` gives
``(r[0], e[1])`` for each pair.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sketch_core.errors import QueryError, SketchError

if TYPE_CHECKING:
    from sketch_core.recursive.selection import AggregateSelection

Row = tuple[Any, ...]
Key = tuple[Any, ...]  # a row's join columns
# A row of seeds or edges, and the base tuples one derivation of it was made of.
Derived = tuple[Row, frozenset[Hashable]]

# Derivations one fixpoint may form before it stops (a recursion that grows values, such as a
# cost summed along the paths of a graph with a cycle, never ends by itself).
DEFAULT_DERIVATION_LIMIT = 20_000_000


class RecursionLimitError(QueryError):
    """A recursion formed more derivations than its limit without reaching a fixpoint."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"the recursion formed {limit:,} derivations without reaching a fixpoint",
            hint="bound it (for example WHERE hops < 20 in its recursive member), aggregate it "
            "with MIN or MAX so derivations that cannot win are pruned, or raise the limit",
        )
        self.limit = limit


# One application of the recursive member to a batch of (r row, edge) pairs that join: per
# pair, the derived row or None (engines call it once per semi-naive round, so a member
# compiled to Arrow evaluates whole rounds at once).
Derive = Callable[[Sequence[tuple[Row, Row]]], list[Row | None]]


def row_by_row(derive: Callable[[Row, Row], Row | None]) -> Derive:
    """A :data:`Derive` from a function of one pair."""
    return lambda pairs: [derive(row, edge) for row, edge in pairs]


# BDD nodes the formulas of one view may hold (CUDD's live nodes, about 30 bytes each) before
# absorption provenance gives up on it (formulas of reachability over a well-connected graph
# are network-reliability functions, whose BDDs can grow exponentially).
DEFAULT_NODE_LIMIT = 20_000_000


# Seconds one change (a first load included) may spend on a view's formulas: past it the
# graph is one whose formulas no budget holds (see DEFAULT_NODE_LIMIT), and saying so beats
# computing for hours.
DEFAULT_SECONDS_LIMIT = 600.0


class FormulasTooLargeError(SketchError):
    """The formulas of a recursive view outgrew their node limit, or took longer than their
    time limit (``seconds``) for one change."""

    def __init__(self, limit: int, seconds: float | None = None) -> None:
        what = (
            f"took more than {seconds:g} s for one change"
            if seconds is not None
            else f"outgrew {limit:,} BDD nodes"
        )
        super().__init__(
            f"the recursive view's provenance formulas {what} (for reachability over a "
            "well-connected graph they grow exponentially with its width)",
            hint="run the query without a sketch; a graph of weakly connected parts (trees, "
            "hierarchies, networks of stubs) is what absorption provenance keeps cheaply",
        )
        self.limit = limit
        self.seconds = seconds


@dataclass(frozen=True)
class LinearRule:
    own: tuple[int, ...]
    other: tuple[int, ...]
    derive: Derive
    limit: int = DEFAULT_DERIVATION_LIMIT
    # Derive only from each group's best row (:mod:`.selection`); None: from every row.
    selection: AggregateSelection | None = None

    def own_key(self, row: Row) -> Key:
        return tuple(row[i] for i in self.own)

    def other_key(self, edge: Row) -> Key:
        return tuple(edge[i] for i in self.other)


@dataclass
class Work:
    """What a maintenance step did, counted: derivations formed by joins, formulas (or rows)
    that changed, rows removed, and (DRed) rows over-deleted and derived again."""

    derivations: int = 0
    changed: int = 0
    removed: int = 0
    overdeleted: int = 0
    rederived: int = 0


@dataclass
class Change:
    """The rows a step added to and removed from the view, and the work it took."""

    added: set[Row] = field(default_factory=set)
    removed: set[Row] = field(default_factory=set)
    work: Work = field(default_factory=Work)
