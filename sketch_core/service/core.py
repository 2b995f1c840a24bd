"""What every part of the service stands on: its repositories and Spark session, stored range
partitions, pinning tables at a commit, Spark views of pinned tables, the incremental engines
kept in memory between maintenance runs, and reading sketch versions and status."""

from __future__ import annotations

import contextlib
import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Self

import pyarrow as pa
from pyroaring import BitMap
from pyspark.sql import SparkSession
from sqlalchemy import Engine
from sqlglot import exp

from sketch_core.algebra.ir import Scan
from sketch_core.algebra.parse_cache import ParsedQueryCache
from sketch_core.arrow_pool import use_arrow_memory_pool
from sketch_core.choice.store import SampleStore
from sketch_core.config import Settings
from sketch_core.cost_advisor import CostAdvisor
from sketch_core.errors import SequenceOutOfRangeError, SketchNotFoundError, UnsupportedQueryError
from sketch_core.incremental.engine import Frontier, IncrementalSketch
from sketch_core.incremental.partials import Partials
from sketch_core.incremental.remote import RemoteEvaluator
from sketch_core.maintenance import MaintainedSketch, StateStore, Summarizer, build_engine, plan_engine
from sketch_core.metastore.choices import AttributeChoiceRepository
from sketch_core.metastore.commits import CommitLog
from sketch_core.metastore.costs import CostRecords
from sketch_core.metastore.engine import connect_metastore
from sketch_core.metastore.migrations import migrate
from sketch_core.metastore.policies import PolicyRepository
from sketch_core.metastore.samples import SampleRepository
from sketch_core.metastore.sketches import PartitionRecord, SketchDefinition, SketchRepository, VersionRecord
from sketch_core.metastore.state_modes import StateModeRepository
from sketch_core.metastore.validations import ValidationRepository
from sketch_core.metastore.work_locks import WorkLocks
from sketch_core.partitions import RangePartition
from sketch_core.partitions.local import local_range_partition, partitions_locally
from sketch_core.rewrites.capture import FRAGMENT_COLUMN
from sketch_core.service.results import SketchVersion
from sketch_core.spark.capture import register_annotated_view
from sketch_core.spark.expressions import evaluate_on_spark
from sketch_core.spark.partitioning import compute_range_partition
from sketch_core.spark.session import build_session
from sketch_core.spark.state_init import compute_frontier_partials
from sketch_core.spark.views import pinned_dataframe, referenced_tables, register_view
from sketch_core.state_budget import StateBudget
from sketch_core.status import SketchStatus, sketch_status
from sketch_core.tables.catalog import RecordingSqlCatalog, open_catalog
from sketch_core.tables.deltas import read_files
from sketch_core.tables.pinned import PinnedSnapshot
from sketch_core.tables.service import TableService
from sketch_core.validation.gate import DeltaGate

log = logging.getLogger(__name__)

# Tables up to this many rows are range-partitioned in-process (one column read, exact
# quantiles: milliseconds) rather than by two Spark jobs of about a second each. A column of
# this many values takes tens of megabytes at most.
LOCAL_PARTITION_ROWS = 2_000_000


# The first state of an engine is computed in-process, from the snapshot's rows, when the
# sketch's tables hold at most this many rows together; on Spark above.
LOCAL_STATE_ROWS = 1_000_000


def sketch_identity(query_sql: str, params: Mapping[str, Any], partition_ids: Mapping[str, int]) -> str:
    """What an incremental engine computes: its query, parameters and partitions. A sketch
    dropped and captured again under its name (here or by another process) counts versions
    from 1 again, so an engine kept for the old one must not pass for the new one's."""
    return json.dumps([query_sql, params, sorted(partition_ids.items())], sort_keys=True, default=str)


def definition_identity(definition: SketchDefinition) -> str:
    return sketch_identity(definition.query_sql, definition.params, definition.partition_ids)


@dataclass(frozen=True)
class _KeptEngine:
    identity: str
    version: int
    maintained: MaintainedSketch


