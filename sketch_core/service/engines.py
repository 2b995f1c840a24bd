"""Incremental engines: building them (from the snapshot, from stored state, or plan only) and
keeping the newest ones in memory between maintenance runs.

:class:`EngineCache` is the one owner of the engines kept in memory: every other part asks it
to keep, take, look up or forget one."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from sketch_core import faults
from sketch_core.algebra.query_text import referenced_tables
from sketch_core.errors import (
    IncrementalTooCostlyError,
    SparkJobError,
    StateMissingError,
    UnsupportedQueryError,
)
from sketch_core.incremental.engine import Frontier, IncrementalSketch
from sketch_core.incremental.partials import Partials
from sketch_core.incremental.remote import RemoteEvaluator
from sketch_core.lru import LruMap
from sketch_core.maintenance.driver import MaintainedSketch, Summarizer, build_engine, plan_engine
from sketch_core.metastore.sketches import SketchDefinition, VersionRecord
from sketch_core.partitions import RangePartition
from sketch_core.service.context import ServiceContext
from sketch_core.spark.expressions import evaluate_on_spark
from sketch_core.spark.jobs import spark_job
from sketch_core.spark.state_init import compute_frontier_partials
from sketch_core.tables.pinned import PinnedSnapshot

log = logging.getLogger(__name__)

# The first state of an engine is computed in-process, from the snapshot's rows, when the
# sketch's tables hold at most this many rows together; on Spark above.
LOCAL_STATE_ROWS = 1_000_000
# Above that, aggregations over joins, selections and projections get their state from Spark;
# a table the plan reads outside them (under a join above an aggregation: TPC-H Q18's IN
# subquery) is held in-process, row by row. At most this many rows together: TPC-H Q18 at SF10
# would hold 60M lineitem rows, and the process was killed for memory at 20 GiB.
IN_PROCESS_STATE_ROWS = 20_000_000


@dataclass(frozen=True)
class _KeptEngine:
    identity: str
    version: int
    maintained: MaintainedSketch


class EngineCache:
    """sketch name -> its engine at a version, the ``entries()`` most recently kept (read on
    each keep: see ``Settings.engine_cache_entries``)."""

    def __init__(self, entries: Callable[[], int]) -> None:
        self._kept: LruMap[str, _KeptEngine] = LruMap(entries)

    def keep(self, definition: SketchDefinition, version: int, maintained: MaintainedSketch) -> None:
        self._kept.put(definition.name, _KeptEngine(definition.identity(), version, maintained))

    def at(
        self, definition: SketchDefinition, record: VersionRecord, *, take: bool
    ) -> MaintainedSketch | None:
        """The engine kept for ``definition`` at ``record``'s version (None: none kept, or one
        kept for another version or another sketch of the same name); ``take`` removes
        whatever was kept for the name."""
        kept = self._kept.pop(definition.name) if take else self._kept.get(definition.name)
        if kept is None or kept.version != record.version or kept.identity != definition.identity():
            return None
        return kept.maintained

    def engine(self, name: str) -> IncrementalSketch | None:
        """The engine kept for ``name``, whatever its version (None: none kept)."""
        kept = self._kept.get(name)
        return kept.maintained.engine if kept is not None else None

    def forget(self, name: str) -> None:
        self._kept.pop(name)

    def clear(self) -> None:
        self._kept.clear()


class EngineFactory:
    """Builds a sketch's incremental engine, with its state or for its plan alone."""

    def __init__(self, context: ServiceContext) -> None:
        self.context = context

    @staticmethod
    def computes_state_locally(rows: int) -> bool:
        """Whether an engine's first state over tables of ``rows`` rows is computed in-process."""
        return rows <= LOCAL_STATE_ROWS

    def first_engine(
        self,
        definition: SketchDefinition,
        partitions: Mapping[str, RangePartition],
        sequence: int,
        keep_top: int | None,
    ) -> MaintainedSketch:
        """See :meth:`SketchService.first_engine`."""
        ctx = self.context
        counts = {
            t: ctx.tables.pin(t, sequence).record_count for t in referenced_tables(definition.query_sql)
        }
        rows = sum(counts.values())
        remote, ansi = self.remote_evaluator(), ctx.spark_ansi()

        def build(summarize: Summarizer | None) -> MaintainedSketch:
            return build_engine(
                ctx.tables, definition, partitions, sequence, None, summarize, keep_top, remote, ansi
            )

        built = None
        if self.computes_state_locally(rows):
            try:
                built = build(None)
            except IncrementalTooCostlyError:
                raise  # (the state's rows would be the same computed on Spark)
            except UnsupportedQueryError as exc:
                log.info("%s: state computed on Spark (in-process: %s)", definition.name, exc)
        if built is None:
            held = self._held_in_process(definition, sequence, counts)
            if held is not None:
                raise self._unbuildable(definition.name, held, definition.name)
            try:
                built = build(self.spark_summarizer(definition))
            except SparkJobError as exc:  # (more state than the driver takes: a recapture needs none)
                failed = f"the Spark job computing it failed: {exc.cause}"
                raise self._unbuildable(definition.name, failed, definition.name) from exc
        ctx.budget.state_built(definition.name)
        return built

    def _unbuildable(self, name: str, why: str, ref: str) -> StateMissingError:
        """Remember that the sketch's state cannot be built (``why``, shown in its status), and
        the error to raise: one phrasing whichever path found it."""
        self.context.budget.maintain_by_recaptures(name, why)
        return StateMissingError(ref, why)

    def _held_in_process(
        self, definition: SketchDefinition, sequence: int, counts: Mapping[str, int]
    ) -> str | None:
        """Why the state, computed on Spark where it can be, would still hold more rows
        in-process than ``IN_PROCESS_STATE_ROWS`` (None: it would not)."""
        engine = self.planned_engine(definition, sequence)
        if engine is None:
            return None
        outside = sorted(engine.tables_outside(engine.frontier()))
        tables = self.context.tables
        held = sum(counts[t] if t in counts else tables.pin(t, sequence).record_count for t in outside)
        if held <= IN_PROCESS_STATE_ROWS:
            return None
        return (
            f"its plan holds {', '.join(outside)} in-process ({held:,} rows, more than "
            f"{IN_PROCESS_STATE_ROWS:,}): the tables under a join above an aggregation"
        )

    def planned_engine(self, definition: SketchDefinition, sequence: int) -> IncrementalSketch | None:
        """See :meth:`SketchService.planned_engine`."""
        try:
            engine, _ = plan_engine(
                self.context.tables,
                definition,
                self.context.partitions.of(definition),
                sequence,
                remote=self.remote_evaluator(),
                ansi=self.context.spark_ansi(),
            )
        except UnsupportedQueryError:
            return None
        return engine

    def restored(
        self, definition: SketchDefinition, record: VersionRecord, state_ref: str
    ) -> MaintainedSketch:
        """The engine at ``record``'s version, its state read from ``state_ref``; refused (and
        remembered) as a first state would be when it holds too many rows in-process: one
        stored while the tables were small grows with them."""
        ctx = self.context
        held = self._held_in_process(definition, record.sequence, {})
        if held is not None:
            raise self._unbuildable(definition.name, held, state_ref)
        return build_engine(
            ctx.tables,
            definition,
            ctx.partitions.of(definition),
            record.sequence,
            ctx.state_store.read(state_ref),
            keep_top=ctx.budget.keep_top(definition.name),
            remote=self.remote_evaluator(),
            ansi=ctx.spark_ansi(),
        )

    def remote_evaluator(self) -> RemoteEvaluator:
        """See :meth:`SketchService.remote_evaluator`."""

        def evaluate(table: pa.Table, expressions: Mapping[str, exp.Expr]) -> pa.Table:
            log.info("evaluating %d expression(s) on Spark over %d rows", len(expressions), table.num_rows)
            return evaluate_on_spark(self.context.spark, table, expressions)

        return evaluate

    def spark_summarizer(self, definition: SketchDefinition) -> Summarizer:
        """See :meth:`SketchService.spark_summarizer`."""
        ctx = self.context
        identified = ctx.partitions.identified(definition)
        attributes = {t: p.attribute for t, (_, p) in identified.items()}

        def summarize(frontier: list[Frontier], pins: Mapping[str, PinnedSnapshot]) -> dict[int, Partials]:
            source = ctx.sources(pins, identified)
            with spark_job(f"computing the operator state of {definition.name}"):
                faults.reached("state-job", spark=ctx.spark)
                return compute_frontier_partials(
                    ctx.spark, frontier, attributes, source, ctx.budget.keep_top(definition.name)
                )

        return summarize
