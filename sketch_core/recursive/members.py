"""The members of a recursive CTE (:mod:`.query`) compiled for the engines (:mod:`.rule`),
their expressions evaluated by Arrow with Spark's rules (the incremental engine's translator).

Supported shapes (others are refused by name):

* the base member reads one table (``FROM t [WHERE ...]``), or none (``SELECT 1, 'root'``):
  each row of ``t`` that passes its WHERE gives one seed;
* the recursive member joins the CTE with one table, by ``JOIN ... ON`` or a comma and WHERE.
  Its conditions are split: equalities between a CTE column and a column of the table are the
  join keys (``own``/``other``), conditions on the table alone filter the edges (each edge is a
  whole row of the table), and the rest is checked on each derived pair with the select list.

Example: in ``SELECT r.src, l.dst, r.n + 1 FROM reach r JOIN g.links l ON l.src = r.dst WHERE
r.n < 5 AND l.w > 0``, the key is ``r.dst = l.src``, ``l.w > 0`` filters the edges, and ``r.n <
5`` is checked with ``(r.src, l.dst, r.n + 1)`` on every pair a round derives.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from sketch_core.algebra.ir import conjuncts
from sketch_core.errors import QueryError, UnsupportedQueryError
from sketch_core.incremental.expressions import ExpressionTranslator, evaluate
from sketch_core.recursive.query import RecursiveQuery, member_types_differ, where
from sketch_core.recursive.rule import DEFAULT_DERIVATION_LIMIT, LinearRule, Row
from sketch_core.recursive.selection import find_selection

# Rows of a base table -> per row, what it gives (a seed, an edge), or None where filtered.
Rows = Callable[[pa.Table], list[Row | None]]


@dataclass(frozen=True)
class Members:
    name: str
    schema: pa.Schema  # the CTE's columns and types (the base member's)
    seed_table: str | None  # None: the base member reads no table (one constant seed)
    edge_table: str
    rule: LinearRule
    seeds_of: Rows
    edges_of: Rows
    constant_seed: Row | None = None
    # Derived columns copied from the CTE row as they are: (derived position, CTE position).
    copied: tuple[tuple[int, int], ...] = ()
    edge_copied: tuple[tuple[int, int], ...] = ()  # ... from the edge: (derived position, edge position)


def _table_name(table: exp.Table) -> str:
    return f"{table.db}.{table.name}" if table.db else table.name


def _renamed(node: exp.Expr, rename: Callable[[exp.Column], str]) -> exp.Expr:
    return node.copy().transform(lambda n: exp.column(rename(n)) if isinstance(n, exp.Column) else n)


def _row_values(
    table: pa.Table, outputs: dict[str, pc.Expression], keep: pc.Expression | None
) -> list[Row | None]:
    """Per row of ``table``, the outputs' values, or None where ``keep`` is not true."""
    if keep is not None:
        outputs = {**outputs, "__keep": keep}
    values = evaluate(table, outputs)
    columns = [values.column(n).to_pylist() for n in values.column_names if n != "__keep"]
    kept = (
        pc.fill_null(values.column("__keep"), False).to_pylist()
        if keep is not None
        else [True] * table.num_rows
    )
    return (
        [tuple(row) if k else None for k, row in zip(kept, zip(*columns, strict=True), strict=True)]
        if columns
        else []
    )


def compile_members(
    query: RecursiveQuery, schemas: Mapping[str, pa.Schema], limit: int = DEFAULT_DERIVATION_LIMIT
) -> Members:
    """The engines' view of ``query``'s members over tables of ``schemas``."""
    base_table, seeds_of, constant, cte_schema = _base_member(query, schemas)
    edge_table, own, other, edges_of, derive, copies = _recursive_member(query, schemas, cte_schema)
    selection = find_selection(query, schemas[edge_table].names)
    rule = LinearRule(own, other, derive, limit, selection)
    return Members(
        query.name, cte_schema, base_table, edge_table, rule, seeds_of, edges_of, constant, *copies
    )


def _base_member(
    query: RecursiveQuery, schemas: Mapping[str, pa.Schema]
) -> tuple[str | None, Rows, Row | None, pa.Schema]:
    base = query.base
    if base.args.get("joins") or base.args.get("group") or base.find(exp.AggFunc) or base.find(exp.Window):
        raise UnsupportedQueryError(f"a base member of {query.name} other than one table's rows", where(base))
    source = base.args.get("from_")
    if source is not None and not isinstance(source.this, exp.Table):
        raise UnsupportedQueryError(f"a base member of {query.name} reading a subquery", where(base))
    name = _table_name(source.this) if source is not None else None
    if name is not None and name not in schemas:
        raise QueryError(f"table {name} does not exist (in the base member of {query.name})")
    schema = schemas[name] if name is not None else pa.schema([])

    def column(node: exp.Column) -> str:
        if node.name not in schema.names:
            raise QueryError(
                f"column {node.sql()} is not a column of {name} (in the base member of {query.name})"
            )
        return node.name

    translate = ExpressionTranslator(schema)
    outputs = {f"c{i}": translate(_renamed(e.unalias(), column)) for i, e in enumerate(base.expressions)}
    condition = base.args.get("where")
    keep = translate(_renamed(condition.this, column)) if condition is not None else None
    typed = evaluate(schema.empty_table(), outputs).schema
    cte_schema = pa.schema([pa.field(c, f.type) for c, f in zip(query.columns, typed, strict=True)])
    if name is None:  # constants: the one seed, derived from no base tuple
        one = _row_values(pa.table({"x": [0]}), outputs, keep)
        return None, lambda rows: [], one[0] if one else None, cte_schema
    return name, lambda rows: _row_values(rows, outputs, keep), None, cte_schema


