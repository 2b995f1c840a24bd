"""Capture (PBDS Sec. 4): instrument the query, run it as one Spark job on pinned snapshots, and
publish the fragments it found as a new sketch version (with incremental state, on request)."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyroaring import BitMap

from sketch_core import faults
from sketch_core.algebra.frontend import encode_params, template_key
from sketch_core.choice.query import AttributeEstimates
from sketch_core.config import Settings
from sketch_core.errors import InvalidSketchNameError, SketchNotFoundError, UnsupportedQueryError
from sketch_core.maintenance import MaintainedSketch, store_state
from sketch_core.metastore.sketches import SketchDefinition
from sketch_core.partitions.range_partition import MAX_FRAGMENTS, PartitionError, RangePartition
from sketch_core.rewrites.capture import CapturePlan, instrument_capture
from sketch_core.service.arguments import checked_fragments, checked_mapping, checked_snapshot, checked_sql
from sketch_core.service.attributes import AttributeChoosing
from sketch_core.service.core import LOCAL_STATE_ROWS, definition_identity
from sketch_core.service.results import SketchVersion
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


def _default_name(template: str, params: Mapping[str, Any], partition_ids: Mapping[str, int]) -> str:
    digest = hashlib.sha256(
        json.dumps([template, params, sorted(partition_ids.items())], sort_keys=True, default=str).encode()
    ).hexdigest()
    return f"sketch_{digest[:16]}"


@dataclass(frozen=True)
class _CaptureRun:
    """How a capture is recorded among the sketch's runs: a capture, or a maintenance run's
    recapture (from a version, over a delta); timed from ``started``."""

    strategy: str
    from_version: int | None
    with_state: bool
    delta_rows: int
    started: float


class Capturing(AttributeChoosing):
    """Capturing sketches."""

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
    ) -> SketchVersion:
        """Capture a provenance sketch for ``sql`` (PBDS Sec. 4) and publish it as a new version.

        ``attributes`` ({table: attribute}) must be safe for the query (PBDS Sec. 6) or the
        capture is refused with :class:`UnsafeAttributeError`; without them, the
        ``attribute_strategy`` setting picks them (by default the safe attribute with the
        smallest estimated sketch; ``heuristic``: the sort key, then the group-by columns; see
        :meth:`choose_attributes`). ``fragments`` is a count
        for every table or per table (default ``settings.fragments``).

        ``with_state`` also computes the incremental-maintenance state (in-process for small
        tables, else on Spark) and stores it with the version (for sketches that will be
        maintained; without it, the first incremental maintenance computes it, at the
        version's snapshot).

        Capturing again under the name of an existing sketch of the same query and parameters
        keeps that sketch's attributes and fragment counts (a new version of the same sketch),
        unless ``attributes`` or ``fragments`` ask otherwise.
        """
        sql = checked_sql(sql)
        params = checked_mapping("params", params, "{'day': date(1995, 3, 15)}")
        attributes = checked_mapping("attributes", attributes, "{'ns.table': 'column'}")
        fragments = checked_fragments(fragments)
        for table in fragments if isinstance(fragments, Mapping) else ["every table"]:
            _fragment_count(fragments, table, self.settings)  # out of range: refused before any work
        snapshot = checked_snapshot(snapshot)
        if name is None:  # named once its partitions are chosen, and held from then on
            return self._capture(
                sql, name, params, attributes, fragments, self._sequence(snapshot), with_state=with_state
            )
        check_sketch_name(name)
        # Held before the latest commit is read: a capture that waited for a concurrent run
        # of the sketch captures the commit that is latest once it goes on (or finds it done).
        with self.coordinated(name, "a capture"):
            if attributes is None:
                attributes, fragments = self._kept_partitions(name, sql, params, fragments)
            return self._capture(
                sql, name, params, attributes, fragments, self._sequence(snapshot), with_state=with_state
            )

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
            definition = self.sketches.definition(name)
        except SketchNotFoundError:
            return None, fragments
        if definition.query_sql != sql or definition.params != encode_params(params):
            return None, fragments
        stored = {t: self._partition(pid)[0] for t, pid in definition.partition_ids.items()}
        counts = {t: p.fragment_count for t, p in stored.items()}
        asked = {t: _fragment_count(fragments, t, self.settings) for t in counts}
        if fragments is not None and counts != asked:
            return None, fragments
        return {t: p.attribute for t, p in stored.items()}, counts

    def _capture(
        self,
        sql: str,
        name: str | None,
        params: Mapping[str, Any] | None,
        attributes: Mapping[str, str] | None,
        fragments: int | Mapping[str, int] | None,
        sequence: int,
        strategy: str = "capture",
        from_version: int | None = None,
        with_state: bool = False,
        delta_rows: int = 0,
    ) -> SketchVersion:
        started = time.perf_counter()
        pins = self._pin_query(sql, sequence)
        parsed = self._parsed.to_ir(sql, table_schemas(pins), params)
        statistics = {table: pin.column_bounds() for table, pin in pins.items()}
        chosen, estimates = self._attributes(
            parsed.plan,
            pins,
            statistics,
            attributes,
            fragments if isinstance(fragments, int) else self.settings.fragments,
        )
        partitions = {
            table: self.range_partition(
                table, attribute, _fragment_count(fragments, table, self.settings), sequence=sequence
            )
            for table, attribute in chosen.items()
        }
        capture = instrument_capture(parsed.plan, attributes=chosen)
        encoded = encode_params(params)
        partition_ids = {table: pid for table, (pid, _) in partitions.items()}
        template = template_key(sql)
        name = name or _default_name(template, encoded, partition_ids)
        definition = SketchDefinition(name, sql, encoded, template, partition_ids)
        run = _CaptureRun(strategy, from_version, with_state, delta_rows, started)
        with self.coordinated(name, "a capture"):
            done = self._published_at(definition, sequence)
            if done is not None:
                return done
            return self._publish_capture(definition, pins, sequence, capture, partitions, estimates, run)

    def _published_at(self, definition: SketchDefinition, sequence: int) -> SketchVersion | None:
        """The sketch's version at ``sequence`` when it exists for this very definition (another
        run published it, maybe while this one waited): capturing it again would only redo
        that work, since a sequence gets one version."""
        try:
            existing = self.sketches.definition(definition.name)
            record = self.sketches.version(definition.name, sequence=sequence)
        except SketchNotFoundError:
            return None
        if record is None or definition_identity(existing) != definition_identity(definition):
            return None
        log.info(
            "%s: version %d at sequence %d was published by another run: no capture needed",
            definition.name,
            record.version,
            sequence,
        )
        return self._sketch_version(record)

    def _publish_capture(
        self,
        definition: SketchDefinition,
        pins: Mapping[str, PinnedSnapshot],
        sequence: int,
        capture: CapturePlan,
        partitions: Mapping[str, tuple[int, RangePartition]],
        estimates: AttributeEstimates | None,
        run: _CaptureRun,
    ) -> SketchVersion:
        """Run the capture on Spark (or take it from the operator state) and publish it."""
        name, sql, encoded = definition.name, definition.query_sql, definition.params
        partition_ids = dict(definition.partition_ids)
        chosen = {table: partition.attribute for table, (_, partition) in partitions.items()}
        with spark_job(f"the capture of {name} at sequence {sequence}"):
            faults.reached("spark-job", spark=self.spark)
            maintained = self._state_capture(definition, pins, sequence)
            if maintained is not None:
                sketch = maintained.engine.sketch()
                found = {table: sketch.get(table, set()) for table in partition_ids}
            else:
                found = run_capture(self.spark, capture, self._sources(pins, partitions))
        self.sketches.ensure_sketch(
            name, sql, encoded, template_key=definition.template_key, partition_ids=partition_ids
        )
        run_id = self.sketches.start_run(name, run.strategy, run.from_version)
        try:
            keeps = (run.with_state or maintained is not None) and self.budget.keeps_state(name)
            if maintained is None and keeps:
                maintained = self._initial_state(name, sequence)
            elif not keeps:
                maintained = None
            ref = store_state(self.state_store, name, maintained.engine, None) if maintained else None
            faults.reached("state-written")
            record = self.sketches.publish_version(
                name,
                sequence,
                {table: pin.snapshot_id for table, pin in pins.items()},
                {partition_ids[table]: BitMap(ids).serialize() for table, ids in found.items()},
                state_ref=ref,
            )
            faults.reached("published")
            if maintained is not None and record.state_ref is not None:
                self._keep_engine(definition_identity(definition), name, record.version, maintained)
            if estimates is not None:
                self._record_choice(name, estimates, chosen, found, partitions)
            seconds = time.perf_counter() - run.started
            self.sketches.finish_run(
                run_id,
                status="succeeded",
                to_version=record.version,
                delta_rows=run.delta_rows,
                seconds=seconds,
                table_rows=sum(pin.record_count for pin in pins.values()),
            )
        except BaseException as exc:  # the row says how it ended (a kill is settled by readers)
            self._fail_run(run_id, exc, time.perf_counter() - run.started, run.delta_rows)
            raise
        log.info("captured %s version %d at sequence %d in %.2fs", name, record.version, sequence, seconds)
        return self._sketch_version(record)

    def _fail_run(self, run_id: int, exc: BaseException, seconds: float, delta_rows: int) -> None:
        """Record a started run as failed with ``exc``; a run never fails for want of that."""
        try:
            self.sketches.finish_run(
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
        self, definition: SketchDefinition, pins: Mapping[str, PinnedSnapshot], sequence: int
    ) -> MaintainedSketch | None:
        """The sketch's incremental engine at ``sequence``, its state computed on Spark, when
        that job can stand for the capture's: the tables are too big for the state to be
        computed in-process (above ``LOCAL_STATE_ROWS`` rows), the sketch keeps state, and
        every table is read under an aggregation whose state Spark computes, so that the engine
        has the query's provenance from those sums alone (the sketch is the engine's, exactly
        what the capture query finds: see ``test_maintenance_vs_capture``). One Spark job then
        gives the sketch and its state, and the first maintenance restores that state instead
        of computing it. None: capture with the instrumented query."""
        rows = sum(pin.record_count for pin in pins.values())
        if rows <= LOCAL_STATE_ROWS or not self.budget.keeps_state(definition.name):
            return None
        engine = self.planned_engine(definition, sequence)
        if engine is None:
            return None
        if engine.tables_outside(engine.frontier()):
            return None  # some table would be read in-process: the capture query reads it on Spark
        partitions = self._range_partitions(definition)
        try:
            maintained = self.first_engine(
                definition, partitions, sequence, self.budget.keep_top(definition.name)
            )
        except (UnsupportedQueryError, pa.ArrowException) as exc:  # the capture query can still run
            log.info("%s: captured with the capture query (the state failed: %s)", definition.name, exc)
            return None
        log.info("%s: captured from its incremental state (one Spark job for both)", definition.name)
        return maintained

    def _initial_state(self, name: str, sequence: int) -> MaintainedSketch | None:
        """The incremental engine of a sketch at ``sequence``, its aggregations' state computed
        from the snapshot (in-process for small tables, else on Spark); None for queries the
        engine does not support (they are recaptured)."""
        definition = self.sketches.definition(name)
        partitions = self._range_partitions(definition)
        try:
            return self.first_engine(definition, partitions, sequence, self.budget.keep_top(name))
        except UnsupportedQueryError as exc:
            log.info("%s: no incremental state (%s); it will be recaptured", name, exc)
            return None
