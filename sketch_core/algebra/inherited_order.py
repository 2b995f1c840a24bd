"""A subquery's ORDER BY, kept by the query that reads it, as Spark keeps it.

SQL says an ORDER BY inside a subquery orders nothing, and the front end drops it there. Spark
does not: ``SELECT ... FROM (SELECT ... ORDER BY s DESC) src LIMIT 10`` returns the first 10
rows in that order (its optimizer plans the LIMIT over the sort, a top-k), and so does a WHERE
or another plain projection in between. Metabase prints its "top 10 by sum" questions in this
shape, dbt models and views order a CTE that a report then limits. Read the SQL way, the outer
LIMIT keeps any 10 rows, and a sketched run answered with other rows than Spark's.

So, on the qualified tree, a SELECT without an ORDER BY of its own that reads one ordered
subquery or CTE (a SELECT, or a UNION, INTERSECT or EXCEPT with an ORDER BY of its own) and
keeps its rows' order (no join, aggregation, DISTINCT, window or QUALIFY) is given that order,
on the source's columns: a key the source returns is named by its alias; another expression is
added to the source's select list under a fresh name (its star is already expanded, so no
reader sees it). Innermost first, so an order travels through several such layers. A source
with DISTINCT over a key it does not return is left alone (Spark refuses that ORDER BY).
"""

from __future__ import annotations

from sqlglot import exp

ORDER_KEY_PREFIX = "__inherited_order_"


def inherit_subquery_orders(tree: exp.Expr) -> exp.Expr:
    """``tree`` (qualified: every column and select item named) with each order-keeping SELECT
    over an ordered source ordered as Spark orders its rows. Changes ``tree`` in place."""
    selects = list(tree.find_all(exp.Select, bfs=False))
    for node in reversed(selects):  # descendants first
        _inherit(node)
    return tree


def _inherit(node: exp.Select) -> None:
    if node.args.get("order") is not None or not _keeps_order(node):
        return
    found = _ordered_source(node)
    if found is None:
        return
    source, alias = found
    keys = [
        _outer_key(source, ordered, alias, position)
        for position, ordered in enumerate(source.args["order"].expressions)
    ]
    if any(key is None for key in keys):
        return
    node.set("order", exp.Order(expressions=keys))


def _keeps_order(node: exp.Select) -> bool:
    """Whether ``node`` passes its source's rows on in their order (Spark's plan keeps the sort
    under a projection or a filter, and loses it under joins, aggregations and windows)."""
    if node.args.get("joins") or node.args.get("laterals"):
        return False
    if any(node.args.get(arg) for arg in ("group", "having", "distinct", "qualify")):
        return False
    return not any(
        isinstance(found, exp.AggFunc | exp.Window) for item in node.expressions for found in item.walk()
    )


def _ordered_source(node: exp.Select) -> tuple[exp.Select | exp.SetOperation, str] | None:
    """The SELECT or set operation that ``node`` reads (a subquery, or a CTE by name) when it
    has an ORDER BY, with the name ``node`` reads it by."""
    from_ = node.args.get("from_")
    source = from_.this if isinstance(from_, exp.From) else None
    inner: exp.Expr | None = None
    if isinstance(source, exp.Subquery):
        inner = source.this
    elif isinstance(source, exp.Table) and not source.args.get("db"):
        inner = _cte_named(node, source.name)
    if source is None or not isinstance(inner, exp.Select | exp.SetOperation):
        return None
    if inner.args.get("order") is None:
        return None
    return inner, source.alias_or_name


def _cte_named(node: exp.Expr, name: str) -> exp.Expr | None:
    """The query of the CTE ``name`` in scope at ``node`` (the nearest WITH that defines it)."""
    scope: exp.Expr | None = node
    while scope is not None:
        with_ = scope.args.get("with_") if isinstance(scope, exp.Query) else None
        for cte in with_.expressions if isinstance(with_, exp.With) else ():
            if cte.alias_or_name.lower() == name.lower():
                query: exp.Expr = cte.this
                return query
        scope = scope.parent
    return None


def _outer_key(
    source: exp.Select | exp.SetOperation, ordered: exp.Ordered, alias: str, position: int
) -> exp.Ordered | None:
    """``ordered`` (a key of ``source``'s ORDER BY) as a key on ``alias``'s columns (a set
    operation's ORDER BY names its columns: Spark refuses anything else there)."""
    outputs = list(source.named_selects)
    key = ordered.this
    name: str | None = None
    if isinstance(key, exp.Column) and not key.table and key.name.lower() in (o.lower() for o in outputs):
        name = next(o for o in outputs if o.lower() == key.name.lower())
    elif isinstance(source, exp.Select):
        for item, output in zip(source.expressions, outputs, strict=True):
            if (item.this if isinstance(item, exp.Alias) else item) == key:
                name = output
                break
    if name is None:
        if not isinstance(source, exp.Select) or source.args.get("distinct"):
            return None
        name = f"{ORDER_KEY_PREFIX}{position}"
        while name in outputs:
            name += "_"
        source.append("expressions", exp.alias_(select_aliases_expanded(key, source), name))
    column = exp.column(name, table=alias)
    return exp.Ordered(
        this=column, desc=ordered.args.get("desc"), nulls_first=ordered.args.get("nulls_first")
    )


def select_aliases_expanded(target: exp.Expr, node: exp.Expr) -> exp.Expr:
    """An ORDER BY expression with the select-list names it uses (unqualified: Spark resolves
    them to the select list first, as in ``SELECT x AS p ... ORDER BY p * 2`` or ``SELECT x ...
    ORDER BY ABS(x)``) replaced by what the select list computes under them: as the front end
    resolves an ORDER BY, and as a select-list item must say it."""
    if not isinstance(node, exp.Select):
        return target
    named: dict[str, exp.Expr] = {
        p.alias_or_name.lower(): (p.this if isinstance(p, exp.Alias) else p) for p in node.expressions
    }

    def expand(found: exp.Expr) -> exp.Expr:
        if isinstance(found, exp.Column) and not found.table and found.name.lower() in named:
            named_expression: exp.Expr = named[found.name.lower()].copy()
            return named_expression
        return found

    expanded: exp.Expr = target.copy().transform(expand)
    return expanded
