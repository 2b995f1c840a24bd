"""The query path (PBDS Sec. 5, 7, 8): pin the tables, find a valid sketch for the query or a
reusable instance of its template (maintaining one on the way when configured), prune files,
add the range conditions, run on Spark; self-tuning captures sketches for queries without one."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pyroaring import BitMap
from pyspark.sql import DataFrame
from sqlglot import exp

from sketch_core import faults
from sketch_core.algebra.dialect import SPARK
from sketch_core.algebra.frontend import ParsedQuery, decode_params, encode_params
from sketch_core.algebra.ir import Relation, Scan, scans_below_joins
from sketch_core.algebra.query_text import QueryText, query_text, referenced_tables
from sketch_core.analysis.reuse import can_reuse
from sketch_core.analysis.safety import Statistics
from sketch_core.costs.choose import Choice
from sketch_core.costs.use import ScanFootprint, timed_use_choice, untimed_use_choice
from sketch_core.errors import (
    DeltaQuarantinedError,
    MissingParameterError,
    NoSafeAttributeError,
    QueryError,
    SketchBusyError,
    SketchNotFoundError,
    UnqualifiedTableError,
    UnsupportedQueryError,
)
from sketch_core.metastore.sketches import SketchDefinition, VersionRecord
from sketch_core.partitions import RangePartition
from sketch_core.partitions.pruning import prune_files, pushed_intervals, row_condition_pays
from sketch_core.recursive.rule import FormulasTooLargeError
from sketch_core.rewrites.use import Condition, instrument_use, sketch_condition
from sketch_core.service.arguments import checked_mapping, checked_sketch_use, checked_snapshot, checked_sql
from sketch_core.service.capture import Capturer, CaptureRequest
from sketch_core.service.context import ServiceContext
from sketch_core.service.maintenance import Maintainer
from sketch_core.service.recursive import recursive_query
from sketch_core.service.results import MaintenancePlan, MaintenanceRun, QueryResult, SketchedFrame
from sketch_core.spark.annotate import rows_in_fragments
from sketch_core.spark.delta_partials import SCRATCH_DIRECTORY
from sketch_core.spark.jobs import spark_job
from sketch_core.spark.lake import iceberg_relation
from sketch_core.spark.recursion import plain_frame
from sketch_core.spark.views import keep_view, pinned_dataframe, register_view, table_schemas
from sketch_core.tables.page_index import has_page_index
from sketch_core.tables.pinned import DataFiles, PinnedSnapshot

log = logging.getLogger(__name__)


@dataclass
class _UsableSketch:
    """A sketch version chosen for a query, resolved once: per table its partition, fragments,
    and the pinned snapshot cut down to the files that may hold those fragments."""

    record: VersionRecord
    sketched: dict[str, tuple[RangePartition, BitMap]]
    pruned: dict[str, PinnedSnapshot]
    # Brought to the query's snapshots for it: the choice to use it is made (and paid for).
    maintained: bool = False
    # Per sketched table its attribute and row condition (see QueryRunner._conditions), once made.
    conditions: dict[str, tuple[str, Condition | None]] | None = None

    @property
    def rows(self) -> int:
        return sum(pin.record_count for pin in self.pruned.values())


@dataclass(frozen=True)
class _UseDecision:
    """Why a query found a valid sketch and applied it, or (``skipped``) did not."""

    reason: str
    skipped: tuple[str, int] | None = None  # the sketch (name, version) left unused


@dataclass
class _TimeAside:
    """The seconds a query spent maintaining or capturing sketches on its way: modelled as
    those runs, so not as part of the query's own. An incremental run counts the seconds it
    recorded (publishing the version, left out of its record, stays with the query that caused
    it); a recapture or capture its wall time (its record's, and the closing of the record).

    The cost model's choice for the query (a refit of the model, the expected query rate, the
    decision's record) is set aside too: it is paid whichever way the query then runs, so it
    must not weigh on either. Left in, it fell on one way: a seldom-timed plain run is
    explored right after a refit (the refit's run counts are what make it seldom), so every
    exploring plain run carried the fit's ~30 ms of metastore reads and the model saw the plain
    query ~10% dearer than it is."""

    seconds: float = 0.0

    def add(self, run: MaintenanceRun) -> None:
        self.seconds += run.seconds

    @contextlib.contextmanager
    def timing(self) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - started


class QueryRunner:
    """Running queries with sketches."""

    def __init__(self, context: ServiceContext, capturer: Capturer, maintainer: Maintainer) -> None:
        self.context = context
        self.capturer = capturer
        self.maintainer = maintainer

    @property
    def _scratch(self) -> Path:
        """Where recursive queries evaluated here write their rounds."""
        return self.context.settings.warehouse / SCRATCH_DIRECTORY / "recursion"

    def sketch_files(self, name: str, version: int | None = None) -> dict[str, PinnedSnapshot]:
        """See :meth:`SketchService.sketch_files`."""
        pins, usable = self._resolved_version(name, version)
        return {**pins, **usable.pruned}

    def sketch_rows(self, name: str, version: int | None = None) -> dict[str, DataFrame]:
        """See :meth:`SketchService.sketch_rows`."""
        pins, usable = self._resolved_version(name, version)
        frames: dict[str, DataFrame] = {}
        for table, pin in pins.items():
            frame = pinned_dataframe(self.context.spark, usable.pruned.get(table, pin))
            if table in usable.sketched:
                frame = rows_in_fragments(frame, *usable.sketched[table])
            frames[table] = frame
        return frames

    def _resolved_version(
        self, name: str, version: int | None
    ) -> tuple[dict[str, PinnedSnapshot], _UsableSketch]:
        """The tables of a sketch's query pinned as of a version, and that version resolved."""
        sketches = self.context.sketches
        record = sketches.version(name, version=version)
        if record is None:
            raise SketchNotFoundError(name)
        pins = self.context.pin_query(sketches.definition(name).query_sql, record.sequence)
        return pins, self._resolve(record, pins)

    def _resolve(self, record: VersionRecord, pins: Mapping[str, PinnedSnapshot]) -> _UsableSketch:
        sketched: dict[str, tuple[RangePartition, BitMap]] = {}
        pruned: dict[str, PinnedSnapshot] = {}
        for partition_id, bitmap in record.bitmaps.items():
            stored, partition = self.context.partitions.get(partition_id)
            fragments = BitMap.deserialize(bitmap)
            sketched[stored.table] = (partition, fragments)
            pin = pins[stored.table]
            kept = prune_files(pin.files, partition, fragments)  # in the pin's order: still sorted
            pruned[stored.table] = replace(pin, files=DataFiles(kept))
        return _UsableSketch(record, sketched, pruned)

    def _usable_sketch(
        self,
        template: str,
        params: Mapping[str, Any] | None,
        plan: Relation | None,
        pins: Mapping[str, PinnedSnapshot],
        sequence: int,
        aside: _TimeAside,
    ) -> _UsableSketch | None:
        """A sketch version valid for these snapshots, captured for this query or a reusable
        instance of its template (PBDS Sec. 7; ``plan`` None: a recursive query, whose sketches
        serve only itself); the one whose files hold the fewest rows.
        With ``settings.maintain_on_query``, a sketch whose newest version is older than the
        snapshots is first maintained to them (IMP Sec. 11)."""
        snapshots = {table: pin.snapshot_id for table, pin in pins.items()}
        encoded = encode_params(params)
        statistics: Statistics | None = None
        best: _UsableSketch | None = None
        ctx = self.context
        for definition in ctx.sketches.definitions(template):
            if definition.params != encoded:
                if plan is None:
                    continue
                if statistics is None:
                    statistics = {table: pin.column_bounds() for table, pin in pins.items()}
                captured = query_text(definition.query_sql).to_ir(
                    table_schemas(pins), decode_params(definition.params)
                )
                verdict = can_reuse(captured.plan, plan, statistics)
                if not verdict.reusable:
                    log.debug("sketch %s not reusable: %s", definition.name, verdict.reason)
                    continue
            record = ctx.sketches.version_for_snapshots(definition.name, snapshots)
            maintained = False
            if record is None and self.context.settings.maintain_on_query != "off":
                record = self._maintained_for(definition, snapshots, sequence, pins, aside)
                maintained = record is not None
            if record is None:
                continue
            candidate = dataclasses.replace(self._resolve(record, pins), maintained=maintained)
            if best is None or candidate.rows < best.rows:
                best = candidate
        return best

    def _maintained_for(
        self,
        definition: SketchDefinition,
        snapshots: Mapping[str, int | None],
        sequence: int,
        pins: Mapping[str, PinnedSnapshot],
        aside: _TimeAside,
    ) -> VersionRecord | None:
        """The sketch maintained from its newest version to ``sequence``, when that version is
        older (a version is never maintained backwards: older snapshots need their own)."""
        ctx, name = self.context, definition.name
        strategy = self.context.settings.maintain_on_query
        if strategy == "cost":  # the model may have left it behind: then its fragments are not read
            head = ctx.sketches.newest_head(name)
            if head is None or head[1] >= sequence or ctx.advisor.skipping(name, head[0]):
                return None
        newest = ctx.sketches.version(name)
        if newest is None or newest.sequence >= sequence:
            return None
        started = time.perf_counter()
        plan: MaintenancePlan | None = None
        if strategy == "cost":
            with aside.timing():
                plan = self._plan_for_query(definition, newest, sequence, pins)
            if plan is None:
                return None
            strategy = plan.strategy
        try:
            # A query does not wait for another run of the sketch: it reads without it.
            run = self.maintainer.maintain_one(
                name, strategy, target=sequence, context="query", plan=plan, wait_seconds=0
            )
        except (DeltaQuarantinedError, SketchBusyError) as exc:  # run without it
            log.warning("%s", exc)
            return None
        aside.add(run)
        log.info(
            "maintained %s to sequence %d for a query (%s, %.2fs)",
            name,
            sequence,
            run.strategy,
            time.perf_counter() - started,
        )
        return ctx.sketches.version_for_snapshots(name, snapshots)

    def _plan_for_query(
        self,
        definition: SketchDefinition,
        newest: VersionRecord,
        sequence: int,
        pins: Mapping[str, PinnedSnapshot],
    ) -> MaintenancePlan | None:
        """How a query brings the sketch to its snapshots, by the cost model: maintain it
        incrementally, recapture, or (None) run without it, given the queries expected
        before the next load. Recorded with its reason; the reports that follow at the same
        snapshots reuse the choice."""
        name, advisor = definition.name, self.context.advisor
        if advisor.skipping(name, newest.version):
            return None
        choice = advisor.query_choice(name, newest.version, sequence)
        if choice is not None:  # decided at these snapshots already (by another report)
            plan = self.maintainer.plan(definition, newest, choice.action, sequence)
        else:
            tables = referenced_tables(definition.query_sql)
            table_rows = sum(pin.record_count for table, pin in pins.items() if table in tables)
            plan = self.maintainer.plan(definition, newest, "cost", sequence, table_rows)
            if plan.choice is not None:
                advisor.remember_query_choice(name, newest.version, sequence, plan.choice)
                advisor.record(name, "query", plan.choice)
        if plan.strategy == "skip":
            advisor.skip_from(name, newest.version)
            return None
        return dataclasses.replace(plan, choice=None)  # recorded here, not again by the run

    def query(
        self,
        sql: str,
        params: Mapping[str, Any] | None = None,
        snapshot: int | None = None,
        use_sketches: bool | str = True,
    ) -> QueryResult:
        """See :meth:`SketchService.query`."""
        started = time.perf_counter()
        ctx = self.context
        text, params, how, sequence, pins = self._pinned_request(sql, params, snapshot, use_sketches)
        faults.reached("query-pinned")
        files_total = sum(len(pin.files) for pin in pins.values())
        aside = _TimeAside()
        chosen, decision = (None, None)
        if how is not None:
            chosen, decision = self._sketch_for_query(text, params, pins, sequence, aside, how)
        with spark_job("the query"):
            if chosen is None:
                views = {pin.table: register_view(ctx.spark, pin) for pin in pins.values()}
                frame = plain_frame(ctx.spark, text.bound_to(views), self._scratch, params)
                sketch, files_read = None, files_total
            else:
                parsed, usable = chosen
                if parsed is None:
                    frame, files_read = self._run_recursive_with_sketch(text, params, usable, pins)
                else:
                    frame, files_read = self._run_with_sketch(parsed, usable, pins)
                sketch = (usable.record.name, usable.record.version)
            table = frame.toArrow()
        finished = time.perf_counter()
        result = QueryResult(
            table,
            sketch,
            files_read,
            files_total,
            finished - started,
            sequence,
            {pin.table: pin.sequence for pin in pins.values()},
            max(0.0, finished - started - aside.seconds),
            sketch_reason=decision.reason if decision is not None else "",
            sketch_skipped=decision.skipped if decision is not None else None,
        )
        self._record_query(text, sketch, pins, result)
        return result

    def _pinned_request(
        self,
        sql: str,
        params: Mapping[str, Any] | None,
        snapshot: int | None,
        use_sketches: bool | str,
    ) -> tuple[QueryText, Mapping[str, Any] | None, str | None, int, dict[str, PinnedSnapshot]]:
        """A query's arguments checked, its text parsed (once: every later step reads this
        parse), the sequence it reads fixed and its tables pinned there."""
        sql = self.context.views_inlined(checked_sql(sql))
        params = checked_mapping("params", params, "{'day': date(1995, 3, 15)}")
        how = checked_sketch_use(use_sketches, self.context.settings.sketch_use)
        text = query_text(sql)
        sequence = self.context.sequence(checked_snapshot(snapshot))
        return text, params, how, sequence, self.context.pin_query(sql, sequence)

    def sketched(
        self,
        sql: str,
        params: Mapping[str, Any] | None = None,
        snapshot: int | None = None,
        use_sketches: bool | str = True,
    ) -> DataFrame:
        """See :meth:`SketchService.sketched`."""
        frame: DataFrame = self.sketched_frame(sql, params, snapshot, use_sketches).frame
        return frame

    def sketched_frame(
        self,
        sql: str,
        params: Mapping[str, Any] | None = None,
        snapshot: int | None = None,
        use_sketches: bool | str = True,
    ) -> SketchedFrame:
        """See :meth:`SketchService.sketched_frame`."""
        ctx = self.context
        text, params, how, sequence, pins = self._pinned_request(sql, params, snapshot, use_sketches)
        catalog = ctx.settings.catalog_name
        chosen, decision = None, None
        if how is not None:
            chosen, decision = self._sketch_for_query(text, params, pins, sequence, _TimeAside(), how)
            if decision is not None:
                log.info("sketched frame: %s", decision.reason)
        reason = decision.reason if decision is not None else ""
        files_total = sum(len(pin.files) for pin in pins.values())
        if chosen is None:
            snapshots = {pin.table: pin.snapshot_id for pin in pins.values()}
            spelled = {pin.table: pin.iceberg_name for pin in pins.values()}
            with spark_job("the sketched query"):  # analysed here: Spark's refusal, typed
                frame = plain_frame(
                    ctx.spark, text.bound_to_snapshots(catalog, snapshots, spelled), self._scratch, params
                )
            return SketchedFrame(frame, None, reason, sequence, files_total, files_total)
        parsed, usable = chosen
        if parsed is None:
            with spark_job("the sketched query"):
                frame, _ = self._run_recursive_with_sketch(text, params, usable, pins)
        else:
            frame, usable = self._sketched_with((parsed, usable), pins)
        in_sketch = sum(len(usable.pruned.get(table, pin).files) for table, pin in pins.items())
        record = usable.record
        return SketchedFrame(frame, (record.name, record.version), reason, sequence, files_total, in_sketch)

    def _sketched_with(
        self, chosen: tuple[ParsedQuery, _UsableSketch], pins: Mapping[str, PinnedSnapshot]
    ) -> tuple[DataFrame, _UsableSketch]:
        ctx = self.context
        catalog = ctx.settings.catalog_name
        parsed, usable = chosen
        # Every sketched scan gets its range condition: through Iceberg's source it is what
        # skips files (by their manifest statistics) and row groups.
        max_intervals = ctx.settings.max_intervals
        conditions: dict[str, tuple[str, Condition | None]] = {
            table: (partition.attribute, sketch_condition(partition, fragments, max_intervals))
            for table, (partition, fragments) in usable.sketched.items()
        }
        plan, _ = instrument_use(parsed.plan, conditions)

        def source(scan: Scan) -> str:
            pin = pins[scan.table]
            return iceberg_relation(catalog, pin.iceberg_name, pin.snapshot_id)

        log.info("sketched frame with %s version %d", usable.record.name, usable.record.version)
        with spark_job("the sketched query"):
            return ctx.spark.sql(parsed.runnable(plan, source)), usable

    def _record_query(
        self,
        text: QueryText,
        sketch: tuple[str, int] | None,
        pins: Mapping[str, PinnedSnapshot],
        result: QueryResult,
    ) -> None:
        """Record the run for the cost models; a query never fails for want of its record."""
        template = text.template_key
        try:
            self.context.costs.record_query(
                template,
                sketch,
                sum(pin.record_count for pin in pins.values()),
                result.files_read,
                result.files_total,
                result.query_seconds,
            )
        except Exception as exc:
            log.warning("could not record the query's run: %s", exc)
            return
        if sketch is not None:
            self.context.advisor.observed("use", name=sketch[0])
        else:
            self.context.advisor.observed("plain", template=template)

    def _sketch_for_query(
        self,
        text: QueryText,
        params: Mapping[str, Any] | None,
        pins: Mapping[str, PinnedSnapshot],
        sequence: int,
        aside: _TimeAside,
        how: str,
    ) -> tuple[tuple[ParsedQuery | None, _UsableSketch] | None, _UseDecision | None]:
        """The sketch the query runs with (None: plain), and why it was or was not applied.
        A recursive query has no IR (None in its place): its sketch filters its base tables."""
        parsed: ParsedQuery | None = None
        try:
            parsed = text.to_ir(table_schemas(pins), params)
        except (MissingParameterError, UnqualifiedTableError):
            raise  # the plain query cannot run either: these say why
        except UnsupportedQueryError as exc:
            if not self._recursive(text):
                log.info("running without sketches: %s", exc)
                return None, None
        except QueryError as exc:
            # The front end could not read a text that parsed (a name it does not resolve as
            # Spark does): Spark runs it plain, and names the fault if the text has one.
            log.info("running without sketches (the sketch front end could not read it): %s", exc)
            return None, None
        sql, template = text.sql, text.template_key
        plan = parsed.plan if parsed is not None else None
        usable = self._usable_sketch(template, params, plan, pins, sequence, aside)
        if usable is None:
            usable = self._self_tune(sql, template, params, plan, pins, sequence, aside)
            return (None if usable is None else (parsed, usable)), None
        if self.context.settings.self_tuning != "off":  # the counts only adaptive self-tuning reads
            self.context.sketches.record_template_use(template, sql, hit=True)
        found = (usable.record.name, usable.record.version)
        if how == "always":
            return (parsed, usable), _UseDecision("use: sketch_use='always'")
        if usable.maintained:  # brought to these snapshots for this query: chosen over plain already
            mode = self.context.settings.maintain_on_query
            why = f"use: maintained for this query (maintain_on_query={mode!r})"
            return (parsed, usable), _UseDecision(why)
        with aside.timing():
            footprints = self._footprints(parsed, usable, pins)
            choice = self._use_choice(usable.record, footprints, pins, sequence)
        if choice.action == "skip":
            return None, _UseDecision(choice.reason, skipped=found)
        return (parsed, usable), _UseDecision(choice.reason)

    @staticmethod
    def _recursive(text: QueryText) -> bool:
        """Whether the query holds a recursion whose sketches this runs (others run plain)."""
        try:
            return recursive_query(text.sql) is not None
        except UnsupportedQueryError as exc:
            log.info("running without sketches: %s", exc)
            return False

    def _footprints(
        self, parsed: ParsedQuery | None, usable: _UsableSketch, pins: Mapping[str, PinnedSnapshot]
    ) -> list[ScanFootprint]:
        """What the query reads of each table with the sketch (its pruned files, and whether
        its row condition drops rows before a join) and without it."""
        conditions = self._conditions(parsed, usable, pins)
        found = []
        for table, pin in pins.items():
            read = usable.pruned.get(table, pin)
            found.append(
                ScanFootprint(
                    table,
                    len(pin.files),
                    len(read.files),
                    sum(f.size_bytes for f in pin.files),
                    sum(f.size_bytes for f in read.files),
                    sketched=table in usable.sketched,
                    drops_rows_before_join=conditions.get(table, ("", None))[1] is not None,
                )
            )
        return found

    def _use_choice(
        self,
        record: VersionRecord,
        footprints: list[ScanFootprint],
        pins: Mapping[str, PinnedSnapshot],
        sequence: int,
    ) -> Choice:
        """Whether the query is expected to run faster with this valid sketch than without:
        until the sketch has been timed with the query, from what it skips
        (:func:`sketch_core.costs.use.untimed_use_choice`); then by the cost model
        (:func:`sketch_core.costs.use.timed_use_choice`). Decided once per version and
        snapshot, and recorded (``status`` shows the newest decision)."""
        name, advisor = record.name, self.context.advisor
        choice = advisor.query_choice(name, record.version, sequence)
        if choice is not None:
            return choice
        model = advisor.model(name)
        if model.costs["use"].runs == 0 and not advisor.pinned(name):
            choice = untimed_use_choice(footprints)
        else:
            choice = timed_use_choice(model, sum(pin.record_count for pin in pins.values()))
        advisor.remember_query_choice(name, record.version, sequence, choice)
        advisor.record(name, "query", choice)
        return choice

    def _conditions(
        self, parsed: ParsedQuery | None, usable: _UsableSketch, pins: Mapping[str, PinnedSnapshot]
    ) -> dict[str, tuple[str, Condition | None]]:
        """Per sketched table its attribute and the row condition its scans get (None: only
        its files are pruned, see ``row_condition_pays``; always one where the kept files have
        merge-on-read deletes). Made once per usable sketch: the
        use decision and the run both need them."""
        if usable.conditions is not None:
            return usable.conditions
        max_intervals = self.context.settings.max_intervals
        conditions: dict[str, tuple[str, Condition | None]] = {}
        # A recursion (no IR) joins every table it reads.
        joined = {scan.table for scan in scans_below_joins(parsed.plan)} if parsed else set(usable.sketched)
        for table, (partition, fragments) in usable.sketched.items():
            kept = usable.pruned[table]
            # Files with merge-on-read deletes are read through Iceberg's source, over the whole
            # snapshot: there the condition is what skips the other files (by their statistics).
            # Its reader uses no page index; Spark's, over the kept files, does.
            page_index = not kept.has_deletes and has_page_index(kept.files, partition.attribute)
            intervals = pushed_intervals(max_intervals, page_index)
            share = partition.predicate_share(fragments, intervals)
            rows_read, rows_total = kept.record_count, pins[table].record_count
            pays = kept.has_deletes or row_condition_pays(
                share, rows_read, rows_total, feeds_join=table in joined
            )
            condition = sketch_condition(partition, fragments, intervals) if pays else None
            conditions[table] = (partition.attribute, condition)
        usable.conditions = conditions
        return conditions

    def _run_with_sketch(
        self, parsed: ParsedQuery, usable: _UsableSketch, pins: Mapping[str, PinnedSnapshot]
    ) -> tuple[DataFrame, int]:
        """The query with the sketch's range conditions, its filtered scans reading only the
        pruned files. Returns the frame and the number of data files it reads."""
        record, pruned = usable.record, usable.pruned
        plan, filtered = instrument_use(parsed.plan, self._conditions(parsed, usable, pins))
        filtered_ids = {id(scan) for scan in filtered}
        views: dict[tuple[str, bool], str] = {}  # registered on first use: each costs a file listing

        def source(scan: Scan) -> str:
            use_pruned = id(scan) in filtered_ids
            key = (scan.table, use_pruned)
            if key not in views:
                pin = pruned[scan.table] if use_pruned else pins[scan.table]
                name = f"{pin.view_name}__{record.name}_v{record.version}" if use_pruned else None
                views[key] = register_view(self.context.spark, pin, name=name)
            return views[key]

        frame = self.context.spark.sql(parsed.runnable(plan, source))
        read_in_full = {table for table, use_pruned in views if not use_pruned}
        files_read = sum(
            len(pin.files) if table in read_in_full or table not in pruned else len(pruned[table].files)
            for table, pin in pins.items()
        )
        return frame, files_read

    def _run_recursive_with_sketch(
        self,
        text: QueryText,
        params: Mapping[str, Any] | None,
        usable: _UsableSketch,
        pins: Mapping[str, PinnedSnapshot],
    ) -> tuple[DataFrame, int]:
        """A recursive query over its base tables cut down to the sketch's files and rows (its
        sketch is safe for the recursion as written: :mod:`sketch_core.recursive.sketch`)."""
        spark, record = self.context.spark, usable.record
        conditions = self._conditions(None, usable, pins)
        views: dict[str, str] = {}
        for table, pin in pins.items():
            if table not in usable.sketched:
                views[table] = register_view(spark, pin)
                continue
            frame = pinned_dataframe(spark, usable.pruned[table])
            attribute, condition = conditions[table]
            if condition is not None:
                frame = frame.where(condition(exp.column(attribute, quoted=True)).sql(dialect=SPARK))
            tag = hashlib.sha256(record.name.encode()).hexdigest()[:12]
            views[table] = keep_view(spark, f"{pin.view_name}__{tag}_v{record.version}", frame)
        files_read = sum(len(usable.pruned.get(t, pin).files) for t, pin in pins.items())
        return plain_frame(spark, text.bound_to(views), self._scratch, params), files_read

    def _self_tune(
        self,
        sql: str,
        template: str,
        params: Mapping[str, Any] | None,
        plan: Relation | None,
        pins: Mapping[str, PinnedSnapshot],
        sequence: int,
        aside: _TimeAside,
    ) -> _UsableSketch | None:
        """PBDS Sec. 8: capture now (eager), or once the template has missed often enough (adaptive)."""
        mode = self.context.settings.self_tuning
        if mode == "off":
            return None
        sketches = self.context.sketches
        misses = sketches.record_template_use(template, sql, hit=False)
        if mode == "adaptive" and misses < self.context.settings.adaptive_after:
            return None
        if self.context.settings.maintain_on_query == "cost" and any(
            d.params == encode_params(params) for d in sketches.definitions(template)
        ):
            # This very query has a sketch that the cost model chose to leave behind: capturing
            # it again would overrule that choice at the highest price.
            return None
        try:
            with aside.timing():
                self.capturer.run(CaptureRequest(sql, sequence, params=params))
        except (NoSafeAttributeError, UnsupportedQueryError, FormulasTooLargeError) as exc:
            log.info("self-tuning captured nothing: %s", exc)
            return None
        return self._usable_sketch(template, params, plan, pins, sequence, aside)
