"""Maintenance (IMP): bring a sketch to a newer commit incrementally (in-process, or with Spark
for big deltas), by recapture, or leave it behind when the cost model says the queries run
cheaper without it."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence

import pyarrow as pa
from pyroaring import BitMap

from sketch_core import faults
from sketch_core.algebra.query_text import referenced_tables
from sketch_core.background import Background
from sketch_core.costs.choose import Choice, Situation, choose, stateless_choice
from sketch_core.costs.model import CostModel
from sketch_core.errors import (
    ColumnsDroppedError,
    DeltaQuarantinedError,
    IncrementalTooCostlyError,
    KeptValuesExhaustedError,
    SketchError,
    SketchNotFoundError,
    SketchTableDroppedError,
    SnapshotExpiredError,
    StateMissingError,
    UnsupportedQueryError,
)
from sketch_core.incremental.engine import Frontier, RowDelta
from sketch_core.incremental.partials import Partials
from sketch_core.maintenance.budget import TOO_COSTLY
from sketch_core.maintenance.driver import (
    DeltaSummarizer,
    MaintainedSketch,
    advance,
    big_delta_covered,
    summarizable,
)
from sketch_core.maintenance.state_store import store_state
from sketch_core.metastore.sketches import FinishedRun, SketchDefinition, VersionRecord
from sketch_core.service.arguments import check_strategy
from sketch_core.service.capture import Capturer
from sketch_core.service.context import ServiceContext
from sketch_core.service.engines import EngineCache, EngineFactory
from sketch_core.service.failed_runs import failure_recorded
from sketch_core.service.lifecycle import Lifecycle
from sketch_core.service.recursive import RecursiveSketches, recursive_query
from sketch_core.service.results import MaintenancePlan, MaintenanceRun
from sketch_core.service.runner import SubmittedJobs
from sketch_core.service.validation import DeltaChecks
from sketch_core.spark.delta_partials import SCRATCH_DIRECTORY, delta_partials
from sketch_core.spark.jobs import spark_job
from sketch_core.tables.pinned import PinnedSnapshot

log = logging.getLogger(__name__)
# The commit operation of a rewrite that changes no row (Iceberg's snapshot operation).
REWRITE = "replace"


# What leaves one sketch at its version while a run over many goes on with the others (a
# quarantined delta batch; a table or column another engine dropped): raised for a named sketch.
LEFT_BEHIND = (DeltaQuarantinedError, SketchTableDroppedError, ColumnsDroppedError)


class Maintainer:
    """Planning and running maintenance."""

    def __init__(
        self,
        context: ServiceContext,
        engines: EngineFactory,
        cache: EngineCache,
        capturer: Capturer,
        checks: DeltaChecks,
        lifecycle: Lifecycle,
        recursive: RecursiveSketches,
        jobs: SubmittedJobs | None = None,
    ) -> None:
        """``jobs``: where runs that need Spark go when not in this process (see
        :mod:`.runner`)."""
        self.context = context
        self.engines = engines
        self.cache = cache
        self.capturer = capturer
        self.checks = checks
        self.lifecycle = lifecycle
        self.recursive = recursive
        self.jobs = jobs

    def maintain(self, name: str | None = None, strategy: str = "auto") -> list[MaintenanceRun]:
        """See :meth:`SketchService.maintain`."""
        check_strategy(strategy)
        names = [name] if name is not None else [d.name for d in self.context.sketches.definitions()]
        runs = []
        for each in names:
            try:
                runs.append(self.maintain_one(each, strategy))
            except SketchNotFoundError:
                if name is not None:
                    raise
                # Defined but never published (its capture died): nothing to maintain from.
                log.warning("%s has no published version: not maintained", each)
            except LEFT_BEHIND as exc:
                if name is not None:
                    raise
                log.warning("%s", exc)  # left at its last good version; the others go on
        if any(r.published for r in runs):
            self.lifecycle.collect_after_maintenance(names)
        return runs

    def plan_maintenance(
        self, name: str, strategy: str = "auto", target: int | None = None
    ) -> MaintenancePlan:
        """See :meth:`SketchService.plan_maintenance`."""
        check_strategy(strategy)
        definition, record = self.context.definition_and_version(name)
        return self.plan(definition, record, strategy, target)

    def plan(
        self,
        definition: SketchDefinition,
        record: VersionRecord,
        strategy: str,
        target: int | None,
        table_rows: int | None = None,
    ) -> MaintenancePlan:
        """What maintaining the sketch from ``record`` to ``target`` (None: the latest commit)
        with ``strategy`` would do. ``table_rows``: the rows of the sketch's tables at
        ``target``, when known (for the cost model; else read from the commit log)."""
        ctx = self.context
        target = ctx.latest_sequence() if target is None else target
        tables = set(referenced_tables(definition.query_sql))
        pending = [
            c
            for c in ctx.commit_log.commits(after_seq=record.sequence, until_seq=target)
            if c.table in tables
        ]
        dropped = next((c for c in pending if c.operation == "drop"), None)
        if dropped is not None:  # (a table another engine dropped; the service's drop_table refuses)
            raise SketchTableDroppedError(definition.name, dropped.table, dropped.seq)
        delta_rows = sum(c.added_rows + c.deleted_rows for c in pending)
        if pending and strategy != "full" and all(c.operation == REWRITE for c in pending):
            # The same rows in other files: nothing to recompute, whatever the state or the
            # cost model would say (a recapture, or building the state, would be pure waste).
            return MaintenancePlan(
                definition.name, record.version, target, "incremental", 0, False, False, rewrites_only=True
            )
        changed = {c.table for c in pending}
        on_spark = delta_rows > self.context.settings.spark_delta_rows
        chosen = strategy if pending else "none"
        choice: Choice | None = None
        if chosen in ("auto", "cost"):
            options: tuple[str, ...] = ("full",)
            if not ctx.budget.keeps_state(definition.name):
                mode = ctx.budget.mode(definition.name)
                choice = stateless_choice(mode.reason if mode is not None else "no state")
            elif not all(ctx.tables.retains(t, record.sequence) for t in changed):
                pass  # the version's snapshots expired (left far behind): only a recapture
            elif delta_rows <= self.context.settings.incremental_max_delta_rows or self._big_delta_covered(
                definition, record, changed, on_spark
            ):
                options = ("incremental", "full")
            if chosen == "cost":  # leaving it stale is an option too, for the queries expected
                # before the next load: at least the one this is for (a report, or the refresh
                # ahead of one), however rarely the template ran per load so far; and the
                # runs after them, at the rate it ran per load.
                rate = ctx.advisor.expected_queries(definition.name)
                situation = Situation(
                    table_rows or 0,
                    delta_rows,
                    max(1.0, rate),
                    loads=len(pending),
                    rate=rate,
                    horizon=self.context.settings.cost_horizon_queries,
                    history_loads=self.context.settings.stale_history_loads,
                )
                choice = self._cost_choice(definition, situation, (*options, "skip"), explore=True)
            elif len(options) > 1:  # within what incremental can take: the cheaper by the model
                # (a run that must first build the state costs more once, but leaves the state
                # that makes the runs after it incremental: not charged, like an investment)
                choice = self._cost_choice(definition, Situation(table_rows or 0, delta_rows, 0.0), options)
            chosen = choice.action if choice is not None else options[0]
        incremental = chosen == "incremental"
        if on_spark and incremental:  # only aggregations over a changed table that Spark takes
            on_spark = self._spark_summarizes(definition, record, changed)
        return MaintenancePlan(
            definition.name,
            record.version,
            target,
            chosen,
            delta_rows,
            on_spark and incremental,
            incremental and self._builds_state(definition, record),
            choice,
        )

    def _builds_state(self, definition: SketchDefinition, record: VersionRecord) -> bool:
        """Whether an incremental run from ``record`` would first compute the state on Spark:
        no engine kept at that version and no usable stored state (the kept engine is checked
        first: the stored state's manifest is a read)."""
        return self.cache.at(definition, record, take=False) is None and not self.context.budget.usable_state(
            definition.name, record
        )

    def _spark_summarizes(
        self, definition: SketchDefinition, record: VersionRecord, changed: set[str]
    ) -> bool:
        """Whether an incremental run over a big delta of ``changed`` would compute some
        aggregations' deltas on Spark (True when the plan cannot be built here: it may)."""
        engine = self.engines.planned_engine(definition, record.sequence)
        if engine is None:
            return True
        return bool(summarizable(engine.frontier(), changed))

    def maintain_one(
        self,
        name: str,
        strategy: str,
        *,
        target: int | None = None,
        context: str = "maintain",
        plan: MaintenancePlan | None = None,
        wait_seconds: float | None = None,
    ) -> MaintenanceRun:
        """One sketch maintained to ``target`` (None: the latest commit); ``context``: what
        asked for it (recorded with the cost model's choice); ``plan``: already made for it
        (used while the sketch's newest version is still the one it was made from);
        ``wait_seconds``: for another run of the sketch to finish (default
        ``settings.work_wait_seconds``). With submitted jobs, a run to the latest commit that
        needs Spark is submitted (the job plans again, under the work lock)."""
        if self.jobs is not None and target is None:
            definition, record = self.context.definition_and_version(name)
            submitted = self.plan(definition, record, strategy, None)
            if submitted.needs_spark:
                self.checks.check(name, record, submitted.target)  # a job would only fail on it
                return self.jobs.maintain(submitted, strategy)
            plan = submitted
        # The commit log is brought up to date while the lock is taken: two round trips at once.
        latest = Background(self.context.latest_sequence, "sketch-refresh") if target is None else None
        with self.context.coordinated_reading(name, "a maintenance run", wait_seconds) as (
            waited,
            definition,
            record,
        ):
            if latest is not None and not waited:
                # The newest commit as the lock was taken, unless the run that held it moved the
                # sketch past it (then, as after a wait, the plan asks again).
                refreshed = latest.result()
                target = refreshed if refreshed >= record.sequence else None
            run = self._run_maintenance(definition, record, strategy, target, context, plan)
        if waited and run.strategy == "none":
            log.info(
                "%s: another run brought it to version %d while this one waited: nothing to do",
                name,
                run.to_version,
            )
        if run.published:
            self.context.advisor.observed(run.strategy, name)
        return run

    def _run_maintenance(
        self,
        definition: SketchDefinition,
        record: VersionRecord,
        strategy: str,
        target: int | None,
        context: str,
        plan: MaintenancePlan | None,
    ) -> MaintenanceRun:
        """``definition``'s maintenance from its newest version ``record`` (read under the work
        lock)."""
        started = time.perf_counter()  # an incremental run's checks before it are part of its cost
        advisor = self.context.advisor
        name = definition.name
        if (
            plan is None
            or plan.from_version != record.version
            or (target is not None and plan.target != target)
        ):
            plan = self.plan(definition, record, strategy, target)
        target, chosen, delta_rows = plan.target, plan.strategy, plan.delta_rows
        if chosen == "none":
            return MaintenanceRun(name, record.version, record.version, "none", 0, 0.0)
        faults.reached("maintenance-planned")
        if plan.choice is not None:
            advisor.record(name, context, plan.choice)
        if chosen == "skip":  # the queries read the plain tables until the model says otherwise
            advisor.skip_from(name, record.version)
            return MaintenanceRun(name, record.version, record.version, "skip", delta_rows, 0.0)
        self.checks.check(name, record, target)
        if plan.rewrites_only:
            return self._carry(definition, record, target, started)
        if chosen == "incremental":
            try:
                try:
                    if recursive_query(definition.query_sql) is not None:
                        return self.recursive.maintain(definition, record, plan, started)
                    return self._maintain_incremental(definition, record, plan, started)
                except pa.ArrowException as exc:
                    # An expression Arrow could not evaluate on these rows: Spark decides it.
                    raise UnsupportedQueryError(
                        f"an expression the in-process engine could not evaluate ({exc})",
                        definition.query_sql[:200],
                        hint="maintain this sketch with strategy='full'",
                    ) from exc
            except KeptValuesExhaustedError as exc:  # top-m ran out: recapture, whatever was asked
                log.info("%s: recapturing: %s", name, exc)
            except (UnsupportedQueryError, StateMissingError, SnapshotExpiredError) as exc:
                # An expired snapshot: the delta from the version's snapshots cannot be read any
                # more (a capture that outlived the retention time); a recapture needs only the
                # target's.
                if isinstance(exc, IncrementalTooCostlyError):  # not tried again for a while
                    self.context.budget.maintain_by_recaptures(name, str(exc.construct), TOO_COSTLY)
                if strategy == "incremental":
                    raise
                log.info("%s: recapturing instead of incremental maintenance: %s", name, exc)
        started = time.perf_counter()  # a recapture is timed as its capture
        version = self.capturer.recapture(definition, target, record.version, delta_rows)
        return MaintenanceRun(
            name, record.version, version.version, "full", delta_rows, time.perf_counter() - started
        )

    def carry_after_rewrite(self, table: str, sequence: int) -> list[MaintenanceRun]:
        """The sketches reading ``table`` that were current until its rewrite at ``sequence``,
        carried to it at once (nothing read: see :meth:`_carry`). Queries use a sketch only at
        the snapshots it has a version for, so without this they would read the plain tables
        until the sketches' next maintenance. A sketch behind for other commits is left to its
        maintenance; one that another run holds, or that fails to carry, is passed over with a
        warning (the rewrite is committed either way)."""
        runs = []
        for definition in self.context.sketches.definitions():
            if table not in referenced_tables(definition.query_sql):
                continue
            record = self.context.sketches.version(definition.name)
            if record is None or record.sequence >= sequence:
                continue
            try:
                plan = self.plan(definition, record, "auto", sequence)
                if plan.rewrites_only:
                    runs.append(
                        self.maintain_one(definition.name, "auto", target=sequence, plan=plan, wait_seconds=0)
                    )
            except SketchError as exc:
                log.warning("%s: not carried to the rewrite of %s (%s)", definition.name, table, exc)
        return runs

    def _carry(
        self, definition: SketchDefinition, record: VersionRecord, target: int, started: float
    ) -> MaintenanceRun:
        """The sketch at ``record``, published again at ``target``, which only rewrote files
        since (Iceberg's ``replace``: a compaction, a sort, ``svc.recluster``): the same rows,
        so the same fragments and the same operator state (a state holds rows and aggregates,
        never files), with no table read. A kept engine moves to the new version."""
        ctx, name = self.context, definition.name
        with failure_recorded(ctx.sketches, name, record.version, 0, started):
            pins = {table: ctx.tables.pin(table, target) for table in record.table_snapshots}
            kept = self.cache.at(definition, record, take=True)
            # A column widened since holds the same values (the fragments stand) but the state
            # and the engine hold the old type: they are left behind, built again when needed.
            widened = bool(self._widened_since(record))
            state_ref, kept = (None, None) if widened else (record.state_ref, kept)
            seconds = time.perf_counter() - started
            published = ctx.sketches.publish_version(
                name,
                target,
                {table: pin.snapshot_id for table, pin in pins.items()},
                dict(record.bitmaps),
                state_ref=state_ref,
                run=FinishedRun(
                    "incremental",
                    record.version,
                    "succeeded",
                    0,
                    seconds,
                    table_rows=sum(pin.record_count for pin in pins.values()),
                    built_state=False,
                ),
                lock=ctx.work_locks.held(name),  # the run's last statement: lets go of the lock too
            )
        if kept is not None:
            self.cache.keep(definition, published.version, dataclasses.replace(kept, sequence=target))
        log.info(
            "%s: the commits up to %d only rewrote files: version %d carried to version %d",
            name,
            target,
            record.version,
            published.version,
        )
        return MaintenanceRun(name, record.version, published.version, "incremental", 0, seconds, "carried")

    def _widened_since(self, record: VersionRecord) -> dict[str, list[str]]:
        """Per table of ``record``, the columns whose types were widened since its snapshot."""
        tables = self.context.tables
        return {t: w for t, sid in record.table_snapshots.items() if (w := tables.widened_since(t, sid))}

    def _big_delta_covered(
        self, definition: SketchDefinition, record: VersionRecord, changed: set[str], on_spark: bool
    ) -> bool:
        """Whether a big delta of these tables is reduced set-at-a-time (by Spark, or by
        aggregations with array state: see ``maintenance.big_delta_covered``). Decided on the
        plan alone: no state is read."""
        engine = self.engines.planned_engine(definition, record.sequence)
        if engine is None:
            return False
        return big_delta_covered(engine, changed, on_spark)

    def _delta_summarizer(self, definition: SketchDefinition, used: list[bool]) -> DeltaSummarizer:
        """Computes frontier aggregations' deltas on Spark; sets ``used[0]`` when it runs."""
        ctx = self.context
        identified = ctx.partitions.identified(definition)
        partitions = {t: p for t, (_, p) in identified.items()}
        attributes = {t: p.attribute for t, p in partitions.items()}

        def summarize(
            frontier: list[Frontier],
            before: Mapping[str, PinnedSnapshot],
            after: Mapping[str, PinnedSnapshot],
            deltas: Mapping[str, RowDelta],
        ) -> dict[int, Partials]:
            used[0] = True
            with spark_job(f"the aggregations' deltas of {definition.name}"):
                return delta_partials(
                    ctx.spark,
                    frontier,
                    attributes,
                    partitions,
                    ctx.sources(before, identified),
                    ctx.sources(after, identified),
                    deltas,
                    self.context.settings.warehouse / SCRATCH_DIRECTORY,
                )

        return summarize

    def _maintain_incremental(
        self, definition: SketchDefinition, record: VersionRecord, plan: MaintenancePlan, started: float
    ) -> MaintenanceRun:
        """``plan``'s incremental run, begun (checks included) at ``started``. Its delta rows,
        recorded and returned, are the commits' (as for recaptures and in the status): the size
        the cost model is fitted and asked on. The rows the engine read, after selection
        push-down, are logged. Its seconds, recorded and returned, end before the transaction
        that publishes the version and records the run."""
        ctx, name = self.context, definition.name
        target, on_spark, delta_rows = plan.target, plan.on_spark, plan.delta_rows
        spark_used = [False]
        widened = self._widened_since(record)
        if widened:  # the stored state (and a kept engine) hold the columns' old types
            self.cache.forget(name)
            shown = "; ".join(f"{t}: {', '.join(cols)}" for t, cols in sorted(widened.items()))
            raise StateMissingError(
                record.state_ref or name, f"column types widened since it was stored ({shown})"
            )
        with failure_recorded(ctx.sketches, name, record.version, delta_rows, started):
            maintained, built_state = self._engine_at(definition, record)
            _, read_rows, pins = advance(
                ctx.tables,
                maintained,
                target,
                self.context.settings.delta_pushdown,
                self.context.settings.join_bloom,
                self._delta_summarizer(definition, spark_used) if on_spark else None,
            )
            # Files first, then the one transaction that publishes the version (invariant 3),
            # which also records the run: it is too short to be worth a "running" row.
            keeps = ctx.budget.keeps_state(name)
            base = ctx.budget.usable_state(name, record)
            ref = store_state(ctx.state_store, name, maintained.engine, base) if keeps else None
            faults.reached("state-written")
            sketch = maintained.engine.sketch()
            seconds = time.perf_counter() - started
            published = ctx.sketches.publish_version(
                name,
                target,
                {table: pin.snapshot_id for table, pin in pins.items()},
                {
                    pid: BitMap(sorted(sketch.get(t, set()))).serialize()
                    for t, pid in definition.partition_ids.items()
                },
                state_ref=ref,
                run=FinishedRun(
                    "incremental",
                    record.version,
                    "succeeded",
                    delta_rows,
                    seconds,
                    table_rows=sum(pin.record_count for pin in pins.values()),
                    built_state=built_state,
                ),
                lock=ctx.work_locks.held(name),  # the run's last statement: lets go of the lock too
            )
        faults.reached("published")
        if keeps:
            self.cache.keep(definition, published.version, maintained)
        where = "spark" if spark_used[0] else "in-process"
        log.info(
            "maintained %s incrementally (%s) to version %d in %.2fs (%d delta rows, %d read)",
            name,
            where,
            published.version,
            seconds,
            delta_rows,
            read_rows,
        )
        return MaintenanceRun(
            name, record.version, published.version, "incremental", delta_rows, seconds, where
        )

    def _engine_at(
        self, definition: SketchDefinition, record: VersionRecord
    ) -> tuple[MaintainedSketch, bool]:
        """The engine at ``record``'s version: the one this process kept, else restored from the
        stored state (else built from the snapshot: then True). A kept engine is taken out of
        the cache while it is advanced, so one that fails half-way is never used again."""
        kept = self.cache.at(definition, record, take=True)
        if kept is not None:
            return kept, False
        budget = self.context.budget
        stored = budget.usable_state(definition.name, record)
        if stored:
            return self.engines.restored(definition, record, stored), False
        # No state yet (the version was captured), or state kept for another mode of the state
        # budget: computed from the snapshot (in-process for small tables, else on Spark).
        partitions = self.context.partitions.of(definition)
        keep_top = budget.keep_top(definition.name)
        # (A state Spark fails to compute raises StateMissingError: ``auto`` recaptures.)
        return self.engines.first_engine(definition, partitions, record.sequence, keep_top), True

    def cost_model(self, name: str, max_age: float = 0.0) -> CostModel:
        """See :meth:`SketchService.cost_model`."""
        return self.context.advisor.model(name, max_age)

    def _cost_choice(
        self,
        definition: SketchDefinition,
        situation: Situation,
        allowed: Sequence[str],
        explore: bool = False,
    ) -> Choice:
        """The cost model's choice among ``allowed`` (``explore``: see
        :func:`sketch_core.costs.choose.choose`); a situation's ``table_rows`` of 0 are read
        from the commit log (the rows of the sketch's tables)."""
        if not situation.table_rows:
            rows = self.context.policies.table_rows(sorted(referenced_tables(definition.query_sql)))
            situation = dataclasses.replace(situation, table_rows=rows)
        return choose(self.context.advisor.model(definition.name), situation, allowed, explore)
