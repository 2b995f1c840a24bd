"""What every part of the service stands on: the settings, the metastore's repositories, the
table service, the lazily started Spark session, the stored range partitions, and the lookups
each job needs (the query's tables pinned at a commit, Spark views of them, sketch versions).

One context is made per :class:`~sketch_core.service.facade.SketchService`; the job objects
(capturer, maintainer, query runner, ...) are each given it in their constructor."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping

from pyspark.sql import SparkSession
from sqlalchemy import Engine
from sqlglot import exp

from sketch_core.algebra.ir import Scan
from sketch_core.algebra.query_text import query_text, referenced_tables
from sketch_core.algebra.views import MAX_VIEW_DEPTH, view_relation
from sketch_core.arrow.pool import use_arrow_memory_pool
from sketch_core.attribute_choice.store import SampleStore
from sketch_core.config import Settings
from sketch_core.errors import QueryError, SequenceOutOfRangeError, SketchNotFoundError
from sketch_core.maintenance.advisor import CostAdvisor
from sketch_core.maintenance.budget import StateBudget
from sketch_core.maintenance.state_store import StateStore
from sketch_core.metastore.choices import AttributeChoiceRepository
from sketch_core.metastore.commits import CommitLog
from sketch_core.metastore.costs import CostRecords
from sketch_core.metastore.policies import PolicyRepository
from sketch_core.metastore.samples import SampleRepository
from sketch_core.metastore.sketches import SketchDefinition, SketchRepository, VersionRecord
from sketch_core.metastore.state_modes import StateModeRepository
from sketch_core.metastore.validations import ValidationRepository
from sketch_core.metastore.work_locks import WorkLocks
from sketch_core.partitions import RangePartition
from sketch_core.rewrites.capture import FRAGMENT_COLUMN
from sketch_core.service.partition_store import PartitionStore
from sketch_core.spark.capture import register_annotated_view
from sketch_core.spark.lake import ensure_lake
from sketch_core.spark.session import build_session, exclude_wrong_result_rules, warn_small_codegen_cache
from sketch_core.spark.views import register_view
from sketch_core.tables.catalog import RecordingSqlCatalog
from sketch_core.tables.catalog_views import CatalogViews
from sketch_core.tables.pinned import PinnedSnapshot
from sketch_core.tables.service import TableService
from sketch_core.validation.gate import DeltaGate


class ServiceContext:
    """The service's state: settings, repositories, tables, partitions and Spark."""

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
        self.tables = TableService(catalog, self.commit_log, settings, lambda: self.spark)
        self.sketches = SketchRepository(engine)
        self.work_locks = WorkLocks(engine)
        self.policies = PolicyRepository(engine)
        self.costs = CostRecords(engine)
        self.state_store = StateStore(settings.warehouse / "_sketch_state")
        self.choices = AttributeChoiceRepository(engine)
        self.spark_session = spark
        self._lake_checked = False
        self.samples = SampleStore(
            SampleRepository(engine),
            self.commit_log,
            settings.warehouse,
            lambda: self.spark,
            rate=settings.sample_rate,
            max_drift=settings.sample_max_drift,
        )
        self.partitions = PartitionStore(self.sketches, self.tables, lambda: self.spark)
        self.advisor = CostAdvisor(self.costs, self.partitions.sketch_share)
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
        self.validations = ValidationRepository(engine)
        self.gate = DeltaGate(self.tables, self.commit_log, self.validations, settings.validation_slack)
        self.views = CatalogViews(catalog.engine, catalog.name)
        # Names known to be tables: a report's text is looked up for views once, not every run.
        self._known_tables: set[str] = set()

    @property
    def spark(self) -> SparkSession:
        """The session given to the service, else one built from the settings on first use."""
        if self.spark_session is None:
            self.spark_session = build_session(self.settings)
        if not self._lake_checked:
            # A session given, or an earlier one that getOrCreate returned, may read another
            # metastore's tables under the catalog's name.
            if self.settings.metastore_url:
                ensure_lake(self.spark_session, self.settings)
            exclude_wrong_result_rules(self.spark_session)  # the service's answers must be right
            warn_small_codegen_cache(self.spark_session)  # a session built elsewhere: say what it costs
            self._lake_checked = True
        return self.spark_session

    def spark_ansi(self) -> bool:
        """Whether Spark evaluates expressions in ANSI mode (Spark 4's default): the running
        session's setting, else the configured one (a session is not started to ask)."""
        key = "spark.sql.ansi.enabled"
        value = (
            self.spark_session.conf.get(key, "true")
            if self.spark_session is not None
            else self.settings.extra.get(key, "true")
        )
        return str(value).strip().lower() == "true"

    def latest_sequence(self) -> int:
        return self.commit_log.latest_sequence()

    def sequence(self, snapshot: int | None) -> int:
        """``snapshot``, or the latest commit for None; out of range: SequenceOutOfRangeError."""
        latest = self.latest_sequence()
        sequence = latest if snapshot is None else snapshot
        if not 0 < sequence <= latest:
            raise SequenceOutOfRangeError(sequence, latest)
        return sequence

    def views_inlined(self, sql: str) -> str:
        """``sql`` with the catalog views it reads written in as derived tables (views within
        views too: see :mod:`sketch_core.algebra.views`); ``sql`` itself when it reads none."""
        for _ in range(MAX_VIEW_DEPTH):
            text = query_text(sql)
            relations: dict[str, exp.Subquery] = {}
            for name in text.tables:
                if name in self._known_tables:
                    continue
                if self.commit_log.get_table(name) is not None:
                    self._known_tables.add(name)
                    continue
                view = self.views.definition(name)
                if view is not None:  # else an unknown table, which pinning names
                    relations[name] = view_relation(view, self.settings.catalog_name)
            if not relations:
                return sql
            sql = text.inlined(relations)
        raise QueryError(
            f"the query reads views nested more than {MAX_VIEW_DEPTH} deep",
            hint="a view that reads itself cannot be expanded; check the views' definitions in Spark",
        )

    def pin_query(self, sql: str, sequence: int) -> dict[str, PinnedSnapshot]:
        """Every table ``sql`` reads, pinned as of commit ``sequence``."""
        text = query_text(sql)
        catalog = self.settings.catalog_name
        foreign = sorted(c for c in text.catalogs if c.lower() != catalog.lower())
        if foreign:
            raise QueryError(
                f"the query reads tables of catalog {', '.join(foreign)}; this service's tables "
                f"are in catalog {catalog}",
                hint=f"name its tables as ns.table or {catalog}.ns.table; Iceberg metadata tables "
                "(ns.table.snapshots and the like) are queried in Spark itself",
            )
        return {name: self.tables.pin(name, sequence) for name in text.tables}

    def coordinated(
        self, name: str, what: str, wait_seconds: float | None = None
    ) -> contextlib.AbstractContextManager[bool]:
        """See :meth:`SketchService.coordinated`."""
        wait = self.settings.work_wait_seconds if wait_seconds is None else wait_seconds
        # str(): a name of another type is refused, with its hint, where it is looked up.
        return self.work_locks.holding(str(name), what, float(wait))

    @contextlib.contextmanager
    def coordinated_reading(
        self, name: str, what: str, wait_seconds: float | None = None
    ) -> Iterator[tuple[bool, SketchDefinition, VersionRecord]]:
        """:meth:`coordinated`, which also yields the sketch's definition and newest version,
        read once the lock is held, in the lock's own round trip (SketchNotFoundError, the lock
        released: no such sketch, or none published)."""
        wait = self.settings.work_wait_seconds if wait_seconds is None else wait_seconds
        with self.work_locks.holding_and_reading(str(name), what, float(wait)) as (waited, row):
            if row is None:  # this thread held the lock already: nothing was read with it
                definition, record = self.sketches.definition_and_version(name)
            else:
                definition, record = self.sketches.locked_definition_and_version(row)
            if record is None:
                raise SketchNotFoundError(str(name))
            yield waited, definition, record

    def sources(
        self, pins: Mapping[str, PinnedSnapshot], partitions: Mapping[str, tuple[int, RangePartition]]
    ) -> Callable[[Scan], str]:
        """Spark views of the pinned tables; a scan with the fragment column reads the table's
        annotated view (each row's fragment id in ``partitions``' partition)."""
        views = {table: register_view(self.spark, pin) for table, pin in pins.items()}
        annotated: dict[str, str] = {}  # registered when a scan reads it: a delayed capture may not

        def source(scan: Scan) -> str:
            if FRAGMENT_COLUMN not in scan.source_columns:
                return views[scan.table]
            if scan.table not in annotated:
                pid, partition = partitions[scan.table]
                annotated[scan.table] = register_annotated_view(
                    self.spark, pins[scan.table], partition, str(pid)
                )
            return annotated[scan.table]

        return source

    def definition_and_version(self, name: str) -> tuple[SketchDefinition, VersionRecord]:
        """The sketch's definition and newest version (SketchNotFoundError: none published)."""
        definition, record = self.sketches.definition_and_version(name)
        if record is None:
            raise SketchNotFoundError(name)
        return definition, record

    def close(self) -> None:
        self.engine.dispose()
        self.catalog.engine.dispose()
