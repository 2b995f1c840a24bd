"""Catalog views read by a report, written in as derived tables.

A report may read an Iceberg view (``CREATE VIEW lake.ns.big_orders AS SELECT ...`` in Spark):
Spark expands it when it runs the text, but the service pins tables, not views, at one commit.
So a view's SQL takes its place in the text, as ``(SELECT ...) AS big_orders``, and every path
(plain, captured, sketched, maintained) reads the tables under it at the pinned commit, as Spark
would read them under the view. A view's tables named without their namespace are named with
the view's default namespace (the one in use when the view was made), when that is in the
service's catalog; a view whose column names differ from its query's (``CREATE VIEW v (a, b)
AS ...``) renames them by position, as a column list on the derived table.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from sketch_core.algebra.frontend import parse_statement, tables_read
from sketch_core.errors import QueryError


@dataclass(frozen=True)
class ViewDefinition:
    """A catalog view as its current version defines it."""

    name: str  # ns.view, lower case
    sql: str  # its Spark SQL query
    columns: tuple[str, ...]  # the view's column names
    query_columns: tuple[str, ...] | None  # its query's output names (Spark records them), if known
    default_catalog: str | None
    default_namespace: str | None


# Views within views are written in level by level; a cycle (or a chain this deep) is refused.
MAX_VIEW_DEPTH = 16


def view_relation(view: ViewDefinition, catalog: str) -> exp.Subquery:
    """``view``'s query as a derived table (its alias names no table: the caller's reference
    does; it may list the view's column names)."""
    tree = parse_statement(view.sql)
    if not isinstance(tree, exp.Query):
        raise QueryError(f"view {view.name} is not defined by a query", hint="query its tables instead")
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    for table in tables_read(tree):
        if table.db or not table.name or table.name.lower() in ctes:
            continue
        # No default catalog recorded: the view's own (Iceberg's view spec).
        if view.default_namespace is None or (view.default_catalog or catalog).lower() != catalog.lower():
            raise QueryError(
                f"view {view.name} reads table {table.name} without a namespace, in catalog "
                f"{view.default_catalog}; this service reads catalog {catalog}",
                hint=f"define the view with its tables named as {catalog}.ns.table",
            )
        table.set("db", exp.to_identifier(view.default_namespace))
        table.set("catalog", exp.to_identifier(catalog))
    if view.columns and view.query_columns != view.columns:
        # CREATE VIEW v (a, b) AS ...: the view's names, by position (a column list on the
        # derived table, as Spark reads ``(...) AS v(a, b)``).
        names = [exp.to_identifier(c, quoted=True) for c in view.columns]
        return exp.Subquery(this=tree, alias=exp.TableAlias(columns=names))
    return exp.Subquery(this=tree)
