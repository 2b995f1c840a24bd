"""Spark SQL to the IR, through sqlglot.

The query is parsed, its ``:name`` parameters are bound to typed literals, and sqlglot's
``qualify`` resolves every column to its table alias, expands stars and positional references.
Then each SELECT becomes scans, joins, a selection, semi/anti joins for IN and EXISTS
subqueries, an aggregation, a projection, DISTINCT and top-k, in SQL's evaluation order.
Anything without a rule raises :class:`UnsupportedQueryError` naming the construct.

Scalar subqueries become joins that bring their value to each row:

* uncorrelated, a one-row aggregation (``x > (SELECT AVG(y) FROM t)``): a scalar join, a
  cross product with its single row (a subquery that may return no row or several is refused:
  SQL gives NULL or an error there, a join neither);
* correlated through equalities (TPC-H Q17's ``l_quantity < (SELECT 0.2 * AVG(l_quantity) FROM
  lineitem WHERE l_partkey = p_partkey)``): the subquery grouped by its side of the
  equalities, joined on them. Where the value's NULL (no group matches) drops the row anyway,
  as a comparison in WHERE does, the join is inner; elsewhere it is a left join, whose padded
  row gives the NULL. COUNT is refused there: over no rows it is 0, not the padding's NULL.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, OptimizeError, ParseError, SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope as SqlglotScope
from sqlglot.optimizer.scope import traverse_scope
from sqlglot.optimizer.simplify import simplify

from sketch_core.algebra.coercion import coerce
from sketch_core.algebra.dialect import SPARK
from sketch_core.algebra.inherited_order import inherit_subquery_orders, select_aliases_expanded
from sketch_core.algebra.ir import (
    RANKING_FUNCTIONS,
    AggCall,
    Aggregate,
    Distinct,
    Join,
    JoinKind,
    Project,
    Relation,
    Scan,
    Select,
    Sort,
    SortKey,
    TopK,
    Union,
    Window,
    WindowCall,
    WindowFunc,
    column,
    conjuncts,
)
from sketch_core.algebra.printer import Source, to_sql
from sketch_core.algebra.shorthands import written_out
from sketch_core.errors import (
    MissingParameterError,
    QueryError,
    TableNotFoundError,
    UnqualifiedTableError,
    UnsupportedQueryError,
)
from sketch_core.recursive.query import split_recursive
from sketch_core.rewrites.prune_outputs import prune_outputs

# table name -> ordered (column, Spark SQL type)
TableSchemas = Mapping[str, Sequence[tuple[str, str]]]

_WINDOW_FUNCTIONS: dict[type[exp.Expr], WindowFunc] = {
    exp.RowNumber: "row_number",
    exp.Rank: "rank",
    exp.DenseRank: "dense_rank",
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
}

_AGGREGATES: dict[type[exp.Expr], str] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
}


@dataclass(frozen=True)
class ParsedQuery:
    """A query as IR, with the column names the user sees (the IR's names are unique, not pretty)."""

    plan: Relation
    output_names: tuple[str, ...]
    sql: str  # the bound SQL the plan came from
    # The whole query's LIMIT without ORDER BY (``LIMIT 2000``, as Metabase caps every
    # question), left out of the plan: such a limit returns any rows of the answer, so any rows
    # of the plan's answer over a sketch's data are an answer, and the plan's sketch serves it.
    row_cap: RowCap | None = None

    def runnable(self, plan: Relation, source: Source) -> str:
        """``plan`` (this plan, or one instrumented from it) printed over ``source``'s relations
        with the names the user sees and the query's row cap."""
        plan_sql = to_sql(plan, source=source, output_names=self.output_names)
        return plan_sql if self.row_cap is None else self.row_cap.applied(plan_sql)


@dataclass(frozen=True)
class RowCap:
    """``LIMIT limit OFFSET offset`` over rows in no particular order."""

    limit: int
    offset: int = 0

    def applied(self, sql: str) -> str:
        skipped = f" OFFSET {self.offset}" if self.offset else ""
        return f"SELECT * FROM ({sql}) LIMIT {self.limit}{skipped}"


# -- parsing and parameters -------------------------------------------------------------------


def parse_sql(sql: str) -> exp.Expr:
    """One Spark SQL query's tree (QueryError: it does not parse as one statement;
    UnsupportedQueryError: the statement is not a query). Not kept: see
    :mod:`sketch_core.algebra.query_text` for the parse the service keeps."""
    return as_query(parse_statement(sql))


def parse_statement(sql: str) -> exp.Expr:
    """One Spark SQL statement's tree (QueryError: it does not parse as exactly one)."""
    try:
        statements = sqlglot.parse(sql, read="spark")
    except ParseError as exc:
        raise QueryError(f"the query does not parse: {exc}", hint="check the Spark SQL syntax") from exc
    if len(statements) != 1 or statements[0] is None:
        raise QueryError("expected exactly one SQL statement", hint="remove extra statements")
    _name_identifier_tables(statements[0])
    _refuse_reads_of_other_states(statements[0])
    _refuse_fetch_beyond_rows(statements[0])
    _refuse_double_quoted_column_names(statements[0])
    return statements[0]


def _refuse_double_quoted_column_names(tree: exp.Expr) -> None:
    """``"orders"."o_totalprice"`` or ``o."o_totalprice"``, as ANSI SQL generators quote names:
    Spark SQL reads double quotes as a string, and a string on either side of a dot is no Spark
    SQL at all. Said here by name; Spark only reports a syntax error near the string."""

    def string(node: object) -> bool:
        return isinstance(node, exp.Literal) and node.is_string

    for node in tree.find_all(exp.Dot, exp.Column):
        parts = (node.this, node.expression) if isinstance(node, exp.Dot) else (node.this,)
        if any(string(part) for part in parts):
            printed = node.sql(dialect=SPARK)
            raise QueryError(
                f"{printed.replace(chr(39), chr(34))}: Spark SQL reads a name in double quotes as a string",
                hint=f"quote names with backticks ({printed.replace(chr(39), '`')}); a BI tool does so "
                "with its Spark SQL (or Databricks) dialect",
            )


def _refuse_fetch_beyond_rows(tree: exp.Expr) -> None:
    """``FETCH FIRST n ROWS ONLY`` (as ANSI SQL generators print a limit) is Spark's ``LIMIT n``;
    ``FETCH ... PERCENT`` and ``WITH TIES`` are refused: Spark SQL has neither, and the text
    Spark runs would say ``LIMIT n`` for them, another answer."""
    for fetch in tree.find_all(exp.Fetch):
        options = fetch.args.get("limit_options")
        for flag, clause in (("percent", "PERCENT"), ("with_ties", "WITH TIES")):
            if options is not None and options.args.get(flag):
                raise QueryError(
                    f"FETCH ... {clause}: Spark SQL has no such clause ({fetch.sql(dialect=SPARK)[:200]})",
                    hint="fetch a number of rows (FETCH FIRST n ROWS ONLY, or LIMIT n)",
                )


def tables_read(tree: exp.Expr) -> list[exp.Table]:
    """The table references of ``tree`` that read rows: not the names in optimizer hints
    (``/*+ BROADCAST(c) */`` names an alias, which Spark resolves itself)."""
    return [table for table in tree.find_all(exp.Table) if table.find_ancestor(exp.Hint) is None]


def _without_hints(tree: exp.Expr) -> exp.Expr:
    """``tree`` without its optimizer hints (a copy where it has any): the plan the IR prints
    is Spark's to optimize, and a hint naming an alias would name nothing there."""
    if tree.find(exp.Hint) is None:
        return tree
    tree = tree.copy()
    for hint in list(tree.find_all(exp.Hint)):
        hint.pop()
    return tree


def _name_identifier_tables(tree: exp.Expr) -> None:
    """``FROM IDENTIFIER('ns.table')`` (Spark's clause for table names built as strings) becomes
    ``FROM ns.table``, in place, so that the table is pinned and read like any other; a name
    given as a parameter is refused by name (the tables are pinned before parameters bind)."""
    for table in tables_read(tree):
        call = table.this
        if not (isinstance(call, exp.Anonymous) and str(call.this).upper() == "IDENTIFIER"):
            continue
        argument = call.expressions[0] if len(call.expressions) == 1 else None
        if not (isinstance(argument, exp.Literal) and argument.is_string):
            raise UnsupportedQueryError(
                "IDENTIFIER with a table name that is not a string literal",
                _where(table),
                hint="name the table in the text (ns.table)",
            )
        try:
            named = exp.to_table(argument.this, dialect=SPARK)
        except ParseError as exc:
            raise QueryError(f"IDENTIFIER({argument.sql(dialect='spark')}) is no table name: {exc}") from exc
        for key in ("this", "db", "catalog"):
            table.set(key, named.args.get(key))


def _refuse_reads_of_other_states(tree: exp.Expr) -> None:
    """Table reads that are not a table's rows at the pinned commit: the service reads every
    table at one commit, so these would silently read the wrong rows (a text with ``VERSION AS
    OF`` got the current snapshot's)."""
    for sample in tree.find_all(exp.TableSample):
        raise UnsupportedQueryError(
            "TABLESAMPLE",
            _where(sample),
            hint="the service reads whole snapshots: sample in Spark itself, or drop TABLESAMPLE",
        )
    for table in tables_read(tree):
        if table.args.get("version") is not None:
            raise UnsupportedQueryError(
                "time travel (VERSION AS OF / TIMESTAMP AS OF)",
                _where(table),
                hint="read every table as of a commit with snapshot=<commit sequence> "
                "(svc.tables.commits(table) lists each commit's sequence and Iceberg snapshot id)",
            )
        if isinstance(table.this, exp.Dot):  # catalog.ns.table.snapshots, .branch_dev and the like
            raise UnsupportedQueryError(
                "an Iceberg metadata table, branch or tag",
                _where(table),
                hint="query metadata tables (snapshots, history, files, ...) and branches in Spark "
                "itself; the service reads each table's main line (svc.tables.commits(table) lists "
                "the commits it has recorded)",
            )


def as_query(tree: exp.Expr) -> exp.Expr:
    """``tree`` when it is a query; UnsupportedQueryError for any other statement."""
    if not isinstance(tree, exp.Query):
        raise UnsupportedQueryError(
            f"{type(tree).__name__} statement", tree.sql("spark"), hint="only queries can use sketches"
        )
    return tree


def literal(value: Any) -> exp.Expr:
    """A typed SQL literal for a parameter value; values are never spliced in as SQL text."""
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int | float | Decimal):
        if isinstance(value, float) and value != value:
            return exp.cast(exp.Literal.string("NaN"), exp.DataType.build("double"))
        number = exp.Literal.number(str(abs(value)) if value < 0 else str(value))
        return exp.Neg(this=number) if value < 0 else number
    if isinstance(value, dt.datetime):
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), exp.DataType.build("timestamp"))
    if isinstance(value, dt.date):
        return exp.cast(exp.Literal.string(value.isoformat()), exp.DataType.build("date"))
    if isinstance(value, str):
        return exp.Literal.string(value)
    raise QueryError(
        f"parameter value {value!r} of type {type(value).__name__} cannot be bound",
        hint="use None, bool, int, float, Decimal, str, date or datetime",
    )


