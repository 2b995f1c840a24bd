"""A recursive view's state as Arrow tables, for the state store, and the view back from them.

The tables: ``nodes`` (the BDD nodes of every formula, children before parents: a variable and
two references each), ``rows``, ``seeds`` and ``edges`` (each row with the reference of its
formula), and per base table ``base{i}`` its rows' copies with the variable of each (NULL for a
copy no formula mentions: a row the members filtered out). A reference is 0 (false), 1 (true),
or ``2 * (node + 1) + complemented``: CUDD's edges may be complemented, and a node's children
are those of the node as stored, so a node is rebuilt as ``ite(var, high, low)`` and an edge
with the flag negates it. Restoring gives a view whose formulas are the same functions of the
same base tuples, so it answers every later change as the view that was stored would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pyarrow as pa

from sketch_core.recursive.absorption import AbsorptionView
from sketch_core.recursive.formulas import Formula, Formulas
from sketch_core.recursive.members import Members
from sketch_core.recursive.rule import DEFAULT_NODE_LIMIT, Row
from sketch_core.recursive.view import RecursiveView

_REF = "__formula"
_COPY = "__copy"
_VARIABLE = "__variable"


def base_tables(members: Members) -> list[str]:
    """The base tables whose rows the view keeps, in the order of their ``base{i}`` tables."""
    return sorted({t for t in (members.seed_table, members.edge_table) if t is not None})


def view_state(view: RecursiveView, schemas: Mapping[str, pa.Schema]) -> dict[str, pa.Table]:
    """The view's state (absorption provenance only) as tables; ``schemas``: the base tables'."""
    engine = view.engine
    assert isinstance(engine, AbsorptionView)
    formulas = engine.formulas
    nodes = _Nodes(formulas)
    members = view.members
    edge_schema = pa.schema([pa.field(f"e{i}", f.type) for i, f in enumerate(schemas[members.edge_table])])
    out = {
        "rows": _rows(engine.rows, members.schema, nodes),
        "seeds": _rows(engine.seeds, members.schema, nodes),
        "edges": _rows(engine.edges, edge_schema, nodes),
    }
    for i, table in enumerate(base_tables(members)):
        copies = [
            (row, copy, formulas.name_of((table, row, copy)))
            for (name, row), count in view.copies.items()
            if name == table
            for copy in range(count)
        ]
        out[f"base{i}"] = _table(
            [row for row, _, _ in copies],
            schemas[table],
            {
                _COPY: pa.array([c for _, c, _ in copies], pa.int64()),
                _VARIABLE: pa.array([v for *_, v in copies], pa.string()),
            },
        )
    out["nodes"] = nodes.table()
    return out


def restored_view(
    members: Members, state: Mapping[str, pa.Table], node_limit: int = DEFAULT_NODE_LIMIT
) -> RecursiveView:
    """The view stored as ``state`` (see :func:`view_state`)."""
    view = RecursiveView(members, node_limit=node_limit, seeded=False)
    engine = view.engine
    assert isinstance(engine, AbsorptionView)
    formulas = engine.formulas
    for i, table in enumerate(base_tables(members)):
        stored = state[f"base{i}"]
        copies = stored.column(_COPY).to_pylist()
        variables = stored.column(_VARIABLE).to_pylist()
        rows = _tuples(stored.drop_columns([_COPY, _VARIABLE]))
        for row, copy, variable in zip(rows, copies, variables, strict=True):
            view.copies[(table, row)] = max(view.copies.get((table, row), 0), copy + 1)
            if variable is not None:
                formulas.adopt((table, row, copy), variable)
    formula = _build(formulas, state["nodes"])
    engine.restore(
        rows=_stored_rows(state["rows"], formula),
        seeds=_stored_rows(state["seeds"], formula),
        edges=_stored_rows(state["edges"], formula),
    )
    return view


def encode_formulas(formulas: Formulas, roots: Sequence[Formula]) -> tuple[pa.Table, list[int]]:
    """The nodes of ``roots`` as a table, and each root's reference into it."""
    nodes = _Nodes(formulas)
    references = [nodes.reference(root) for root in roots]
    return nodes.table(), references


