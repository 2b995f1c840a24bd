"""Provenance sketches of recursive queries, kept with absorption provenance.

A recursive query's provenance sketch holds, per base table of its recursion, the fragments
of the base rows that the rows its outer query reads can be derived from: the variables of
those rows' formulas (:mod:`.absorption`), mapped to their fragments by the table's range
partition.

**Safety** (PBDS's argument, carried over). A recursive CTE built from joins, selections and
projections is monotone: on a subset of the base rows it yields a subset of its rows. The
sketch's data (whole fragments) holds every base row of some minimal derivation of every row
the outer query reads, so each of those rows is derived there too, and nothing the full data
does not derive appears. So the CTE's rows that the outer query reads are the same on both,
whatever the attribute and the fragments; the sketch is safe on any attribute, as long as

* the sketched tables are read only inside the recursion (the outer query sees them whole:
  :func:`.outer.tables_read_outside`), and
* duplicates do not count (``UNION``, or an outer query that reads the set: see
  :func:`.outer.check_duplicates_unread`). A ``UNION ALL`` row has one copy per derivation,
  and the sketch keeps the base rows of minimal derivations only.

The outer query's own selection narrows the rows whose derivations count
(:func:`.outer.outer_selection`). Aggregates over the CTE (MIN, MAX, COUNT) read their groups'
rows among those, so they need no more.

Under an aggregate selection (:mod:`.selection`: least-cost paths) the outer query reads each
group's best cost only, so only the best rows' derivations count. On the sketch's data each
best row is still derived (monotonicity again), and no row of its group beats it (a subset of
the base rows derives a subset of the rows), so every group the outer query reads has the
same best cost. The formula of a best row may miss derivations through rows that were never
derived from (held rows); it still holds one whole derivation, which is all safety needs.

Example: reachability from node 1 over ``g.links`` partitioned on ``src``: the sketch is the
fragments of the links on some path from 1, and the query over those fragments reaches the
same nodes.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sketch_core.incremental.expressions import evaluate
from sketch_core.partitions.range_partition import RangePartition
from sketch_core.recursive.absorption import AbsorptionView
from sketch_core.recursive.members import Members
from sketch_core.recursive.rule import Change, Row
from sketch_core.recursive.state import base_tables, restored_view, view_state
from sketch_core.recursive.view import BaseKey, RecursiveView


@dataclass
class RecursiveSketch:
    """A recursive view kept for its sketch: ``partitions`` per base table (by name),
    ``selection`` the outer query's condition on the CTE's rows (None: every row), the tables'
    schemas, and the commit ``sequence`` the view is at."""

    view: RecursiveView
    partitions: dict[str, RangePartition]
    selection: pc.Expression | None
    schemas: dict[str, pa.Schema]
    sequence: int

    @classmethod
    def build(
        cls,
        members: Members,
        partitions: Mapping[str, RangePartition],
        selection: pc.Expression | None,
        tables: Mapping[str, pa.Table],
        sequence: int,
    ) -> RecursiveSketch:
        """The view over ``tables``' rows (the base tables at ``sequence``)."""
        view = RecursiveView(members)
        view.insert(tables)
        return cls(view, dict(partitions), selection, {t: r.schema for t, r in tables.items()}, sequence)

    @classmethod
    def restore(
        cls,
        members: Members,
        partitions: Mapping[str, RangePartition],
        selection: pc.Expression | None,
        schemas: Mapping[str, pa.Schema],
        state: Mapping[str, pa.Table],
        sequence: int,
    ) -> RecursiveSketch:
        """The view stored as ``state`` (:func:`.state.view_state`) at ``sequence``."""
        view = restored_view(members, state)
        read = {t: schemas[t] for t in base_tables(members)}
        return cls(view, dict(partitions), selection, read, sequence)

    def state(self) -> dict[str, pa.Table]:
        """The view's state as tables (:mod:`.state`)."""
        return view_state(self.view, self.schemas)

    @property
    def members(self) -> Members:
        return self.view.members

    def apply(
        self, inserted: Mapping[str, pa.Table], deleted: Mapping[str, pa.Table], sequence: int
    ) -> tuple[Change, Change]:
        """The base tables' changes up to ``sequence``: the deleted rows first (they were there
        before), then the inserted ones. Returns both steps' changes."""
        gone = self.view.delete(deleted)
        came = self.view.insert(inserted)
        self.sequence = sequence
        return gone, came

    def read_rows(self) -> list[Row]:
        """The CTE's rows the outer query reads."""
        engine = self.view.engine
        rows = engine.best_rows() if isinstance(engine, AbsorptionView) else list(engine.rows)
        return self.selected(rows)

    def selected(self, rows: list[Row]) -> list[Row]:
        """Those of the CTE's ``rows`` the outer query reads."""
        if self.selection is None or not rows:
            return rows
        schema = self.members.schema
        columns = [pa.array(c, f.type) for c, f in zip(zip(*rows, strict=True), schema, strict=True)]
        keep = evaluate(pa.table(columns, schema=schema), {"k": self.selection}).column("k")
        return [row for row, k in zip(rows, pc.fill_null(keep, False).to_pylist(), strict=True) if k]

    def fragments(self) -> dict[str, set[int]]:
        """Per partitioned table, the fragments of the base rows the read rows derive from."""
        engine = self.view.engine
        assert isinstance(engine, AbsorptionView)  # sketches are kept with absorption provenance
        keys: set[Hashable] = set()
        for row in self.read_rows():
            keys |= engine.formulas.keys(engine.rows[row])
        base = cast(set[BaseKey], keys)  # the view's base tuples: (table, row, copy)
        out: dict[str, set[int]] = {table: set() for table in self.partitions}
        for table, partition in self.partitions.items():
            position = self.schemas[table].get_field_index(partition.attribute)
            values = [row[position] for t, row, _ in base if t == table]
            if values:
                out[table] = {int(f) for f in partition.fragments_of(np.asarray(values, dtype=object))}
        return out
