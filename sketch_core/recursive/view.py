"""A recursive CTE's rows over base tables, maintained as rows of those tables come and go.

Each row of a base table is a base tuple: its key is ``(table, row, copy)``, where ``copy``
numbers identical rows (so deleting one of two identical links leaves the other's
derivations). A row of the base member's table gives a seed and a row of the recursive
member's table an edge (:mod:`.members`); where both members read one table, a row is both,
under one key. The engine (absorption provenance, or DRed for comparison) does the rest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping
from typing import Literal

import pyarrow as pa

from sketch_core.errors import InvalidDataError
from sketch_core.recursive.absorption import AbsorptionView
from sketch_core.recursive.dred import DRedView
from sketch_core.recursive.members import Members
from sketch_core.recursive.rule import DEFAULT_NODE_LIMIT, DEFAULT_SECONDS_LIMIT, Change, Derived, Row

BaseKey = tuple[str, Row, int]


class RecursiveView:
    def __init__(
        self,
        members: Members,
        engine: Literal["absorption", "dred"] = "absorption",
        node_limit: int = DEFAULT_NODE_LIMIT,
        seconds_limit: float | None = DEFAULT_SECONDS_LIMIT,
        *,
        seeded: bool = True,
    ) -> None:
        """``seeded=False``: without the constant seed of a base member that reads no table
        (a view about to be restored has it among its stored seeds)."""
        self.members = members
        self.engine: AbsorptionView | DRedView = (
            AbsorptionView(members.rule, node_limit=node_limit, seconds_limit=seconds_limit)
            if engine == "absorption"
            else DRedView(members.rule, members.copied, members.edge_copied)
        )
        # Per base row, the copies of it the view has (identical rows are tuples of their own).
        self.copies: dict[tuple[str, Row], int] = {}
        if members.constant_seed is not None and seeded:
            self.engine.insert([(members.constant_seed, frozenset())])

    @property
    def rows(self) -> set[Row]:
        return set(self.engine.rows)

    def insert(self, tables: Mapping[str, pa.Table]) -> Change:
        """Rows added to base tables (by name; tables the query does not read are ignored)."""
        m = self.members
        read = {name: rows for name, rows in tables.items() if name in (m.seed_table, m.edge_table)}
        given = {
            name: (
                m.seeds_of(rows) if name == m.seed_table else [None] * rows.num_rows,
                m.edges_of(rows) if name == m.edge_table else [None] * rows.num_rows,
            )
            for name, rows in read.items()
        }
        self._check_keys([e for _, edges_of in given.values() for e in edges_of if e is not None])
        seeds: list[Derived] = []
        edges: list[Derived] = []
        for name, rows in read.items():
            for row, seed, edge in zip(_tuples(rows), *given[name], strict=True):
                key = frozenset({self._new_key(name, row)})
                seeds += [(seed, key)] if seed is not None else []
                edges += [(edge, key)] if edge is not None else []
        return self.engine.insert(seeds, edges)

    def delete(self, tables: Mapping[str, pa.Table]) -> Change:
        """Rows removed from base tables (each must be in its table; if one is not, nothing
        changes). Of identical rows, the last copies go."""
        counts = Counter(
            (name, row)
            for name, rows in tables.items()
            if name in (self.members.seed_table, self.members.edge_table)
            for row in _tuples(rows)
        )
        for (table, row), count in counts.items():
            if count > self.copies.get((table, row), 0):
                raise InvalidDataError(
                    f"a row deleted from {table} that the view of {self.members.name} never had: {row}",
                    hint="hand the view every row of its base tables (deltas between two snapshots)",
                )
        gone: list[Hashable] = []
        for (table, row), count in counts.items():
            left = self.copies[(table, row)] - count
            self.copies[(table, row)] = left
            gone += [(table, row, copy) for copy in range(left, left + count)]
        return self.engine.delete(gone)

    def _check_keys(self, edges: list[Row]) -> None:
        """An edge with a NULL join key joins nothing in SQL; in a graph it is a broken row, so
        it is refused before anything changes."""
        rule = self.members.rule
        broken = next((edge for edge in edges if any(v is None for v in rule.other_key(edge))), None)
        if broken is not None:
            raise InvalidDataError(
                f"{self.members.edge_table} has a row with a NULL join key, {broken}, which the "
                f"recursion of {self.members.name} reads as an edge",
                hint="fill or delete such rows, or filter them out in the recursive member "
                "(WHERE ... IS NOT NULL)",
            )

    def _new_key(self, table: str, row: Row) -> BaseKey:
        copy = self.copies.get((table, row), 0)
        self.copies[(table, row)] = copy + 1
        return (table, row, copy)


def _tuples(table: pa.Table) -> list[Row]:
    return [tuple(r.values()) for r in table.to_pylist()]
