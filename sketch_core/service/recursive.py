"""Sketches of ``WITH RECURSIVE`` queries: captured, maintained and kept with absorption
provenance (:mod:`sketch_core.recursive`), published as every sketch is.

The recursion's base tables are read in-process at the pinned snapshots (PyIceberg), the view
is evaluated with a formula per row, and the sketch is the fragments of the base rows those
formulas mention (:mod:`sketch_core.recursive.sketch`, which says why that is safe). A
maintenance run hands the view the rows inserted and deleted since its version: a delete
restricts formulas and removes the rows that lose every derivation, without deriving anything
again. The view at the newest version is kept in this process; a run that finds none builds it
from the version's snapshot first (recorded as ``built_state``).

Attributes: as given, else per table the column its rows are joined on in the recursion (for
reachability over ``links(src, dst)``, ``src``: a path's links are found by their source).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

import pyarrow as pa
from pyroaring import BitMap
from sqlglot import exp

from sketch_core import faults
from sketch_core.algebra.dialect import SPARK
from sketch_core.algebra.frontend import encode_params
from sketch_core.algebra.query_text import template_key
from sketch_core.errors import QueryError, TableExistsError, UnsupportedQueryError
from sketch_core.lru import LruMap
from sketch_core.metastore.sketches import FinishedRun, SketchDefinition, VersionRecord
from sketch_core.partitions.range_partition import RangePartition, literal_sql
from sketch_core.recursive.members import Members, compile_members
from sketch_core.recursive.outer import (
    check_duplicates_unread,
    materialized_columns,
    outer_selection,
    tables_read_outside,
)
from sketch_core.recursive.query import RecursiveQuery, split_recursive
from sketch_core.recursive.rule import Row
from sketch_core.recursive.sketch import RecursiveSketch
from sketch_core.service.arguments import default_sketch_name
from sketch_core.service.context import ServiceContext
from sketch_core.service.failed_runs import failure_recorded
from sketch_core.service.results import MaintenancePlan, MaintenanceRun, SketchVersion
from sketch_core.tables.pinned import PinnedSnapshot

log = logging.getLogger(__name__)


def recursive_query(sql: str) -> RecursiveQuery | None:
    """The recursive CTE of ``sql``, split and checked; None for a query without one."""
    if "recursive" not in sql.lower():
        return None
    return split_recursive(sql)


class RecursiveSketches:
    """Capturing and maintaining sketches of recursive queries."""

    def __init__(self, context: ServiceContext) -> None:
        self.context = context
        # sketch name -> (its definition's identity, version, view at that version)
        self._kept: LruMap[str, tuple[object, int, RecursiveSketch]] = LruMap(
            lambda: context.settings.engine_cache_entries
        )

    # -- capture ---------------------------------------------------------------------------
    def capture(
        self,
        query: RecursiveQuery,
        sql: str,
        sequence: int,
        name: str | None,
        params: Mapping[str, object] | None,
        attributes: Mapping[str, str] | None,
        fragments: Mapping[str, int],
        run: tuple[str, int | None, int],
        started: float,
        into: str | None = None,
    ) -> SketchVersion:
        """Capture ``sql`` at ``sequence`` (arguments checked and fragment counts resolved by the
        capturer); ``run``: what to record it as (strategy, version it replaces, delta rows);
        ``into``: a table to materialise the view's rows in (see ``SketchService.materialize``; a sketch
        that is a materialised view already writes its table again)."""
        ctx = self.context
        if params:
            raise UnsupportedQueryError(
                "parameters in a recursive query's sketch",
                sql[:200],
                hint="write the values into the query text",
            )
        check_duplicates_unread(query)
        pins = ctx.pin_query(sql, sequence)
        members = compile_members(query, {t: pin.schema for t, pin in pins.items()})
        chosen = self._attributes(query, members, pins, attributes)
        partitions = {
            table: ctx.partitions.range_partition(table, attribute, fragments[table], sequence=sequence)
            for table, attribute in chosen.items()
        }
        partition_ids = {table: pid for table, (pid, _) in partitions.items()}
        encoded = encode_params(params)
        template = template_key(sql)
        if name is None:
            name = default_sketch_name(template, encoded, partition_ids)
        definition = SketchDefinition(name, sql, encoded, template, partition_ids)
        if into is not None:
            self._check_into(name, into, query, members)
        kept = self._build(query, members, {t: p for t, (_, p) in partitions.items()}, sequence)
        found = kept.fragments()
        with ctx.coordinated(name, "a capture"):
            ctx.sketches.ensure_sketch(name, sql, encoded, template_key=template, partition_ids=partition_ids)
            if into is not None:
                ctx.sketches.materialize_into(name, into)
            into = into or ctx.sketches.materialized_table(name)
            if into is not None:  # the table first, then the version (a retry writes it again)
                self._write_view(into, query, kept, None)
            strategy, from_version, delta_rows = run
            ref = self._stored(name, kept)
            record = self._publish(
                ref,
                definition,
                sequence,
                pins,
                found,
                FinishedRun(
                    strategy,
                    from_version,
                    "succeeded",
                    delta_rows,
                    time.perf_counter() - started,
                    table_rows=sum(pin.record_count for pin in pins.values()),
                ),
            )
        self._keep(definition, record.version, kept)
        log.info("captured recursive %s version %d at sequence %d", name, record.version, sequence)
        return ctx.partitions.sketch_version(record)

    def _attributes(
        self,
        query: RecursiveQuery,
        members: Members,
        pins: Mapping[str, PinnedSnapshot],
        given: Mapping[str, str] | None,
    ) -> dict[str, str]:
        """Per base table of the recursion that only the recursion reads, its attribute."""
        outside = tables_read_outside(query)
        read = [t for t in (members.seed_table, members.edge_table) if t is not None]
        tables = sorted({t for t in read if t not in outside})
        if not tables:
            raise UnsupportedQueryError(
                f"a sketch of {query.name} whose base tables are read outside the recursion too "
                f"({', '.join(sorted(set(read)))}): a sketch would filter what the outer query reads",
                sql_of(query),
            )
        if given:
            unknown = sorted(set(given) - set(tables))
            if unknown:
                raise QueryError(
                    f"attributes given for {', '.join(unknown)}, which the recursion of {query.name} "
                    "does not sketch",
                    hint=f"give attributes for {', '.join(tables)}",
                )
        chosen: dict[str, str] = {}
        for table in tables:
            names = pins[table].schema.names
            attribute = (given or {}).get(table) or _join_column(members, table, names)
            if attribute not in names:
                raise QueryError(
                    f"{attribute} is not a column of {table}", hint=f"its columns: {', '.join(names)}"
                )
            chosen[table] = attribute
        return chosen

    # -- maintenance -----------------------------------------------------------------------
    def maintain(
        self, definition: SketchDefinition, record: VersionRecord, plan: MaintenancePlan, started: float
    ) -> MaintenanceRun:
        """``plan``'s incremental run: the view at ``record`` given the rows inserted and deleted
        up to ``plan.target``, and the sketch it then gives published."""
        ctx, name, target = self.context, definition.name, plan.target
        query = split_recursive(definition.query_sql)
        assert query is not None  # a recursive sketch's definition
        with failure_recorded(ctx.sketches, name, record.version, plan.delta_rows, started):
            kept, built = self._at(definition, query, record)
            inserted, deleted = {}, {}
            for table in kept.schemas:
                delta = ctx.tables.delta(table, record.sequence, target)
                inserted[table], deleted[table] = delta.inserted, delta.deleted
            into = ctx.sketches.materialized_table(name)
            # Under an aggregate selection the table holds each group's best row, which a
            # change of the view's rows does not tell: compare them before and after.
            bests = set(kept.read_rows()) if into is not None and kept.members.rule.selection else None
            gone, came = kept.apply(inserted, deleted, target)
            found = kept.fragments()
            if into is not None:
                if bests is not None:
                    now = set(kept.read_rows())
                    removed, added = sorted(bests - now, key=repr), sorted(now - bests, key=repr)
                else:
                    removed = kept.selected(sorted(gone.removed - came.added, key=repr))
                    added = kept.selected(sorted(came.added - gone.removed, key=repr))
                self._write_view(into, query, kept, (removed, added))
            pins = ctx.pin_query(definition.query_sql, target)
            seconds = time.perf_counter() - started
            ref = self._stored(name, kept)
            published = self._publish(
                ref,
                definition,
                target,
                pins,
                found,
                FinishedRun(
                    "incremental",
                    record.version,
                    "succeeded",
                    plan.delta_rows,
                    seconds,
                    table_rows=sum(pin.record_count for pin in pins.values()),
                    built_state=built,
                ),
            )
        self._keep(definition, published.version, kept)
        log.info(
            "maintained recursive %s to version %d in %.2fs: %d rows removed, %d added, "
            "%d derivations formed",
            name,
            published.version,
            seconds,
            len(gone.removed),
            len(came.added),
            gone.work.derivations + came.work.derivations,
        )
        return MaintenanceRun(
            name, record.version, published.version, "incremental", plan.delta_rows, seconds
        )

    def _check_into(self, name: str, into: str, query: RecursiveQuery, members: Members) -> None:
        """Refuse to materialise ``query`` into ``into`` unless its rows map one to one onto the
        view's, and ``into`` is new or this sketch's own table already."""
        materialized_columns(query, members.schema, members.rule.selection)
        if self.context.tables.exists(into) and self.context.sketches.materialized_table(name) != into:
            raise TableExistsError(into)

    def _write_view(
        self,
        table: str,
        query: RecursiveQuery,
        kept: RecursiveSketch,
        change: tuple[list[Row], list[Row]] | None,
    ) -> int:
        """Write the view's rows to ``table``: all of them (``change`` None, or a change too
        big for a predicate), else the rows removed and added, as one commit that deletes both
        and adds the added ones (so writing the same change twice leaves the same table)."""
        tables = self.context.tables
        columns = materialized_columns(query, kept.members.schema, kept.members.rule.selection)
        schema = pa.schema([pa.field(n, kept.members.schema.field(i).type) for n, i in columns])

        def arrow(rows: list[Row]) -> pa.Table:
            values = [[row[i] for row in rows] for _, i in columns]
            return pa.table([pa.array(v, f.type) for v, f in zip(values, schema, strict=True)], schema=schema)

        if change is None or len(change[0]) + len(change[1]) > MAX_PREDICATE_ROWS:
            rows = arrow(kept.read_rows())
            if not tables.exists(table):
                return tables.create(table, rows)
            return tables.overwrite(table, rows)
        removed, added = change
        if not removed and not added:
            return 0
        names = [n for n, _ in columns]
        where = " OR ".join(
            "(" + " AND ".join(_equals(n, row[i]) for n, (_, i) in zip(names, columns, strict=True)) + ")"
            for row in removed + added
        )
        return tables.overwrite(table, arrow(added), where=where)

    def forget(self, name: str) -> None:
        self._kept.pop(name)

    # -- internals -------------------------------------------------------------------------
    def _at(
        self, definition: SketchDefinition, query: RecursiveQuery, record: VersionRecord
    ) -> tuple[RecursiveSketch, bool]:
        """The view at ``record``'s version: the one kept here (taken out while it is advanced,
        so one that fails half-way is never used again), else restored from the version's
        stored state, else built from its snapshot (then True)."""
        kept = self._kept.pop(definition.name)
        if kept is not None and kept[0] == definition.identity() and kept[1] == record.version:
            return kept[2], False
        ctx = self.context
        pins = ctx.pin_query(definition.query_sql, record.sequence)
        schemas = {t: pin.schema for t, pin in pins.items()}
        members = compile_members(query, schemas)
        partitions = dict(ctx.partitions.of(definition))
        stored = ctx.budget.usable_state(definition.name, record)
        if stored is not None:
            (state,) = ctx.state_store.read(stored)  # written whole, never as layers
            selection = outer_selection(query, members.schema)
            restored = RecursiveSketch.restore(
                members, partitions, selection, schemas, state, record.sequence
            )
            return restored, False
        return self._build(query, members, partitions, record.sequence), True

    def _build(
        self,
        query: RecursiveQuery,
        members: Members,
        partitions: Mapping[str, RangePartition],
        sequence: int,
    ) -> RecursiveSketch:
        read = sorted({t for t in (members.seed_table, members.edge_table) if t is not None})
        tables = {t: self.context.tables.read_arrow(t, sequence) for t in read}
        return RecursiveSketch.build(
            members, partitions, outer_selection(query, members.schema), tables, sequence
        )

    def _stored(self, name: str, kept: RecursiveSketch) -> str | None:
        """The view's state written to the state store (its files first: invariant 3), when
        the sketch keeps state; its reference."""
        if not self.context.budget.keeps_state(name):
            return None
        ref = self.context.state_store.write(name, kept.state())
        faults.reached("state-written")
        return ref

    def _publish(
        self,
        state_ref: str | None,
        definition: SketchDefinition,
        sequence: int,
        pins: Mapping[str, PinnedSnapshot],
        found: Mapping[str, set[int]],
        run: FinishedRun,
    ) -> VersionRecord:
        return self.context.sketches.publish_version(
            definition.name,
            sequence,
            {table: pin.snapshot_id for table, pin in pins.items()},
            {
                pid: BitMap(sorted(found.get(t, set()))).serialize()
                for t, pid in definition.partition_ids.items()
            },
            state_ref=state_ref,
            run=run,
        )

    def _keep(self, definition: SketchDefinition, version: int, kept: RecursiveSketch) -> None:
        self._kept.put(definition.name, (definition.identity(), version, kept))


# A change of a materialised view of more rows than this rewrites the whole table (a predicate
# of that many disjuncts costs more to plan than the rows cost to write).
MAX_PREDICATE_ROWS = 1000


def _equals(column: str, value: object) -> str:
    quoted = exp.to_identifier(column).sql(dialect=SPARK)
    return f"{quoted} IS NULL" if value is None else f"{quoted} = {literal_sql(value)}"


def _join_column(members: Members, table: str, names: list[str]) -> str:
    """The column of ``table`` its rows are joined on in the recursion (the first join key of
    an edge; for a seed table that is not the edge table, the column its first row column
    comes from, else its first column)."""
    if table == members.edge_table:
        return names[members.rule.other[0]]
    return names[0]


def sql_of(query: RecursiveQuery) -> str:
    return query.outer.sql(dialect=SPARK)[:300]