def bind_parameters(tree: exp.Expr, params: Mapping[str, Any] | None) -> exp.Expr:
    params = dict(params or {})

    def bind(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Placeholder):
            name = node.args.get("this")  # (sqlglot names a positional ? "?")
            if not name:
                raise QueryError(
                    "positional ? parameters are not supported",
                    hint="name each placeholder (:day) and pass params={'day': ...}",
                )
            if name not in params:
                raise MissingParameterError(name)
            return literal(params[name])
        return node

    return tree.copy().transform(bind)


def encode_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Parameters as JSON for the metastore, keeping dates, timestamps and decimals typed."""
    encoded: dict[str, Any] = {}
    for name, value in sorted((params or {}).items()):
        if isinstance(value, dt.datetime):
            encoded[name] = {"$timestamp": value.isoformat()}
        elif isinstance(value, dt.date):
            encoded[name] = {"$date": value.isoformat()}
        elif isinstance(value, Decimal):
            encoded[name] = {"$decimal": str(value)}
        else:
            literal(value)  # refuses types that cannot be bound
            encoded[name] = value
    return encoded


def decode_params(encoded: Mapping[str, Any]) -> dict[str, Any]:
    decoders: dict[str, Callable[[str], Any]] = {
        "$timestamp": dt.datetime.fromisoformat,
        "$date": dt.date.fromisoformat,
        "$decimal": Decimal,
    }
    decoded: dict[str, Any] = {}
    for name, value in encoded.items():
        if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in decoders:
            tag, text = next(iter(value.items()))
            decoded[name] = decoders[tag](text)
        else:
            decoded[name] = value
    return decoded


# -- names and scopes -------------------------------------------------------------------------


class _Names:
    """Allocates plan-wide unique column names, readable where possible."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def fresh(self, base: str) -> str:
        base = re.sub(r"[^a-z0-9_]", "_", base.lower()).strip("_") or "col"
        if base[0].isdigit():
            base = f"c_{base}"
        name, n = base, 1
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        return name


Scope = dict[str, dict[str, str]]  # alias -> visible column -> unique name


@dataclass(frozen=True)
class _Built:
    rel: Relation
    visible: tuple[str, ...]


def _where(node: exp.Expr) -> str:
    return node.sql(dialect=SPARK)


def _scalar_subqueries(expression: exp.Expr) -> list[exp.Subquery]:
    """The subqueries in ``expression`` used as values (not inside another subquery)."""
    found: list[exp.Subquery] = []

    def visit(node: exp.Expr) -> None:
        for child in node.iter_expressions():
            if isinstance(child, exp.Subquery):
                found.append(child)
            elif not isinstance(child, exp.Query):
                visit(child)

    visit(expression)
    return found


# Operators whose result is NULL when an operand is: a NULL value under only these makes a
# WHERE conjunct drop the row.
_NULL_REJECTING = (
    exp.Not,
    exp.Paren,
    exp.Cast,
    exp.Neg,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    *(exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE),
)


def _rejects_null(conjunct: exp.Expr, sub: exp.Expr) -> bool:
    """Whether ``conjunct`` is NULL (drops the row) when the value of ``sub`` is NULL."""
    node = sub.parent
    while node is not None:
        if not isinstance(node, _NULL_REJECTING):
            return False
        if node is conjunct:
            return True
        node = node.parent
    return False


def _one_row(rel: Relation) -> bool:
    """Whether ``rel`` always has exactly one row: an aggregation without groups, projected."""
    while isinstance(rel, Project):
        rel = rel.child
    return isinstance(rel, Aggregate) and not rel.groups


class _Uncorrelated(Exception):
    """An EXISTS subquery that reads nothing of the outer query."""


def _in_as_exists(predicate: exp.In, negated: bool = False) -> exp.Exists:
    """``x IN (SELECT y FROM t WHERE p)`` as ``EXISTS (SELECT 1 FROM t WHERE p AND y = x)``: the
    same rows pass a WHERE (where a NULL is as good as false), and a correlated IN becomes a
    correlated EXISTS.

    ``negated``: the EXISTS that NOT IN is the negation of. ``x NOT IN S`` is true when S is
    empty, else NULL when x is NULL or S holds a NULL, else whether x is outside S; so it is
    NOT EXISTS a row of S equal to x, NULL, or compared with a NULL x::

        x NOT IN (SELECT y FROM t WHERE t.k = o.k)
          = NOT EXISTS (SELECT 1 FROM t WHERE t.k = o.k AND (y = x OR y IS NULL OR x IS NULL))

    e.g. with S = {1, NULL}, x = 2 is not kept (NOT IN gives NULL), and with S empty, a NULL x
    is kept."""
    query = predicate.args["query"]
    sub = query.this if isinstance(query, exp.Subquery) else query
    shaped = isinstance(sub, exp.Select) and len(sub.expressions) == 1
    if not shaped or _shaping_clause(sub) is not None or _aggregating(sub):
        # (Named so: with stand-in schemas an uncorrelated IN can look correlated.)
        construct = "correlated NOT IN subquery" if negated else "correlated IN subquery"
        raise UnsupportedQueryError(
            construct, _where(predicate), hint="write it as [NOT] EXISTS with the comparison in its HAVING"
        )
    item = sub.expressions[0]
    value = item.this if isinstance(item, exp.Alias) else item
    rewritten = sub.copy()
    matches: exp.Expr = exp.EQ(this=value.copy(), expression=predicate.this.copy())
    if negated:
        matches = exp.paren(
            exp.or_(
                matches,
                exp.Is(this=value.copy(), expression=exp.Null()),
                exp.Is(this=predicate.this.copy(), expression=exp.Null()),
            ),
            copy=False,
        )
    where = rewritten.args.get("where")
    rewritten.set("where", exp.Where(this=exp.and_(where.this, matches) if where else matches))
    rewritten.set("expressions", [exp.Literal.number(1)])
    return exp.Exists(this=rewritten)


def _aggregating(query: exp.Expr) -> bool:
    """Whether a subquery's SELECT aggregates (GROUP BY, HAVING or an aggregate function of its
    own, not one in a nested subquery or a window)."""
    sub = query.this if isinstance(query, exp.Subquery) else query
    if not isinstance(sub, exp.Select):
        return False
    if sub.args.get("group") or sub.args.get("having"):
        return True
    return any(
        isinstance(node, exp.AggFunc) and not _windowed(node)
        for item in sub.expressions
        for node in item.walk(prune=lambda n: isinstance(n, exp.Subquery | exp.Select))
    )


def _holds_on_no_rows(having: exp.Expr) -> bool | None:
    """Whether a HAVING condition holds for a global aggregate over no rows (COUNT is 0, every
    other aggregate NULL): True, False (false or NULL), or None when it does not fold."""
    empty = having.copy().transform(
        lambda n: (
            (exp.Literal.number(0) if isinstance(n, exp.Count) else exp.Null())
            if isinstance(n, exp.AggFunc)
            else n
        )
    )
    folded = simplify(_null_folded(empty))
    if isinstance(folded, exp.Null) or (isinstance(folded, exp.Boolean) and not folded.this):
        return False
    if isinstance(folded, exp.Boolean):
        return True
    return None


def _null_folded(node: exp.Expr) -> exp.Expr:
    """``node`` with SQL's NULL rules applied bottom-up (which sqlglot's simplify leaves): an
    operator over a NULL operand is NULL, AND/OR are three-valued, ``NULL IS NULL`` is true."""
    if isinstance(node, exp.Paren):
        return _null_folded(node.this)
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        inner = _null_folded(node.this)
        if isinstance(inner, exp.Null | exp.Literal | exp.Boolean):
            return exp.Boolean(this=isinstance(inner, exp.Null))
        return node
    if isinstance(node, exp.Not):
        inner = _null_folded(node.this)
        if isinstance(inner, exp.Boolean):
            return exp.Boolean(this=not inner.this)
        return inner if isinstance(inner, exp.Null) else exp.Not(this=inner)
    if isinstance(node, exp.And | exp.Or):
        sides = [_null_folded(node.this), _null_folded(node.expression)]
        decisive = isinstance(node, exp.Or)  # the value that decides: TRUE for OR, FALSE for AND
        if any(isinstance(x, exp.Boolean) and x.this is decisive for x in sides):
            return exp.Boolean(this=decisive)
        if all(isinstance(x, exp.Boolean) for x in sides):
            return exp.Boolean(this=not decisive)
        if all(isinstance(x, exp.Boolean | exp.Null) for x in sides):
            return exp.Null()
        return node.__class__(this=sides[0], expression=sides[1])
    if isinstance(node, exp.Coalesce):
        for value in (node.this, *node.expressions):
            folded = _null_folded(value)
            if not isinstance(folded, exp.Null):
                return folded
        return exp.Null()
    if isinstance(node, exp.Binary | exp.Neg | exp.Cast):
        rebuilt = node.copy()
        for key in ("this", "expression"):
            if isinstance(operand := node.args.get(key), exp.Expr):
                folded = _null_folded(operand)
                if isinstance(folded, exp.Null):
                    return exp.Null()
                rebuilt.set(key, folded)
        simplified: exp.Expr = simplify(rebuilt)
        return simplified
    return node


