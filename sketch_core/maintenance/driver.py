"""Driving the incremental engine from storage: pinned snapshots in, sketch deltas out.

This is the adapter between the pure engine (:mod:`sketch_core.incremental`) and the tables
and metastore: it builds the engine for a sketch definition, loads a snapshot into it, and
advances it along the table deltas between two commit sequence numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from sketch_core.algebra.frontend import decode_params
from sketch_core.algebra.query_text import query_text, referenced_tables
from sketch_core.errors import ColumnsDroppedError, QueryError
from sketch_core.incremental.engine import Frontier, IncrementalSketch, Reader, RowDelta
from sketch_core.incremental.merge import SketchDelta
from sketch_core.incremental.partials import Partials
from sketch_core.incremental.remote import RemoteEvaluator
from sketch_core.metastore.sketches import SketchDefinition
from sketch_core.partitions import RangePartition
from sketch_core.spark.views import table_schemas
from sketch_core.tables.deltas import read_files, read_matching
from sketch_core.tables.file_cache import FileCache
from sketch_core.tables.pinned import PinnedSnapshot
from sketch_core.tables.service import TableService


def pinned_reader(pins: Mapping[str, PinnedSnapshot], cache: FileCache | None = None) -> Reader:
    """Reads the engine asks for, served from these pinned snapshots (with file pruning)."""

    def read(table: str, columns: Sequence[str], keys: Mapping[str, pa.Array] | None) -> pa.Table:
        return read_matching(pins[table], columns, keys, cache)

    return read


@dataclass
class MaintainedSketch:
    """An engine, and the commit sequence number its state is at."""

    engine: IncrementalSketch
    sequence: int
    tables: tuple[str, ...]  # every table the query reads


# Computes the frontier aggregations' partial aggregates over these pinned snapshots (on Spark).
Summarizer = Callable[[list[Frontier], Mapping[str, PinnedSnapshot]], Mapping[int, Partials]]

# Computes frontier aggregations' partial aggregates over the deltas of their subtrees between
# two pinned snapshot sets, given the tables' row deltas (on Spark: IMP Sec. 8's set-oriented
# strategy): (frontier, pins before, pins after, deltas) -> index -> partials.
DeltaSummarizer = Callable[
    [list[Frontier], Mapping[str, PinnedSnapshot], Mapping[str, PinnedSnapshot], Mapping[str, RowDelta]],
    Mapping[int, Partials],
]


def summarizable(frontier: Sequence[Frontier], changed: Iterable[str]) -> list[Frontier]:
    """The frontier aggregations whose delta a :data:`DeltaSummarizer` computes: those over a
    changed table that join, or keep min/max state (a Python object per group), and read each
    of their tables once (the delta of a self join is not the sum of per-table terms). A
    join-free aggregation with its state in arrays reduces even a big delta in-process about as
    fast as Spark would, without moving the rows to it."""
    changed = set(changed)
    return [
        f
        for f in frontier
        if (f.joins or not f.arrays) and len(set(f.tables)) == len(f.tables) and changed & set(f.tables)
    ]


def big_delta_covered(engine: IncrementalSketch, changed: Iterable[str], on_spark: bool) -> bool:
    """Whether every changed table is read only under frontier aggregations that reduce a big
    delta set-at-a-time: join-free ones with array state (in-process, with Arrow) and, when
    ``on_spark``, the :func:`summarizable` ones. Then no big delta goes row by row through
    in-process operators or joins."""
    changed = set(changed)
    frontier = engine.frontier()
    reducing = [f for f in frontier if f.arrays and not f.joins]
    if on_spark:
        reducing += summarizable(frontier, changed)
    return not changed & engine.tables_outside(reducing)


def plan_engine(
    tables: TableService,
    definition: SketchDefinition,
    partitions: Mapping[str, RangePartition],
    sequence: int,
    keep_top: int | None = None,
    remote: RemoteEvaluator | None = None,
    ansi: bool = True,
) -> tuple[IncrementalSketch, dict[str, PinnedSnapshot]]:
    """The engine for ``definition``'s plan, with no state yet, and the tables it reads pinned
    at ``sequence`` (``remote`` and ``ansi``: see :class:`IncrementalSketch`)."""
    names = referenced_tables(definition.query_sql)
    pins = {name: tables.pin(name, sequence) for name in sorted(names)}
    # The kept parse (the capture and the query path made it too, in a long-lived process).
    try:
        parsed = query_text(definition.query_sql).to_ir(table_schemas(pins), decode_params(definition.params))
    except QueryError:
        _refuse_dropped_columns(tables, definition.query_sql, names)
        raise
    schemas = {t: p.schema for t, p in pins.items()}
    engine = IncrementalSketch(parsed.plan, partitions, schemas, keep_top, remote=remote, ansi=ansi)
    return engine, pins


def _refuse_dropped_columns(tables: TableService, sql: str, names: Iterable[str]) -> None:
    """A query that stopped resolving because another engine dropped columns it names says so
    (pins read with the table's current schema, so a column dropped since the sketch's version
    is missing at every sequence)."""
    named = query_text(sql).column_names
    for table in names:
        gone = sorted(named & tables.dropped_columns(table))
        if gone:
            raise ColumnsDroppedError(table, gone)


def build_engine(
    tables: TableService,
    definition: SketchDefinition,
    partitions: Mapping[str, RangePartition],
    sequence: int,
    state: Sequence[Mapping[str, pa.Table]] | None = None,
    summarize: Summarizer | None = None,
    keep_top: int | None = None,
    remote: RemoteEvaluator | None = None,
    ansi: bool = True,
) -> MaintainedSketch:
    """The engine for ``definition`` at ``sequence``: restored from ``state`` when given, else
    loaded from the snapshots. With ``summarize``, aggregations over stateless subtrees are
    loaded from partial aggregates it computes; whatever else the plan reads is read
    in-process (the columns and rows the plan can use). ``keep_top``: see
    :class:`IncrementalSketch`, as are ``remote`` and ``ansi``."""
    engine, pins = plan_engine(tables, definition, partitions, sequence, keep_top, remote, ansi)
    names = set(pins)
    if state is not None:
        engine.restore(state)
        return MaintainedSketch(engine, sequence, tuple(sorted(names)))
    frontier = engine.frontier() if summarize is not None else []
    partials = summarize(frontier, pins) if summarize is not None and frontier else {}
    columns, filters = engine.columns_read(), engine.delta_filters()
    everything = {}
    for table in sorted(engine.tables_outside(frontier)):
        pin = pins[table]
        rows = read_files(pin.files, pin.schema, sorted(columns[table]), filters.get(table))
        everything[table] = RowDelta(rows, rows.schema.empty_table())
    engine.load(partials, everything, pinned_reader(pins), filtered=filters.keys())
    return MaintainedSketch(engine, sequence, tuple(sorted(names)))


def advance(
    tables: TableService,
    sketch: MaintainedSketch,
    to_sequence: int,
    pushdown: bool = True,
    blooms: bool = True,
    summarize: DeltaSummarizer | None = None,
) -> tuple[SketchDelta, int, dict[str, PinnedSnapshot]]:
    """Move the engine to ``to_sequence``: returns the sketch delta, the delta rows read and
    the tables as pinned at ``to_sequence``. ``pushdown=False`` reads every delta row, also
    those the query's selections drop (for measuring what IMP 9.4.2 saves); ``blooms=False``
    probes no join Bloom filters (IMP 9.4.1). With ``summarize``, the aggregations over
    stateless subtrees (:func:`summarizable` ones) get their deltas' partial aggregates from it
    instead of running their subtrees in-process: joins there read nothing in-process."""
    # Only the columns the query reads: rows that differ elsewhere cancel in the bag difference,
    # and the delta files are read and compared that much narrower.
    columns = sketch.engine.columns_read()
    # And only the rows that can pass the selections.
    filters = sketch.engine.delta_filters() if pushdown else {}
    pins = {t: tables.pin(t, to_sequence) for t in sketch.tables}
    for t, pin in pins.items():  # another engine may have dropped one (the table service refuses)
        dropped = sorted(set(columns.get(t, ())) - set(pin.schema.names))
        if dropped:
            raise ColumnsDroppedError(t, dropped)
    deltas = {
        t: tables.delta(
            t,
            sketch.sequence,
            to_sequence,
            tuple(sorted(columns.get(t, ()))) or None,
            filters.get(t),
            pinned=pins[t],
        )
        for t in sketch.tables
    }
    changed = {t: RowDelta(d.inserted, d.deleted) for t, d in deltas.items() if not d.is_empty}
    reader = pinned_reader(pins, tables.file_cache)
    frontier = summarizable(sketch.engine.frontier(), changed) if summarize is not None else []
    if summarize is not None and frontier:
        before = {t: tables.pin(t, sketch.sequence) for t in sketch.tables}
        partials = summarize(frontier, before, pins, changed)
        outside = sketch.engine.tables_outside(frontier)
        rest = {t: d for t, d in changed.items() if t in outside}
        result = sketch.engine.load(partials, rest, reader, filtered=filters.keys())
    else:
        result = sketch.engine.apply(changed, reader, blooms=blooms, filtered=filters.keys())
    sketch.sequence = to_sequence
    return result, sum(d.row_count for d in deltas.values()), pins
