"""``SketchService``: the public entry point (tables now; capture, use and maintenance later)."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyroaring import BitMap
from pyspark.sql import DataFrame, SparkSession
from sqlalchemy import Engine

from sketch_core import faults
from sketch_core.algebra.frontend import ParsedQuery, decode_params, encode_params, template_key
from sketch_core.algebra.ir import Relation, Scan, positive_scans, scans_below_joins
from sketch_core.algebra.parse_cache import ParsedQueryCache
from sketch_core.algebra.printer import to_sql
from sketch_core.arrow_pool import use_arrow_memory_pool
from sketch_core.choice.candidates import table_candidates
from sketch_core.choice.estimation import DEFAULT_REPLICATES
from sketch_core.choice.local_plan import evaluate_plan
from sketch_core.choice.query import AttributeEstimates, SampledTable, estimate_candidates
from sketch_core.choice.shape import aggregation_shape
from sketch_core.choice.store import SampleStore, StoredSample
from sketch_core.choice.strategies import TableCandidates, preferences
from sketch_core.config import Settings
from sketch_core.cost_advisor import CostAdvisor
from sketch_core.costs.arrivals import forecast_next, predict
from sketch_core.costs.choose import Choice, Situation, choose, exploring_rule
from sketch_core.costs.model import CostModel
from sketch_core.errors import (
    ConfigurationError,
    DeltaQuarantinedError,
    InvalidSketchNameError,
    KeptValuesExhaustedError,
    NoSafeAttributeError,
    QueryError,
    SequenceOutOfRangeError,
    SketchNotFoundError,
    SnapshotExpiredError,
    StateMissingError,
    TableInUseError,
    UnsafeAttributeError,
    UnsupportedQueryError,
    ValidationOverrideError,
)
from sketch_core.incremental.engine import Frontier, IncrementalSketch, RowDelta
from sketch_core.incremental.partials import Partials
from sketch_core.maintenance import (
    DeltaSummarizer,
    MaintainedSketch,
    StateStore,
    Summarizer,
    advance,
    big_delta_covered,
    build_engine,
    plan_engine,
    store_state,
    summarizable,
)
from sketch_core.metastore.choices import AttributeChoiceRepository
from sketch_core.metastore.commits import CommitLog
from sketch_core.metastore.costs import CostRecords
from sketch_core.metastore.engine import connect_metastore
from sketch_core.metastore.migrations import migrate
from sketch_core.metastore.policies import PolicyRepository
from sketch_core.metastore.samples import SampleRepository
from sketch_core.metastore.sketches import (
    FinishedRun,
    PartitionRecord,
    SketchDefinition,
    SketchRepository,
    VersionRecord,
)
from sketch_core.metastore.state_modes import StateModeRepository
from sketch_core.metastore.table_drop import forget_table
from sketch_core.metastore.validations import BatchValidation, ValidationRepository
from sketch_core.partitions import RangePartition
from sketch_core.partitions.pruning import prune_files, row_condition_pays
from sketch_core.partitions.range_partition import MAX_FRAGMENTS, PartitionError
from sketch_core.policy import Decision, Policy, PolicyFacts, effective_policy, evaluate
from sketch_core.rewrites.capture import FRAGMENT_COLUMN, instrument_capture
from sketch_core.rewrites.push_selections import push_selections
from sketch_core.rewrites.reuse import can_reuse
from sketch_core.rewrites.safety import (
    SafetyResult,
    Statistics,
    check_safety,
    choose_attributes,
    group_by_attributes,
)
from sketch_core.rewrites.use import Condition, instrument_use, sketch_condition
from sketch_core.spark.capture import register_annotated_view, run_capture
from sketch_core.spark.delta_partials import SCRATCH_DIRECTORY, collect_scratch, delta_partials
from sketch_core.spark.jobs import spark_job
from sketch_core.spark.partitioning import compute_range_partition
from sketch_core.spark.session import build_session
from sketch_core.spark.state_init import compute_frontier_partials
from sketch_core.spark.views import (
    bind_tables,
    keep_view,
    pinned_dataframe,
    referenced_tables,
    register_view,
    table_schemas,
)
from sketch_core.state_budget import BudgetRun, StateBudget
from sketch_core.status import SketchStatus, sketch_status
from sketch_core.tables.catalog import RecordingSqlCatalog, open_catalog
from sketch_core.tables.deltas import read_matching
from sketch_core.tables.orphans import RemovedFiles
from sketch_core.tables.pinned import PinnedSnapshot
from sketch_core.tables.service import TableService
from sketch_core.validation.gate import DeltaGate

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SketchVersion:
    """One published version of a sketch: valid for exactly ``table_snapshots``."""

    name: str
    version: int
    sequence: int
    table_snapshots: dict[str, int | None]
    fragments: dict[str, list[int]]
    partitions: dict[str, tuple[str, int]]  # table -> (attribute, fragment count)


_MAX_NAME_CHARACTERS = 200


def check_sketch_name(name: str) -> None:
    """Refuse names the metastore cannot store (NUL) or that would not print back (control
    characters), and empty or overlong ones; everything else (quotes, slashes, SQL) is a
    value like any other: bound in queries, digested in paths."""
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


def _unsafe_because(result: SafetyResult) -> str | None:
    return None if result.safe else result.reason or "unsafe"


def _default_name(template: str, params: Mapping[str, Any], partition_ids: Mapping[str, int]) -> str:
    digest = hashlib.sha256(
        json.dumps([template, params, sorted(partition_ids.items())], sort_keys=True, default=str).encode()
    ).hexdigest()
    return f"sketch_{digest[:16]}"


def _sketch_identity(query_sql: str, params: Mapping[str, Any], partition_ids: Mapping[str, int]) -> str:
    """What an incremental engine computes: its query, parameters and partitions. A sketch
    dropped and captured again under its name (here or by another process) counts versions
    from 1 again, so an engine kept for the old one must not pass for the new one's."""
    return json.dumps([query_sql, params, sorted(partition_ids.items())], sort_keys=True, default=str)


def _definition_identity(definition: SketchDefinition) -> str:
    return _sketch_identity(definition.query_sql, definition.params, definition.partition_ids)


@dataclass(frozen=True)
class _KeptEngine:
    identity: str
    version: int
    maintained: MaintainedSketch


@dataclass(frozen=True)
class _UsableSketch:
    """A sketch version chosen for a query, resolved once: per table its partition, fragments,
    and the pinned snapshot cut down to the files that may hold those fragments."""

    record: VersionRecord
    sketched: dict[str, tuple[RangePartition, BitMap]]
    pruned: dict[str, PinnedSnapshot]
    # Brought to the query's snapshots for it: the choice to use it is made (and paid for).
    maintained: bool = False

    @property
    def rows(self) -> int:
        return sum(pin.record_count for pin in self.pruned.values())


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


@dataclass(frozen=True)
class MaintenanceRun:
    """One sketch brought to a newer snapshot (or found up to date: strategy "none")."""

    name: str
    from_version: int | None
    to_version: int | None
    strategy: str  # "incremental", "full", "none" (up to date) or "skip" (left stale, by cost)
    delta_rows: int
    seconds: float
    # Where an incremental run computed its aggregations' deltas: "in-process", or "spark"
    # (IMP Sec. 8's set-oriented strategy, for deltas above the in-process threshold).
    where: str = "in-process"

    @property
    def published(self) -> bool:
        """Whether the run published a new version (else it found the sketch up to date, or
        the cost model chose to leave it stale)."""
        return self.strategy in ("incremental", "full") and self.to_version is not None


# "cost": as "auto", but the sketch is left stale ("skip") when the cost model expects the
# queries before the next load to cost less without it than maintaining it and using it.
MAINTENANCE_STRATEGIES = ("auto", "cost", "incremental", "full")
# A current sketch is left unused only when the query is expected to run this much faster
# without it: estimates that close are noise, and flipping between them costs both ways.
PLAIN_MARGIN = 0.05


def _check_strategy(strategy: str) -> None:
    if strategy not in MAINTENANCE_STRATEGIES:
        raise ConfigurationError(
            f"unknown maintenance strategy {strategy!r}",
            hint=f"use one of {', '.join(MAINTENANCE_STRATEGIES)}",
        )


@dataclass(frozen=True)
class MaintenancePlan:
    """What maintaining a sketch would do: from which version to which commit, how."""

    name: str
    from_version: int
    target: int  # the commit sequence number the new version would be valid at
    strategy: str  # "none" (up to date), "incremental", "full" or "skip" (left stale, by cost)
    delta_rows: int
    on_spark: bool  # an incremental run that would compute some aggregations' deltas on Spark
    builds_state: bool  # an incremental run from a version without stored state (built on Spark)
    choice: Choice | None = None  # the cost model's choice, when it made this one

    @property
    def needs_spark(self) -> bool:
        """Whether the run needs Spark: a recapture, state to build, or a delta too big for
        in-process work. (An incremental run may still fall back to a recapture when its
        kept top-m values run out or its state cannot be read; see ``maintain``.)"""
        return self.strategy == "full" or self.on_spark or self.builds_state