# Clauses that shape a subquery's rows beyond FROM/WHERE/SELECT (``with_``: its own CTEs).
_SHAPING_CLAUSES = ("group", "having", "limit", "order", "distinct", "with_")


def _shaping_clause(node: exp.Expr, clauses: Sequence[str] = _SHAPING_CLAUSES) -> str | None:
    """The first of ``clauses`` that ``node`` has, as SQL names it (``GROUP``, ``WITH``)."""
    return next((c.upper().rstrip("_") for c in clauses if node.args.get(c)), None)


def _sort_key(ordered: exp.Ordered, column_name: str) -> SortKey:
    """``ordered``'s direction and NULL placement (SQL's default when unsaid) on a column."""
    descending = bool(ordered.args.get("desc"))
    nulls_first = ordered.args.get("nulls_first")
    return SortKey(column_name, descending, (not descending) if nulls_first is None else bool(nulls_first))


def _correlation_key(conjunct: exp.Expr, inner: set[str]) -> tuple[exp.Expr, exp.Expr] | None:
    """``conjunct`` as (the subquery's side, the outer side) when it equates an expression over
    the subquery's tables (``inner``) with one over the outer query's only; else None."""
    if not isinstance(conjunct, exp.EQ):
        return None
    sides = (conjunct.this, conjunct.expression)
    owners = [{c.table for c in side.find_all(exp.Column)} for side in sides]
    for mine, theirs in ((0, 1), (1, 0)):
        if owners[mine] and owners[mine] <= inner and owners[theirs] and not owners[theirs] & inner:
            return sides[mine], sides[theirs]
    return None


def _equality_correlation(
    body: exp.Select, refusal: str
) -> tuple[list[exp.Expr], list[tuple[exp.Expr, exp.Expr]]]:
    """A subquery's WHERE conjuncts over its own tables (and those with subqueries of their own),
    and its correlations as (the subquery's side, the outer side) of equalities; any other
    correlation is refused as ``refusal``."""
    inner = _from_aliases(body)
    local: list[exp.Expr] = []
    keys: list[tuple[exp.Expr, exp.Expr]] = []
    for conjunct in conjuncts(body.args["where"].this if body.args.get("where") else None):
        tables = {c.table for c in conjunct.find_all(exp.Column)}
        if not tables - inner or _has_subquery(conjunct):
            local.append(conjunct)
            continue
        key = _correlation_key(conjunct, inner)
        if key is None:
            raise UnsupportedQueryError(refusal, _where(conjunct))
        keys.append(key)
    return local, keys


def _from_aliases(node: exp.Select) -> set[str]:
    from_ = node.args.get("from_")
    sources = [from_.this] if from_ is not None else []
    sources += [join.this for join in node.args.get("joins") or []]
    return {source.alias_or_name for source in sources}


def _windowed(node: exp.Expr) -> bool:
    """Whether ``node`` is the function a window computes (``SUM(x)`` of ``SUM(x) OVER (...)``,
    and ``LAG(x)`` of ``LAG(x) IGNORE NULLS OVER (...)``)."""
    if isinstance(node.parent, _CALL_CLAUSES) and node.arg_key == "this":
        node = node.parent
    return isinstance(node.parent, exp.Window) and node.arg_key == "this"


def _windows_in(expression: exp.Expr) -> list[exp.Window]:
    """The window functions in ``expression``, outside subqueries."""
    found: list[exp.Window] = []

    def visit(node: exp.Expr) -> None:
        if isinstance(node, exp.Window):
            found.append(node)
            return
        for child in node.iter_expressions():
            if not isinstance(child, exp.Query | exp.Subquery):
                visit(child)

    visit(expression)
    return found


def _aggregates_outside_subqueries(expression: exp.Expr) -> bool:
    def visit(node: exp.Expr) -> bool:
        if isinstance(node, exp.AggFunc) and not _windowed(node):
            return True
        return any(visit(c) for c in node.iter_expressions() if not isinstance(c, exp.Query | exp.Subquery))

    return visit(expression)


def _has_subquery(node: exp.Expr) -> bool:
    return any(isinstance(n, exp.Query | exp.Subquery) for n in node.walk() if n is not node) or isinstance(
        node, exp.Exists
    )


_UNSUPPORTED_SELECT_ARGS = {
    "laterals": "LATERAL VIEW",
    "sort": "SORT BY",
    "cluster": "CLUSTER BY",
    "distribute": "DISTRIBUTE BY",
    "pivots": "PIVOT",
}


def _subquery_construct(node: exp.Expr) -> str:
    """What a subquery inside an expression is, as an error names it."""
    if isinstance(node.parent, exp.Exists):
        return "EXISTS inside an expression (under OR, in CASE or the select list)"
    if isinstance(node.parent, exp.In):
        return "IN (subquery) inside an expression (under OR, in CASE or the select list)"
    return "scalar subquery"


def _refuse_unsupported_clauses(node: exp.Select) -> None:
    for arg, construct in _UNSUPPORTED_SELECT_ARGS.items():
        if node.args.get(arg):
            raise UnsupportedQueryError(construct, _where(node))