def decode_formulas(formulas: Formulas, nodes: pa.Table) -> Callable[[int], Formula]:
    """The nodes of an :func:`encode_formulas` table rebuilt in ``formulas`` (whose variables
    it names must be known there); returns the decoder of references to them."""
    return _build(formulas, nodes)


class _Nodes:
    """Numbers the nodes of the formulas it is given, children first."""

    def __init__(self, formulas: Formulas) -> None:
        self.formulas = formulas
        self.index: dict[int, int] = {}
        self.variables: list[str] = []
        self.lows: list[int] = []
        self.highs: list[int] = []

    def reference(self, u: Formula) -> int:
        """``u``'s reference (0 false, 1 true, else twice its node's number plus 2, plus 1 when
        complemented), its nodes numbered first."""
        stack: list[tuple[Formula, bool]] = [(u, False)]
        while stack:  # iterative: a BDD is as deep as its variables are many
            node, expanded = stack.pop()
            if node == self.formulas.true or node == self.formulas.false:
                continue
            key = int(~node if node.negated else node)
            if key in self.index:
                continue
            if expanded:
                self.index[key] = len(self.variables)
                self.variables.append(node.var)
                self.lows.append(self._known(node.low))
                self.highs.append(self._known(node.high))
            else:
                stack += [(node, True), (node.high, False), (node.low, False)]
        return self._known(u)

    def _known(self, u: Formula) -> int:
        if u == self.formulas.true:
            return 1
        if u == self.formulas.false:
            return 0
        key = int(~u if u.negated else u)
        return 2 * (self.index[key] + 1) + (1 if u.negated else 0)

    def table(self) -> pa.Table:
        return pa.table(
            {
                "variable": pa.array(self.variables, pa.string()),
                "low": pa.array(self.lows, pa.int64()),
                "high": pa.array(self.highs, pa.int64()),
            }
        )


def _build(formulas: Formulas, nodes: pa.Table) -> Callable[[int], Formula]:
    """The stored nodes rebuilt in ``formulas``; returns the decoder of references to them."""
    built: list[Formula] = []

    def formula(reference: int) -> Formula:
        if reference < 2:
            return formulas.true if reference else formulas.false
        node = built[reference // 2 - 1]
        return ~node if reference % 2 else node

    for variable, low, high in zip(
        nodes.column("variable").to_pylist(),
        nodes.column("low").to_pylist(),
        nodes.column("high").to_pylist(),
        strict=True,
    ):
        built.append(formulas.node(variable, formula(high), formula(low)))
    return formula


def _rows(rows: Mapping[Row, Formula], schema: pa.Schema, nodes: _Nodes) -> pa.Table:
    references = [nodes.reference(f) for f in rows.values()]
    return _table(list(rows), schema, {_REF: pa.array(references, pa.int64())})


def _table(rows: Sequence[Row], schema: pa.Schema, extra: Mapping[str, pa.Array]) -> pa.Table:
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in schema]
    arrays = [pa.array(list(c), f.type) for c, f in zip(columns, schema, strict=True)]
    return pa.table(arrays + list(extra.values()), names=[*schema.names, *extra])


def _tuples(table: pa.Table) -> list[Row]:
    columns = [c.to_pylist() for c in table.columns]
    return list(zip(*columns, strict=True)) if columns else [() for _ in range(table.num_rows)]


def _stored_rows(table: pa.Table, formula: Callable[[int], Formula]) -> dict[Row, Formula]:
    references = table.column(_REF).to_pylist()
    rows = _tuples(table.drop_columns([_REF]))
    return {row: formula(r) for row, r in zip(rows, references, strict=True)}
