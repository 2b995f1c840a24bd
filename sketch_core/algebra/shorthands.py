"""Spark SQL shorthands written out in the forms the front end reads.

- ``AGG(x) FILTER (WHERE c)`` becomes ``AGG(CASE WHEN c THEN x END)`` and ``COUNT(*) FILTER
  (WHERE c)`` becomes ``COUNT(CASE WHEN c THEN 1 END)``: an aggregate skips NULLs, so it sees
  exactly the rows the filter keeps (and over none of them gives what the filter gives: NULL,
  or 0 for a count). ``COUNT(DISTINCT a, b)`` skips a row where any value is NULL, so each
  value is wrapped.
- ``PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY x) FILTER (WHERE c)`` (and ``PERCENTILE_DISC``,
  ``LISTAGG``) orders ``CASE WHEN c THEN x END`` instead, for the same reason.
- ``GROUP BY ALL`` (Spark 3.4) becomes a GROUP BY of every select-list expression without an
  aggregate, as Spark resolves it.
- ``ORDER BY ALL`` (Spark 4) becomes an ORDER BY of every select-list position in turn, each in
  the direction and NULL order given (without this, the capture asked Spark for a column
  ``ALL``).
- ``COUNT_IF(c)`` becomes ``COUNT(CASE WHEN c THEN 1 END)``: the rows where ``c`` is true, and 0
  over none.
- ``STD(x)``, ``EVERY(c)`` and ``SOME(c)``, Spark's other names of ``STDDEV``, ``BOOL_AND`` and
  ``BOOL_OR``, become those (sqlglot reads them as unknown scalar functions, so a report's
  ``STD(x)`` read as a column outside the GROUP BY).
- ``PERCENT_RANK() OVER (PARTITION BY p ORDER BY o)`` becomes ``(RANK() - 1) / (COUNT(*) - 1)``
  over the same window (the count over the whole partition; 0 in a partition of one row), and
  ``CUME_DIST()`` becomes the count of rows up to the current one's peers (a ``RANGE`` frame)
  over the partition's count, both as doubles: Spark's own definitions, in the window
  functions the front end reads.
- ``LIMIT ALL`` is dropped: it limits nothing.
- ``EXISTS(array, x -> p)``, Spark's higher-order function (true when ``p`` holds for an
  element), becomes a call of a function named ``exists``: sqlglot reads it as an EXISTS
  subquery, which the front end then refused as a subquery it cannot read.
- ``WINDOW w AS (PARTITION BY p ORDER BY o)`` (a named window) is written into each ``OVER w``
  and ``OVER (w frame)`` that names it, and the clause dropped: the same windows, spelled out.
- A parenthesized join first in a FROM, ``FROM (a JOIN b ON p) JOIN c ON q`` (as Access-style
  generators nest joins), becomes ``FROM a JOIN b ON p JOIN c ON q``: joins associate to the
  left, so the parentheses there change nothing.

They are printed by report tools and dbt models; Spark runs them, so a sketch must take them.
"""

from __future__ import annotations

from sqlglot import exp

from sketch_core.algebra.dialect import SPARK
from sketch_core.errors import UnsupportedQueryError


def written_out(tree: exp.Expr) -> exp.Expr:
    """``tree`` without the shorthands above: itself where it has none, else a copy."""
    if not any(
        isinstance(node, exp.Filter | exp.CountIf)
        or _aggregate_alias(node) is not None
        or _distribution_window(node)
        or (isinstance(node, exp.Group) and node.args.get("all"))
        or _orders_by_all(node)
        or _leading_join_group(node) is not None
        or _limits_nothing(node)
        or _higher_order_exists(node)
        or (isinstance(node, exp.Select) and node.args.get("windows"))
        for node in tree.walk()
    ):
        return tree
    tree = tree.copy()
    # Innermost first: a subquery's names are its own (and are gone before its query's turn).
    for select in reversed(list(tree.find_all(exp.Select))):
        if select.args.get("windows"):
            _spell_out_named_windows(select)
    for limit in list(tree.find_all(exp.Limit)):
        if _limits_nothing(limit):
            limit.pop()
    for exists in list(tree.find_all(exp.Exists)):
        if _higher_order_exists(exists):
            exists.replace(exp.Anonymous(this="exists", expressions=[exists.this, exists.expression]))
    for select in list(tree.find_all(exp.Select)):
        _unnest_leading_join_group(select)
    for anonymous in list(tree.find_all(exp.Anonymous)):
        if (kind := _aggregate_alias(anonymous)) is not None:
            anonymous.replace(kind(this=anonymous.expressions[0].copy()))
    for found in list(tree.find_all(exp.Filter)):
        if isinstance(found.this, exp.AggFunc):
            found.replace(_filtered_aggregate(found.this, found.expression.this))
        elif isinstance(found.this, exp.WithinGroup) and isinstance(found.this.expression, exp.Order):
            found.replace(_filtered_within_group(found.this, found.expression.this))
    for count_if in list(tree.find_all(exp.CountIf)):
        kept = exp.Case(ifs=[exp.If(this=count_if.this.copy(), true=exp.Literal.number(1))])
        count_if.replace(exp.Count(this=kept))
    for window in list(tree.find_all(exp.Window)):
        if _distribution_window(window):
            window.replace(_distribution_written_out(window))
    for group in list(tree.find_all(exp.Group)):
        if group.args.get("all"):
            _group_by_all(group)
    for order in list(tree.find_all(exp.Order)):
        if _orders_by_all(order):
            _order_by_all(order)
    return tree