class _Builder:
    def __init__(self, schemas: TableSchemas, refs: Mapping[str, set[str]]) -> None:
        self.schemas = schemas
        self.refs = refs
        self.names = _Names()
        self.placeholders = 0  # numbers the scopes of scalar subqueries' and windows' values
        self.row_cap: RowCap | None = None  # the whole query's LIMIT without ORDER BY

    # -- expressions --------------------------------------------------------------------------
    def translate(
        self, expression: exp.Expr, scopes: Sequence[Scope], where: exp.Expr, *, opaque: bool = False
    ) -> exp.Expr:
        """The expression over unique names; scopes are searched innermost first. ``opaque``:
        it may hold aggregate functions of any kind (an aggregation's calls, and expressions
        over them); elsewhere only those the project evaluates."""
        for node in expression.walk():
            if isinstance(node, exp.Window):
                raise UnsupportedQueryError("window function", _where(node))
            if isinstance(node, exp.Query | exp.Subquery):
                raise UnsupportedQueryError(_subquery_construct(node), _where(where))
            if isinstance(node, exp.AggFunc) and type(node) not in _AGGREGATES and not opaque:
                raise UnsupportedQueryError(f"aggregate function {node.key.upper()}", _where(node))

        def resolve(node: exp.Expr) -> exp.Expr:
            if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
                for scope in scopes:
                    found = scope.get(node.table, {}).get(node.name)
                    if found is not None:
                        return column(found)
                raise QueryError(
                    f"cannot resolve column {node.sql(dialect='spark')} in {_where(where)[:200]!r}",
                    hint="check the column and table names",
                )
            return node

        return expression.copy().transform(resolve)

    # -- queries ------------------------------------------------------------------------------
    def query(
        self, node: exp.Expr, ctes: Mapping[str, exp.Expr], *, top: bool = False, outer: Sequence[Scope] = ()
    ) -> _Built:
        if isinstance(node, exp.Subquery):
            return self.query(node.this, ctes, top=top, outer=outer)
        if isinstance(node, exp.Union):
            return self.union(node, ctes, top=top, outer=outer)
        if isinstance(node, exp.Intersect | exp.Except):
            return self.set_difference(node, ctes, top=top, outer=outer)
        if isinstance(node, exp.Select):
            return self.select(node, ctes, top=top, outer=outer)
        if isinstance(node, exp.Table) and node.args.get("joins"):  # (a first one is written out)
            raise UnsupportedQueryError(
                "a join in parentheses on a join's right side",
                _where(node),
                hint="join the tables one after another without the parentheses",
            )
        raise UnsupportedQueryError(f"{type(node).__name__} as a query", _where(node))

    def _with(self, node: exp.Expr, ctes: Mapping[str, exp.Expr]) -> dict[str, exp.Expr]:
        merged = dict(ctes)
        with_ = node.args.get("with_")
        if with_ is not None:
            if with_.args.get("recursive"):
                raise UnsupportedQueryError("WITH RECURSIVE", _where(with_))
            for cte in with_.expressions:
                merged[cte.alias_or_name] = cte.this
        return merged

    def union(
        self, node: exp.Union, ctes: Mapping[str, exp.Expr], *, top: bool, outer: Sequence[Scope]
    ) -> _Built:
        ctes = self._with(node, ctes)
        inputs: list[_Built] = []

        def flatten(part: exp.Expr) -> None:
            # Nested UNION ALLs under a UNION ALL become one n-ary union; a distinct UNION is
            # DISTINCT over its two inputs.
            if (
                not node.args.get("distinct")
                and isinstance(part, exp.Union)
                and not part.args.get("distinct")
                and not part.args.get("order")
                and not part.args.get("limit")
            ):
                flatten(part.left)
                flatten(part.right)
            else:
                inputs.append(self.query(part, ctes, outer=outer))

        flatten(node.left)
        flatten(node.right)
        arity = {len(b.visible) for b in inputs}
        if len(arity) != 1:
            raise QueryError(f"UNION inputs have different numbers of columns in {_where(node)[:200]!r}")
        visible = inputs[0].visible
        rel: Relation = Union(tuple(b.rel for b in inputs), tuple(self.names.fresh(v) for v in visible))
        if node.args.get("distinct"):
            rel = Distinct(rel)
        return self._order_limit(node, _Built(rel, visible), top=top, scopes=(), agg_map={})

    def set_difference(
        self,
        node: exp.Intersect | exp.Except,
        ctes: Mapping[str, exp.Expr],
        *,
        top: bool,
        outer: Sequence[Scope],
    ) -> _Built:
        """``A INTERSECT B`` as the distinct rows of A with a match in B, ``A EXCEPT B`` without
        one: a semi or anti join on every column, NULLs matching NULLs (as set operations
        compare rows), under DISTINCT.

        Their ALL forms count duplicates: a row that A holds m times and B n times comes out
        min(m, n) times (INTERSECT ALL) or max(m - n, 0) times (EXCEPT ALL). Each side's copies
        of a row are numbered 1, 2, ... (ROW_NUMBER over a partition by every column), and the
        join matches the number too: copies 1..min(m, n) of A find a partner, copies n+1..m do
        not. The numbering is a window partitioned by the whole row, so each copy's
        provenance is every copy of its row, whichever number it got (which copy gets which
        is arbitrary), e.g. A = {x (fragment 1), x (fragment 4)}, B = {x (fragment 2)}:
        INTERSECT ALL gives x once, from fragments {1, 4} of A and {2} of B."""
        construct = node.key.upper()
        every = not node.args.get("distinct")
        ctes = self._with(node, ctes)
        left = self.query(node.left, ctes, outer=outer)
        right = self.query(node.right, ctes, outer=outer)
        if len(left.visible) != len(right.visible):
            raise QueryError(
                f"{construct} inputs have different numbers of columns in {_where(node)[:200]!r}"
            )
        matches = exp.and_(
            *(
                exp.NullSafeEQ(this=column(a), expression=column(b))
                for a, b in zip(left.rel.columns, right.rel.columns, strict=True)
            )
        )
        kind: JoinKind = "semi" if isinstance(node, exp.Intersect) else "anti"
        rel: Relation
        if every:
            numbered = [self._copies_numbered(side.rel) for side in (left, right)]
            copy_matches = exp.EQ(this=column(numbered[0][1]), expression=column(numbered[1][1]))
            joined = Join(numbered[0][0], numbered[1][0], kind, exp.and_(matches, copy_matches))
            rel = Project(joined, tuple((c, column(c)) for c in left.rel.columns))
        else:
            rel = Distinct(Join(left.rel, right.rel, kind, matches))
        return self._order_limit(node, _Built(rel, left.visible), top=top, scopes=(), agg_map={})

    def _copies_numbered(self, rel: Relation) -> tuple[Window, str]:
        """``rel`` with each copy of a row numbered among the copies, and that number's column."""
        name = self.names.fresh("copy")
        call = WindowCall("row_number")
        order = (SortKey(rel.columns[0]),)  # (the copies are equal: any order numbers them)
        return Window(rel, rel.columns, order, ((name, call),)), name

    def _source(
        self, node: exp.Expr, ctes: Mapping[str, exp.Expr], outer: Sequence[Scope]
    ) -> tuple[Relation, Scope]:
        alias = node.alias_or_name
        if isinstance(node, exp.Table):
            if not node.args.get("db") and node.name in ctes:
                built = self.query(
                    ctes[node.name], {k: v for k, v in ctes.items() if k != node.name}, outer=outer
                )
                return built.rel, {alias: dict(zip(built.visible, built.rel.columns, strict=True))}
            return self.scan(node, alias)
        if isinstance(node, exp.Subquery):
            built = self.query(node.this, ctes, outer=outer)
            return built.rel, {alias: dict(zip(built.visible, built.rel.columns, strict=True))}
        raise UnsupportedQueryError(f"{type(node).__name__} in FROM", _where(node))

    def scan(self, node: exp.Table, alias: str) -> tuple[Scan, Scope]:
        # A catalog qualifier (`lake.ns.table`) is checked by the service, which knows its own
        # catalog's name: here the table is its `ns.table`.
        if not node.args.get("db"):
            raise UnqualifiedTableError(
                f"table {node.sql(dialect='spark')} must be named as ns.table",
                hint="qualify it with its namespace",
            )
        table = f"{node.db}.{node.name}".lower()
        if table not in self.schemas:
            raise TableNotFoundError(table)
        schema = list(self.schemas[table])
        wanted = self.refs.get(alias, set())
        # The query names columns in any case (Spark resolves them case-insensitively, and
        # qualify() lower-cases them); the scan reads them by the names the files hold.
        chosen = [(c, t) for c, t in schema if c.lower() in wanted] or schema[:1]
        names = tuple(self.names.fresh(c.lower()) for c, _ in chosen)
        scan = Scan(table, alias, tuple(c for c, _ in chosen), names, tuple(t for _, t in chosen))
        return scan, {alias: {c.lower(): n for c, n in zip(scan.source_columns, names, strict=True)}}

    def _from(
        self, node: exp.Select, ctes: Mapping[str, exp.Expr], outer: Sequence[Scope]
    ) -> tuple[Relation, Scope]:
        from_ = node.args.get("from_")
        if from_ is None:
            raise UnsupportedQueryError("SELECT without FROM", _where(node))
        rel, scope = self._source(from_.this, ctes, outer)
        for join in node.args.get("joins") or []:
            right, right_scope = self._source(join.this, ctes, outer)
            combined = {**scope, **right_scope}
            side, kind = (join.side or "").upper(), (join.kind or "").upper()
            if join.args.get("using"):
                raise UnsupportedQueryError("JOIN ... USING", _where(join), hint="write the join with ON")
            on = join.args.get("on")
            if kind in ("SEMI", "ANTI") and side in ("", "LEFT") and on is not None:
                condition = self.translate(on, [combined, *outer], join)
                rel = Join(rel, right, "semi" if kind == "SEMI" else "anti", condition)
                continue  # the right side's columns are not visible after a semi/anti join
            written = f"{' '.join(p for p in (side, kind) if p)} JOIN"
            if side in ("LEFT", "RIGHT", "FULL") and kind in ("", "OUTER"):
                if on is None:
                    raise UnsupportedQueryError(
                        f"{written} without ON", _where(join), hint="give the join its ON condition"
                    )
                condition = self.translate(on, [combined, *outer], join)
                if side == "RIGHT":  # the same join with the padded side on the right
                    rel = Join(right, rel, "left", condition)
                else:
                    rel = Join(rel, right, "left" if side == "LEFT" else "full", condition)
                scope = combined
                continue
            if side or kind not in ("", "INNER", "CROSS"):
                raise UnsupportedQueryError(written, _where(join))
            if on is None:
                rel = Join(rel, right, "cross")
            else:
                rel = Join(rel, right, "inner", self.translate(on, [combined, *outer], join))
            scope = combined
        return rel, scope

    def _subquery_join(
        self, rel: Relation, predicate: exp.Expr, ctes: Mapping[str, exp.Expr], scopes: Sequence[Scope]
    ) -> Relation:
        negated = isinstance(predicate, exp.Not)
        inner = predicate.this if negated else predicate
        if isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, exp.In) and inner.args.get("query") is not None:
            try:
                built = self.query(inner.args["query"], ctes)
            except QueryError as exc:
                if "cannot resolve column" not in exc.message:
                    raise
                # qualify() validated every column, so an unresolved one refers to the outer query.
                exists: exp.Expr = _in_as_exists(inner, negated)
                return self._subquery_join(rel, exp.Not(this=exists) if negated else exists, ctes, scopes)
            # (a, b) IN (SELECT x, y ...): a semi join on both equalities.
            values = inner.this.expressions if isinstance(inner.this, exp.Tuple) else [inner.this]
            if len(built.visible) != len(values):
                raise QueryError(
                    f"an IN subquery must return as many columns as the values before IN "
                    f"({len(values)}): {_where(inner)[:200]!r}"
                )
            if negated and len(values) > 1:
                raise UnsupportedQueryError(
                    "NOT IN with several columns",
                    _where(inner),
                    hint="write it as NOT EXISTS (SELECT 1 FROM ... WHERE x = a AND y = b), minding NULLs",
                )
            condition = exp.and_(
                *[
                    exp.EQ(this=self.translate(value, scopes, inner), expression=column(name))
                    for value, name in zip(values, built.rel.columns, strict=True)
                ]
            )
            if negated:
                return Join(rel, built.rel, "anti", condition, null_aware=True)
            return Join(rel, built.rel, "semi", condition)
        if isinstance(inner, exp.Exists):
            try:
                if _aggregating(inner.this):
                    right, correlation = self._correlated_aggregation(inner, ctes, scopes)
                else:
                    right, correlation = self._correlated(inner, ctes, scopes)
            except _Uncorrelated:
                return self._exists_as_count(rel, inner, negated, ctes)
            return Join(rel, right, "anti" if negated else "semi", correlation)
        if not _scalar_subqueries(predicate):
            raise UnsupportedQueryError("a subquery in this position", _where(predicate))
        rel, replaced, with_values = self._with_scalars(rel, predicate, ctes, scopes, where=True)
        return Select(rel, self.translate(replaced, with_values, predicate))

    def _exists_as_count(
        self, rel: Relation, exists: exp.Exists, negated: bool, ctes: Mapping[str, exp.Expr]
    ) -> Relation:
        """An uncorrelated [NOT] EXISTS holds for every row or none: its subquery's row count,
        a scalar join's value, compared with 0 (its input read whole, as a scalar's)."""
        sub = exists.this.this if isinstance(exists.this, exp.Subquery) else exists.this
        if _aggregating(sub):  # count the rows it returns, not the rows it aggregates
            counting = exp.select(exp.alias_(exp.Count(this=exp.Star()), "n")).from_(
                exp.Subquery(this=sub.copy(), alias=exp.TableAlias(this=exp.to_identifier("__exists")))
            )
        else:
            counting = sub.copy()
            counting.set("expressions", [exp.alias_(exp.Count(this=exp.Star()), "n")])
        built = self.query(counting, ctes)
        count = column(built.rel.columns[0])
        holds = (
            exp.EQ(this=count, expression=exp.Literal.number(0))
            if negated
            else exp.GT(this=count, expression=exp.Literal.number(0))
        )
        return Select(Join(rel, built.rel, "scalar"), holds)

    def _with_scalars(
        self,
        rel: Relation,
        expression: exp.Expr,
        ctes: Mapping[str, exp.Expr],
        scopes: Sequence[Scope],
        *,
        where: bool,
        uncorrelated_only: bool = False,
    ) -> tuple[Relation, exp.Expr, list[Scope]]:
        """``rel`` joined with the value of each scalar subquery in ``expression``, the expression
        with columns of those values in their place, and the scopes that resolve the columns.
        ``where``: the expression is a WHERE conjunct (a NULL that it rejects drops the row)."""
        replaced, values, joins = self._scalar_values(
            expression, ctes, scopes, where=where, uncorrelated_only=uncorrelated_only
        )
        for right, kind, condition in joins:
            rel = Join(rel, right, kind, condition)
        return rel, replaced, [values, *scopes]

    def _scalar_values(
        self,
        expression: exp.Expr,
        ctes: Mapping[str, exp.Expr],
        scopes: Sequence[Scope],
        *,
        where: bool,
        uncorrelated_only: bool = False,
    ) -> tuple[exp.Expr, Scope, list[tuple[Relation, JoinKind, exp.Expr | None]]]:
        """:meth:`_with_scalars` before the joins: the expression, the scope of the value
        columns, and the joins that bring them (right side, kind, condition)."""
        replaced = expression.copy()
        values: Scope = {}
        joins: list[tuple[Relation, JoinKind, exp.Expr | None]] = []
        for sub in _scalar_subqueries(replaced):
            rejecting = where and _rejects_null(replaced, sub)
            name, *join = self._scalar(sub, ctes, scopes, rejecting, uncorrelated_only)
            joins.append(tuple(join))  # type: ignore[arg-type]
            self.placeholders += 1
            alias = f"__scalar_{self.placeholders}"
            values[alias] = {"value": name}
            sub.replace(exp.column("value", table=alias))
        return replaced, values, joins

    def _scalar(
        self,
        sub: exp.Subquery,
        ctes: Mapping[str, exp.Expr],
        scopes: Sequence[Scope],
        rejecting: bool,
        uncorrelated_only: bool,
    ) -> tuple[str, Relation, JoinKind, exp.Expr | None]:
        """The column holding ``sub``'s value, and the join that brings it: the relation
        joined on the right, the kind and the condition (module docstring)."""
        try:
            built = self.query(sub.this, ctes)
        except QueryError as exc:
            if "cannot resolve column" not in exc.message:
                raise
            # qualify() validated every column, so an unresolved one refers to the outer query.
            if uncorrelated_only:
                raise UnsupportedQueryError(
                    "a correlated scalar subquery in the select list or HAVING of an aggregation",
                    _where(sub),
                    hint="compute it in a derived table joined on the correlation",
                ) from exc
            return self._correlated_scalar(sub, ctes, scopes, rejecting)
        if len(built.visible) != 1:
            raise QueryError(f"a scalar subquery must return one column: {_where(sub)[:200]!r}")
        if not _one_row(built.rel) and isinstance(sub.parent, exp.In):  # (a membership test outside WHERE)
            raise UnsupportedQueryError(
                _subquery_construct(sub),
                _where(sub.parent),
                hint="make it a conjunct of WHERE (... AND x IN (SELECT ...)), or LEFT JOIN the "
                "subquery's DISTINCT keys and test them IS NOT NULL",
            )
        if not _one_row(built.rel):
            raise UnsupportedQueryError(
                "a scalar subquery that may return no row or several",
                _where(sub),
                hint="aggregate it without GROUP BY or HAVING (MAX(...), SUM(...)) so it returns one row",
            )
        return built.rel.columns[0], built.rel, "scalar", None

    def _correlated_scalar(
        self, sub: exp.Subquery, ctes: Mapping[str, exp.Expr], scopes: Sequence[Scope], rejecting: bool
    ) -> tuple[str, Relation, JoinKind, exp.Expr | None]:
        """A scalar subquery correlated through equalities, grouped by its side of them."""
        body = sub.this
        if not isinstance(body, exp.Select):
            raise UnsupportedQueryError("a correlated scalar subquery over a set operation", _where(sub))
        clause = _shaping_clause(body, (*_SHAPING_CLAUSES, "offset"))
        if clause is not None:
            raise UnsupportedQueryError(f"{clause} in a correlated scalar subquery", _where(sub))
        if len(body.expressions) != 1:
            raise QueryError(f"a scalar subquery must return one column: {_where(sub)[:200]!r}")
        item = body.expressions[0]
        value = item.this if isinstance(item, exp.Alias) else item
        if value.find(exp.AggFunc) is None:
            raise UnsupportedQueryError(
                "a correlated scalar subquery without an aggregate",
                _where(sub),
                hint="aggregate its value (MAX(...), SUM(...)) so each outer row gets one",
            )
        if value.find(exp.Count) is not None:
            raise UnsupportedQueryError(
                "COUNT in a correlated scalar subquery",
                _where(sub),
                hint="count in a derived table joined on the correlation, with COALESCE(n, 0)",
            )
        local, keys = _equality_correlation(body, "a non-equality correlation in a scalar subquery")
        grouped = body.copy()
        grouped.set("where", exp.Where(this=exp.and_(*local)) if local else None)
        grouped.set(
            "expressions",
            [
                exp.alias_(value.copy(), "value"),
                *(exp.alias_(k.copy(), f"key_{i}") for i, (k, _) in enumerate(keys)),
            ],
        )
        grouped.set("group", exp.Group(expressions=[k.copy() for k, _ in keys]))
        built = self._decorrelated(grouped, ctes, "a correlated scalar subquery", sub)
        value_name, *key_names = built.rel.columns
        condition = exp.and_(
            *(
                exp.EQ(this=self.translate(outer, scopes, sub), expression=column(key))
                for (_, outer), key in zip(keys, key_names, strict=True)
            )
        )
        return value_name, built.rel, "inner" if rejecting else "left", condition

    def _decorrelated(
        self, grouped: exp.Select, ctes: Mapping[str, exp.Expr], what: str, at: exp.Expr
    ) -> _Built:
        """A subquery rewritten to group by its correlations' sides, built on its own; a column
        it cannot resolve is an outer one read outside those equalities: refused by name."""
        try:
            return self.query(grouped, ctes)
        except QueryError as exc:
            if "cannot resolve column" not in exc.message:
                raise
            raise UnsupportedQueryError(
                f"{what} that reads outer columns outside its WHERE equalities", _where(at)
            ) from exc

    def _correlated_aggregation(
        self, exists: exp.Exists, ctes: Mapping[str, exp.Expr], outer: Sequence[Scope]
    ) -> tuple[Relation, exp.Expr]:
        """EXISTS over an aggregation correlated by equalities: the subquery grouped also by its
        side of each equality, and the join condition on those columns. For one outer row the
        subquery aggregates the rows whose side equals the outer row's value; grouping by that
        side as well splits the rows the same way for every outer row at once::

            EXISTS (SELECT 1 FROM t WHERE t.k = o.k GROUP BY t.g HAVING SUM(t.v) > 10)
              = o.k IN (SELECT t.k FROM t GROUP BY t.g, t.k HAVING SUM(t.v) > 10)

        e.g. t = {(k 1, g a, v 8), (1, a, 5), (2, a, 4)}: o.k = 1 passes (a's sum 13), 2 does
        not. Its provenance is the semi join's (rows of t in the groups that pass). Without
        GROUP BY, the aggregation over no rows still gives a row: its HAVING must be false there
        (an outer row with no partner would pass otherwise), and with no HAVING EXISTS always
        holds."""
        sub = exists.this.this if isinstance(exists.this, exp.Subquery) else exists.this
        if sub.args.get("with_") or sub.args.get("distinct"):
            raise UnsupportedQueryError("WITH or DISTINCT in an EXISTS over an aggregation", _where(exists))
        local, pairs = _equality_correlation(
            sub, "an EXISTS over an aggregation correlated by more than equalities"
        )
        if not pairs:
            raise _Uncorrelated()
        having = sub.args.get("having")
        if not sub.args.get("group"):
            holds = True if having is None else _holds_on_no_rows(having.this)
            if holds is not False:
                raise UnsupportedQueryError(
                    "an EXISTS over an aggregation without GROUP BY whose HAVING may hold on no rows",
                    _where(exists),
                    hint="EXISTS over a global aggregation always holds unless its HAVING rejects "
                    "the empty aggregate; write the condition on the outer query",
                )
        grouped = sub.copy()
        grouped.set("where", exp.Where(this=exp.and_(*local)) if local else None)
        sides = [inner.copy() for inner, _ in pairs]
        groups = [*(grouped.args["group"].expressions if grouped.args.get("group") else []), *sides]
        grouped.set("group", exp.Group(expressions=groups))
        grouped.set("expressions", [exp.alias_(s.copy(), f"__corr{i}") for i, s in enumerate(sides)])
        grouped.set("order", None)
        built = self._decorrelated(grouped, ctes, "an EXISTS over an aggregation", exists)
        condition = exp.and_(
            *(
                exp.EQ(this=self.translate(outer_side, outer, exists), expression=column(name))
                for (_, outer_side), name in zip(pairs, built.rel.columns, strict=True)
            )
        )
        return built.rel, condition

    def _correlated(
        self, exists: exp.Exists, ctes: Mapping[str, exp.Expr], outer: Sequence[Scope]
    ) -> tuple[Relation, exp.Expr]:
        """EXISTS (SELECT ... WHERE local AND correlated): the subquery and its join condition."""
        sub = exists.this
        if isinstance(sub, exp.Subquery):
            sub = sub.this
        if not isinstance(sub, exp.Select):
            raise UnsupportedQueryError("EXISTS over a set operation", _where(exists))
        clause = _shaping_clause(sub)
        if clause is not None:
            raise UnsupportedQueryError(f"{clause} inside EXISTS", _where(exists))
        rel, scope = self._from(sub, ctes, outer)
        local: list[exp.Expr] = []
        correlated: list[exp.Expr] = []
        nested: list[exp.Expr] = []
        for conjunct in conjuncts(sub.args["where"].this if sub.args.get("where") else None):
            if _has_subquery(conjunct):
                nested.append(conjunct)
                continue
            tables = {c.table for c in conjunct.find_all(exp.Column)}
            (correlated if tables - set(scope) else local).append(conjunct)
        if not correlated:
            raise _Uncorrelated()
        if local:
            rel = Select(rel, exp.and_(*(self.translate(c, [scope], sub) for c in local)))
        for conjunct in nested:
            rel = self._subquery_join(rel, conjunct, ctes, [scope])
        condition = exp.and_(*(self.translate(c, [scope, *outer], exists) for c in correlated))
        return rel, condition

    def select(
        self, node: exp.Select, ctes: Mapping[str, exp.Expr], *, top: bool, outer: Sequence[Scope]
    ) -> _Built:
        _refuse_unsupported_clauses(node)
        distinct = node.args.get("distinct")
        if distinct is not None and distinct.args.get("on"):
            raise UnsupportedQueryError("DISTINCT ON", _where(node))
        ctes = self._with(node, ctes)
        rel, scope = self._from(node, ctes, outer)
        scopes = [scope, *outer]

        plain: list[exp.Expr] = []
        subqueries: list[exp.Expr] = []
        for conjunct in conjuncts(node.args["where"].this if node.args.get("where") else None):
            (subqueries if _has_subquery(conjunct) else plain).append(conjunct)
        if plain:
            rel = Select(rel, exp.and_(*(self.translate(c, scopes, c) for c in plain)))
        for conjunct in subqueries:
            rel = self._subquery_join(rel, conjunct, ctes, scopes)

        visible = tuple(item.alias_or_name for item in node.expressions)
        group = node.args.get("group")
        parts = [p for p in (*node.expressions, node.args.get("having"), node.args.get("order")) if p]
        aggregated = bool(group) or any(_aggregates_outside_subqueries(p) for p in parts)
        # Scalar subqueries in the select list and HAVING: their values as columns. Over an
        # aggregation they join its output (a global one has its row even over no rows).
        node, values, joins = self._select_values(node, ctes, scopes, aggregated)
        scopes = [values, *scopes] if values else scopes
        if not aggregated:
            for right, kind, condition in joins:
                rel = Join(rel, right, kind, condition)
        items = node.expressions
        having = node.args.get("having")

        agg_map: dict[str, str] = {}
        if aggregated:
            rel, agg_map = self.aggregate(node, rel, scopes)
            for right, kind, condition in joins:
                rel = Join(rel, right, kind, condition)
            agg_map.update({name: name for scope in values.values() for name in scope.values()})
        if having is not None:
            rel = Select(rel, self._post(having.this, scopes, agg_map, having))
        node, rel, scopes = self._windows(node, rel, scopes, agg_map)
        qualify = node.args.get("qualify")
        if qualify is not None:  # QUALIFY filters on the windows' values, before the projection
            rel = Select(rel, self._post(qualify.this, scopes, agg_map, qualify))
        items = node.expressions
        outputs: list[tuple[str, exp.Expr]] = []
        for item, name in zip(items, visible, strict=True):
            source = item.this if isinstance(item, exp.Alias) else item
            expression = self._post(source, scopes, agg_map, item)
            if (
                isinstance(expression, exp.Column)
                and expression.name == name.lower()
                and name.lower() not in (n for n, _ in outputs)
            ):
                outputs.append((expression.name, expression))
            else:
                outputs.append((self.names.fresh(name), expression))
        rel = Project(rel, tuple(outputs))
        if distinct is not None:
            rel = Distinct(rel)
        return self._order_limit(node, _Built(rel, visible), top=top, scopes=scopes, agg_map=agg_map)

    def _windows(
        self, node: exp.Select, rel: Relation, scopes: Sequence[Scope], agg_map: dict[str, str]
    ) -> tuple[exp.Select, Relation, list[Scope]]:
        """``rel`` with a Window per distinct window function of the select list (after the
        aggregation and HAVING, as SQL evaluates them), ``node`` with columns of their values
        in their place, and the scopes that resolve those columns. ``agg_map`` learns them."""
        qualify = node.args.get("qualify")
        parts = [*node.expressions, *([qualify] if qualify is not None else [])]
        if not any(_windows_in(part) for part in parts):
            return node, rel, list(scopes)
        node = node.copy()
        qualify = node.args.get("qualify")
        values: Scope = {}
        computed: dict[str, str] = {}  # a window's SQL -> its column (QUALIFY repeats them)
        for item in [*node.expressions, *([qualify] if qualify is not None else [])]:
            for window in _windows_in(item):
                key = window.sql(dialect=SPARK)
                if key not in computed:
                    rel, computed[key] = self._window(window, rel, scopes, agg_map)
                self.placeholders += 1
                alias = f"__window_{self.placeholders}"
                values[alias] = {"value": computed[key]}
                if agg_map:  # over an aggregation: a column it may read
                    agg_map[computed[key]] = computed[key]
                window.replace(exp.column("value", table=alias))
        return node, rel, [values, *scopes]

    def _window(
        self, window: exp.Window, rel: Relation, scopes: Sequence[Scope], agg_map: Mapping[str, str]
    ) -> tuple[Relation, str]:
        """``rel`` with a Window computing ``window``, and the column of its value."""
        function = window.this
        func = _WINDOW_FUNCTIONS.get(type(function))
        if window.args.get("alias"):
            raise UnsupportedQueryError("a named window", _where(window))
        if func is None or function.args.get("ignore_nulls"):
            call = self._opaque_window_call(window, scopes, agg_map)
        else:
            arg = function.this if func not in RANKING_FUNCTIONS else None
            if isinstance(arg, exp.Distinct):
                raise UnsupportedQueryError("DISTINCT in a window function", _where(window))
            call = WindowCall(
                func,
                None
                if arg is None or isinstance(arg, exp.Star)
                else self._post(arg, scopes, agg_map, window),
            )
        # Partition and order keys as columns: computed ones are projected first.
        extra: list[tuple[str, exp.Expr]] = []

        def key_column(expression: exp.Expr) -> str:
            translated = self._post(expression, scopes, agg_map, window)
            if isinstance(translated, exp.Column) and translated.name in rel.columns:
                return translated.name
            name = self.names.fresh("window_key")
            extra.append((name, translated))
            return name

        partition = tuple(key_column(e) for e in window.args.get("partition_by") or [])
        order: list[SortKey] = []
        for ordered in window.args["order"].expressions if window.args.get("order") else []:
            order.append(_sort_key(ordered, key_column(ordered.this)))
        if func in RANKING_FUNCTIONS and not order:
            raise QueryError(f"{func.upper()}() needs an ORDER BY in its window: {_where(window)[:200]!r}")
        if extra:
            rel = Project(rel, tuple((c, column(c)) for c in rel.columns) + tuple(extra))
        spec = window.args.get("spec")
        frame = spec.sql(dialect=SPARK) if spec is not None else None
        name = self.names.fresh(call.label)
        return Window(rel, partition, tuple(order), ((name, call),), frame), name

    def _opaque_window_call(
        self, window: exp.Window, scopes: Sequence[Scope], agg_map: Mapping[str, str]
    ) -> WindowCall:
        """Another window function (LAG, LEAD, NTILE, FIRST_VALUE, STDDEV, ...), kept whole for
        Spark. Its value at a row depends on the row's partition, as every window function's
        here: the row's provenance is the partition's (see ``rewrites.capture``), and on the
        sketch's data its value is the same only where whole partitions are kept (see
        ``analysis.safety``). Refused where printing it for Spark would change it."""
        function = window.this
        if isinstance(function, exp.Star) or any(isinstance(n, exp.Distinct) for n in function.walk()):
            raise UnsupportedQueryError("DISTINCT in a window function", _where(window))
        translated = self._post(function, scopes, agg_map, window, window=True)
        _refuse_changed_in_print(function, translated, "window function", window)
        return WindowCall("opaque", translated)

    def _select_values(
        self, node: exp.Select, ctes: Mapping[str, exp.Expr], scopes: Sequence[Scope], aggregated: bool
    ) -> tuple[exp.Select, Scope, list[tuple[Relation, JoinKind, exp.Expr | None]]]:
        """``node`` with its select list's and HAVING's scalar subqueries replaced by value
        columns, their scope, and the joins that bring them (see :meth:`_with_scalars`)."""
        having = node.args.get("having")
        if not any(_scalar_subqueries(p) for p in (*node.expressions, *([having] if having else []))):
            return node, {}, []
        node = node.copy()
        values: Scope = {}
        joins: list[tuple[Relation, JoinKind, exp.Expr | None]] = []
        targets = [*node.expressions, *([node.args["having"].this] if having else [])]
        for part in targets:
            if not _scalar_subqueries(part):
                continue
            replaced, found, needed = self._scalar_values(
                part, ctes, scopes, where=False, uncorrelated_only=aggregated
            )
            part.replace(replaced)
            values.update(found)
            joins += needed
        return node, values, joins

    def _post(
        self,
        expression: exp.Expr,
        scopes: Sequence[Scope],
        agg_map: Mapping[str, str],
        where: exp.Expr,
        *,
        window: bool = False,
    ) -> exp.Expr:
        """An expression evaluated after the aggregation: aggregates and groups become columns.
        ``window``: it is a window's function, which may be any aggregate function."""
        if not agg_map:
            return self.translate(expression, scopes, where, opaque=window)
        translated = self.translate(expression, scopes, where, opaque=True)

        def substitute(node: exp.Expr) -> exp.Expr:
            found = agg_map.get(node.sql(dialect=SPARK))
            return column(found) if found is not None else node

        result = translated.transform(substitute)
        allowed = set(agg_map.values())
        stray = [c.name for c in result.find_all(exp.Column) if c.name not in allowed]
        if stray:
            for call in result.find_all(exp.Anonymous):
                if str(call.this).upper() in _UNREAD_AGGREGATES:  # not a column out of place
                    raise UnsupportedQueryError(f"aggregate function {str(call.this).upper()}", _where(where))
            raise QueryError(
                f"{_where(where)[:200]!r} uses {stray} outside an aggregate and not in GROUP BY",
                hint="add the column to GROUP BY or aggregate it",
            )
        return result

    def aggregate(
        self, node: exp.Select, rel: Relation, scopes: Sequence[Scope]
    ) -> tuple[Aggregate, dict[str, str]]:
        agg_map: dict[str, str] = {}
        groups: list[tuple[str, exp.Expr]] = []
        group = node.args.get("group")
        for g in group.expressions if group else []:
            translated = self.translate(g, scopes, g)
            key = translated.sql(dialect=SPARK)
            if key in agg_map:
                continue
            name = (
                translated.name
                if isinstance(translated, exp.Column)
                else self.names.fresh(g.alias_or_name or "grp")
            )
            agg_map[key] = name
            groups.append((name, translated))
        if group is not None and (
            group.args.get("rollup") or group.args.get("cube") or group.args.get("grouping_sets")
        ):
            raise UnsupportedQueryError("ROLLUP/CUBE/GROUPING SETS", _where(group), hint=_GROUPING_SETS_HINT)
        aggregates: list[tuple[str, AggCall]] = []
        aliases = {
            item.this.sql(dialect=SPARK): item.alias
            for item in node.expressions
            if isinstance(item, exp.Alias) and isinstance(item.this, (exp.AggFunc, *_CALL_CLAUSES))
        }
        parts: list[exp.Expr] = [*node.expressions]
        if node.args.get("having") is not None:
            parts.append(node.args["having"])
        if node.args.get("order") is not None:
            parts.append(node.args["order"])
        for part in parts:
            for function in part.find_all(exp.AggFunc):
                # PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY x), FIRST(x) IGNORE NULLS: the
                # call is the whole clause
                found = function.parent if isinstance(function.parent, _CALL_CLAUSES) else function
                if _windowed(found):  # a window's function: computed above the aggregation
                    continue
                if any(isinstance(a, exp.AggFunc) for a in found.walk() if a is not function):
                    raise UnsupportedQueryError("nested aggregate", _where(found))
                call = self._agg_call(found, scopes)
                key = self.translate(found, scopes, found, opaque=True).sql(dialect=SPARK)
                if key in agg_map:
                    continue
                alias = aliases.get(found.sql(dialect=SPARK))
                name = self.names.fresh(alias or call.label)
                agg_map[key] = name
                aggregates.append((name, call))
        return Aggregate(rel, tuple(groups), tuple(aggregates)), agg_map

    def _agg_call(self, found: exp.Expr, scopes: Sequence[Scope]) -> AggCall:
        if type(found) not in _AGGREGATES:
            return self._opaque_call(found, scopes)
        func = _AGGREGATES[type(found)]
        arg = found.this
        distinct = isinstance(arg, exp.Distinct)
        if distinct:
            if len(arg.expressions) > 1 and isinstance(found, exp.Count):  # the distinct tuples
                values = [self.translate(a, scopes, found) for a in arg.expressions]
                return AggCall("count", exp.Tuple(expressions=values), True)
            if len(arg.expressions) != 1:
                raise UnsupportedQueryError("DISTINCT over several columns in an aggregate", _where(found))
            arg = arg.expressions[0]
        if isinstance(found, exp.Count) and (arg is None or isinstance(arg, exp.Star)):
            return AggCall("count")
        if isinstance(arg, exp.Star) or arg is None:
            raise UnsupportedQueryError(f"{func}(*)", _where(found))
        return AggCall(func, self.translate(arg, scopes, found), distinct)  # type: ignore[arg-type]

    def _opaque_call(self, found: exp.Expr, scopes: Sequence[Scope]) -> AggCall:
        """Another aggregate function (STDDEV, MAX_BY, APPROX_COUNT_DISTINCT, ...), kept whole
        for Spark. A group's value depends on all the group's rows, whatever the function, so
        its provenance is the group's, as for the aggregates the project evaluates; where it
        only shows a value the incremental engine and the estimates never compute it (see
        ``rewrites.prune_outputs``). Refused when printing it for Spark would change it (an
        argument sqlglot drops, or another function's name)."""
        translated = self.translate(found, scopes, found, opaque=True)
        _refuse_changed_in_print(found, translated, "aggregate function", found)
        return AggCall("opaque", translated)

    def _order_limit(
        self, node: exp.Expr, built: _Built, *, top: bool, scopes: Sequence[Scope], agg_map: Mapping[str, str]
    ) -> _Built:
        order = node.args.get("order")
        limit = node.args.get("limit")
        if node.args.get("offset") is not None and limit is None:
            raise UnsupportedQueryError("OFFSET without LIMIT", _where(node), hint="add a LIMIT")
        if limit is not None and order is None:
            if not top:  # which rows it keeps decides the query's answer
                raise UnsupportedQueryError(
                    "LIMIT without ORDER BY in a subquery",
                    _where(node),
                    hint="add an ORDER BY that makes the rows deterministic",
                )
            self.row_cap = RowCap(*_limit_and_offset(node, limit))
            return built
        if order is None:
            return built
        rel = built.rel
        by_visible = dict(zip((v.lower() for v in built.visible), rel.columns, strict=True))
        outputs = dict(rel.outputs) if isinstance(rel, Project) else {}
        by_sql = {e.sql(dialect=SPARK): n for n, e in outputs.items()}
        keys: list[SortKey] = []
        hidden: list[tuple[str, exp.Expr]] = []
        for ordered in order.expressions:
            target = ordered.this
            name: str | None = None
            if isinstance(target, exp.Column) and not target.table and target.name.lower() in by_visible:
                name = by_visible[target.name.lower()]
            elif scopes:
                translated = self._post(select_aliases_expanded(target, node), scopes, agg_map, ordered)
                name = by_sql.get(translated.sql(dialect=SPARK))
                if name is None:
                    if not isinstance(rel, Project) or isinstance(built.rel, Distinct):
                        raise UnsupportedQueryError(
                            "ORDER BY an expression not in the select list", _where(ordered)
                        )
                    name = self.names.fresh("sort_key")
                    hidden.append((name, translated))
            else:
                raise UnsupportedQueryError("ORDER BY an expression over a set operation", _where(ordered))
            keys.append(_sort_key(ordered, name))
        if hidden:
            assert isinstance(rel, Project)
            rel = Project(rel.child, rel.outputs + tuple(hidden))
        if limit is not None:
            rel = TopK(rel, tuple(keys), *_limit_and_offset(node, limit))
        elif top:
            rel = Sort(rel, tuple(keys))
        else:
            return built  # ORDER BY without LIMIT inside a subquery orders nothing
        if hidden:
            rel = Project(rel, tuple((n, column(n)) for n in built.rel.columns))
        return _Built(rel, built.visible)


