"""What the query around a recursive CTE reads of it: which of its rows, and whether their
duplicates count. Both decide what a provenance sketch of the query must keep (:mod:`.sketch`).

* **Which rows.** An outer query ``SELECT ... FROM cte [alias] WHERE cond ...`` reads the rows
  that pass ``cond`` (grouping, HAVING, ORDER BY and LIMIT read among those): only their
  derivations need to be in the sketch. Any other shape (a join, the CTE in a subquery) is
  taken to read every row, which is never wrong, only less selective.
* **Duplicates.** With ``UNION ALL`` a row appears once per derivation (per walk through a
  graph). Absorption provenance keeps each row's *minimal* derivations only, so a sketch built
  from it can drop a base tuple that only non-minimal derivations use: on the sketch's data
  the row is still there, but fewer times. That is harmless where the outer query does not
  count duplicates: the CTE is ``UNION``, or every outer SELECT that reads the CTE is
  ``DISTINCT``, groups with only MIN, MAX or COUNT(DISTINCT), or sits in an ``IN`` or
  ``EXISTS``. Elsewhere a sketch is refused, by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from sketch_core.errors import QueryError, UnsupportedQueryError
from sketch_core.incremental.expressions import ExpressionTranslator
from sketch_core.recursive.query import RecursiveQuery, where

if TYPE_CHECKING:
    from sketch_core.recursive.selection import AggregateSelection


def outside_definition(query: RecursiveQuery) -> list[exp.Table]:
    """The table references of the query outside the recursive CTE's own definition."""
    definition = next(c for c in query.outer.args["with_"].expressions if c.alias_or_name == query.name)
    return [t for t in query.outer.find_all(exp.Table) if definition not in ancestors(t)]


def ancestors(node: exp.Expr) -> list[exp.Expr]:
    out = []
    while node.parent is not None:
        node = node.parent
        out.append(node)
    return out


def tables_read_outside(query: RecursiveQuery) -> set[str]:
    """The ``ns.table`` names read outside the recursive CTE (by the outer query or other
    CTEs): a sketch must not filter those, or the outer query would read less than it does."""
    return {f"{t.db}.{t.name}" for t in outside_definition(query) if t.args.get("db")}


def outer_selection(query: RecursiveQuery, cte: pa.Schema) -> pc.Expression | None:
    """The condition on the CTE's rows (columns named as in ``cte``) under which the outer
    query reads them; None: it may read every row."""
    tree = query.outer
    reads = [t for t in outside_definition(query) if not t.args.get("db") and t.name == query.name]
    source = tree.args.get("from_") if isinstance(tree, exp.Select) else None
    if (
        len(reads) != 1
        or source is None
        or source.this is not reads[0]
        or tree.args.get("joins")
        or tree.args.get("where") is None
    ):
        return None
    condition = tree.args["where"].this
    if condition.find(exp.Subquery, exp.Select, exp.AggFunc, exp.Window) is not None:
        return None
    alias = reads[0].alias_or_name
    columns = list(condition.find_all(exp.Column))
    if any((c.table and c.table != alias) or c.name not in cte.names for c in columns):
        return None  # Spark will say what is wrong with it; all rows are read meanwhile
    bare = condition.copy().transform(lambda n: exp.column(n.name) if isinstance(n, exp.Column) else n)
    try:
        return ExpressionTranslator(cte)(bare)
    except (UnsupportedQueryError, QueryError):
        return None  # an expression Arrow does not evaluate here: every row is read


_NO_DUPLICATES = (exp.Min, exp.Max)


def check_duplicates_unread(query: RecursiveQuery) -> None:
    """Refuse (:class:`UnsupportedQueryError`) a ``UNION ALL`` recursion whose outer query counts
    its duplicates (see the module docstring)."""
    if query.distinct:
        return
    for read in outside_definition(query):
        if read.args.get("db") or read.name != query.name:
            continue
        select = read.find_ancestor(exp.Select)
        if select is None or _duplicates_unread(select):
            continue
        raise UnsupportedQueryError(
            f"a sketch of a UNION ALL recursion ({query.name}) read with its duplicates (a sketch "
            "keeps the base rows of each row's minimal derivations, not of every walk)",
            where(select)[:300],
            hint="read it with SELECT DISTINCT, or GROUP BY with MIN, MAX or COUNT(DISTINCT ...); "
            "the query runs without a sketch as it is",
        )