def _spell_out_named_windows(select: exp.Select) -> None:
    """Each window of ``select`` that names one of its WINDOW clause's definitions gets that
    definition's partitioning, ordering and frame where it gives none of its own (SQL lets a
    reference add an ordering or a frame); the clause is dropped."""
    named: dict[str, exp.Window] = {}
    for definition in select.args["windows"]:
        if definition.args.get("alias") is not None:  # ``WINDOW w2 AS (w1 ...)``
            raise UnsupportedQueryError(
                "a named window defined over another one", definition.sql(dialect=SPARK)
            )
        named[definition.name.lower()] = definition
    select.set("windows", None)
    for window in list(select.find_all(exp.Window)):
        reference = window.args.get("alias")
        if reference is None or window.find_ancestor(exp.Select) is not select:
            continue
        definition = named.get(reference.name.lower())
        if definition is None:
            raise UnsupportedQueryError(f"window {reference.name} (not defined)", window.sql(dialect=SPARK))
        spelled = exp.Window(this=window.this.copy(), over=window.args.get("over") or "OVER")
        for part in ("partition_by", "order", "spec"):
            given = window.args.get(part) or definition.args.get(part)
            if given:
                copied = [g.copy() for g in given] if isinstance(given, list) else given.copy()
                spelled.set(part, copied)
        window.replace(spelled)


def _limits_nothing(node: exp.Expr) -> bool:
    """``LIMIT ALL`` (read as a keyword, or by older sqlglot as a column named ``all``)."""
    if not isinstance(node, exp.Limit):
        return False
    count = node.expression
    bare_column = isinstance(count, exp.Column) and not count.table and not count.this.quoted
    return (bare_column or isinstance(count, exp.Var)) and count.name.upper() == "ALL"


def _higher_order_exists(node: exp.Expr) -> bool:
    return isinstance(node, exp.Exists) and isinstance(node.expression, exp.Lambda)


def _join_group(node: exp.Expr) -> tuple[exp.Expr, list[exp.Join]] | None:
    """``(a JOIN b ON ...)``, parentheses nested or not, as its first relation (a table or a
    derived table ``(SELECT ...) AS x``) and its joins in order; None for anything else."""
    if node.args.get("joins") and (isinstance(node, exp.Table) or _derived_table(node)):
        return node, list(node.args["joins"])
    if isinstance(node, exp.Subquery) and {k for k, v in node.args.items() if v} <= {"this", "joins"}:
        inner = _join_group(node.this)
        if inner is not None:
            return inner[0], [*inner[1], *(node.args.get("joins") or [])]
    return None


def _derived_table(node: exp.Expr) -> bool:
    return isinstance(node, exp.Subquery) and node.alias != "" and isinstance(node.this, exp.Query)


def _leading_join_group(node: exp.Expr) -> tuple[exp.Expr, list[exp.Join]] | None:
    if not isinstance(node, exp.Select) or node.args.get("from_") is None:
        return None
    return _join_group(node.args["from_"].this)


def _unnest_leading_join_group(select: exp.Select) -> None:
    group = _leading_join_group(select)
    if group is None:
        return
    first, joins = group
    first = first.copy()
    first.set("joins", None)
    select.args["from_"].set("this", first)
    select.set("joins", [j.copy() for j in joins] + [j for j in select.args.get("joins") or []])


# Spark's other names of aggregate functions sqlglot knows (one argument each).
_ALIASES: dict[str, type[exp.AggFunc]] = {"STD": exp.Stddev, "EVERY": exp.LogicalAnd, "SOME": exp.LogicalOr}


def _aggregate_alias(node: exp.Expr) -> type[exp.AggFunc] | None:
    if isinstance(node, exp.Anonymous) and isinstance(node.this, str) and len(node.expressions) == 1:
        return _ALIASES.get(node.this.upper())
    return None