def _limit_and_offset(node: exp.Expr, limit: exp.Expr) -> tuple[int, int]:
    if isinstance(limit, exp.Fetch):  # FETCH FIRST [n] ROWS ONLY: n rows, one when n is left out
        count = limit.args.get("count") or exp.Literal.number(1)
    else:
        count = limit.expression
    if not isinstance(count, exp.Literal) or count.is_string:
        raise UnsupportedQueryError("a LIMIT that is not a number", _where(limit))
    skip = node.args.get("offset")
    skipped = skip.expression if skip is not None else exp.Literal.number(0)
    if not isinstance(skipped, exp.Literal) or skipped.is_string:
        raise UnsupportedQueryError("an OFFSET that is not a number", _where(skip or node))
    return int(count.name), int(skipped.name)


def _nested(schemas: TableSchemas) -> dict[str, object]:
    """``{namespace: {table: {column: type}}}``, as sqlglot's schema-taking passes want it."""
    nested: dict[str, object] = {}
    for table, cols in schemas.items():
        ns, name = table.split(".", 1)
        tables = nested.setdefault(ns, {})
        assert isinstance(tables, dict)
        tables[name] = dict(cols)
    return nested


def _qualify(tree: exp.Expr, schemas: TableSchemas) -> exp.Expr:
    nested = _nested(schemas)
    try:
        qualified = qualify(
            tree,
            schema=nested,
            dialect=SPARK,
            quote_identifiers=False,
            validate_qualify_columns=True,
            identify=False,
        )
    except OptimizeError as exc:
        raise QueryError(f"the query does not resolve: {exc}", hint="check column and table names") from exc
    return coerce(qualified, nested)


