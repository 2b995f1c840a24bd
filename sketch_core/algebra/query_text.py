"""A query text, parsed once: its tree, template key and tables, and the forms made from it (the
text bound to Spark views, the IR over given schemas), each made on first use and kept.

A scheduled report sends the same text on every run, and every layer asks something of it:
the tables to pin, the template its sketches are filed under, its IR, its text over the pinned
views. :func:`query_text` keeps one :class:`QueryText` per text (the ``TEXTS`` most recently
used), so the text is parsed once and each derived form computed once, whichever layer asks
first. Parsing, qualifying and normalizing cost milliseconds each; a report the cost model runs
without its sketch would otherwise pay them on top of the plain query. The trees and the IR are
never changed once made (bound parameters and qualification work on copies). Errors are not
kept: a text that fails to parse raises the same error again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

import sqlglot
from sqlglot import exp

from sketch_core.algebra.dialect import SPARK
from sketch_core.algebra.frontend import (
    ParsedQuery,
    TableSchemas,
    as_query,
    ir_from_tree,
    parse_statement,
    tables_read,
)
from sketch_core.algebra.ir import PlanError
from sketch_core.errors import UnsupportedQueryError
from sketch_core.lru import LruMap
from sketch_core.tables.names import normalize_table_name

# Query texts kept; each keeps the IR for at most ``IR_PER_TEXT`` (schemas, parameters) pairs
# (a template run with many bindings, or over tables whose schemas evolved).
TEXTS = 256
IR_PER_TEXT = 16

_IrKey = tuple[tuple[tuple[str, tuple[tuple[str, str], ...]], ...], str]


class QueryText:
    """One query text, parsed (:class:`QueryError` when it does not parse as one statement)."""

    def __init__(self, sql: str) -> None:
        self.sql = sql
        self.statement = parse_statement(sql)
        # The ``ns.table`` names it reads (CTE names and unqualified names are not tables).
        self.tables: tuple[str, ...] = tuple(
            sorted(
                {
                    normalize_table_name(f"{t.db}.{t.name}")
                    for t in tables_read(self.statement)
                    if t.db and t.name
                }
            )
        )
        # The catalogs its table names are qualified with (``lake.ns.table``, as tools connected
        # to Spark print them): only the service's own can be read.
        self.catalogs: frozenset[str] = frozenset(
            t.catalog for t in tables_read(self.statement) if t.db and t.name and t.catalog
        )
        self._template_key: str | None = None
        self._bound: LruMap[tuple[Any, ...], str] = LruMap(IR_PER_TEXT)
        self._ir: LruMap[_IrKey, ParsedQuery] = LruMap(IR_PER_TEXT)

    @property
    def column_names(self) -> frozenset[str]:
        """Every column name the text mentions, lower-case (Spark resolves names so)."""
        return frozenset(c.name.lower() for c in self.statement.find_all(exp.Column) if c.name)

    @property
    def template_key(self) -> str:
        """Identifies a parameterized query template: its normalized SQL, placeholders unbound
        (UnsupportedQueryError for a statement that is not a query)."""
        if self._template_key is None:
            normalized = as_query(self.statement).sql(dialect=SPARK, normalize=True)
            self._template_key = hashlib.sha256(normalized.encode()).hexdigest()[:32]
        return self._template_key

    def bound_to(self, views: Mapping[str, str]) -> str:
        """The text with its ``ns.table`` references reading the given views (aliases kept)."""

        def view_of(name: str, alias: exp.TableAlias) -> exp.Expression | None:
            view = views.get(name)
            return None if view is None else exp.Table(this=exp.to_identifier(view), alias=alias)

        return self._bound_with(tuple(sorted(views.items())), view_of)

    def bound_to_snapshots(
        self,
        catalog: str,
        snapshots: Mapping[str, int | None],
        spelled: Mapping[str, str] | None = None,
    ) -> str:
        """The text with its ``ns.table`` references reading ``catalog.ns.table`` at the given
        Iceberg snapshots (``VERSION AS OF``; None: the table had no snapshot, so no rows),
        aliases kept; ``spelled``: a table's name as the catalog spells it, where it differs."""

        def snapshot_of(name: str, alias: exp.TableAlias) -> exp.Expression | None:
            if name not in snapshots:
                return None
            snapshot_id = snapshots[name]
            iceberg_name = (spelled or {}).get(name, name)
            if snapshot_id is None:
                empty = sqlglot.parse_one(f"SELECT * FROM {catalog}.{iceberg_name} LIMIT 0", read="spark")
                return exp.Subquery(this=empty, alias=alias)
            namespace, table_name = iceberg_name.split(".")
            version = exp.Literal.number(snapshot_id)
            return exp.Table(
                this=exp.to_identifier(table_name),
                db=exp.to_identifier(namespace),
                catalog=exp.to_identifier(catalog),
                version=exp.Version(this="VERSION", kind="AS OF", expression=version),
                alias=alias,
            )

        key = ("@snapshots", catalog, *sorted(snapshots.items()), *sorted((spelled or {}).items()))
        return self._bound_with(key, snapshot_of)

    def inlined(self, relations: Mapping[str, exp.Subquery]) -> str:
        """The text with the ``ns.table`` references named in ``relations`` reading those derived
        tables instead (aliases kept): the catalog views it reads, written in."""

        def relation_of(name: str, alias: exp.TableAlias) -> exp.Expression | None:
            found = relations.get(name)
            if found is None:
                return None
            named = found.args.get("alias")
            if named is not None and named.columns and not alias.columns:  # the relation's own names
                alias.set("columns", [c.copy() for c in named.columns])
            return exp.Subquery(this=found.this.copy(), alias=alias)

        key = ("@relations", *sorted((name, r.sql(dialect=SPARK)) for name, r in relations.items()))
        return self._bound_with(key, relation_of)

    def _bound_with(
        self, key: tuple[Any, ...], relation: Callable[[str, exp.TableAlias], exp.Expression | None]
    ) -> str:
        """The text with each ``ns.table`` reference replaced by ``relation(name, alias)``
        (None: kept), cached under ``key``."""
        found = self._bound.get(key)
        if found is not None:
            return found
        tree = self.statement.copy()
        for table in tables_read(tree):
            if not (table.db and table.name):
                continue
            name = normalize_table_name(f"{table.db}.{table.name}")
            replacement = relation(name, exp.TableAlias(this=exp.to_identifier(table.alias or table.name)))
            if replacement is not None:
                if not table.alias:
                    _name_columns_by_table(tree, name)
                _carry_clauses(table, replacement)
                table.replace(replacement)
        bound = tree.sql(dialect=SPARK)
        self._bound.put(key, bound)  # a report is bound to the same views until they change
        return bound

    def to_ir(self, schemas: TableSchemas, params: Mapping[str, Any] | None = None) -> ParsedQuery:
        """The query as IR over tables of these ``schemas``, its placeholders bound to ``params``
        (see :func:`sketch_core.algebra.frontend.to_ir` for what it refuses)."""
        key = _ir_key(schemas, params)
        parsed = self._ir.get(key)
        if parsed is None:
            try:
                parsed = ir_from_tree(as_query(self.statement), schemas, params)
            except PlanError as exc:  # a front-end bug the text found: typed, so the query runs plain
                raise UnsupportedQueryError(
                    f"a plan the sketch front end could not build ({exc})",
                    self.statement.sql(dialect=SPARK),
                    hint="run it without sketches (the default query does), and report the text",
                ) from exc
            self._ir.put(key, parsed)
        return parsed