def _orders_by_all(node: exp.Expr) -> bool:
    """Whether ``node`` is an ``ORDER BY ALL``."""
    if not isinstance(node, exp.Order) or len(node.expressions) != 1:
        return False
    key = node.expressions[0].this
    return isinstance(key, exp.Var) and key.name.upper() == "ALL"


def _order_by_all(order: exp.Order) -> None:
    query = order.parent
    select = query.selects if isinstance(query, exp.Query) else []
    if not select:
        raise UnsupportedQueryError("ORDER BY ALL outside a query", order.sql(dialect=SPARK))
    (all_,) = order.expressions
    order.set(
        "expressions",
        [
            exp.Ordered(
                this=exp.Literal.number(position),
                desc=all_.args.get("desc"),
                nulls_first=all_.args.get("nulls_first"),
            )
            for position in range(1, len(select) + 1)
        ],
    )


def _filtered_aggregate(call: exp.AggFunc, condition: exp.Expr) -> exp.Expr:
    def only_kept(value: exp.Expr) -> exp.Expr:
        return exp.Case(ifs=[exp.If(this=condition.copy(), true=value)])

    call = call.copy()
    argument = call.this
    if isinstance(call, exp.Count) and (argument is None or isinstance(argument, exp.Star)):
        call.set("this", only_kept(exp.Literal.number(1)))
    elif isinstance(argument, exp.Distinct):
        argument.set("expressions", [only_kept(e) for e in argument.expressions])
    elif argument is not None and not any(v for k, v in call.args.items() if k not in ("this", "big_int")):
        call.set("this", only_kept(argument))
    else:  # an aggregate with more arguments than its value (a percentile's share)
        raise UnsupportedQueryError("FILTER on this aggregate", call.sql(dialect=SPARK))
    return call


def _filtered_within_group(call: exp.WithinGroup, condition: exp.Expr) -> exp.Expr:
    """``PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY x) FILTER (WHERE c)``: the ordered values
    kept only where ``c`` holds (the ordered-set aggregates skip NULLs, as FILTER skips rows)."""
    call = call.copy()
    for ordered in call.expression.expressions:
        ordered.set("this", exp.Case(ifs=[exp.If(this=condition.copy(), true=ordered.this)]))
    return call


def _group_by_all(group: exp.Group) -> None:
    select = group.parent
    if not isinstance(select, exp.Select):
        raise UnsupportedQueryError("GROUP BY ALL outside a SELECT", group.sql(dialect=SPARK))
    keys = [
        (item.this if isinstance(item, exp.Alias) else item).copy()
        for item in select.expressions
        if not any(isinstance(node, exp.AggFunc) for node in item.walk())
    ]
    group.set("all", None)
    group.set("expressions", keys)
    if not keys:  # every item aggregates: one group of all rows, as Spark reads it
        select.set("group", None)


def _distribution_window(node: exp.Expr) -> bool:
    """Whether ``node`` is ``PERCENT_RANK()`` or ``CUME_DIST()`` over a window written in place
    (a named window, ``OVER w``, is left to be refused by name)."""
    return (
        isinstance(node, exp.Window)
        and isinstance(node.this, exp.PercentRank | exp.CumeDist)
        and node.args.get("alias") is None
    )


def _distribution_written_out(window: exp.Window) -> exp.Expr:
    partition = [p.copy() for p in window.args.get("partition_by") or []]
    order = window.args.get("order")

    def over(function: exp.Expr, *, ordered: bool, frame: exp.WindowSpec | None = None) -> exp.Window:
        return exp.Window(
            this=function,
            partition_by=[p.copy() for p in partition] or None,
            order=order.copy() if ordered and order is not None else None,
            spec=frame,
            over="OVER",
        )

    def double(value: exp.Expr) -> exp.Expr:
        return exp.cast(value, exp.DataType.build("double"))

    rows = over(exp.Count(this=exp.Star()), ordered=False)
    if isinstance(window.this, exp.CumeDist):
        up_to_peers = exp.WindowSpec(
            kind="RANGE", start="UNBOUNDED", start_side="PRECEDING", end="CURRENT ROW"
        )
        counted = over(exp.Count(this=exp.Star()), ordered=True, frame=up_to_peers)
        return exp.Div(this=double(counted), expression=double(rows))
    rank = over(exp.Rank(), ordered=True)
    one = exp.Literal.number(1)
    share = exp.Div(
        this=double(exp.Sub(this=rank, expression=one.copy())),
        expression=double(exp.Sub(this=rows.copy(), expression=one.copy())),
    )
    return exp.Case(
        ifs=[exp.If(this=exp.GT(this=rows, expression=one.copy()), true=share)],
        default=double(exp.Literal.number(0)),
    )