# Functions whose value changes from run to run: a sketch is the provenance of one query, and
# with these the same text asks another one tomorrow (BI tools print relative date filters as
# `date_add(current_date(), -6)`), or another one every run (random values).
_CHANGING: tuple[type[exp.Expr], ...] = (
    exp.CurrentDate,
    exp.CurrentDatetime,
    exp.CurrentTime,
    exp.CurrentTimestamp,
    exp.CurrentTimestampLTZ,
    exp.Localtimestamp,
    exp.Rand,
    exp.Randn,
    exp.Uuid,
)
_CHANGING_NAMES = frozenset({"now", "current_timezone", "shuffle", "random", "uuid"})


# Subtotals and grand totals depend on every row the WHERE clause keeps, so a sketch of such a
# report could skip no more than its WHERE clause does (tried as a UNION ALL of one GROUP BY per
# grouping set: every attribute was unsafe under its ORDER BY ... LIMIT, the grand total's
# group being cut short by any sketch).
_GROUPING_SETS_HINT = (
    "subtotals read every row the WHERE clause keeps, which no sketch can skip: sketch the "
    "report's finest grouping (GROUP BY every column of the ROLLUP or CUBE) and total its "
    "result, or run this query with use_sketches=False"
)


def _refuse_changing_values(tree: exp.Expr) -> None:
    for node in tree.walk():
        named = isinstance(node, exp.Anonymous) and str(node.this).lower() in _CHANGING_NAMES
        if isinstance(node, _CHANGING) or named:
            name = node.sql(dialect=SPARK).split("(")[0]
            raise UnsupportedQueryError(
                f"{name}, whose value changes from run to run",
                _where(node),
                hint="pass the value as a parameter (params={'day': ...}), so that each value "
                "gets its own sketch; the query runs without a sketch as it is",
            )


