"""An aggregation of DISTINCT values as an aggregation over distinct rows, for maintenance.

``SELECT g, COUNT(DISTINCT x) FROM R GROUP BY g`` counts the rows of
``SELECT DISTINCT g, x FROM R`` per g, less the one whose x is NULL (COUNT skips it, as COUNT
(DISTINCT x) does); SUM and AVG of DISTINCT values likewise. The incremental engine maintains
DISTINCT (a count per row) and plain aggregations, so this form is maintained without a new
operator. The provenance is the same: a group's result depends on every row of the group in
both (the rows of each distinct (g, x), then all of g's distinct rows), e.g. g = 1 with rows
x = 5 (fragment 2), x = 5 (fragment 7) and x = NULL (fragment 4) gives COUNT 1 and {2, 4, 7}.

Only aggregations whose calls all take DISTINCT over the same argument have this form; others
(``SUM(v), COUNT(DISTINCT x)``) are refused by name.
"""

from __future__ import annotations

from dataclasses import replace

from sketch_core.algebra.ir import Aggregate, Distinct, Project, column
from sketch_core.errors import UnsupportedQueryError

DISTINCT_VALUE = "__distinct_value"


def distinct_rows_first(node: Aggregate) -> Aggregate:
    """``node`` itself when no call takes DISTINCT, else its form over distinct rows."""
    calls = [call for _, call in node.aggregates]
    if not any(call.distinct for call in calls):
        return node
    arguments = {call.arg.sql() if call.arg is not None else "*" for call in calls}
    if (
        not all(call.distinct and call.func in ("count", "sum", "avg") for call in calls)
        or len(arguments) != 1
    ):
        raise UnsupportedQueryError(
            "a DISTINCT aggregate beside other aggregates in incremental maintenance (not yet)",
            ", ".join(f"{call.func}({'DISTINCT ' if call.distinct else ''}...)" for call in calls),
            hint="maintain this sketch with strategy='full'",
        )
    argument = calls[0].arg
    assert argument is not None  # COUNT(DISTINCT *) does not parse
    rows = Distinct(Project(node.child, (*node.groups, (DISTINCT_VALUE, argument))))
    plain = tuple(
        (name, replace(call, arg=column(DISTINCT_VALUE), distinct=False)) for name, call in node.aggregates
    )
    return Aggregate(rows, tuple((name, column(name)) for name, _ in node.groups), plain)