def _recursive_member(
    query: RecursiveQuery, schemas: Mapping[str, pa.Schema], cte: pa.Schema
) -> tuple[
    str,
    tuple[int, ...],
    tuple[int, ...],
    Rows,
    Callable[[Sequence[tuple[Row, Row]]], list[Row | None]],
    tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]],
]:
    step = query.step
    tables = [t for t in step.find_all(exp.Table)]
    others = [t for t in tables if t.db or t.name != query.name]
    if len(others) != 1:
        raise UnsupportedQueryError(
            f"a recursive member of {query.name} joining {len(others)} tables besides it (one is supported)",
            where(step),
        )
    edge = others[0]
    edge_table = _table_name(edge)
    if edge_table not in schemas:
        raise QueryError(f"table {edge_table} does not exist (in the recursive member of {query.name})")
    schema = schemas[edge_table]
    own_alias = next(t.alias_or_name for t in tables if not t.db and t.name == query.name)
    edge_alias = edge.alias_or_name

    def side(node: exp.Column) -> str:
        qualifier = node.table
        if qualifier == own_alias or (
            not qualifier and node.name in cte.names and node.name not in schema.names
        ):
            if node.name not in cte.names:
                raise QueryError(f"column {node.sql()} is not a column of {query.name}")
            return "r"
        if qualifier == edge_alias or (
            not qualifier and node.name in schema.names and node.name not in cte.names
        ):
            if node.name not in schema.names:
                raise QueryError(f"column {node.sql()} is not a column of {edge_table}")
            return "e"
        raise QueryError(
            f"column {node.sql()} is ambiguous or unknown in the recursive member of {query.name}"
        )

    def rename(node: exp.Column) -> str:
        return f"r{cte.names.index(node.name)}" if side(node) == "r" else f"e{schema.names.index(node.name)}"

    conditions = conjuncts(step.args["where"].this if step.args.get("where") else None)
    for join in step.args.get("joins") or []:
        conditions += conjuncts(join.args.get("on"))
    own: list[int] = []
    other: list[int] = []
    edge_filters: list[exp.Expr] = []
    residual: list[exp.Expr] = []
    for condition in conditions:
        sides = {side(c) for c in condition.find_all(exp.Column)}
        if isinstance(condition, exp.EQ) and all(
            isinstance(x, exp.Column) for x in (condition.this, condition.expression)
        ):
            left, right = condition.this, condition.expression
            if {side(left), side(right)} == {"r", "e"}:
                r, e = (left, right) if side(left) == "r" else (right, left)
                own.append(cte.names.index(r.name))
                other.append(schema.names.index(e.name))
                continue
        (edge_filters if sides == {"e"} else residual).append(condition)

    edge_translate = ExpressionTranslator(schema)
    edge_outputs = {f"e{i}": pc.field(n) for i, n in enumerate(schema.names)}
    edge_keep = edge_translate(_renamed(exp.and_(*edge_filters), lambda c: c.name)) if edge_filters else None

    pair_schema = pa.schema(
        [pa.field(f"r{i}", f.type) for i, f in enumerate(cte)]
        + [pa.field(f"e{i}", f.type) for i, f in enumerate(schema)]
    )
    translate = ExpressionTranslator(pair_schema)
    outputs = {f"c{i}": translate(_renamed(e.unalias(), rename)) for i, e in enumerate(step.expressions)}
    keep = translate(_renamed(exp.and_(*residual), rename)) if residual else None
    for field, output in zip(cte, outputs.values(), strict=True):
        # Spark does not widen a recursive CTE's columns between its members: it refuses the
        # query, and so does this.
        if (kind := translate.type_of(output)) != field.type:
            raise member_types_differ(query.name, field.name, str(kind), str(field.type), step)

    # The derived columns that are a column of either side as it is (DRed's indexes).
    bare = [(i, e) for i, e in enumerate(x.unalias() for x in step.expressions) if isinstance(e, exp.Column)]

    def derive(pairs: Sequence[tuple[Row, Row]]) -> list[Row | None]:
        if not pairs:
            return []
        columns = list(zip(*(row + edge for row, edge in pairs), strict=True))
        table = pa.table(
            [pa.array(c, f.type) for c, f in zip(columns, pair_schema, strict=True)], schema=pair_schema
        )
        return _row_values(table, outputs, keep)

    return (
        edge_table,
        tuple(own),
        tuple(other),
        lambda rows: _row_values(rows, edge_outputs, edge_keep),
        derive,
        (
            tuple((i, cte.names.index(e.name)) for i, e in bare if side(e) == "r"),
            tuple((i, schema.names.index(e.name)) for i, e in bare if side(e) == "e"),
        ),
    )