def _column_refs(tree: exp.Expr) -> dict[str, set[str]]:
    refs: dict[str, set[str]] = {}
    for col in tree.find_all(exp.Column):
        if col.table:
            refs.setdefault(col.table, set()).add(col.name)
    return refs


def to_ir(sql: str, schemas: TableSchemas, params: Mapping[str, Any] | None = None) -> ParsedQuery:
    """Parse Spark SQL over ``ns.table`` names into the IR; ``schemas`` lists each table's columns."""
    return ir_from_tree(parse_sql(sql), schemas, params)


def ir_from_tree(
    query: exp.Expr, schemas: TableSchemas, params: Mapping[str, Any] | None = None
) -> ParsedQuery:
    """:func:`to_ir` of a parsed query (left unchanged: parameters are bound into a copy)."""
    tree = written_out(_without_hints(bind_parameters(query, params)))
    _refuse_changing_values(tree)
    for pivot in tree.find_all(exp.Pivot):  # (Spark runs it: the plain query is not refused)
        unpivot = bool(pivot.args.get("unpivot"))
        raise UnsupportedQueryError(
            "UNPIVOT" if unpivot else "PIVOT",
            _where(pivot),
            hint="write it as a UNION ALL of one SELECT per column"
            if unpivot
            else "write each pivoted value as an aggregate of CASE WHEN (SUM(CASE WHEN k = 1 THEN v END))",
        )
    # Checked before anything else: a select list that is fine under ROLLUP is refused as not
    # grouped.
    for group in tree.find_all(exp.Group):
        nested = any(isinstance(e, exp.Rollup | exp.Cube | exp.GroupingSets) for e in group.expressions)
        if nested or group.args.get("rollup") or group.args.get("cube") or group.args.get("grouping_sets"):
            raise UnsupportedQueryError("ROLLUP/CUBE/GROUPING SETS", _where(group), hint=_GROUPING_SETS_HINT)
    lowered = {name.lower(): cols for name, cols in schemas.items()}
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        if isinstance(table.this, exp.Func):  # range(10), explode(...): rows of no table
            raise UnsupportedQueryError(
                f"table-valued function {table.this.sql(dialect=SPARK)}", _where(table)
            )
        if table.args.get("db") and f"{table.db}.{table.name}".lower() not in lowered:
            raise TableNotFoundError(f"{table.db}.{table.name}".lower())
        if not table.args.get("db") and table.name and table.name.lower() not in ctes:
            # Named here, before the names resolve: else its columns are what fails to resolve.
            raise UnqualifiedTableError(
                f"table {table.sql(dialect='spark')} must be named as ns.table",
                hint=f"qualify it with its namespace (e.g. myns.{table.name})",
            )
    qualified = _qualify(tree, {t: [(c.lower(), kind) for c, kind in cols] for t, cols in lowered.items()})
    inherit_subquery_orders(qualified)
    for exists in qualified.find_all(exp.Exists):
        # An EXISTS subquery's select list means nothing; dropping it keeps scans narrow.
        inner = exists.this.this if isinstance(exists.this, exp.Subquery) else exists.this
        if isinstance(inner, exp.Select) and not _aggregating(inner):  # (its aggregates decide)
            inner.set("expressions", [exp.Literal.number(1)])
    builder = _Builder(lowered, _column_refs(qualified))
    built = builder.query(qualified, {}, top=True)
    _refuse_arbitrary_deciding(built.rel)
    return ParsedQuery(built.rel, built.visible, tree.sql(dialect=SPARK), builder.row_cap)