def _duplicates_unread(select: exp.Select) -> bool:
    if select.args.get("distinct"):
        return True
    if select.find_ancestor(exp.In, exp.Exists) is not None:
        return True
    aggregates = [a for a in select.find_all(exp.AggFunc) if a.find_ancestor(exp.Select) is select]
    if not aggregates and not select.args.get("group"):
        return False
    return all(
        isinstance(a, _NO_DUPLICATES) or (isinstance(a, exp.Count) and isinstance(a.this, exp.Distinct))
        for a in aggregates
    )


def materialized_columns(
    query: RecursiveQuery, cte: pa.Schema, selection: AggregateSelection | None = None
) -> list[tuple[str, int]]:
    """For a materialised view of ``query``: its output columns, each with the CTE column it
    is (so a view row is one output row, and a change of the view one change of the table).
    Refused (:class:`UnsupportedQueryError`) unless the outer query is ``SELECT [DISTINCT] *``
    or every CTE column once, bare or renamed, ``FROM`` the CTE ``[WHERE ...]``, over a
    ``UNION`` recursion or with ``DISTINCT`` (a table of rows, not of walks); or, under an
    aggregate ``selection``, ``SELECT <the group columns and MIN(cost)> FROM cte [WHERE ...]
    GROUP BY <the group columns>`` (a table of each group's best row)."""
    tree = query.outer
    shape = (
        "a materialised view whose query is not SELECT [DISTINCT] <every column of {n}> FROM {n} "
        "[WHERE ...], or SELECT <its other columns>, MIN(<cost>) FROM {n} [WHERE ...] GROUP BY <them>"
    )
    refused = UnsupportedQueryError(shape.format(n=query.name), sql_text(tree))
    grouped = selection is not None and tree.args.get("group") is not None
    if not isinstance(tree, exp.Select) or any(
        tree.args.get(k) for k in ("joins", "having", "order", "limit", "qualify", "windows")
    ):
        raise refused
    if tree.args.get("group") is not None and not grouped:
        raise refused
    source = tree.args.get("from_")
    if source is None or not isinstance(source.this, exp.Table) or source.this.args.get("db"):
        raise refused
    if source.this.name != query.name or tree.find(exp.Window, exp.Subquery) is not None:
        raise refused
    if grouped:
        assert selection is not None
        return _best_rows_columns(query, cte, selection, tree, refused)
    if tree.find(exp.AggFunc) is not None:
        raise refused
    if not query.distinct and not tree.args.get("distinct"):
        raise UnsupportedQueryError(
            f"a materialised view of a UNION ALL recursion ({query.name}) without DISTINCT",
            sql_text(tree),
            hint="write the recursion with UNION, or SELECT DISTINCT from it",
        )
    if tree.args.get("where") is not None and outer_selection(query, cte) is None:
        raise UnsupportedQueryError(
            f"a materialised view whose WHERE on {query.name} is not evaluated in-process", sql_text(tree)
        )
    if len(tree.expressions) == 1 and isinstance(tree.expressions[0], exp.Star):
        return [(name, i) for i, name in enumerate(cte.names)]
    columns = []
    for expression in tree.expressions:
        column = expression.unalias()
        if not isinstance(column, exp.Column) or column.name not in cte.names:
            raise refused
        columns.append((expression.alias_or_name, cte.names.index(column.name)))
    if sorted(i for _, i in columns) != list(range(len(cte.names))):
        raise refused
    return columns


def _best_rows_columns(
    query: RecursiveQuery,
    cte: pa.Schema,
    selection: AggregateSelection,
    tree: exp.Select,
    refused: UnsupportedQueryError,
) -> list[tuple[str, int]]:
    """The output columns of ``SELECT <group columns>, MIN(cost) ... GROUP BY <group columns>``."""
    groups = {cte.names[i] for i in selection.groups}
    keys = [g for g in tree.args["group"].expressions]
    if not all(isinstance(k, exp.Column) for k in keys) or {k.name for k in keys} != groups:
        raise refused
    aggregate = exp.Min if selection.kind == "min" else exp.Max
    columns = []
    for expression in tree.expressions:
        value = expression.unalias()
        if isinstance(value, aggregate) and isinstance(value.this, exp.Column):
            value = value.this
            if value.name != cte.names[selection.cost] or not expression.alias:
                raise refused  # unnamed, the table's column would be named as Spark prints it
        elif not isinstance(value, exp.Column) or value.name not in groups:
            raise refused
        columns.append((expression.alias_or_name, cte.names.index(value.name)))
    if sorted(i for _, i in columns) != list(range(len(cte.names))):
        raise refused
    return columns


def sql_text(node: exp.Expr) -> str:
    return where(node)[:300]
