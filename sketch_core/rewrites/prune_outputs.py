"""Drop the result's shown-only expressions: ``project[round(s, 2) as r, g](...)`` at the top of
a plan whose result nothing filters or orders on ``r`` becomes ``project[g](...)``.

A sketch depends on which rows the query returns, not on the values it shows. Above the
plan's last aggregation, DISTINCT or join, the chain of projections, HAVING selections, sorts
and top-k decides which rows come out only through the columns its selections and top-k keys
read; any other output of those projections is display (a ``ROUND`` or ``CAST`` of an
aggregate, a concatenated label). Evaluators of provenance (the in-process incremental engine,
the sample estimates) then need not compute them, so an expression they cannot evaluate
exactly does not stop them when it is only shown.

Example: ``SELECT g, ROUND(SUM(x), 2) AS r FROM t GROUP BY g HAVING SUM(x) > 10`` keeps the
HAVING's ``SUM(x)`` (an aggregate column, read by the selection) and drops ``r``.

The aggregation right below that chain is pruned the same way: an aggregate that nothing above
reads is only shown, so it is not computed. Its provenance does not change: a group's output
row depends on all the group's rows whatever its aggregates are, except in an aggregation of
only MIN/MAX, whose provenance is the rows holding the extremes (PBDS Sec. 4.2, rule r3), so
such an aggregation is left whole, and a pruned one that would become one keeps a
``COUNT(*)``. TPC-H Q1 (``GROUP BY l_returnflag, l_linestatus`` with eight shown aggregates, no
HAVING) keeps none: its incremental state is a row count per group and fragment, not eight
partial sums of decimals over six million rows.
"""

from __future__ import annotations

from sqlglot import exp

from sketch_core.algebra.ir import (
    AggCall,
    Aggregate,
    Project,
    Relation,
    Select,
    Sort,
    TopK,
    column,
    referenced,
    replace_children,
)

_CHAIN = (Project, Select, TopK, Sort)
_EXTREMES = ("min", "max")


def needed_outputs(chain: tuple[Relation, ...]) -> dict[int, tuple[tuple[str, exp.Expr], ...]]:
    """For a chain of projections, selections, sorts and top-k (outermost first), per
    projection (by ``id``) the outputs that a selection or top-k above it reads."""
    return _needed(chain)[0]


def _needed(chain: tuple[Relation, ...]) -> tuple[dict[int, tuple[tuple[str, exp.Expr], ...]], set[str]]:
    """:func:`needed_outputs`, and the columns of the chain's input that decide rows."""
    needed: set[str] = set()
    kept_outputs: dict[int, tuple[tuple[str, exp.Expr], ...]] = {}
    for node in chain:
        if isinstance(node, Select):
            needed |= referenced(node.condition)
        elif isinstance(node, TopK):
            needed |= {key.column for key in node.order}
        elif isinstance(node, Project):
            kept = tuple((name, e) for name, e in node.outputs if name in needed)
            kept_outputs[id(node)] = kept
            needed = set().union(*(referenced(e) for _, e in kept))
    return kept_outputs, needed


def deciding_columns(chain: tuple[Relation, ...]) -> set[str]:
    """The columns of the chain's input that decide which rows it returns."""
    return _needed(chain)[1]


def pruned_aggregate(node: Aggregate, needed: set[str]) -> Aggregate:
    """``node`` without the aggregates outside ``needed``, its provenance unchanged (see the
    module's docstring)."""
    calls = node.aggregates
    if calls and all(c.func in _EXTREMES for _, c in calls):
        return node
    kept = tuple((name, call) for name, call in calls if name in needed)
    if (kept and all(c.func in _EXTREMES for _, c in kept)) or (not kept and not node.groups):
        name = "__rows"
        while name in node.columns:
            name = f"_{name}"
        kept += ((name, AggCall("count")),)
    if [name for name, _ in kept] == [name for name, _ in calls]:
        return node
    return Aggregate(node.child, node.groups, kept)


def prune_outputs(plan: Relation) -> Relation:
    """``plan`` with the top chain's projections reduced to the outputs that decide rows (a
    projection that keeps none passes one column of its input through), its sorts dropped, and
    the aggregation below it without the aggregates only shown."""
    chain: list[Relation] = []
    node = plan
    while isinstance(node, _CHAIN):
        chain.append(node)
        node = node.children[0]
    kept, needed = _needed(tuple(chain))
    if isinstance(node, Aggregate):
        node = pruned_aggregate(node, needed)

    def rebuild(index: int) -> Relation:
        if index == len(chain):
            return node
        current, child = chain[index], rebuild(index + 1)
        if isinstance(current, Project):
            outputs = kept[id(current)] or ((child.columns[0], column(child.columns[0])),)
            return Project(child, outputs)
        if isinstance(current, Sort):
            return child  # an order decides no row (and its keys may be pruned)
        return replace_children(current, (child,))

    return rebuild(0)
