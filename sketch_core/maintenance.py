"""Driving the incremental engine from storage: pinned snapshots in, sketch deltas out.

This is the adapter between the pure engine (:mod:`sketch_core.incremental`) and the tables
and metastore: it builds the engine for a sketch definition, loads a snapshot into it, and
advances it along the table deltas between two commit sequence numbers.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from sketch_core.algebra.frontend import decode_params, to_ir
from sketch_core.arrow_files import read_arrow, write_arrow
from sketch_core.errors import StateMissingError
from sketch_core.incremental.engine import Frontier, IncrementalSketch, Reader, RowDelta
from sketch_core.incremental.merge import SketchDelta
from sketch_core.incremental.partials import Partials
from sketch_core.incremental.remote import RemoteEvaluator
from sketch_core.incremental.state import STATE_FORMAT
from sketch_core.metastore.sketches import SketchDefinition
from sketch_core.partitions import RangePartition
from sketch_core.spark.views import referenced_tables, table_schemas
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
    parsed = to_ir(definition.query_sql, table_schemas(pins), decode_params(definition.params))
    schemas = {t: p.schema for t, p in pins.items()}
    engine = IncrementalSketch(parsed.plan, partitions, schemas, keep_top, remote=remote, ansi=ansi)
    return engine, pins


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
    engine.load(partials, everything, pinned_reader(pins))
    return MaintainedSketch(engine, sequence, tuple(sorted(names)))


# A stored state is a whole state plus at most this many layers of changes; the next write
# after that stores the whole state again, so a restore reads a bounded number of files.
MAX_STATE_LAYERS = 64
# ... and the layers together hold at most this fraction of the whole state's entries: then a
# restore reads at most that much more than the whole state, and rewriting the whole state
# (hundreds of milliseconds for tens of thousands of groups) is paid once per that many changes,
# not once per so many runs.
MAX_LAYERED_FRACTION = 0.5


class StateStore:
    """Operator state files under the warehouse: one directory per sketch version, one Arrow
    IPC file per operator. A directory holds the whole state, or the changes to the state of
    the directory its manifest names as ``base`` (same sketch). A directory is written
    completely before the version that refers to it is published, and never changed after;
    one that no version refers to, directly or as a base, is garbage (a run that died)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(
        self,
        sketch: str,
        tables: Mapping[str, pa.Table],
        base: str | None = None,
        keep_top: int | None = None,
        changed_entries: int = 0,
    ) -> str:
        """Store ``tables``: a whole state, or with ``base`` the changes to that state
        (``changed_entries`` of them, summed along the chain of layers).
        ``keep_top``: the m its min/max and top-k values were cut to (None: kept in full)."""
        depth, layered = 0, 0
        if base is not None:
            base_depth, base_layered = self.layers(base)
            depth, layered = base_depth + 1, base_layered + changed_entries
        directory = self.root / state_directory_name(sketch) / uuid.uuid4().hex
        directory.mkdir(parents=True)
        for name, table in tables.items():
            write_arrow(directory / f"{name}.arrow", table)
        manifest = {
            "format": STATE_FORMAT,
            "files": sorted(tables),
            "base": Path(base).name if base is not None else None,
            "depth": depth,
            "layered": layered,
            "keep_top": keep_top,
        }
        (directory / "manifest.json").write_text(json.dumps(manifest))
        return str(directory)

    def depth(self, ref: str) -> int:
        """How many layers of changes the state at ``ref`` has on top of a whole state."""
        return self.layers(ref)[0]

    def layers(self, ref: str) -> tuple[int, int]:
        """The state at ``ref``'s layers of changes on top of a whole state, and the entries
        changed in them (0 and 0 for a whole state)."""
        manifest = self._manifest(ref)
        depth = int(manifest.get("depth", 0))
        if "layered" in manifest:
            return depth, int(manifest["layered"])
        return depth, 0 if depth == 0 else _UNKNOWN_LAYERED  # written before it was counted

    def keep_top(self, ref: str) -> int | None:
        """The m the state's ordered values were cut to (None: kept in full)."""
        value = self._manifest(ref).get("keep_top")
        return int(value) if value else None

    def read(self, ref: str) -> list[dict[str, pa.Table]]:
        """The layers of the state at ``ref``, oldest (the whole state) first."""
        layers: list[dict[str, pa.Table]] = []
        directory: Path | None = Path(ref)
        while directory is not None:
            manifest = self._manifest(str(directory))
            layers.append({name: read_arrow(directory / f"{name}.arrow") for name in manifest["files"]})
            directory = directory.parent / manifest["base"] if manifest.get("base") else None
        return layers[::-1]

    def chain(self, ref: str) -> list[Path]:
        """The directories the state at ``ref`` is read from (it and its bases); a missing one
        ends the chain (reading it would fail, and collecting must not)."""
        found: list[Path] = []
        directory: Path | None = Path(ref)
        while directory is not None and directory not in found:
            found.append(directory)
            try:
                manifest = self._manifest(str(directory))
            except StateMissingError:
                break
            directory = directory.parent / manifest["base"] if manifest.get("base") else None
        return found

    def collect(self, live_refs: Iterable[str], older_than: float) -> int:
        """Delete state directories no live reference reads (directly or as a base) whose
        files are older than ``older_than`` (epoch seconds): those of expired versions, dropped
        sketches and runs that died before publishing. Returns how many were deleted."""
        live = {d.resolve() for ref in live_refs for d in self.chain(ref)}
        deleted = 0
        if not self.root.is_dir():
            return 0
        for sketch_dir in self.root.iterdir():
            if not sketch_dir.is_dir():
                continue
            for directory in sketch_dir.iterdir():
                if directory.resolve() in live or directory.stat().st_mtime >= older_than:
                    continue
                shutil.rmtree(directory, ignore_errors=True)
                deleted += 1
            if not any(sketch_dir.iterdir()):
                sketch_dir.rmdir()
        return deleted

    def _manifest(self, ref: str) -> dict[str, Any]:
        try:
            manifest: dict[str, Any] = json.loads((Path(ref) / "manifest.json").read_text())
        except FileNotFoundError as exc:
            raise StateMissingError(ref) from exc
        if manifest.get("format") not in _READABLE_FORMATS:
            raise StateMissingError(ref, f"state format {manifest.get('format')}, expected {STATE_FORMAT}")
        return manifest