class ServiceCore:
    """The service's state and the lookups every job needs."""

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
        self.work_locks = WorkLocks(engine)
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
    def from_env(cls, *, spark: SparkSession | None = None) -> Self:
        """Configure from SKETCH_METASTORE_URL, SKETCH_WAREHOUSE and SKETCH_SPARK_MASTER."""
        return cls.from_settings(Settings.from_env(), spark=spark)

    @classmethod
    def from_settings(cls, settings: Settings, *, spark: SparkSession | None = None) -> Self:
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
            computed = self._compute_partition(pinned, attribute, fragments)
            found = self.sketches.ensure_partition(
                name, attribute, fragments, computed.to_json(), pinned.sequence
            )
        return found.partition_id, self._partition(found.partition_id)[1]

    def _compute_partition(self, pinned: PinnedSnapshot, attribute: str, fragments: int) -> RangePartition:
        """In-process from the column's values for a small table (no Spark job), else on Spark."""
        name, schema = pinned.table, pinned.schema
        small = pinned.record_count <= LOCAL_PARTITION_ROWS
        if small and attribute in schema.names and partitions_locally(schema.field(attribute).type):
            values = read_files(pinned.files, schema, [attribute]).column(attribute)
            return local_range_partition(values, name, attribute, fragments)
        return compute_range_partition(pinned_dataframe(self.spark, pinned), name, attribute, fragments)

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

    def coordinated(
        self, name: str, what: str, wait_seconds: float | None = None
    ) -> contextlib.AbstractContextManager[bool]:
        """Hold sketch ``name`` for ``what`` (a capture, a maintenance run) while it plans,
        runs and publishes: a concurrent run of the same sketch, from any process, waits (up to
        ``wait_seconds``, default ``settings.work_wait_seconds``) and then finds the work done.
        Yields whether this run waited. See :mod:`sketch_core.metastore.work_locks`."""
        wait = self.settings.work_wait_seconds if wait_seconds is None else wait_seconds
        # str(): a name of another type is refused, with its hint, where it is looked up.
        return self.work_locks.holding(str(name), what, float(wait))

    def _sequence(self, snapshot: int | None) -> int:
        latest = self.latest_sequence()
        sequence = latest if snapshot is None else snapshot
        if not 0 < sequence <= latest:
            raise SequenceOutOfRangeError(sequence, latest)
        return sequence

    def _pin_query(self, sql: str, sequence: int) -> dict[str, PinnedSnapshot]:
        return {name: self.tables.pin(name, sequence) for name in referenced_tables(sql)}

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

    def sketch(self, name: str, version: int | None = None) -> SketchVersion:
        """The newest version of a sketch (or the given one)."""
        record = self.sketches.version(name, version=version)
        if record is None:
            raise SketchNotFoundError(name)
        return self._sketch_version(record)

    def _definition_and_version(self, name: str) -> tuple[SketchDefinition, VersionRecord]:
        definition, record = self.sketches.definition_and_version(name)
        if record is None:
            raise SketchNotFoundError(name)
        return definition, record

    def _kept_at(
        self, definition: SketchDefinition, record: VersionRecord, take: bool
    ) -> MaintainedSketch | None:
        """The engine this process kept for ``definition`` at ``record``'s version (None: none
        kept, or one kept for another version or another sketch of the same name); ``take``
        removes whatever was kept from the cache."""
        kept = self._engines.pop(definition.name, None) if take else self._engines.get(definition.name)
        identity = definition_identity(definition)
        if kept is None or kept.version != record.version or kept.identity != identity:
            return None
        return kept.maintained

    def first_engine(
        self,
        definition: SketchDefinition,
        partitions: Mapping[str, RangePartition],
        sequence: int,
        keep_top: int | None,
    ) -> MaintainedSketch:
        """An engine without stored state, its state computed from the snapshot at ``sequence``:
        in-process (the snapshot's rows run through the engine as one insert) when the sketch's
        tables hold at most ``LOCAL_STATE_ROWS`` rows together, else, or where the in-process
        engine refuses the whole tables (a join without an equality), with its aggregations'
        state computed on Spark. A Spark job costs about a second whatever its input; in-process,
        a few hundred thousand rows cost less (TPC-H SF0.01 Q8: the Spark job took 3.4 s)."""
        tables = referenced_tables(definition.query_sql)
        rows = sum(self.tables.pin(table, sequence).record_count for table in tables)
        remote = self.remote_evaluator()
        if rows <= LOCAL_STATE_ROWS:
            try:
                return build_engine(
                    self.tables,
                    definition,
                    partitions,
                    sequence,
                    keep_top=keep_top,
                    remote=remote,
                    ansi=self.spark_ansi(),
                )
            except UnsupportedQueryError as exc:
                log.info("%s: state computed on Spark (in-process: %s)", definition.name, exc)
        summarize = self.spark_summarizer(definition)
        return build_engine(
            self.tables,
            definition,
            partitions,
            sequence,
            summarize=summarize,
            keep_top=keep_top,
            remote=remote,
            ansi=self.spark_ansi(),
        )

    def planned_engine(self, definition: SketchDefinition, sequence: int) -> IncrementalSketch | None:
        """The engine for the sketch's plan at ``sequence``, without state, to decide from
        (None: the plan cannot be maintained in-process)."""
        try:
            engine, _ = plan_engine(
                self.tables,
                definition,
                self._range_partitions(definition),
                sequence,
                remote=self.remote_evaluator(),
                ansi=self.spark_ansi(),
            )
        except UnsupportedQueryError:
            return None
        return engine

    def spark_ansi(self) -> bool:
        """Whether Spark evaluates expressions in ANSI mode (Spark 4's default): the running
        session's setting, else the configured one. The in-process engine's rules are ANSI
        mode's; without it, Spark evaluates the expressions (see ``remote_evaluator``)."""
        key = "spark.sql.ansi.enabled"
        value = (
            self._spark.conf.get(key, "true")
            if self._spark is not None
            else self.settings.extra.get(key, "true")
        )
        return str(value).strip().lower() == "true"

    def remote_evaluator(self) -> RemoteEvaluator:
        """Evaluates on Spark the expressions the in-process engine has no exact rule for (see
        :mod:`sketch_core.incremental.remote`); the session starts when one is first needed."""

        def evaluate(table: pa.Table, expressions: Mapping[str, exp.Expr]) -> pa.Table:
            log.info("evaluating %d expression(s) on Spark over %d rows", len(expressions), table.num_rows)
            return evaluate_on_spark(self.spark, table, expressions)

        return evaluate

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

    def close(self) -> None:
        self.engine.dispose()
        self.catalog.engine.dispose()