@dataclass(frozen=True)
class PolicyCheck:
    """One sketch's policy, checked: whether it fires now, and why."""

    name: str
    policy: Policy
    explicit: bool  # False: the sketch has no policy of its own and got DEFAULT_POLICY
    decision: Decision
    checked_at: datetime

    @property
    def fire(self) -> bool:
        return self.decision.fire


@dataclass(frozen=True)
class QueryResult:
    table: pa.Table
    sketch: tuple[str, int] | None
    files_read: int
    files_total: int
    seconds: float  # the whole call: pinning, finding (or maintaining) a sketch, the query
    sequence: int
    table_sequences: Mapping[str, int]
    # ``seconds`` less the maintenance or capture done on the way (recorded and modelled as
    # those runs): what the cost models learn a query's cost from.
    query_seconds: float = 0.0


@dataclass(frozen=True)
class GarbageReport:
    versions: Mapping[str, list[int]]  # sketch -> the version numbers expired
    state_directories: int
    table_snapshots: Mapping[str, int] = field(default_factory=dict)  # table -> snapshots expired
    table_files: Mapping[str, RemovedFiles] = field(default_factory=dict)  # table -> files deleted

    @property
    def version_count(self) -> int:
        return sum(len(v) for v in self.versions.values())


class SketchService:
    """Tables, queries and (in later releases) sketches over one metastore and warehouse."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        catalog: RecordingSqlCatalog,
        spark: SparkSession | None = None,
    ) -> None:
        self.settings = settings
        use_arrow_memory_pool(settings.arrow_memory_pool)
        self.engine = engine
        self.catalog = catalog
        self.commit_log = CommitLog(engine)
        self.tables = TableService(catalog, self.commit_log, settings)
        self.sketches = SketchRepository(engine)
        self.policies = PolicyRepository(engine)
        self.costs = CostRecords(engine)
        self.state_store = StateStore(settings.warehouse / "_sketch_state")
        self.choices = AttributeChoiceRepository(engine)
        self.samples = SampleStore(
            SampleRepository(engine),
            self.commit_log,
            settings.warehouse,
            lambda: self.spark,
            rate=settings.sample_rate,
            max_drift=settings.sample_max_drift,
        )
        self._spark = spark
        # Stored partitions are immutable (a new computation gets a new id), so parsing one
        # (10,000 cuts: ~10 ms) is done once per service, not on every query.
        self._partitions: dict[int, tuple[PartitionRecord, RangePartition]] = {}
        # sketch -> its engine at a version: see Settings.engine_cache_entries.
        self._engines: OrderedDict[str, _KeptEngine] = OrderedDict()
        self._collected_at = float("-inf")  # monotonic time of the last collection after maintenance
        self.advisor = CostAdvisor(self.costs, self._sketch_share)
        self.state_modes = StateModeRepository(engine)
        self.budget = StateBudget(
            settings,
            self.sketches,
            self.policies,
            self.state_modes,
            self.state_store,
            self.advisor,
            lambda name: sorted(referenced_tables(self.sketches.definition(name).query_sql)),
        )
        self._parsed = ParsedQueryCache()
        self.validations = ValidationRepository(engine)
        self.gate = DeltaGate(self.tables, self.commit_log, self.validations, settings.validation_slack)

    @classmethod
    def from_env(cls, *, spark: SparkSession | None = None) -> SketchService:
        """Configure from SKETCH_METASTORE_URL, SKETCH_WAREHOUSE and SKETCH_SPARK_MASTER."""
        return cls.from_settings(Settings.from_env(), spark=spark)

    @classmethod
    def from_settings(cls, settings: Settings, *, spark: SparkSession | None = None) -> SketchService:
        url = settings.require_metastore_url()
        engine = connect_metastore(url)
        migrate(engine)
        settings.warehouse.mkdir(parents=True, exist_ok=True)
        catalog = open_catalog(
            engine.url.render_as_string(hide_password=False),
            settings.warehouse.as_uri(),
            name=settings.catalog_name,
        )
        return cls(settings, engine, catalog, spark)

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            self._spark = build_session(self.settings)
        return self._spark

    def range_partition(
        self, table: str, attribute: str, fragments: int, *, sequence: int | None = None
    ) -> tuple[int, RangePartition]:
        """The stored partition for (table, attribute, fragments), computed now if there is none.

        A new partition is computed on Spark over the table pinned at ``sequence`` (latest if
        None) and stored with that sequence. Stored partitions are reused as they are, so the
        fragment ids of every sketch on them stay comparable. Returns (partition id, partition).
        ``fragments`` is the requested count; a column with fewer distinct values gets fewer.
        """
        pinned = self.tables.pin(table, sequence)
        name = pinned.table
        found = self.sketches.find_partition(name, attribute, fragments)
        if found is None:
            computed = compute_range_partition(
                pinned_dataframe(self.spark, pinned), name, attribute, fragments
            )
            found = self.sketches.ensure_partition(
                name, attribute, fragments, computed.to_json(), pinned.sequence
            )
        return found.partition_id, self._partition(found.partition_id)[1]

    def _partition(self, partition_id: int) -> tuple[PartitionRecord, RangePartition]:
        if partition_id not in self._partitions:
            stored = self.sketches.partition_by_id(partition_id)
            parsed = RangePartition.from_json(stored.table, stored.attribute, stored.boundaries)
            self._partitions[partition_id] = (stored, parsed)
        return self._partitions[partition_id]

    def _identified_partitions(self, definition: SketchDefinition) -> dict[str, tuple[int, RangePartition]]:
        """Per table the sketch partitions: (partition id, partition)."""
        return {t: (pid, self._partition(pid)[1]) for t, pid in definition.partition_ids.items()}

    def _range_partitions(self, definition: SketchDefinition) -> dict[str, RangePartition]:
        return {t: p for t, (_, p) in self._identified_partitions(definition).items()}

    def latest_sequence(self) -> int:
        return self.commit_log.latest_sequence()

    # -- pinning --------------------------------------------------------------------------------
    def _sequence(self, snapshot: int | None) -> int:
        latest = self.latest_sequence()
        sequence = latest if snapshot is None else snapshot
        if not 0 < sequence <= latest:
            raise SequenceOutOfRangeError(sequence, latest)
        return sequence

    def _pin_query(self, sql: str, sequence: int) -> dict[str, PinnedSnapshot]:
        return {name: self.tables.pin(name, sequence) for name in referenced_tables(sql)}

    # -- attribute choice (CBS) ----------------------------------------------------------------
    def estimate_attributes(
        self,
        sql: str,
        params: Mapping[str, Any] | None = None,
        *,
        snapshot: int | None = None,
        fragments: int | None = None,
        replicates: int = DEFAULT_REPLICATES,
    ) -> AttributeEstimates:
        """Every safe attribute of every table the query reads, with the expected selectivity of
        a sketch on it, estimated from a stratified sample of the query's largest table (CBS;
        see :mod:`sketch_core.choice.query`); the unsafe ones with the reason."""
        plan, pins, statistics = self._pinned_plan(sql, params, snapshot)
        return self._estimates(plan, pins, statistics, fragments or self.settings.fragments, replicates)

    def _pinned_plan(
        self, sql: str, params: Mapping[str, Any] | None, snapshot: int | None
    ) -> tuple[Relation, dict[str, PinnedSnapshot], Statistics]:
        """The query's plan, its tables pinned at ``snapshot`` (default: the latest), and their
        column bounds (for safety checks)."""
        pins = self._pin_query(sql, self._sequence(snapshot))
        parsed = self._parsed.to_ir(sql, table_schemas(pins), params)
        return parsed.plan, pins, {table: pin.column_bounds() for table, pin in pins.items()}

    def _estimates(
        self,
        plan: Relation,
        pins: Mapping[str, PinnedSnapshot],
        statistics: Statistics,
        fragments: int,
        replicates: int = DEFAULT_REPLICATES,
        *,
        screen: bool = True,
    ) -> AttributeEstimates:
        """With ``screen``, only the attributes a safety check accepts are estimated; without,
        every attribute is (a capture checks its picks in order of preference anyway, and a
        check costs more than an estimate)."""
        started = time.perf_counter()

        def unsafe_because(table: str, attribute: str) -> str | None:
            if not screen:
                return None
            return _unsafe_because(check_safety(plan, {table: attribute}, statistics))

        tables, refused = table_candidates(
            plan, {t: pin.schema.names for t, pin in pins.items()}, self._sort_keys(pins), unsafe_because
        )
        candidates = {table: list(c.all) for table, c in tables.items()}
        shape = aggregation_shape(plan)
        if isinstance(shape, str):
            return AttributeEstimates(candidates, refused, None, reason=shape, tables=tables)
        positive = {scan.table for scan in positive_scans(plan)}
        fact = max(sorted(positive), key=lambda t: pins[t].record_count)
        stored = self.samples.sample(pins[fact], group_by_attributes(plan).get(fact, []))

        stored_ids = {table: self.sketches.partition_ids(table, fragments) for table in candidates}

        def partition_of(table: str, attribute: str) -> RangePartition | None:
            found = stored_ids.get(table, {}).get(attribute)
            return None if found is None else self._partition(found)[1]

        estimation = estimate_candidates(
            lambda rows_plan: self._sample_rows(rows_plan, pins, fact, stored),
            shape,
            SampledTable(fact, stored.sample, stored.memo),
            candidates,
            partition_of,
            fragments,
            replicates=replicates,
        )
        return AttributeEstimates(
            candidates,
            refused,
            estimation,
            sampled_table=fact,
            sample_drawn=stored.drawn,
            seconds=time.perf_counter() - started,
            tables=tables,
        )

    def _sample_rows(
        self, plan: Relation, pins: Mapping[str, PinnedSnapshot], sampled: str, stored: StoredSample
    ) -> pa.Table:
        """``plan``'s rows with ``sampled``'s scans reading its sample: in-process when
        :mod:`~sketch_core.choice.local_plan` covers the plan (no Spark job: most of an estimate's
        time otherwise), else on Spark."""

        def read(scan: Scan, keys: Mapping[str, pa.Array] | None) -> pa.Table:
            if scan.table == sampled:
                return stored.sample.rows
            return read_matching(pins[scan.table], scan.source_columns, keys, self.tables.file_cache)

        try:
            return evaluate_plan(push_selections(plan), read, driving=sampled)
        except (UnsupportedQueryError, pa.ArrowException) as error:
            log.info("estimating on Spark: %s", error)
        sample = self.spark.read.parquet(stored.path)
        view = keep_view(self.spark, f"__sample_{abs(hash(stored.path))}", sample)
        source = {table: register_view(self.spark, pin) for table, pin in pins.items()} | {sampled: view}
        return self.spark.sql(to_sql(plan, source=lambda scan: source[scan.table])).toArrow()

    def choose_attributes(
        self,
        sql: str,
        params: Mapping[str, Any] | None = None,
        *,
        snapshot: int | None = None,
        fragments: int | None = None,
    ) -> tuple[dict[str, str], AttributeEstimates | None]:
        """The attributes a capture of ``sql`` without ``attributes`` would sketch, picked by the
        ``attribute_strategy`` setting, and the estimates a cost-based strategy ranked them by:
        the work the choice adds to such a capture."""
        plan, pins, statistics = self._pinned_plan(sql, params, snapshot)
        return self._attributes(plan, pins, statistics, None, fragments or self.settings.fragments)

    def _sort_keys(self, pins: Mapping[str, PinnedSnapshot]) -> dict[str, tuple[str, ...]]:
        keys = {}
        for table in pins:
            record = self.commit_log.get_table(table)
            keys[table] = record.sort_by if record else ()
        return keys

    # -- capture --------------------------------------------------------------------------------
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

        ``with_state`` also computes the incremental-maintenance state on Spark and stores it
        with the version (for sketches that will be maintained; without it, the first
        incremental maintenance computes it, at the version's snapshot).
        """
        if name is not None:
            check_sketch_name(name)
        return self._capture(
            sql, name, params, attributes, fragments, self._sequence(snapshot), with_state=with_state
        )

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
        with spark_job(f"the capture of {name or 'a sketch'} at sequence {sequence}"):
            faults.reached("spark-job", spark=self.spark)
            found = run_capture(self.spark, capture, self._sources(pins, partitions))
        encoded = encode_params(params)
        partition_ids = {table: pid for table, (pid, _) in partitions.items()}
        template = template_key(sql)
        name = name or _default_name(template, encoded, partition_ids)
        self.sketches.ensure_sketch(name, sql, encoded, template_key=template, partition_ids=partition_ids)
        run_id = self.sketches.start_run(name, strategy, from_version)
        try:
            keeps = with_state and self.budget.keeps_state(name)
            maintained = self._initial_state(name, sequence) if keeps else None
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
                identity = _sketch_identity(sql, encoded, partition_ids)
                self._keep_engine(identity, name, record.version, maintained)
            if estimates is not None and estimates.estimation is not None:
                self._record_choice(name, estimates, chosen, found, partitions)
            seconds = time.perf_counter() - started
            self.sketches.finish_run(
                run_id,
                status="succeeded",
                to_version=record.version,
                delta_rows=delta_rows,
                seconds=seconds,
                table_rows=sum(pin.record_count for pin in pins.values()),
            )
        except BaseException as exc:  # the row says how it ended (a kill is settled by readers)
            self._fail_run(run_id, exc, time.perf_counter() - started, delta_rows)
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

    def _initial_state(self, name: str, sequence: int) -> MaintainedSketch | None:
        """The incremental engine of a sketch at ``sequence``, its aggregations' state computed
        on Spark; None for queries the engine does not support (they are recaptured)."""
        definition = self.sketches.definition(name)
        partitions = self._range_partitions(definition)
        try:
            return build_engine(
                self.tables,
                definition,
                partitions,
                sequence,
                summarize=self.spark_summarizer(definition),
                keep_top=self.budget.keep_top(name),
            )
        except UnsupportedQueryError as exc:
            log.info("%s: no incremental state (%s); it will be recaptured", name, exc)
            return None

    def _sources(
        self, pins: Mapping[str, PinnedSnapshot], partitions: Mapping[str, tuple[int, RangePartition]]
    ) -> Callable[[Scan], str]:
        """Spark views of the pinned tables; a scan with the fragment column reads the table's
        annotated view (each row's fragment id in ``partitions``' partition)."""
        views = {table: register_view(self.spark, pin) for table, pin in pins.items()}
        annotated = {
            table: register_annotated_view(self.spark, pins[table], partition, str(pid))
            for table, (pid, partition) in partitions.items()
        }

        def source(scan: Scan) -> str:
            return annotated[scan.table] if FRAGMENT_COLUMN in scan.source_columns else views[scan.table]

        return source

    def _attributes(
        self,
        plan: Relation,
        pins: Mapping[str, PinnedSnapshot],
        statistics: Statistics,
        requested: Mapping[str, str] | None,
        fragments: int,
    ) -> tuple[dict[str, str], AttributeEstimates | None]:
        """The attribute of each sketched table: ``requested`` (checked to be safe), or as the
        ``attribute_strategy`` setting picks them (with the estimates it ranked them by)."""
        if requested:
            wanted = {table.lower(): attribute for table, attribute in requested.items()}
            for table, attribute in wanted.items():
                if table not in pins:
                    raise QueryError(f"attributes names {table}, which the query does not read")
                if attribute not in pins[table].schema.names:
                    raise QueryError(
                        f"{table} has no column {attribute!r}", hint=f"columns: {pins[table].schema.names}"
                    )
            for table, attribute in wanted.items():
                alone = check_safety(plan, {table: attribute}, statistics)
                if not alone.safe:
                    raise UnsafeAttributeError(table, attribute, alone.reason or "unsafe")
            together = check_safety(plan, wanted, statistics)
            if not together.safe:
                raise UnsafeAttributeError(
                    ", ".join(wanted), ", ".join(wanted.values()), f"together: {together.reason}"
                )
            return wanted, None
        positive = {scan.table for scan in positive_scans(plan)}
        # Largest tables first: they have the most to skip, so they get first pick.
        sketched = [
            table
            for table in sorted(positive, key=lambda t: -pins[t].record_count)
            if len(pins[table].files) >= self.settings.min_files_to_sketch
        ]
        strategy = self.settings.attribute_strategy
        estimates: AttributeEstimates | None = None
        if strategy == "heuristic" or not sketched:  # (nothing to sketch: nothing to estimate)
            grouped = group_by_attributes(plan)
            keys = self._sort_keys(pins)
            pools = {t: TableCandidates((), (), tuple(grouped.get(t, [])), keys[t][:1]) for t in sketched}
        else:
            estimates = self._estimates(plan, pins, statistics, fragments, screen=False)
            pools = {t: estimates.tables[t] for t in sketched if t in estimates.tables}
        expected = estimates.expected_selectivities() if estimates is not None else None
        candidates = preferences(strategy, pools, expected)
        choice = choose_attributes(plan, candidates, statistics)
        if not choice.chosen:
            reasons = "; ".join(f"{t}.{a}: {r}" for t, refused in choice.refused.items() for a, r in refused)
            raise NoSafeAttributeError(
                sorted(candidates), reasons or "no table has enough data files to skip"
            )
        if estimates is not None:
            estimates = replace(estimates, refused=choice.refused)
        return choice.chosen, estimates

    def _record_choice(
        self,
        name: str,
        estimates: AttributeEstimates,
        chosen: Mapping[str, str],
        found: Mapping[str, Any],
        partitions: Mapping[str, tuple[int, RangePartition]],
    ) -> None:
        """Keep the estimates beside the sketch, with the share of fragments the captured sketch
        keeps on each chosen attribute and the relative size error of its estimate (CBS Sec.
        4.4.1; fragments, not rows: the captured sketch tells those without a scan)."""
        assert estimates.estimation is not None
        by_table: dict[str, dict[str, Any]] = {}
        refused = {(t, a): why for t, unsafe in estimates.refused.items() for a, why in unsafe}
        for key, e in estimates.estimation.candidates.items():
            table, attribute = key.rsplit(".", 1)
            by_table.setdefault(table, {})[attribute] = {
                "selectivity": e.selectivity,
                "low": e.low,
                "high": e.high,
                "fragment_share": e.fragment_share,
            }
            if (table, attribute) in refused:  # estimated, then found unsafe when picked
                by_table[table][attribute]["unsafe"] = refused[table, attribute]
        outcome: dict[str, Any] = {}
        for table, attribute in chosen.items():
            # Compared as shares of fragments: what the captured sketch tells without a scan.
            estimated = by_table.get(table, {}).get(attribute, {}).get("fragment_share")
            actual = len(found.get(table, ())) / max(1, partitions[table][1].fragment_count)
            rse = None if estimated is None or actual == 0 else abs(estimated - actual) / actual
            outcome[table] = {"attribute": attribute, "estimated": estimated, "actual": actual, "rse": rse}
        self.choices.record(name, self.settings.attribute_strategy, by_table, outcome)

    # -- sketches -------------------------------------------------------------------------------
    def _sketch_version(self, record: VersionRecord) -> SketchVersion:
        fragments: dict[str, list[int]] = {}
        partitions: dict[str, tuple[str, int]] = {}
        for partition_id, bitmap in record.bitmaps.items():
            partition, _ = self._partition(partition_id)
            fragments[partition.table] = list(BitMap.deserialize(bitmap))
            partitions[partition.table] = (partition.attribute, partition.fragment_count)
        return SketchVersion(
            record.name, record.version, record.sequence, dict(record.table_snapshots), fragments, partitions
        )

    # -- maintenance ----------------------------------------------------------------------------
    def maintain(self, name: str | None = None, strategy: str = "auto") -> list[MaintenanceRun]:
        """Bring sketches (one, or all) to the latest commit, each as a new version.

        ``incremental`` runs IMP's incremental operators over the table deltas, starting from
        the operator state stored with the sketch's newest version (computed on Spark from the
        snapshot when there is none yet), in-process; above ``settings.spark_delta_rows``
        changed rows, the aggregations over stateless subtrees that join or keep min/max get
        their deltas from Spark queries over the delta rows and the pinned snapshots (the rest
        of the plan still runs in-process). ``full`` recaptures on Spark. ``auto`` goes
        incremental up to ``settings.incremental_max_delta_rows`` changed rows, and above that
        when every changed table is read only under aggregations that reduce a big delta
        set-at-a-time (join-free ones with array state; the ones Spark takes), and recaptures
        otherwise or for queries the incremental engine does not support. Earlier versions
        stay, for queries pinned to older snapshots.
        """
        _check_strategy(strategy)
        names = [name] if name is not None else [d.name for d in self.sketches.definitions()]
        runs = []
        for each in names:
            try:
                runs.append(self._maintain_one(each, strategy))
            except SketchNotFoundError:
                if name is not None:
                    raise
                # Defined but never published (its capture died): nothing to maintain from.
                log.warning("%s has no published version: not maintained", each)
            except DeltaQuarantinedError as exc:
                if name is not None:
                    raise
                log.warning("%s", exc)  # blocked at its last good version; the others go on
        # Collected at most once per tenth of the retention time (expired versions linger at most
        # that much longer); a collection lists every state directory.
        due = time.monotonic() - self._collected_at >= self.settings.retain_seconds / 10
        if due and any(r.published for r in runs):
            try:
                self.collect_garbage(names)
            except Exception as exc:  # the runs stand; garbage waits for the next collection
                log.warning("garbage collection after maintenance failed: %s", exc)
        return runs

    def collect_garbage(self, names: Sequence[str] | None = None) -> GarbageReport:
        """Expire old sketch versions and delete the state files nothing reads any more.

        Each sketch (of ``names``, default all) keeps its newest ``settings.retain_versions``
        versions and every version younger than ``settings.retain_seconds``: a query pinned to
        an older snapshot may still be using one. State directories are deleted when no kept
        version reads them (directly or as the base of its layers) and they are older than that
        too, which also clears what runs that died before publishing left behind. With
        ``settings.expire_table_snapshots``, the tables' snapshots that nothing kept reads are
        expired, and then their files that no snapshot left reaches (and those of writes that
        died) are deleted, past the same retention time.
        """
        self._collected_at = time.monotonic()  # the next automatic collection waits from here
        every_table = names is None
        names = list(names) if names is not None else [d.name for d in self.sketches.definitions()]
        expired = {
            n: self.sketches.expire_versions(n, self.settings.retain_versions, self.settings.retain_seconds)
            for n in names
        }
        live = [ref for refs in self.sketches.state_refs().values() for ref in refs]
        older_than = time.time() - self.settings.retain_seconds
        removed = self.state_store.collect(live, older_than=older_than)
        removed += collect_scratch(self.settings.warehouse / SCRATCH_DIRECTORY, older_than)
        snapshots: dict[str, int] = {}
        files: dict[str, RemovedFiles] = {}
        if self.settings.expire_table_snapshots:
            tables = self._tables_of(None if every_table else names)
            snapshots = self._expire_table_snapshots(tables)
            # Then the files only the expired snapshots read, or that died with their writes.
            for table in tables:
                gone = self.tables.remove_unreferenced_files(table, older_than)
                if gone.files:
                    files[table] = gone
        report = GarbageReport({n: v for n, v in expired.items() if v}, removed, snapshots, files)
        if report.versions or removed or snapshots or files:
            log.info(
                "collected %d versions, %d state directories, %d table snapshots and %d table files",
                report.version_count,
                removed,
                sum(snapshots.values()),
                sum(f.files for f in files.values()),
            )
        return report

    def _tables_of(self, names: Sequence[str] | None) -> list[str]:
        """The tables the sketches ``names`` read (None: every table)."""
        if names is None:
            return sorted(record.name for record in self.tables.list())
        wanted = set(names)
        definitions = self.sketches.definitions()
        return sorted({t for d in definitions if d.name in wanted for t in referenced_tables(d.query_sql)})

    def _expire_table_snapshots(self, tables: Sequence[str]) -> dict[str, int]:
        """Expire the snapshots of ``tables`` that no kept sketch version, of any sketch, and no
        query pinned within the retention time can still read: each table keeps its state as
        of the newest commit older than ``retain_seconds`` and as of its sketches' oldest kept
        versions, and all after them."""
        recent = self.commit_log.sequence_older_than(self.settings.retain_seconds)
        if recent == 0:
            return {}
        keep_from = dict.fromkeys(tables, recent)
        for sql, oldest in self.sketches.oldest_sequences():
            for table in referenced_tables(sql):
                if table not in keep_from:
                    continue
                if self._left_far_behind(table, oldest):
                    log.info(
                        "%s: a sketch version at sequence %d is over %d loads behind; its history "
                        "is not kept (the sketch is recaptured when brought up)",
                        table,
                        oldest,
                        self.settings.stale_history_loads,
                    )
                    continue
                keep_from[table] = min(keep_from[table], oldest)
        expired = {
            table: self.tables.expire_snapshots(table, seq) for table, seq in sorted(keep_from.items())
        }
        return {table: count for table, count in expired.items() if count}

    def _left_far_behind(self, table: str, sequence: int) -> bool:
        """Whether a sketch version at ``sequence`` is more than ``stale_history_loads`` loads of
        ``table`` behind, and so no longer holds its history (see the setting)."""
        limit = self.settings.stale_history_loads
        return limit > 0 and len(self.commit_log.commits(table, after_seq=sequence)) > limit

    def plan_maintenance(
        self, name: str, strategy: str = "auto", target: int | None = None
    ) -> MaintenancePlan:
        """What ``maintain(name, strategy)`` would do now, decided from the commit log and the
        query plan alone (no state or data is read, and nothing runs on Spark)."""
        _check_strategy(strategy)
        definition, record = self._definition_and_version(name)
        return self._plan(definition, record, strategy, target)

    def _definition_and_version(self, name: str) -> tuple[SketchDefinition, VersionRecord]:
        definition, record = self.sketches.definition_and_version(name)
        if record is None:
            raise SketchNotFoundError(name)
        return definition, record

    def _plan(
        self,
        definition: SketchDefinition,
        record: VersionRecord,
        strategy: str,
        target: int | None,
        table_rows: int | None = None,
    ) -> MaintenancePlan:
        """``table_rows``: the rows of the sketch's tables at ``target``, when known (for the
        cost model; else read from the commit log)."""
        target = self.latest_sequence() if target is None else target
        tables = set(referenced_tables(definition.query_sql))
        pending = [
            c
            for c in self.commit_log.commits(after_seq=record.sequence, until_seq=target)
            if c.table in tables
        ]
        delta_rows = sum(c.added_rows + c.deleted_rows for c in pending)
        changed = {c.table for c in pending}
        on_spark = delta_rows > self.settings.spark_delta_rows
        chosen = strategy if pending else "none"
        choice: Choice | None = None
        if chosen in ("auto", "cost"):
            options: tuple[str, ...] = ("full",)
            if not self.budget.keeps_state(definition.name):
                choice = self._stateless_choice(definition.name)
            elif not all(self.tables.retains(t, record.sequence) for t in changed):
                pass  # the version's snapshots expired (left far behind): only a recapture
            elif delta_rows <= self.settings.incremental_max_delta_rows or self._big_delta_covered(
                definition, record, changed, on_spark
            ):
                options = ("incremental", "full")
            if chosen == "cost":  # leaving it stale is an option too, for the queries expected
                # before the next load: at least the one this is for (a report, or the refresh
                # ahead of one), however rarely the template ran per load so far; and the
                # runs after them, at the rate it ran per load.
                rate = self.advisor.expected_queries(definition.name)
                situation = Situation(
                    table_rows or 0,
                    delta_rows,
                    max(1.0, rate),
                    loads=len(pending),
                    rate=rate,
                    horizon=self.settings.cost_horizon_queries,
                    history_loads=self.settings.stale_history_loads,
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
        return self._kept_at(definition, record, take=False) is None and not self.budget.usable_state(
            definition.name, record
        )

    def _kept_at(
        self, definition: SketchDefinition, record: VersionRecord, take: bool
    ) -> MaintainedSketch | None:
        """The engine this process kept for ``definition`` at ``record``'s version (None: none
        kept, or one kept for another version or another sketch of the same name); ``take``
        removes whatever was kept from the cache."""
        kept = self._engines.pop(definition.name, None) if take else self._engines.get(definition.name)
        identity = _definition_identity(definition)
        if kept is None or kept.version != record.version or kept.identity != identity:
            return None
        return kept.maintained

    def _stateless_choice(self, name: str) -> Choice:
        mode = self.budget.mode(name)
        why = mode.reason if mode is not None else "no state"
        return Choice("full", {}, f"full: the state budget keeps no state for this sketch ({why})")

    def _spark_summarizes(
        self, definition: SketchDefinition, record: VersionRecord, changed: set[str]
    ) -> bool:
        """Whether an incremental run over a big delta of ``changed`` would compute some
        aggregations' deltas on Spark (True when the plan cannot be built here: it may)."""
        try:
            engine, _ = plan_engine(
                self.tables, definition, self._range_partitions(definition), record.sequence
            )
        except UnsupportedQueryError:
            return True
        return bool(summarizable(engine.frontier(), changed))

    def _maintain_one(
        self,
        name: str,
        strategy: str,
        target: int | None = None,
        context: str = "maintain",
        plan: MaintenancePlan | None = None,
    ) -> MaintenanceRun:
        """One sketch maintained to ``target``; ``plan``: already made for it (used while the
        sketch's newest version is still the one it was made from)."""
        run = self._run_maintenance(name, strategy, target, context, plan)
        if run.published:
            self.advisor.observed(run.strategy, name)
        return run

    def _run_maintenance(
        self, name: str, strategy: str, target: int | None, context: str, plan: MaintenancePlan | None
    ) -> MaintenanceRun:
        started = time.perf_counter()  # an incremental run's checks before it are part of its cost
        definition, record = self._definition_and_version(name)
        if (
            plan is None
            or plan.from_version != record.version
            or (target is not None and plan.target != target)
        ):
            plan = self._plan(definition, record, strategy, target)
        target, chosen, delta_rows = plan.target, plan.strategy, plan.delta_rows
        if chosen == "none":
            return MaintenanceRun(name, record.version, record.version, "none", 0, 0.0)
        faults.reached("maintenance-planned")
        if plan.choice is not None:
            self.advisor.record(name, context, plan.choice)
        if chosen == "skip":  # the queries read the plain tables until the model says otherwise
            self.advisor.skip_from(name, record.version)
            return MaintenanceRun(name, record.version, record.version, "skip", delta_rows, 0.0)
        self._check_deltas(name, record, target)
        if chosen == "incremental":
            try:
                return self._maintain_incremental(definition, record, plan, started)
            except KeptValuesExhaustedError as exc:  # top-m ran out: recapture, whatever was asked
                log.info("%s: recapturing: %s", name, exc)
            except (UnsupportedQueryError, StateMissingError, SnapshotExpiredError) as exc:
                # An expired snapshot: the delta from the version's snapshots cannot be read any
                # more (a capture that outlived the retention time); a recapture needs only the
                # target's.
                if strategy == "incremental":
                    raise
                log.info("%s: recapturing instead of incremental maintenance: %s", name, exc)
        started = time.perf_counter()  # a recapture is timed as its capture
        stored = {t: self._partition(pid)[0] for t, pid in definition.partition_ids.items()}
        version = self._capture(
            definition.query_sql,
            name,
            decode_params(definition.params),
            {t: p.attribute for t, p in stored.items()},
            {t: p.fragment_count for t, p in stored.items()},
            target,
            strategy="full",
            from_version=record.version,
            delta_rows=delta_rows,
        )
        return MaintenanceRun(
            name, record.version, version.version, "full", delta_rows, time.perf_counter() - started
        )

    def _check_deltas(self, name: str, record: VersionRecord, target: int) -> None:
        """Raise :class:`DeltaQuarantinedError` when a delta batch between the version and
        ``target`` failed validation and is neither fixed nor overridden (the sketch then stays
        at its version: a recapture would take the batch in just the same)."""
        if not self.settings.validate_deltas:
            return
        quarantine = self.gate.check(dict.fromkeys(record.table_snapshots, record.sequence), target)
        if quarantine is not None:
            raise DeltaQuarantinedError(
                name, [(b.table, b.seq, "; ".join(map(str, b.failures))) for b in quarantine.batches]
            )

    def override_validation(self, table: str, seq: int, reason: str) -> None:
        """Accept the quarantined batch at commit ``seq`` of ``table`` (``reason`` is kept): the
        sketches it blocked are maintained again, and its values widen the table's suite."""
        table = self.tables.record(table).name
        if not reason.strip():
            raise ConfigurationError("an override needs a reason", hint="say why the batch is acceptable")
        if not self.gate.override(table, seq, reason):
            found = self.validations.results(table, seq - 1, seq)
            raise ValidationOverrideError(table, seq, found[0].status if found else None)

    def declare_nullable(self, table: str, columns: Sequence[str]) -> None:
        """Let these columns of ``table`` hold NULLs in delta batches (sort key and partition
        attributes must have values otherwise)."""
        table = self.tables.record(table).name
        try:
            self.gate.declare_nullable(table, set(columns))
        except ValueError as exc:
            raise ConfigurationError(str(exc), hint="name columns the table has") from exc

    def validate_deltas(self, tables: Sequence[str] | None = None) -> list[BatchValidation]:
        """Validate now the commits that maintenance would otherwise validate on its way: those
        of ``tables`` (default: every table a sketch reads) after the oldest newest-version of
        the sketches on each. A step for right after a load, so that maintenance only reads the
        results; returns every result, failed ones included."""
        starts: dict[str, int] = {}
        for definition in self.sketches.definitions():
            record = self.sketches.version(definition.name)
            if record is None:
                continue
            for table in record.table_snapshots:
                starts[table] = min(starts.get(table, record.sequence), record.sequence)
        wanted = {self.tables.record(t).name for t in tables} if tables is not None else set(starts)
        return [v for table in sorted(wanted & set(starts)) for v in self.gate.validate(table, starts[table])]

    def quarantined(self, tables: Sequence[str] | None = None) -> list[BatchValidation]:
        """The delta batches that failed validation and are not yet fixed or overridden."""
        return self.validations.quarantined(tables)

    def _big_delta_covered(
        self, definition: SketchDefinition, record: VersionRecord, changed: set[str], on_spark: bool
    ) -> bool:
        """Whether a big delta of these tables is reduced set-at-a-time (by Spark, or by
        aggregations with array state: see ``maintenance.big_delta_covered``). Decided on the
        plan alone: no state is read."""
        try:
            engine, _ = plan_engine(
                self.tables, definition, self._range_partitions(definition), record.sequence
            )
        except UnsupportedQueryError:
            return False
        return big_delta_covered(engine, changed, on_spark)

    def _delta_summarizer(self, definition: SketchDefinition, used: list[bool]) -> DeltaSummarizer:
        """Computes frontier aggregations' deltas on Spark; sets ``used[0]`` when it runs."""
        identified = self._identified_partitions(definition)
        partitions = {t: p for t, (_, p) in identified.items()}
        attributes = {t: p.attribute for t, p in partitions.items()}

        def summarize(
            frontier: list[Frontier],
            before: Mapping[str, PinnedSnapshot],
            after: Mapping[str, PinnedSnapshot],
            deltas: Mapping[str, RowDelta],
        ) -> dict[int, Partials]:
            used[0] = True
            return delta_partials(
                self.spark,
                frontier,
                attributes,
                partitions,
                self._sources(before, identified),
                self._sources(after, identified),
                deltas,
                self.settings.warehouse / SCRATCH_DIRECTORY,
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
        name = definition.name
        target, on_spark, delta_rows = plan.target, plan.on_spark, plan.delta_rows
        spark_used = [False]
        widened = {
            t: w for t, sid in record.table_snapshots.items() if (w := self.tables.widened_since(t, sid))
        }
        if widened:  # the stored state (and a kept engine) hold the columns' old types
            self._engines.pop(name, None)
            shown = "; ".join(f"{t}: {', '.join(cols)}" for t, cols in sorted(widened.items()))
            raise StateMissingError(
                record.state_ref or name, f"column types widened since it was stored ({shown})"
            )
        try:
            maintained, built_state = self._engine_at(definition, record)
            _, read_rows, pins = advance(
                self.tables,
                maintained,
                target,
                self.settings.delta_pushdown,
                self.settings.join_bloom,
                self._delta_summarizer(definition, spark_used) if on_spark else None,
            )
            # Files first, then the one transaction that publishes the version (invariant 3),
            # which also records the run: it is too short to be worth a "running" row.
            keeps = self.budget.keeps_state(name)
            base = self.budget.usable_state(name, record)
            ref = store_state(self.state_store, name, maintained.engine, base) if keeps else None
            faults.reached("state-written")
            sketch = maintained.engine.sketch()
            seconds = time.perf_counter() - started
            published = self.sketches.publish_version(
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
            )
        except Exception as exc:
            failed = FinishedRun(
                "incremental", record.version, "failed", delta_rows, time.perf_counter() - started, str(exc)
            )
            try:
                self.sketches.record_run(name, failed, None)
            except Exception as unrecorded:  # the original error is the one to report
                log.warning("could not record the failed run of %s: %s", name, unrecorded)
            raise
        faults.reached("published")
        if keeps:
            identity = _definition_identity(definition)
            self._keep_engine(identity, name, published.version, maintained)
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
        kept = self._kept_at(definition, record, take=True)
        if kept is not None:
            return kept, False
        partitions = self._range_partitions(definition)
        keep_top = self.budget.keep_top(definition.name)
        stored = self.budget.usable_state(definition.name, record)
        if stored:
            state = self.state_store.read(stored)
            sequence = record.sequence
            return build_engine(
                self.tables, definition, partitions, sequence, state, keep_top=keep_top
            ), False
        # No state yet (the version was captured), or state kept for another mode of the state
        # budget: the aggregations' state is computed on Spark.
        summarize = self.spark_summarizer(definition)
        built = build_engine(
            self.tables, definition, partitions, record.sequence, summarize=summarize, keep_top=keep_top
        )
        return built, True

    def spark_summarizer(self, definition: SketchDefinition) -> Summarizer:
        """Computes an incremental engine's frontier aggregations' state on Spark, for
        :func:`sketch_core.maintenance.build_engine`."""
        identified = self._identified_partitions(definition)
        attributes = {t: p.attribute for t, (_, p) in identified.items()}

        def summarize(frontier: list[Frontier], pins: Mapping[str, PinnedSnapshot]) -> dict[int, Partials]:
            source = self._sources(pins, identified)
            return compute_frontier_partials(
                self.spark, frontier, attributes, source, self.budget.keep_top(definition.name)
            )

        return summarize

    def kept_engine(self, name: str) -> IncrementalSketch | None:
        """The incremental engine kept in memory for ``name`` (None: none kept), to inspect."""
        kept = self._engines.get(name)
        return kept.maintained.engine if kept is not None else None

    def kept_state_entries(self, name: str) -> int | None:
        """Groups and top-k entries of the engine kept in memory for ``name`` (None: none kept)."""
        engine = self.kept_engine(name)
        return engine.state_entries() if engine is not None else None

    def release_engines(self) -> None:
        """Drop the incremental engines kept in memory; the next maintenance of each sketch
        starts from its stored state again."""
        self._engines.clear()

    def _keep_engine(self, identity: str, name: str, version: int, maintained: MaintainedSketch) -> None:
        if self.settings.engine_cache_entries == 0:
            return
        self._engines[name] = _KeptEngine(identity, version, maintained)
        while len(self._engines) > self.settings.engine_cache_entries:
            self._engines.popitem(last=False)

    # -- state budget -----------------------------------------------------------------------------
    def allocate_state(self, names: Sequence[str] | None = None) -> BudgetRun | None:
        """Choose, within ``settings.state_budget_bytes``, which sketches (``names``, default:
        all) keep their state in full, cut to the top m, or not at all (see
        :mod:`sketch_core.state_budget`); None when there is no budget. Engines kept in memory
        for a sketch whose mode changed are dropped."""
        run = self.budget.allocate(names)
        for name in run.changed if run is not None else ():
            self._engines.pop(name, None)
        return run

    # -- policies ---------------------------------------------------------------------------------
    def set_policy(self, name: str, policy: Policy | Mapping[str, Any] | None) -> None:
        """Attach a maintenance policy to a sketch (a :class:`Policy` or its JSON form); None
        detaches it, and the sketch falls back to ``DEFAULT_POLICY`` (maintain when stale)."""
        if policy is not None and not isinstance(policy, Policy):
            policy = Policy.from_json(policy)
        self.policies.set_policy(name, policy.to_json() if policy is not None else None)

    def policy(self, name: str) -> tuple[Policy, bool]:
        """The sketch's policy, and whether it is its own (False: ``DEFAULT_POLICY``)."""
        return effective_policy(self.policies.policy(name))

    def check_policies(
        self, names: Sequence[str] | None = None, now: datetime | None = None, record: bool = True
    ) -> list[PolicyCheck]:
        """Check the policies of these sketches (default: all) at ``now`` (default: the clock).
        Metastore queries only, no Spark; each decision is logged with its reason (``record``)."""
        now = now if now is not None else datetime.now(UTC)
        if now.tzinfo is None:
            raise ConfigurationError(
                f"now={now.isoformat()} has no time zone", hint="pass an aware datetime (e.g. UTC)"
            )
        names = list(names) if names is not None else [d.name for d in self.sketches.definitions()]
        if record and self.budget.due(names):  # new sketches, or the workload may have moved
            self.allocate_state()
        checks = []
        for name in names:
            policy, explicit = self.policy(name)
            facts = self.policies.facts(name, policy.before_reports)
            if facts.pending_commits and (policy.forecast_reports or policy.defer_in_bursts):
                facts = self._predicted_facts(name, policy, facts, now)
            decision = evaluate(policy, facts, now)
            if record:
                self.policies.record_decision(name, decision.fire, decision.reason, policy.to_json(), now)
            checks.append(PolicyCheck(name, policy, explicit, decision, now))
        return checks

    def _predicted_facts(self, name: str, policy: Policy, facts: PolicyFacts, now: datetime) -> PolicyFacts:
        """``facts`` with what the policy's predictions need: the arrival prediction of each of
        the sketch's tables, each named report's forecast next run, and the estimated seconds
        of maintaining now (the cheaper of incremental and recapture, by the cost model)."""
        definition = self.sketches.definition(name)
        tables = sorted(referenced_tables(definition.query_sql))
        moment = now.timestamp()
        arrivals = {
            table: predict(history, moment) for table, history in self.policies.commit_history(tables).items()
        }
        forecasts: dict[str, datetime | None] = {}
        for report in policy.before_reports if policy.forecast_reports else ():
            times = [due.timestamp() for due in self.policies.report_due_times(report)]
            at = forecast_next(times, moment)
            forecasts[report] = datetime.fromtimestamp(at, UTC) if at is not None else None
        model = self.advisor.model(name)  # within the advisor's ttl: a check per poke refits nothing
        table_rows = self.policies.table_rows(tables)
        seconds = min(model.estimate("incremental", facts.delta_rows), model.estimate("full", table_rows))
        return dataclasses.replace(
            facts, arrivals=arrivals, report_forecasts=forecasts, maintenance_seconds=seconds
        )

    def maintain_due(
        self, names: Sequence[str] | None = None, strategy: str = "auto", now: datetime | None = None
    ) -> list[MaintenanceRun]:
        """Maintain the sketches (default: all) whose policy fires at ``now``."""
        due = [c.name for c in self.check_policies(names, now) if c.fire]
        return self.maintain_each(due, strategy)

    def maintain_each(self, names: Sequence[str], strategy: str = "auto") -> list[MaintenanceRun]:
        """Maintain each sketch of ``names``. One that a quarantined delta batch blocks is left
        at its version with a warning (``status()`` says why), one defined but never published
        (its capture died) is passed over, and the others go on; any other error stops the
        run, as ``maintain(name)``'s would."""
        runs = []
        for name in names:
            try:
                runs.extend(self.maintain(name, strategy))
            except DeltaQuarantinedError as exc:
                log.warning("%s", exc)
            except SketchNotFoundError:
                self.sketches.definition(name)  # raises when the name is not a sketch at all
                log.warning("%s has no published version: not maintained", name)
        return runs

    def blocked(self, name: str) -> DeltaQuarantinedError | None:
        """Whether maintaining ``name`` to the newest commit is blocked by a quarantined delta
        batch (the batches not yet validated are validated now), as the error maintenance
        would raise; None: it is not."""
        _, record = self._definition_and_version(name)
        try:
            self._check_deltas(name, record, self.latest_sequence())
        except DeltaQuarantinedError as exc:
            return exc
        return None

    def report_sketches(self, sql: str | None = None, report: str | None = None) -> list[str]:
        """The sketches a report uses: those captured for its query's template (any binding of
        its parameters), and those whose policy names the report."""
        names: set[str] = set()
        if sql is not None:
            names |= {d.name for d in self.sketches.definitions(template_key(sql))}
        if report is not None:
            names |= {
                name
                for name, spec in self.policies.policies().items()
                if report in Policy.from_json(spec).before_reports
            }
        return sorted(names)

    def announce_report(self, report: str, due_at: datetime | None = None) -> datetime:
        """Record that ``report`` is about to run (at ``due_at``, default now): the policies that
        name it fire at their next check (see :class:`Policy`)."""
        if not isinstance(report, str) or not 0 < len(report) <= 200:
            raise ConfigurationError(
                f"report name {report!r} is not 1 to 200 characters",
                hint="name the report as its policy does",
            )
        if due_at is not None and due_at.tzinfo is None:
            raise ConfigurationError(
                f"due_at {due_at.isoformat()} has no time zone", hint="pass an aware datetime (e.g. UTC)"
            )
        return self.policies.announce(report, due_at)

    def sketch(self, name: str, version: int | None = None) -> SketchVersion:
        """The newest version of a sketch (or the given one)."""
        record = self.sketches.version(name, version=version)
        if record is None:
            raise SketchNotFoundError(name)
        return self._sketch_version(record)

    def drop_table(self, name: str, cascade: bool = False) -> int:
        """Drop table ``name`` with its history, partitions, samples and validation results,
        and delete its files; returns the sequence number of the drop. Refused with
        :class:`TableInUseError` while sketches read it, unless ``cascade`` (then they are
        dropped first). The name can be used again at once, for a table of its own."""
        table = self.tables.record(name).name
        readers = [d.name for d in self.sketches.definitions() if table in referenced_tables(d.query_sql)]
        if readers and not cascade:
            raise TableInUseError(table, readers)
        for reader in readers:
            self.drop_sketch(reader)
            log.info("dropped sketch %s, which read %s", reader, table)
        samples: list[str] = []
        sequence = self.tables.drop(
            table, lambda conn, table_id: samples.extend(forget_table(conn, table, table_id))
        )
        for path in samples:
            Path(path).unlink(missing_ok=True)
        return sequence

    def drop_sketch(self, name: str) -> None:
        """Delete a sketch and all its versions; queries stop using it at once."""
        self.sketches.drop(name)
        # What this process remembers of it would pass for a sketch captured again under its name.
        self._engines.pop(name, None)
        self.advisor.forget(name)

    def sketch_files(self, name: str, version: int | None = None) -> dict[str, PinnedSnapshot]:
        """Every table the sketch's query reads, pinned as of the sketch version; sketched tables
        cut down to the data files that may hold the sketch's fragments."""
        record = self.sketches.version(name, version=version)
        if record is None:
            raise SketchNotFoundError(name)
        pins = self._pin_query(self.sketches.definition(name).query_sql, record.sequence)
        return {**pins, **self._resolve(record, pins).pruned}

    def status(self, name: str | None = None) -> list[SketchStatus]:
        """Every sketch (or one): newest version, how far behind the tables it is, its size per
        table and its last maintenance run."""
        definitions = [self.sketches.definition(name)] if name else self.sketches.definitions()
        modes = self.state_modes.all([d.name for d in definitions])
        quarantined = self.validations.quarantined()
        return [
            sketch_status(
                self.sketches, self.policies, self.commit_log, d, self.costs, modes.get(d.name), quarantined
            )
            for d in definitions
        ]

    def _resolve(self, record: VersionRecord, pins: Mapping[str, PinnedSnapshot]) -> _UsableSketch:
        sketched: dict[str, tuple[RangePartition, BitMap]] = {}
        pruned: dict[str, PinnedSnapshot] = {}
        for partition_id, bitmap in record.bitmaps.items():
            stored, partition = self._partition(partition_id)
            fragments = BitMap.deserialize(bitmap)
            sketched[stored.table] = (partition, fragments)
            pin = pins[stored.table]
            pruned[stored.table] = replace(pin, files=tuple(prune_files(pin.files, partition, fragments)))
        return _UsableSketch(record, sketched, pruned)

    def _usable_sketch(
        self,
        template: str,
        params: Mapping[str, Any] | None,
        plan: Relation,
        pins: Mapping[str, PinnedSnapshot],
        sequence: int,
        aside: _TimeAside,
    ) -> _UsableSketch | None:
        """A sketch version valid for these snapshots, captured for this query or a reusable
        instance of its template (PBDS Sec. 7); the one whose files hold the fewest rows.
        With ``settings.maintain_on_query``, a sketch whose newest version is older than the
        snapshots is first maintained to them (IMP Sec. 11)."""
        snapshots = {table: pin.snapshot_id for table, pin in pins.items()}
        encoded = encode_params(params)
        statistics: Statistics | None = None
        best: _UsableSketch | None = None
        for definition in self.sketches.definitions(template):
            if definition.params != encoded:
                if statistics is None:
                    statistics = {table: pin.column_bounds() for table, pin in pins.items()}
                captured = self._parsed.to_ir(
                    definition.query_sql, table_schemas(pins), decode_params(definition.params)
                )
                verdict = can_reuse(captured.plan, plan, statistics)
                if not verdict.reusable:
                    log.debug("sketch %s not reusable: %s", definition.name, verdict.reason)
                    continue
            record = self.sketches.version_for_snapshots(definition.name, snapshots)
            maintained = False
            if record is None and self.settings.maintain_on_query != "off":
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
        name = definition.name
        strategy = self.settings.maintain_on_query
        if strategy == "cost":  # the model may have left it behind: then its fragments are not read
            head = self.sketches.newest_head(name)
            if head is None or head[1] >= sequence or self.advisor.skipping(name, head[0]):
                return None
        newest = self.sketches.version(name)
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
            run = self._maintain_one(name, strategy, target=sequence, context="query", plan=plan)
        except DeltaQuarantinedError as exc:  # blocked at its last good version: run without it
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
        return self.sketches.version_for_snapshots(name, snapshots)

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
        name = definition.name
        if self.advisor.skipping(name, newest.version):
            return None
        choice = self.advisor.query_choice(name, newest.version, sequence)
        if choice is not None:  # decided at these snapshots already (by another report)
            plan = self._plan(definition, newest, choice.action, sequence)
        else:
            tables = referenced_tables(definition.query_sql)
            table_rows = sum(pin.record_count for table, pin in pins.items() if table in tables)
            plan = self._plan(definition, newest, "cost", sequence, table_rows)
            if plan.choice is not None:
                self.advisor.remember_query_choice(name, newest.version, sequence, plan.choice)
                self.advisor.record(name, "query", plan.choice)
        if plan.strategy == "skip":
            self.advisor.skip_from(name, newest.version)
            return None
        return dataclasses.replace(plan, choice=None)  # recorded here, not again by the run

    # -- queries --------------------------------------------------------------------------------
    def query(
        self,
        sql: str,
        params: Mapping[str, Any] | None = None,
        snapshot: int | None = None,
        use_sketches: bool = True,
    ) -> QueryResult:
        """Run Spark SQL over ``ns.table`` names, every table pinned at one commit sequence.

        ``snapshot`` is a global commit sequence number; None reads the latest, fixed once when
        the query starts so that commits landing meanwhile cannot change the answer. With
        ``use_sketches``, a sketch version valid for exactly the pinned snapshots (for this
        query, or for another binding of its template that the reuse check accepts) prunes
        the files Spark reads and adds its range conditions; without one the plain query runs.
        """
        started = time.perf_counter()
        sequence = self._sequence(snapshot)
        pins = self._pin_query(sql, sequence)
        faults.reached("query-pinned")
        files_total = sum(len(pin.files) for pin in pins.values())
        aside = _TimeAside()
        chosen = self._sketch_for_query(sql, params, pins, sequence, aside) if use_sketches else None
        if chosen is None:
            views = {pin.table: register_view(self.spark, pin) for pin in pins.values()}
            frame = self.spark.sql(bind_tables(sql, views), args=dict(params) if params else None)
            sketch, files_read = None, files_total
        else:
            parsed, usable = chosen
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
        )
        self._record_query(sql, sketch, pins, result)
        return result

    def _record_query(
        self,
        sql: str,
        sketch: tuple[str, int] | None,
        pins: Mapping[str, PinnedSnapshot],
        result: QueryResult,
    ) -> None:
        """Record the run for the cost models; a query never fails for want of its record."""
        template = template_key(sql)
        try:
            self.costs.record_query(
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
            self.advisor.observed("use", name=sketch[0])
        else:
            self.advisor.observed("plain", template=template)

    def cost_model(self, name: str, max_age: float = 0.0) -> CostModel:
        """The sketch's five cost models, fitted from its recorded runs (priors until then);
        one fitted at most ``max_age`` seconds ago is reused."""
        return self.advisor.model(name, max_age)

    def _sketch_share(self, name: str) -> float | None:
        """The largest share of a table's fragments the sketch's newest version keeps: about the
        share of that table a query with it reads (None: no version)."""
        record = self.sketches.version(name)
        if record is None or not record.bitmaps:
            return None
        return max(
            len(BitMap.deserialize(bitmap)) / self._partition(pid)[1].fragment_count
            for pid, bitmap in record.bitmaps.items()
        )

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
            rows = self.policies.table_rows(sorted(referenced_tables(definition.query_sql)))
            situation = dataclasses.replace(situation, table_rows=rows)
        return choose(self.advisor.model(definition.name), situation, allowed, explore)

    def _sketch_for_query(
        self,
        sql: str,
        params: Mapping[str, Any] | None,
        pins: Mapping[str, PinnedSnapshot],
        sequence: int,
        aside: _TimeAside,
    ) -> tuple[ParsedQuery, _UsableSketch] | None:
        try:
            parsed = self._parsed.to_ir(sql, table_schemas(pins), params)
        except UnsupportedQueryError as exc:
            log.info("running without sketches: %s", exc)
            return None
        template = template_key(sql)
        usable = self._usable_sketch(template, params, parsed.plan, pins, sequence, aside)
        if usable is not None:
            if self.settings.self_tuning != "off":  # the counts only adaptive self-tuning reads
                self.sketches.record_template_use(template, sql, hit=True)
            # A sketch maintained for this query was chosen over the plain query already.
            if not usable.maintained:
                with aside.timing():
                    plain_is_faster = self._plain_is_faster(usable.record, pins, sequence)
                if plain_is_faster:
                    return None
        else:
            usable = self._self_tune(sql, template, params, parsed.plan, pins, sequence, aside)
        return None if usable is None else (parsed, usable)

    def _plain_is_faster(
        self, record: VersionRecord, pins: Mapping[str, PinnedSnapshot], sequence: int
    ) -> bool:
        """With the cost model in charge (``maintain_on_query="cost"``), whether the query is
        expected to run faster without this valid sketch than with it, by more than
        ``PLAIN_MARGIN`` (small tables: a sketched query's extra planning can outweigh the
        files it skips). Decided once per version and snapshot, and recorded."""
        if self.settings.maintain_on_query != "cost":
            return False
        name = record.name
        choice = self.advisor.query_choice(name, record.version, sequence)
        if choice is None:
            model = self.advisor.model(name)
            rows = sum(pin.record_count for pin in pins.values())
            estimates = {"use": model.estimate("use", rows), "plain": model.estimate("plain", rows)}
            faster = estimates["plain"] * (1 + PLAIN_MARGIN) < estimates["use"]
            figures = f"without it {estimates['plain']:.3g}s, with it {estimates['use']:.3g}s per run"
            reason = (
                f"skip: the query runs faster without the sketch ({figures})"
                if faster
                else f"use: the sketch is current and pays ({figures})"
            )
            # Exploring (see sketch_core.costs.choose): the other way, seldom timed and close.
            other = "use" if faster else "plain"
            best = "plain" if faster else "use"
            rule = exploring_rule(model, other, estimates[other], estimates[best], best)
            if rule is not None:
                faster = not faster
                runs = model.costs[other].runs
                reason = f"{'skip' if faster else 'use'}, exploring: timed {runs} times ({rule}; {figures})"
            choice = Choice("skip" if faster else "use", estimates, reason)  # "use" is not recorded
            self.advisor.remember_query_choice(name, record.version, sequence, choice)
            if faster:
                self.advisor.record(name, "query", choice)
        return choice.action == "skip"

    def _run_with_sketch(
        self, parsed: ParsedQuery, usable: _UsableSketch, pins: Mapping[str, PinnedSnapshot]
    ) -> tuple[DataFrame, int]:
        """The query with the sketch's range conditions, its filtered scans reading only the
        pruned files. Returns the frame and the number of data files it reads."""
        record, pruned = usable.record, usable.pruned
        max_intervals = self.settings.max_intervals
        conditions: dict[str, tuple[str, Condition | None]] = {}
        joined = {scan.table for scan in scans_below_joins(parsed.plan)}
        for table, (partition, fragments) in usable.sketched.items():
            share = partition.predicate_share(fragments, max_intervals)
            rows_read, rows_total = pruned[table].record_count, pins[table].record_count
            pays = row_condition_pays(share, rows_read, rows_total, feeds_join=table in joined)
            condition = sketch_condition(partition, fragments, max_intervals) if pays else None
            conditions[table] = (partition.attribute, condition)
        plan, filtered = instrument_use(parsed.plan, conditions)
        filtered_ids = {id(scan) for scan in filtered}
        views: dict[tuple[str, bool], str] = {}  # registered on first use: each costs a file listing

        def source(scan: Scan) -> str:
            use_pruned = id(scan) in filtered_ids
            key = (scan.table, use_pruned)
            if key not in views:
                pin = pruned[scan.table] if use_pruned else pins[scan.table]
                name = f"{pin.view_name}__{record.name}_v{record.version}" if use_pruned else None
                views[key] = register_view(self.spark, pin, name=name)
            return views[key]

        frame = self.spark.sql(to_sql(plan, source=source, output_names=parsed.output_names))
        read_in_full = {table for table, use_pruned in views if not use_pruned}
        files_read = sum(
            len(pin.files) if table in read_in_full or table not in pruned else len(pruned[table].files)
            for table, pin in pins.items()
        )
        return frame, files_read

    def _self_tune(
        self,
        sql: str,
        template: str,
        params: Mapping[str, Any] | None,
        plan: Relation,
        pins: Mapping[str, PinnedSnapshot],
        sequence: int,
        aside: _TimeAside,
    ) -> _UsableSketch | None:
        """PBDS Sec. 8: capture now (eager), or once the template has missed often enough (adaptive)."""
        mode = self.settings.self_tuning
        if mode == "off":
            return None
        misses = self.sketches.record_template_use(template, sql, hit=False)
        if mode == "adaptive" and misses < self.settings.adaptive_after:
            return None
        if self.settings.maintain_on_query == "cost" and any(
            d.params == encode_params(params) for d in self.sketches.definitions(template)
        ):
            # This very query has a sketch that the cost model chose to leave behind: capturing
            # it again would overrule that choice at the highest price.
            return None
        try:
            with aside.timing():
                self._capture(sql, None, params, None, None, sequence)
        except (NoSafeAttributeError, UnsupportedQueryError) as exc:
            log.info("self-tuning captured nothing: %s", exc)
            return None
        return self._usable_sketch(template, params, plan, pins, sequence, aside)

    def close(self) -> None:
        self.engine.dispose()
        self.catalog.engine.dispose()
