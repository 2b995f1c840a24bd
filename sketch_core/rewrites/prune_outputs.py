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
"""

from __future__ import annotations

from sqlglot import exp

from sketch_core.algebra.ir import Project, Relation, Select, Sort, TopK, column, referenced, replace_children

_CHAIN = (Project, Select, TopK, Sort)


def needed_outputs(chain: tuple[Relation, ...]) -> dict[int, tuple[tuple[str, exp.Expr], ...]]:
    """For a chain of projections, selections, sorts and top-k (outermost first), per
    projection (by ``id``) the outputs that a selection or top-k above it reads."""
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
    return kept_outputs


def prune_outputs(plan: Relation) -> Relation:
    """``plan`` with the top chain's projections reduced to the outputs that decide rows (a
    projection that keeps none passes one column of its input through), and its sorts
    dropped."""
    chain: list[Relation] = []
    node = plan
    while isinstance(node, _CHAIN):
        chain.append(node)
        node = node.children[0]
    kept = needed_outputs(tuple(chain))

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