# Spark aggregate functions sqlglot reads as unknown scalar functions (so not as aggregates).
_UNREAD_AGGREGATES = frozenset(
    {
        "TRY_SUM",
        "TRY_AVG",
        "HISTOGRAM_NUMERIC",
        "HLL_SKETCH_AGG",
        "HLL_UNION_AGG",
        "COUNT_MIN_SKETCH",
        "BITMAP_CONSTRUCT_AGG",
        "BITMAP_OR_AGG",
        "APPROX_TOP_K",
    }
)

# Clauses that belong to the aggregate call they wrap.
_CALL_CLAUSES = (exp.WithinGroup, exp.IgnoreNulls, exp.RespectNulls)

# Aggregate functions whose value Spark may compute differently over the same rows (which row
# comes first in a task, how partial results merge): fine to show, but a sketch cannot promise
# that a condition or an order on them picks the same rows on its data as on the full table.
_ARBITRARY_AGGREGATES = (
    exp.First,
    exp.Last,
    exp.AnyValue,
    exp.FirstValue,
    exp.LastValue,
    exp.ArrayAgg,
    exp.GroupConcat,
    exp.ApproxQuantile,
    exp.Mode,
)


def _refuse_changed_in_print(function: exp.Expr, translated: exp.Expr, what: str, where: exp.Expr) -> None:
    """Refuse a function kept whole for Spark that sqlglot would print as something else (an
    argument it drops, another function's name)."""
    try:
        printed = translated.sql(dialect=SPARK, unsupported_level=ErrorLevel.RAISE)
        same = type(sqlglot.parse_one(printed, read="spark")) is type(function)
    except (SqlglotError, ValueError):
        same = False
    if not same:
        name = _where(function).split("(", 1)[0]
        raise UnsupportedQueryError(f"{what} {name} with these arguments", _where(where))


def _refuse_arbitrary_deciding(plan: Relation) -> None:
    """Refuse a plan where an aggregate of :data:`_ARBITRARY_AGGREGATES` decides rows: one the
    plan still computes once only shown values are pruned."""
    stack = [prune_outputs(plan)]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if not isinstance(node, Aggregate):
            continue
        for _, call in node.aggregates:
            if call.func != "opaque" or call.arg is None:
                continue
            nulls = isinstance(call.arg, exp.IgnoreNulls | exp.RespectNulls)
            if isinstance(call.arg.this if nulls else call.arg, _ARBITRARY_AGGREGATES):
                name = call.label.upper()
                raise UnsupportedQueryError(
                    f"{name} in a condition, an order or a join",
                    call.arg.sql(dialect=SPARK)[:200],
                    hint=f"{name} may give other values over the same rows: show it, but filter or "
                    "order on a deterministic aggregate (MIN, MAX, ...)",
                )


# Verdicts that turn on which table a column belongs to, which stand-in schemas cannot know.
_DEPENDS_ON_COLUMN_OWNERS = frozenset(
    {
        "correlated IN subquery",
        "correlated NOT IN subquery",
        "an EXISTS over an aggregation correlated by more than equalities",
        "an EXISTS over an aggregation without GROUP BY whose HAVING may hold on no rows",
        "an EXISTS over an aggregation that reads outer columns outside its WHERE equalities",
        "a correlated scalar subquery in the select list or HAVING of an aggregation",
        "a correlated scalar subquery over a set operation",
        "a correlated scalar subquery without an aggregate",
        "a correlated scalar subquery that reads outer columns outside its WHERE equalities",
        "a non-equality correlation in a scalar subquery",
        "COUNT in a correlated scalar subquery",
        "a scalar subquery that may return no row or several",
    }
)


def check_supported(sql: str) -> None:
    """Refuse, without any table schema, a query the front end cannot support.

    For checks before the tables can be read (an Airflow DAG being parsed): the query must
    parse, and building its IR over stand-in schemas must not hit an unsupported construct.
    The stand-ins give each table the columns the query names on it; a column named without a
    table goes to a source of its own SELECT (a derived table that outputs it, else the first
    table), so a subquery never looks correlated for want of a schema. Name resolution is left
    to :func:`to_ir` with the real schemas.
    """
    tree = parse_sql(sql)
    if split_recursive(tree) is not None:  # refuses the recursions it cannot keep, by name
        return
    # Clauses refused whatever the schemas: refused here before the stand-ins are built (a
    # stand-in resolution problem would otherwise hide them: sqlglot 30.0 places a SORT BY's
    # output alias as a table column).
    for select in tree.find_all(exp.Select):
        _refuse_unsupported_clauses(select)
    # Placeholders stand for values: any literal shows the structure.
    tree = tree.transform(lambda n: exp.Literal.number(0) if isinstance(n, exp.Placeholder) else n)
    try:
        scopes = traverse_scope(tree)
    except OptimizeError:
        return  # sqlglot cannot scope it; to_ir will say what is wrong with the real schemas
    schemas: dict[str, dict[str, str]] = {}
    known: dict[str, str] = {}  # column -> alias of the table a single-source scope reads it from
    claimed: set[int] = set()  # columns already placed by an inner scope (listed first)
    for scope in scopes:
        tables = {
            alias: f"{source.db}.{source.name}".lower()
            for alias, source in scope.sources.items()
            if isinstance(source, exp.Table) and source.args.get("db")
        }
        for table in tables.values():
            schemas.setdefault(table, {})
        derived = {
            alias: {name.lower() for name in source.expression.named_selects}
            for alias, source in scope.sources.items()
            if isinstance(source, SqlglotScope) and isinstance(source.expression, exp.Query)
        }
        for col in scope.columns:
            if id(col) in claimed or not col.name or isinstance(col.this, exp.Star):
                continue
            claimed.add(id(col))
            name = col.name.lower()
            alias = col.table
            if not alias:
                alias = next((a for a, names in derived.items() if name in names), "")
                alias = alias or (known.get(name, "") if known.get(name) in tables else "")
                alias = alias or next(iter(tables), "")
                if alias in tables and len(scope.sources) > 1:
                    col.set("table", exp.to_identifier(alias))
            if alias in tables:
                schemas[tables[alias]][name] = "double"
                if len(scope.sources) == 1:
                    known.setdefault(name, alias)
    stand_ins = {table: list(cols.items()) or [("_", "double")] for table, cols in schemas.items()}
    try:
        to_ir(tree.sql(dialect=SPARK), stand_ins)
    except UnsupportedQueryError as exc:
        if exc.construct not in _DEPENDS_ON_COLUMN_OWNERS:
            raise
    except QueryError:
        return  # a resolution problem of the stand-in schemas, not of the query's structure
