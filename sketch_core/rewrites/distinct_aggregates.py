"""An aggregation of DISTINCT values as aggregations over distinct rows, for maintenance.

``SELECT g, COUNT(DISTINCT x) FROM R GROUP BY g`` counts the rows of
``SELECT DISTINCT g, x FROM R`` per g, less the one whose x is NULL (COUNT skips it, as COUNT
(DISTINCT x) does); SUM and AVG of DISTINCT values likewise, and ``COUNT(DISTINCT x, y)``
counts the distinct (x, y) with neither NULL. The incremental engine maintains DISTINCT (a
count per row) and plain aggregations, so this form is maintained without a new operator.
The provenance is the same: a group's result depends on every row of the group in both (the
rows of each distinct (g, x), then all of g's distinct rows), e.g. g = 1 with rows x = 5
(fragment 2), x = 5 (fragment 7) and x = NULL (fragment 4) gives COUNT 1 and {2, 4, 7}.

Calls over different arguments, or DISTINCT calls beside plain ones (``SUM(v), COUNT(DISTINCT
x)``), split the aggregation into one per argument (the plain calls together), each over the
same groups, joined on the groups. NULL is a group like any other, so the join matches it
with ``<=>``; without groups each part has exactly one row, and the join is their product.
Each output row's provenance is then the union over the parts, all rows of its group in each:
the same as the single aggregation's.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from sketch_core.algebra.ir import AggCall, Aggregate, Distinct, Join, Project, Relation, column

DISTINCT_VALUE = "__distinct_value"


def arguments_of(call: AggCall) -> tuple[exp.Expr, ...]:
    """A call's arguments: several for ``COUNT(DISTINCT x, y)`` (kept as a tuple), else one."""
    if call.arg is None:
        return ()
    return tuple(call.arg.expressions) if isinstance(call.arg, exp.Tuple) else (call.arg,)


def counted_value(values: list[exp.Expr]) -> exp.Expr:
    """One expression that is NULL where COUNT of ``values`` skips the row: the value itself,
    or for several (``COUNT(DISTINCT x, y)``) 1 unless any of them is NULL."""
    if len(values) == 1:
        return values[0]
    present = exp.and_(*(exp.Not(this=exp.Is(this=v, expression=exp.Null())) for v in values))
    return exp.Case(ifs=[exp.If(this=present, true=exp.Literal.number(1))])


def distinct_rows_first(node: Aggregate) -> Relation:
    """``node`` itself when no call takes DISTINCT, else its form over distinct rows."""
    calls = [call for _, call in node.aggregates]
    if not any(call.distinct for call in calls):
        return node
    parts: dict[str, list[tuple[str, AggCall]]] = {}
    for name, call in node.aggregates:
        key = f"DISTINCT {call.arg.sql()}" if call.distinct and call.arg is not None else ""
        parts.setdefault(key, []).append((name, call))
    built = [
        _over_distinct_rows(node, named) if key else replace(node, aggregates=tuple(named))
        for key, named in parts.items()
    ]
    if len(built) == 1:
        return built[0]
    return _joined_on_groups(node, built)


def _over_distinct_rows(node: Aggregate, named: list[tuple[str, AggCall]]) -> Aggregate:
    """The calls (all DISTINCT over one argument) as plain calls over the distinct rows of the
    groups and the argument's values."""
    values = arguments_of(named[0][1])
    value_names = [f"{DISTINCT_VALUE}{i}" for i in range(len(values))]
    rows = Distinct(Project(node.child, (*node.groups, *zip(value_names, values, strict=True))))
    argument = counted_value([column(v) for v in value_names])
    plain = tuple((name, replace(call, arg=argument, distinct=False)) for name, call in named)
    return Aggregate(rows, tuple((name, column(name)) for name, _ in node.groups), plain)


def _joined_on_groups(node: Aggregate, parts: list[Aggregate]) -> Relation:
    """The parts (each the groups, then some of ``node``'s aggregates) joined on the groups,
    with ``node``'s columns in its order."""
    groups = [name for name, _ in node.groups]
    joined: Relation = parts[0]
    for i, part in enumerate(parts[1:], start=1):
        renamed = {g: f"__part{i}_{g}" for g in groups}
        right = Project(
            part,
            tuple((renamed.get(c, c), column(c)) for c in part.columns),
        )
        if groups:
            condition = exp.and_(
                *(exp.NullSafeEQ(this=column(g), expression=column(renamed[g])) for g in groups)
            )
            joined = Join(joined, right, "inner", condition)
        else:
            joined = Join(joined, right, "cross")
    return Project(joined, tuple((c, column(c)) for c in node.columns))