# What a table reference holds besides its name: the joins of a parenthesized join
# (``FROM (a JOIN b ON ...) JOIN c``), a PIVOT or LATERAL VIEW written after the table.
_NAMING_ARGS = frozenset({"this", "db", "catalog", "alias", "version"})


def _carry_clauses(table: exp.Table, replacement: exp.Expression) -> None:
    """``replacement`` given the clauses ``table`` holds besides its name: replacing the table
    alone dropped them (a parenthesized join lost its inner join, so the query read one table
    where it joined two)."""
    for key, value in table.args.items():
        if key in _NAMING_ARGS or not value:
            continue
        if key not in replacement.arg_types:
            raise UnsupportedQueryError(
                f"{key.upper()} on a table reference",
                table.sql(dialect=SPARK)[:200],
                hint="read the table in a subquery and apply it there",
            )
        replacement.set(key, value)


def _name_columns_by_table(tree: exp.Expr, name: str) -> None:
    """Columns qualified with the table's full name (``ns.table.column``, as Metabase prints
    them, or ``catalog.ns.table.column``) qualified with the table's name alone: the relation
    that replaces the table is aliased by that name, so the full name resolves to nothing."""
    for column in tree.find_all(exp.Column):
        if column.args.get("db") and f"{column.db}.{column.table}".lower() == name:
            column.set("db", None)
            column.set("catalog", None)


def _ir_key(schemas: TableSchemas, params: Mapping[str, Any] | None) -> _IrKey:
    tables = tuple(sorted((name, tuple((c, str(ty)) for c, ty in cols)) for name, cols in schemas.items()))
    # repr keeps the values' types apart (1, 1.0, "1", a date and its ISO string differ).
    return tables, repr(sorted((params or {}).items()))


_texts: LruMap[str, QueryText] = LruMap(TEXTS)


def query_text(sql: str) -> QueryText:
    """The parsed form of ``sql``: the one kept for this text, else parsed now and kept."""
    found = _texts.get(sql)
    if found is None:
        found = QueryText(sql)  # outside any lock: parsing takes milliseconds
        _texts.put(sql, found)
    return found


def referenced_tables(sql: str) -> list[str]:
    """The ``ns.table`` names a query reads (CTE names and unqualified names are not tables)."""
    return list(query_text(sql).tables)


def template_key(sql: str) -> str:
    """The template the query text belongs to: see :attr:`QueryText.template_key`."""
    return query_text(sql).template_key


def bind_tables(sql: str, views: Mapping[str, str]) -> str:
    """Rewrite ``ns.table`` references to the given view names, keeping aliases."""
    return query_text(sql).bound_to(views)
