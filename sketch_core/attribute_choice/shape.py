"""The query shape sample-based estimation handles (pure): an aggregation with GROUP BY, under
any chain of projections, HAVING selections, sorts and top-k (CBS Sec. 6.1's Q-AGH and Q-AJGH
templates, and their top-k forms).

The chain above the aggregation decides which groups the query returns. Given the estimated
aggregates of every group (as an Arrow table of the aggregation's output columns plus
:data:`GROUP`, the group's id), :func:`result_groups` runs that chain in-process and returns the
ids of the groups that come out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sketch_core.algebra.ir import Aggregate, Project, Relation, Select, Sort, TopK
from sketch_core.incremental.expressions import ExpressionTranslator, evaluate, filter_rows
from sketch_core.rewrites.prune_outputs import deciding_columns, needed_outputs, pruned_aggregate

GROUP = "__group"
ESTIMABLE_FUNCTIONS = {"count", "sum", "avg", "min", "max"}


@dataclass(frozen=True)
class AggregationShape:
    aggregate: Aggregate
    above: tuple[Relation, ...]  # the nodes above the aggregation, outermost first


def aggregation_shape(plan: Relation) -> AggregationShape | str:
    """The plan's aggregation and the chain above it; or why the plan has not that shape."""
    above: list[Relation] = []
    node = plan
    while isinstance(node, Project | Select | TopK | Sort):
        above.append(node)
        node = node.child
    if not isinstance(node, Aggregate):
        return f"the query's top is a {type(node).__name__}, not an aggregation"
    if not node.groups:
        return "the aggregation has no GROUP BY: its one group is always in the result"
    # Only the aggregates the chain reads are estimated: a shown STDDEV or COUNT(DISTINCT ...)
    # decides nothing.
    node = pruned_aggregate(node, deciding_columns(tuple(above)))
    for name, call in node.aggregates:
        if call.distinct or call.func not in ESTIMABLE_FUNCTIONS:
            what = f"{call.func}{' DISTINCT' if call.distinct else ''}"
            return f"aggregate {name} ({what}) cannot be scaled from a sample"
    return AggregationShape(node, tuple(above))


def result_groups(shape: AggregationShape, estimates: pa.Table) -> np.ndarray:
    """The :data:`GROUP` ids that the chain above the aggregation returns from ``estimates``.

    Raises :class:`~sketch_core.errors.UnsupportedQueryError` or an Arrow error for a HAVING
    or ORDER BY expression the in-process evaluation cannot compute."""
    table = estimates
    outputs_of = needed_outputs(shape.above)  # shown-only outputs need no estimate
    for node in reversed(shape.above):
        translate = ExpressionTranslator(table.schema)
        if isinstance(node, Project):
            outputs = {name: translate(expression) for name, expression in outputs_of[id(node)]}
            table = evaluate(table, {**outputs, GROUP: pc.field(GROUP)})
        elif isinstance(node, Select):
            table = filter_rows(table, translate(node.condition))
        elif isinstance(node, TopK):
            keys = [
                (
                    k.column,
                    "descending" if k.descending else "ascending",
                    "at_start" if k.effective_nulls_first else "at_end",
                )
                for k in node.order
            ]
            table = _leading_candidates(table, keys[0], node.reach)
            order = pc.sort_indices(table, sort_keys=keys)
            table = table.take(order[: node.reach])
    return np.asarray(table.column(GROUP).to_numpy(zero_copy_only=False), dtype=np.int64)


def _leading_candidates(table: pa.Table, first_key: tuple[str, str, str], reach: int) -> pa.Table:
    """``table`` without the rows that cannot be among its first ``reach`` once sorted (the
    bootstrap sorts every replicate's groups for a top-k: sorting the few that can lead is
    cheaper). A row whose first sort key is worse than that of ``reach`` others comes after
    them whatever its other keys; NULL and NaN keys are kept (their place depends on the
    placement), and the rows keep their order, so a stable sort of what is left returns the
    same first ``reach`` rows."""
    column, direction, _ = first_key
    values = table.column(column)
    if reach <= 0 or table.num_rows <= 4 * reach or not pa.types.is_floating(values.type):
        return table
    numbers = values.to_numpy(zero_copy_only=False).astype(float)  # NULL -> NaN
    ordered = numbers if direction == "descending" else -numbers
    finite = ordered[~np.isnan(ordered)]
    if len(finite) <= reach:
        return table
    # The ``reach``-th largest: rows below it have ``reach`` rows ahead of them.
    bound = np.partition(finite, len(finite) - reach)[len(finite) - reach]
    with np.errstate(invalid="ignore"):
        keep = ~(ordered < bound)
    return table.filter(pa.array(keep))