_READABLE_FORMATS = (STATE_FORMAT,)
# Layers written without their entry count: treated as big enough to rewrite the whole state.
_UNKNOWN_LAYERED = 1 << 62


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")


def state_directory_name(sketch: str) -> str:
    """The directory a sketch's state goes in: its name when that is a plain file name, else
    a digest of it. Sketch names are the user's (quotes, slashes, ``..`` included); a name must
    never place files outside the state root."""
    if _PLAIN_NAME.fullmatch(sketch) and ".." not in sketch:
        return sketch
    return "sketch-" + hashlib.sha256(sketch.encode()).hexdigest()[:24]


def store_state(store: StateStore, sketch: str, engine: IncrementalSketch, base: str | None) -> str:
    """Store the engine's state for a new version: as the changes to ``base`` (the stored state
    the engine was at), unless the chain of layers gets too long or, with these changes, holds
    more than :data:`MAX_LAYERED_FRACTION` of the state (then the whole state is written)."""
    changed = engine.changed_entries()
    depth, layered = store.layers(base) if base is not None else (0, 0)
    if (
        depth + 1 >= MAX_STATE_LAYERS
        or layered + changed > MAX_LAYERED_FRACTION * engine.state_entries()
        or engine.blooms_dropped
    ):
        base = None
    tables = engine.state_tables(changes_only=base is not None)
    ref = store.write(sketch, tables, base, engine.keep_top, changed_entries=changed)
    engine.mark_stored()
    return ref


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
        result = sketch.engine.load(partials, rest, reader)
    else:
        result = sketch.engine.apply(changed, reader, blooms=blooms)
    sketch.sequence = to_sequence
    return result, sum(d.row_count for d in deltas.values()), pins
