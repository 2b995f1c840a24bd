"""Capture (PBDS Sec. 4): instrument the query, run it as one Spark job on pinned snapshots, and
publish the fragments it found as a new sketch version (with incremental state, on request)."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyroaring import BitMap

from sketch_core import faults
from sketch_core.algebra.frontend import decode_params, encode_params
from sketch_core.algebra.query_text import query_text, referenced_tables, template_key
from sketch_core.attribute_choice.query import AttributeEstimates
from sketch_core.config import Settings
from sketch_core.errors import (
    InvalidSketchNameError,
    SketchNotFoundError,
    StateMissingError,
    UnsupportedQueryError,
)
from sketch_core.maintenance.driver import MaintainedSketch
from sketch_core.maintenance.state_store import store_state
from sketch_core.metastore.sketches import SketchDefinition
from sketch_core.partitions.range_partition import MAX_FRAGMENTS, PartitionError, RangePartition
from sketch_core.rewrites.capture import CapturePlan, instrument_capture
from sketch_core.service.arguments import (
    checked_fragments,
    checked_mapping,
    checked_snapshot,
    checked_sql,
    default_sketch_name,
)
from sketch_core.service.attributes import AttributeChooser
from sketch_core.service.context import ServiceContext
from sketch_core.service.engines import EngineCache, EngineFactory
from sketch_core.service.recursive import RecursiveSketches, recursive_query
from sketch_core.service.results import SketchVersion
from sketch_core.service.runner import SubmittedJobs
from sketch_core.spark.capture import run_capture
from sketch_core.spark.jobs import spark_job
from sketch_core.spark.views import table_schemas
from sketch_core.tables.pinned import PinnedSnapshot

log = logging.getLogger(__name__)


_MAX_NAME_CHARACTERS = 200


def check_sketch_name(name: str) -> None:
    """Refuse names the metastore cannot store (NUL) or that would not print back (control
    characters), and empty or overlong ones; everything else (quotes, slashes, SQL) is a
    value like any other: bound in queries, digested in paths."""
    if not isinstance(name, str):
        raise InvalidSketchNameError(repr(name), f"it is a {type(name).__name__}, not a str")
    if not name.strip():
        raise InvalidSketchNameError(name, "it is empty")
    if len(name) > _MAX_NAME_CHARACTERS:
        raise InvalidSketchNameError(name, f"it has {len(name)} characters, more than {_MAX_NAME_CHARACTERS}")
    bad = sorted({c for c in name if not c.isprintable()})
    if bad:
        raise InvalidSketchNameError(name, f"it holds control characters {', '.join(map(repr, bad))}")


def _fragment_count(fragments: int | Mapping[str, int] | None, table: str, settings: Settings) -> int:
    if fragments is None:
        count = settings.fragments
    elif isinstance(fragments, int):
        count = fragments
    else:
        count = int(fragments.get(table, settings.fragments))
    if not 1 <= count <= MAX_FRAGMENTS:
        # Checked before any Spark work: a billion quantiles would exhaust the driver first.
        raise PartitionError(
            f"fragment count {count} for {table} is out of range",
            hint=f"use 1 to {MAX_FRAGMENTS:,} fragments (PBDS uses 1,000 to 10,000)",
        )
    return count


@dataclass(frozen=True)
class CaptureRequest:
    """A capture of ``sql`` with ``params`` at commit ``sequence``, checked already.

    ``name``: None names it from its query and partitions; ``attributes`` and ``fragments``:
    as :meth:`SketchService.capture` takes them. It is recorded among the sketch's runs as
    ``strategy``: ``"capture"``, or ``"full"`` for a maintenance run's recapture (from
    ``from_version``, over ``delta_rows`` changed rows)."""

    sql: str
    sequence: int
    name: str | None = None
    params: Mapping[str, Any] | None = None
    attributes: Mapping[str, str] | None = None
    fragments: int | Mapping[str, int] | None = None
    with_state: bool = False
    strategy: str = "capture"
    from_version: int | None = None
    delta_rows: int = 0
    materialize: str | None = None  # a table to write a recursive query's rows to


class Capturer:
    """Capturing sketches on Spark and publishing them."""

    def __init__(
        self,
        context: ServiceContext,
        chooser: AttributeChooser,
        engines: EngineFactory,
        cache: EngineCache,
        recursive: RecursiveSketches,
        jobs: SubmittedJobs | None = None,
    ) -> None:
        """``recursive``: captures of ``WITH RECURSIVE`` queries; ``jobs``: where captures run
        when not in this process (see :mod:`.runner`)."""
        self.context = context
        self.recursive = recursive
        self.chooser = chooser
        self.engines = engines
        self.cache = cache
        self.jobs = jobs

    def capture(
        self,
        sql: str,
        name: str | None = None,
        params: Mapping[str, Any] | None = None,
        attributes: Mapping[str, str] | None = None,
        fragments: int | Mapping[str, int] | None = None,
        *,
        snapshot: int | None = None,
        with_state: bool = False,
        materialize: str | None = None,
    ) -> SketchVersion:
        """See :meth:`SketchService.capture` (``materialize``: :meth:`SketchService.materialize`)."""
        sql = self.context.views_inlined(checked_sql(sql))
        params = checked_mapping("params", params, "{'day': date(1995, 3, 15)}")
        attributes = checked_mapping("attributes", attributes, "{'ns.table': 'column'}")
        fragments = checked_fragments(fragments)
        for table in fragments if isinstance(fragments, Mapping) else ["every table"]:
            _fragment_count(fragments, table, self.context.settings)  # out of range: refused before any work
        snapshot = checked_snapshot(snapshot)
        if self.jobs is not None:  # the job takes the sketch's work lock itself
            return self.jobs.capture(sql, name, params, attributes, fragments, snapshot, with_state)
        ctx = self.context
        if name is None:  # named once its partitions are chosen, and held from then on
            sequence = ctx.sequence(snapshot)
            return self.run(CaptureRequest(sql, sequence, None, params, attributes, fragments, with_state))
        check_sketch_name(name)
        # Held before the latest commit is read: a capture that waited for a concurrent run
        # of the sketch captures the commit that is latest once it goes on (or finds it done).
        with ctx.coordinated(name, "a capture"):
            if attributes is None:
                attributes, fragments = self._kept_partitions(name, sql, params, fragments)
            sequence = ctx.sequence(snapshot)
            request = CaptureRequest(sql, sequence, name, params, attributes, fragments, with_state)
            return self.run(dataclasses.replace(request, materialize=materialize))

    def recapture(
        self, definition: SketchDefinition, target: int, from_version: int, delta_rows: int
    ) -> SketchVersion:
        """A maintenance run's recapture of the sketch at ``target``, on its own partitions."""
        stored = self.context.partitions.records(definition)
        request = CaptureRequest(
            definition.query_sql,
            target,
            definition.name,
            decode_params(definition.params),
            {t: p.attribute for t, p in stored.items()},
            {t: p.fragment_count for t, p in stored.items()},
            strategy="full",
            from_version=from_version,
            delta_rows=delta_rows,
        )
        return self.run(request)

    def _kept_partitions(
        self,
        name: str,
        sql: str,
        params: Mapping[str, Any] | None,
        fragments: int | Mapping[str, int] | None,
    ) -> tuple[Mapping[str, str] | None, int | Mapping[str, int] | None]:
        """The attributes and fragment counts of the existing sketch ``name`` when it is this
        query with these parameters and ``fragments`` asks for nothing else; else no attributes
        (chosen anew) and ``fragments`` as given. A cost-based choice made again on changed
        data could pick other attributes, and the name would then refuse the capture."""
        try:
            definition = self.context.sketches.definition(name)
        except SketchNotFoundError:
            return None, fragments
        if definition.query_sql != sql or definition.params != encode_params(params):
            return None, fragments
        stored = self.context.partitions.records(definition)
        counts = {t: p.fragment_count for t, p in stored.items()}
        asked = {t: _fragment_count(fragments, t, self.context.settings) for t in counts}
        if fragments is not None and counts != asked:
            return None, fragments
        return {t: p.attribute for t, p in stored.items()}, counts

    def run(self, request: CaptureRequest) -> SketchVersion:
        """Choose the attributes (unless given), partition, capture and publish: one version."""
        started = time.perf_counter()
        ctx, sql, sequence, fragments = self.context, request.sql, request.sequence, request.fragments
        recursive = recursive_query(sql)
        if recursive is not None:
            counts = {t: _fragment_count(fragments, t, ctx.settings) for t in referenced_tables(sql)}
            run = (request.strategy, request.from_version, request.delta_rows)
            return self.recursive.capture(
                recursive,
                sql,
                sequence,
                request.name,
                request.params,
                request.attributes,
                counts,
                run,
                started,
                request.materialize,
            )
        if request.materialize is not None:
            raise UnsupportedQueryError(
                "a materialised view of a query without WITH RECURSIVE",
                sql[:200],
                hint="materialise recursive queries; capture a sketch for the others",
            )
        pins = ctx.pin_query(sql, sequence)
        parsed = query_text(sql).to_ir(table_schemas(pins), request.params)
        statistics = {table: pin.column_bounds() for table, pin in pins.items()}
        chosen, estimates = self.chooser.choose(
            parsed.plan,
            pins,
            statistics,
            request.attributes,
            fragments if isinstance(fragments, int) else self.context.settings.fragments,
        )
        partitions = {
            table: ctx.partitions.range_partition(
                table, attribute, _fragment_count(fragments, table, self.context.settings), sequence=sequence
            )
            for table, attribute in chosen.items()
        }
        capture = instrument_capture(parsed.plan, attributes=chosen)
        encoded = encode_params(request.params)
        partition_ids = {table: pid for table, (pid, _) in partitions.items()}
        template = template_key(sql)
        name = request.name or default_sketch_name(template, encoded, partition_ids)
        definition = SketchDefinition(name, sql, encoded, template, partition_ids)
        with ctx.coordinated(name, "a capture"):
            done = self._published_at(definition, sequence)
            if done is not None:
                return done
            return self._publish(definition, pins, capture, partitions, estimates, request, started)

    def _published_at(self, definition: SketchDefinition, sequence: int) -> SketchVersion | None:
        """The sketch's version at ``sequence`` when it exists for this very definition (another
        run published it, maybe while this one waited): capturing it again would only redo
        that work, since a sequence gets one version."""
        try:
            existing = self.context.sketches.definition(definition.name)
            record = self.context.sketches.version(definition.name, sequence=sequence)
        except SketchNotFoundError:
            return None
        if record is None or existing.identity() != definition.identity():
            return None
        log.info(
            "%s: version %d at sequence %d was published by another run: no capture needed",
            definition.name,
            record.version,
            sequence,
        )
        return self.context.partitions.sketch_version(record)

    def _publish(
        self,
        definition: SketchDefinition,
        pins: Mapping[str, PinnedSnapshot],
        capture: CapturePlan,
        partitions: Mapping[str, tuple[int, RangePartition]],
        estimates: AttributeEstimates | None,
        request: CaptureRequest,
        started: float,
    ) -> SketchVersion:
        """Run the capture on Spark (or take it from the operator state) and publish it."""
        ctx, sequence = self.context, request.sequence
        name, sql, encoded = definition.name, definition.query_sql, definition.params
        partition_ids = dict(definition.partition_ids)
        chosen = {table: partition.attribute for table, (_, partition) in partitions.items()}
        with spark_job(f"the capture of {name} at sequence {sequence}"):
            faults.reached("spark-job", spark=ctx.spark)
            maintained, unbuilt = (
                self._state_capture(definition, pins, sequence) if request.with_state else (None, None)
            )
            if maintained is not None:
                sketch = maintained.engine.sketch()
                found = {table: sketch.get(table, set()) for table in partition_ids}
            else:
                found = run_capture(
                    ctx.spark,
                    capture,
                    ctx.sources(pins, partitions),
                    {table: partition for table, (_, partition) in partitions.items()},
                )
        ctx.sketches.ensure_sketch(
            name, sql, encoded, template_key=definition.template_key, partition_ids=partition_ids
        )
        run_id = ctx.sketches.start_run(name, request.strategy, request.from_version)
        try:
            keeps = (request.with_state or maintained is not None) and ctx.budget.keeps_state(name)
            if unbuilt is not None and keeps:  # a new sketch: remembered now that it exists, not tried twice
                ctx.budget.maintain_by_recaptures(name, unbuilt)
                keeps = False
            if maintained is None and keeps:
                maintained = self._initial_state(name, sequence)
            elif not keeps:
                maintained = None
            ref = store_state(ctx.state_store, name, maintained.engine, None) if maintained else None
            faults.reached("state-written")
            record = ctx.sketches.publish_version(
                name,
                sequence,
                {table: pin.snapshot_id for table, pin in pins.items()},
                {partition_ids[table]: BitMap(ids).serialize() for table, ids in found.items()},
                state_ref=ref,
            )
            faults.reached("published")
            if maintained is not None and record.state_ref is not None:
                self.cache.keep(definition, record.version, maintained)
            if estimates is not None:
                self.chooser.record_choice(name, estimates, chosen, found, partitions)
            seconds = time.perf_counter() - started
            ctx.sketches.finish_run(
                run_id,
                status="succeeded",
                to_version=record.version,
                delta_rows=request.delta_rows,
                seconds=seconds,
                table_rows=sum(pin.record_count for pin in pins.values()),
            )
        except BaseException as exc:  # the row says how it ended (a kill is settled by readers)
            self._fail_run(run_id, exc, time.perf_counter() - started, request.delta_rows)
            raise
        log.info("captured %s version %d at sequence %d in %.2fs", name, record.version, sequence, seconds)
        return ctx.partitions.sketch_version(record)

    def _fail_run(self, run_id: int, exc: BaseException, seconds: float, delta_rows: int) -> None:
        """Record a started run as failed with ``exc``; a run never fails for want of that."""
        try:
            self.context.sketches.finish_run(
                run_id,
                status="failed",
                to_version=None,
                delta_rows=delta_rows,
                seconds=seconds,
                error=f"{type(exc).__name__}: {exc}"[:2000],
            )
        except Exception as recording:
            log.warning("could not record the failure of run %d: %s", run_id, recording)

    def _state_capture(
        self,
        definition: SketchDefinition,
        pins: Mapping[str, PinnedSnapshot],
        sequence: int,
    ) -> tuple[MaintainedSketch | None, str | None]:
        """For a capture asked to compute the state too (``with_state``): the sketch's
        incremental engine at ``sequence``, its state computed on Spark, when that job can
        stand for the capture's: the tables are too big for the state to be
        computed in-process (above ``LOCAL_STATE_ROWS`` rows), the sketch keeps state, and
        every table is read under an aggregation whose state Spark computes, so that the engine
        has the query's provenance from those sums alone (the sketch is the engine's, exactly
        what the capture query finds: see ``test_maintenance_vs_capture``). One Spark job then
        gives the sketch and its state, and the first maintenance restores that state instead
        of computing it. None: capture with the instrumented query; then the second item says
        why the state cannot be built, when it was tried and cannot (None: not tried, or it
        can).

        Only when asked: the state job costs more than the capture query (TPC-H Q10 at SF1:
        1.8 times as long), a price for sketches that will be maintained, not for every one."""
        budget = self.context.budget
        rows = sum(pin.record_count for pin in pins.values())
        if self.engines.computes_state_locally(rows) or not budget.keeps_state(definition.name):
            return None, None
        engine = self.engines.planned_engine(definition, sequence)
        if engine is None:
            return None, None
        if engine.tables_outside(engine.frontier()):
            return None, None  # some table would be read in-process: the capture query reads it on Spark
        partitions = self.context.partitions.of(definition)
        try:
            maintained = self.engines.first_engine(
                definition, partitions, sequence, budget.keep_top(definition.name)
            )
        except (UnsupportedQueryError, StateMissingError, pa.ArrowException) as exc:
            # (the capture query can still run; a state that cannot be built is not tried again)
            log.info("%s: captured with the capture query (the state failed: %s)", definition.name, exc)
            return None, exc.reason if isinstance(exc, StateMissingError) else None
        log.info("%s: captured from its incremental state (one Spark job for both)", definition.name)
        return maintained, None

    def _initial_state(self, name: str, sequence: int) -> MaintainedSketch | None:
        """The incremental engine of a sketch at ``sequence``, its aggregations' state computed
        from the snapshot (in-process for small tables, else on Spark); None for queries the
        engine does not support (they are recaptured)."""
        ctx = self.context
        definition = ctx.sketches.definition(name)
        partitions = ctx.partitions.of(definition)
        try:
            return self.engines.first_engine(definition, partitions, sequence, ctx.budget.keep_top(name))
        except (UnsupportedQueryError, StateMissingError) as exc:
            log.info("%s: no incremental state (%s); it will be recaptured", name, exc)
            return None
