"""``SketchService``: the public facade over the service's parts.

The facade builds one :class:`~sketch_core.service.context.ServiceContext` (settings,
repositories, tables, partitions, the lazy Spark session) and the job objects over it, each
given what it uses in its constructor::

    context ─┬─ EngineFactory, EngineCache (the one owner of the engines kept in memory)
             ├─ AttributeChooser ── Capturer ─┐
             ├─ DeltaChecks, Lifecycle ───────┴─ Maintainer ─┬─ QueryRunner
             └───────────────────────────────────────────────┴─ Scheduler

Every public method is here, with its arguments, return value and errors; it hands the work to
the part that does it. The parts are attributes (``svc.capturer``, ``svc.maintainer``, ...)
for callers that compose their own flows."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, Self, TypeVar, cast, overload

from pyspark.sql import DataFrame, SparkSession
from sqlalchemy import Engine

from sketch_core.attribute_choice.estimation import DEFAULT_REPLICATES
from sketch_core.attribute_choice.query import AttributeEstimates
from sketch_core.attribute_choice.store import SampleStore
from sketch_core.config import Settings
from sketch_core.costs.model import CostModel
from sketch_core.errors import ConfigurationError, DeltaQuarantinedError, SketchNotFoundError
from sketch_core.incremental.engine import IncrementalSketch
from sketch_core.incremental.remote import RemoteEvaluator
from sketch_core.layout.advisor import Advice
from sketch_core.layout.simulation import Layout
from sketch_core.maintenance.advisor import CostAdvisor
from sketch_core.maintenance.budget import BudgetRun, StateBudget
from sketch_core.maintenance.driver import MaintainedSketch, Summarizer
from sketch_core.maintenance.state_store import StateStore
from sketch_core.metastore.choices import AttributeChoiceRepository
from sketch_core.metastore.commits import CommitLog
from sketch_core.metastore.costs import CostRecords
from sketch_core.metastore.engine import connect_metastore
from sketch_core.metastore.migrations import migrate
from sketch_core.metastore.policies import PolicyRepository
from sketch_core.metastore.sketches import SketchDefinition, SketchRepository
from sketch_core.metastore.state_modes import StateModeRepository
from sketch_core.metastore.validations import BatchValidation, ValidationRepository
from sketch_core.metastore.work_locks import WorkLocks
from sketch_core.partitions import RangePartition
from sketch_core.policy import REPORT_WINDOW_SECONDS, Policy
from sketch_core.service.attributes import AttributeChooser
from sketch_core.service.capture import Capturer
from sketch_core.service.context import ServiceContext
from sketch_core.service.engines import EngineCache, EngineFactory
from sketch_core.service.layouts import LayoutAdvisor
from sketch_core.service.lifecycle import Lifecycle
from sketch_core.service.maintenance import Maintainer
from sketch_core.service.query import QueryRunner
from sketch_core.service.recursive import RecursiveSketches
from sketch_core.service.results import (
    GarbageReport,
    MaintenancePlan,
    MaintenanceRun,
    PolicyCheck,
    QueryResult,
    SketchedFrame,
    SketchVersion,
)
from sketch_core.service.runner import Submit, SubmittedJobs
from sketch_core.service.scheduling import Scheduler
from sketch_core.service.validation import DeltaChecks
from sketch_core.status import SketchStatus, StatusSources, sketch_statuses
from sketch_core.tables.catalog import RecordingSqlCatalog, open_catalog
from sketch_core.tables.pinned import PinnedSnapshot
from sketch_core.tables.service import TableService
from sketch_core.validation.gate import DeltaGate

T = TypeVar("T")


class _Shared(Generic[T]):
    """A facade attribute that is the context's: read from it, and assigned to it, so that
    every part sees what a caller puts there (a repository wrapped for a test, say)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, service: None, owner: type) -> Self: ...
    @overload
    def __get__(self, service: SketchService, owner: type) -> T: ...
    def __get__(self, service: SketchService | None, owner: type) -> T | Self:
        return self if service is None else cast(T, getattr(service.context, self.name))

    def __set__(self, service: SketchService, value: T) -> None:
        setattr(service.context, self.name, value)


class SketchService:
    """Tables, sketches (capture, use, maintenance, policies) and queries over one metastore
    and warehouse. Open one with :meth:`from_env` or :meth:`from_settings`; :meth:`close` it.

    Every error a method raises is a :class:`sketch_core.errors.SketchError` with a ``hint``
    (what to do) and ``transient`` (whether retrying may help)."""

    # The context's connections, repositories and stores, for callers that use them directly.
    engine: _Shared[Engine] = _Shared()
    catalog: _Shared[RecordingSqlCatalog] = _Shared()
    tables: _Shared[TableService] = _Shared()
    commit_log: _Shared[CommitLog] = _Shared()
    sketches: _Shared[SketchRepository] = _Shared()
    work_locks: _Shared[WorkLocks] = _Shared()
    policies: _Shared[PolicyRepository] = _Shared()
    costs: _Shared[CostRecords] = _Shared()
    state_store: _Shared[StateStore] = _Shared()
    choices: _Shared[AttributeChoiceRepository] = _Shared()
    samples: _Shared[SampleStore] = _Shared()
    advisor: _Shared[CostAdvisor] = _Shared()
    state_modes: _Shared[StateModeRepository] = _Shared()
    budget: _Shared[StateBudget] = _Shared()
    validations: _Shared[ValidationRepository] = _Shared()
    gate: _Shared[DeltaGate] = _Shared()

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        catalog: RecordingSqlCatalog,
        spark: SparkSession | None = None,
        *,
        submit: Submit | None = None,
    ) -> None:
        """``spark``: a session to use instead of building one; ``submit``: run captures and the
        maintenance runs that need Spark as jobs started by this function instead of in this
        process (see :mod:`sketch_core.service.runner`)."""
        self.context = context = ServiceContext(settings, engine, catalog, spark)
        # The parts.
        self.engine_cache = EngineCache(lambda: context.settings.engine_cache_entries)
        self.engines = EngineFactory(context)
        self.chooser = AttributeChooser(context)
        self.jobs = SubmittedJobs(context, submit) if submit is not None else None
        self.recursive = RecursiveSketches(context)
        self.capturer = Capturer(
            context, self.chooser, self.engines, self.engine_cache, self.recursive, self.jobs
        )
        self.checks = DeltaChecks(context)
        self.lifecycle = Lifecycle(context, self.engine_cache)
        self.maintainer = Maintainer(
            context,
            self.engines,
            self.engine_cache,
            self.capturer,
            self.checks,
            self.lifecycle,
            self.recursive,
            self.jobs,
        )
        self.queries = QueryRunner(context, self.capturer, self.maintainer)
        self.scheduler = Scheduler(context, self.maintainer, self.engine_cache)
        self.layouts = LayoutAdvisor(context)

    @classmethod
    def from_env(cls, *, spark: SparkSession | None = None, submit: Submit | None = None) -> Self:
        """A service configured from the environment (``SKETCH_METASTORE_URL``,
        ``SKETCH_WAREHOUSE``, ``SKETCH_SPARK_MASTER`` and the other settings of
        :meth:`Settings.from_env`); ``spark`` and ``submit`` as for :meth:`from_settings`.
        Raises ConfigurationError (a setting is missing or wrong) or MetastoreUnavailableError."""
        return cls.from_settings(Settings.from_env(), spark=spark, submit=submit)

    @classmethod
    def from_settings(
        cls, settings: Settings, *, spark: SparkSession | None = None, submit: Submit | None = None
    ) -> Self:
        """A service over the metastore and warehouse of ``settings``: connects, migrates the
        metastore's schema to this version, and opens the Iceberg catalog. ``spark``: a session
        to use instead of building one; ``submit``: where captures and the maintenance runs that
        need Spark run instead of this process (see :mod:`sketch_core.service.runner`). Raises
        ConfigurationError, MetastoreDatabaseMissingError or MetastoreUnavailableError."""
        url = settings.require_metastore_url()
        # A relative warehouse is taken from the working directory, as a shell user means it
        # (Iceberg's metadata needs absolute URIs).
        settings = dataclasses.replace(settings, warehouse=settings.warehouse.expanduser().resolve())
        try:
            settings.warehouse.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigurationError(
                f"cannot create the warehouse directory {settings.warehouse}: {exc.strerror or exc}",
                hint="set SKETCH_WAREHOUSE (or Settings.warehouse) to a directory this user can write",
            ) from exc
        engine = connect_metastore(url)
        migrate(engine)
        catalog = open_catalog(
            engine.url.render_as_string(hide_password=False),
            settings.warehouse.as_uri(),
            name=settings.catalog_name,
        )
        return cls(settings, engine, catalog, spark, submit=submit)

    @property
    def settings(self) -> Settings:
        """The settings every part reads; assigning new ones applies to the work started after
        (the table service and the state budget keep the ones they were opened with)."""
        return self.context.settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        self.context.settings = settings

    @property
    def spark(self) -> SparkSession:
        """The Spark session: the one given, else one built from the settings on first use."""
        return self.context.spark

    def close(self) -> None:
        """Release the metastore's connections (the Spark session stays up)."""
        self.context.close()

    # -- tables, partitions, versions ---------------------------------------------------------

    def latest_sequence(self) -> int:
        """The newest global commit sequence number (0: nothing committed yet)."""
        return self.context.latest_sequence()

    def range_partition(
        self, table: str, attribute: str, fragments: int, *, sequence: int | None = None
    ) -> tuple[int, RangePartition]:
        """The stored partition for (table, attribute, fragments), computed now if there is none.

        A new partition is computed (in-process for small tables, else on Spark) over the
        table pinned at ``sequence`` (latest if None) and stored with that sequence. Stored
        partitions are reused as they are, so the fragment ids of every sketch on them stay
        comparable. Returns (partition id, partition). ``fragments`` is the requested count; a
        column with fewer distinct values gets fewer. Raises TableNotFoundError or
        PartitionError."""
        return self.context.partitions.range_partition(table, attribute, fragments, sequence=sequence)

    def sketch(self, name: str, version: int | None = None) -> SketchVersion:
        """The newest version of sketch ``name`` (or version ``version``). Raises
        SketchNotFoundError."""
        record = self.sketches.version(name, version=version)
        if record is None:
            raise SketchNotFoundError(name)
        return self.context.partitions.sketch_version(record)

    def status(self, name: str | None = None) -> list[SketchStatus]:
        """Every sketch (or one): newest version, how far behind the tables it is, its size per
        table, its state and policy, and its last maintenance run. Raises SketchNotFoundError
        for an unknown ``name``."""
        sources = StatusSources(
            self.sketches,
            self.policies,
            self.commit_log,
            self.costs,
            self.state_modes,
            self.validations,
            self.context.choices,
        )
        found = sketch_statuses(sources, None if name is None else [name])
        if name is not None and not found:
            raise SketchNotFoundError(name)
        return found

    def coordinated(
        self, name: str, what: str, wait_seconds: float | None = None
    ) -> contextlib.AbstractContextManager[bool]:
        """Hold sketch ``name`` for ``what`` (a capture, a maintenance run) while it plans,
        runs and publishes: a concurrent run of the same sketch, from any process, waits (up to
        ``wait_seconds``, default ``settings.work_wait_seconds``) and then finds the work done.
        Yields whether this run waited; raises SketchBusyError (transient) when the wait runs
        out. See :mod:`sketch_core.metastore.work_locks`."""
        return self.context.coordinated(name, what, wait_seconds)

    # -- attribute choice and capture ---------------------------------------------------------

    def estimate_attributes(
        self,
        sql: str,
        params: Mapping[str, Any] | None = None,
        *,
        snapshot: int | None = None,
        fragments: int | None = None,
        replicates: int = DEFAULT_REPLICATES,
    ) -> AttributeEstimates:
        """Every safe attribute of every table ``sql`` (with ``params``) reads at commit
        ``snapshot`` (default: the latest), with the expected selectivity of a sketch of
        ``fragments`` fragments (default ``settings.fragments``) on it, estimated from a
        stratified sample of the query's largest table over ``replicates`` bootstrap
        replicates (CBS; see :mod:`sketch_core.attribute_choice.query`); the unsafe ones with the reason.
        Raises QueryError (UnsupportedQueryError), ConfigurationError or
        SequenceOutOfRangeError."""
        return self.chooser.estimate_attributes(
            sql, params, snapshot=snapshot, fragments=fragments, replicates=replicates
        )

    def choose_attributes(
        self,
        sql: str,
        params: Mapping[str, Any] | None = None,
        *,
        snapshot: int | None = None,
        fragments: int | None = None,
    ) -> tuple[dict[str, str], AttributeEstimates | None]:
        """The attributes ({table: attribute}) a capture of ``sql`` without ``attributes``
        would sketch, picked by the ``attribute_strategy`` setting, and the estimates a
        cost-based strategy ranked them by (None for ``heuristic``): the work the choice adds
        to such a capture. Raises as :meth:`estimate_attributes`, and NoSafeAttributeError."""
        return self.chooser.choose_attributes(sql, params, snapshot=snapshot, fragments=fragments)

    def materialize(
        self,
        table: str,
        sql: str,
        attributes: Mapping[str, str] | None = None,
        fragments: int | Mapping[str, int] | None = None,
        *,
        snapshot: int | None = None,
    ) -> SketchVersion:
        """Keep the rows of the recursive query ``sql`` as the Iceberg table ``table``, and a
        sketch of the same name that maintains them: every version :meth:`maintain` publishes
        (incrementally, with absorption provenance) writes the rows that left and came to the
        view to ``table`` first, as one commit. ``sql`` must read its CTE as
        ``SELECT [DISTINCT] <every column> FROM cte [WHERE ...]`` over a ``UNION`` recursion
        (or with ``DISTINCT``): a table of rows, not of walks. ``attributes``, ``fragments``
        and ``snapshot``: as for :meth:`capture`.

        Returns the sketch's version. Raises UnsupportedQueryError (a query it cannot keep),
        TableExistsError (``table`` exists and is not this view's), and what :meth:`capture`
        raises."""
        return self.capturer.capture(
            sql, table, None, attributes, fragments, snapshot=snapshot, materialize=table
        )

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

        ``name``: the sketch's name (default: derived from the query, its parameters and
        partitions); ``params``: values of the query's ``:name`` placeholders; ``snapshot``:
        the commit to capture at (default: the latest). ``attributes`` ({table: attribute})
        must be safe for the query (PBDS Sec. 6) or the capture is refused with
        :class:`UnsafeAttributeError`; without them, the ``attribute_strategy`` setting picks
        them (by default the safe attribute with the smallest estimated sketch; ``heuristic``:
        the sort key, then the group-by columns; see :meth:`choose_attributes`).
        ``fragments`` is a count for every table or per table (default
        ``settings.fragments``).

        ``with_state`` also computes the incremental-maintenance state (in-process for small
        tables, else on Spark) and stores it with the version (for sketches that will be
        maintained; without it, the first incremental maintenance computes it, at the
        version's snapshot). Over big tables all read under aggregations, that state's Spark
        job also gives the sketch: one job instead of the capture query and a state job.

        Capturing again under the name of an existing sketch of the same query and parameters
        keeps that sketch's attributes and fragment counts (a new version of the same sketch),
        unless ``attributes`` or ``fragments`` ask otherwise. A capture that waited for a
        concurrent run of the same sketch and finds its version published returns that one.

        Returns the published version. Raises InvalidSketchNameError, QueryError
        (UnsupportedQueryError), UnsafeAttributeError, NoSafeAttributeError, PartitionError,
        ConfigurationError, SequenceOutOfRangeError, SketchBusyError or SparkJobError.
        """
        return self.capturer.capture(
            sql, name, params, attributes, fragments, snapshot=snapshot, with_state=with_state
        )

    # -- maintenance --------------------------------------------------------------------------

    def maintain(self, name: str | None = None, strategy: str = "auto") -> list[MaintenanceRun]:
        """Bring sketches (``name``, or all) to the latest commit, each as a new version;
        returns one run per sketch (``strategy`` ``none`` when it was current).

        ``incremental`` runs IMP's incremental operators over the table deltas, starting from
        the operator state stored with the sketch's newest version (computed from the
        snapshot when there is none yet), in-process; above ``settings.spark_delta_rows``
        changed rows, the aggregations over stateless subtrees that join or keep min/max get
        their deltas from Spark queries over the delta rows and the pinned snapshots (the rest
        of the plan still runs in-process). ``full`` recaptures on Spark. ``auto`` goes
        incremental up to ``settings.incremental_max_delta_rows`` changed rows, and above that
        when every changed table is read only under aggregations that reduce a big delta
        set-at-a-time (join-free ones with array state; the ones Spark takes), and recaptures
        otherwise or for queries the incremental engine does not support. ``cost`` lets the
        cost model also leave the sketch behind (``skip``). Earlier versions stay, for queries
        pinned to older snapshots.

        Raises ConfigurationError (unknown strategy), SketchNotFoundError,
        DeltaQuarantinedError, SketchTableDroppedError or ColumnsDroppedError (another engine
        dropped a table or column it reads) for one named sketch (with all, such a sketch is
        left behind with a warning), UnsupportedQueryError (``incremental`` on a query the
        engine cannot maintain), SketchBusyError or SparkJobError.
        """
        return self.maintainer.maintain(name, strategy)

    def plan_maintenance(
        self, name: str, strategy: str = "auto", target: int | None = None
    ) -> MaintenancePlan:
        """What ``maintain(name, strategy)`` would do now (to commit ``target``, default the
        latest), decided from the commit log and the query plan alone (no state or data is
        read, and nothing runs on Spark). Raises ConfigurationError or SketchNotFoundError."""
        return self.maintainer.plan_maintenance(name, strategy, target)

    def cost_model(self, name: str, max_age: float = 0.0) -> CostModel:
        """The sketch's five cost models, fitted from its recorded runs (priors until then);
        one fitted at most ``max_age`` seconds ago is reused."""
        return self.maintainer.cost_model(name, max_age)

    def maintain_due(
        self, names: Sequence[str] | None = None, strategy: str = "auto", now: datetime | None = None
    ) -> list[MaintenanceRun]:
        """Maintain, with ``strategy``, the sketches (``names``, default: all) whose policy
        fires at ``now`` (default: the clock), as :meth:`maintain_each` does."""
        return self.scheduler.maintain_due(names, strategy, now)

    def maintain_each(self, names: Sequence[str], strategy: str = "auto") -> list[MaintenanceRun]:
        """Maintain each sketch of ``names``. One that a quarantined delta batch blocks is left
        at its version with a warning (``status()`` says why), so is one whose table or column
        another engine dropped, one defined but never published
        (its capture died) is passed over, and the others go on; any other error stops the
        run, as ``maintain(name)``'s would. Returns the runs."""
        return self.scheduler.maintain_each(names, strategy)

    # -- queries ------------------------------------------------------------------------------

    def query(
        self,
        sql: str,
        params: Mapping[str, Any] | None = None,
        snapshot: int | None = None,
        use_sketches: bool | str = True,
    ) -> QueryResult:
        """Run Spark SQL over ``ns.table`` names, every table pinned at one commit sequence.

        ``params``: values of the query's ``:name`` placeholders. ``snapshot`` is a global
        commit sequence number; None reads the latest, fixed once when the query starts so
        that commits landing meanwhile cannot change the answer. A sketch version valid for
        exactly the pinned snapshots (for this query, or for another binding of its template
        that the reuse check accepts) prunes the files Spark reads and adds its range
        conditions. ``use_sketches``: True applies it as ``settings.sketch_use`` says
        (``"cost"``: only when it is expected to make the query faster; the result's
        ``sketch_reason`` says why or why not), ``"cost"`` or ``"always"`` so for this query,
        False runs the plain query.

        Returns the result table with what was read. Raises QueryError (SparkQueryError: Spark
        refused the query), ConfigurationError, SequenceOutOfRangeError or SparkJobError; a
        query the sketches cannot serve runs without them.
        """
        return self.queries.query(sql, params, snapshot, use_sketches)

    def sketched(
        self,
        sql: str,
        params: Mapping[str, Any] | None = None,
        snapshot: int | None = None,
        use_sketches: bool | str = True,
    ) -> DataFrame:
        """The query as a lazy Spark DataFrame of the service's session (nothing is run or
        collected): every table read through Iceberg's Spark source at its snapshot as of one
        commit sequence, and a valid sketch applied as range conditions on the scans, which
        Iceberg's planning uses to skip data files and Parquet to skip row groups. Arguments
        as for :meth:`query`; write the frame wherever the report goes (``frame.writeTo(...)``).

        Give the service your own session (``SketchService.from_env(spark=session)``, the
        session configured with :func:`sketch_core.spark.lake.configure_lake`) to get frames
        of it. Raises as :meth:`query` does."""
        return self.queries.sketched(sql, params, snapshot, use_sketches)

    def sketched_frame(
        self,
        sql: str,
        params: Mapping[str, Any] | None = None,
        snapshot: int | None = None,
        use_sketches: bool | str = True,
    ) -> SketchedFrame:
        """:meth:`sketched`, with what was decided: the sketch applied (or None, and why), the
        commit sequence read, and how many of the snapshots' data files the sketch's fragments
        overlap. Raises as :meth:`query` does."""
        return self.queries.sketched_frame(sql, params, snapshot, use_sketches)

    def sketch_files(self, name: str, version: int | None = None) -> dict[str, PinnedSnapshot]:
        """Every table the sketch's query reads, pinned as of the sketch version (default: the
        newest); sketched tables cut down to the data files that may hold the sketch's
        fragments. A file with merge-on-read deletes names them (``DataFileInfo.deletes``):
        reading it as plain Parquet would return its deleted rows too. Raises
        SketchNotFoundError."""
        return self.queries.sketch_files(name, version)

    def sketch_rows(self, name: str, version: int | None = None) -> dict[str, DataFrame]:
        """Every table the sketch's query reads, as of the sketch version (default: the
        newest), as a Spark DataFrame: for a sketched table exactly the rows of its fragments,
        other tables in full. Raises SketchNotFoundError.

        The sketch's query over these rows gives its result (the sketch is sound), and they
        are the least that skipping with this sketch could read: a query over them alone
        bounds the speedup the sketch can give (``benchmarks.capture_use`` measures it)."""
        return self.queries.sketch_rows(name, version)

    # -- policies, reports, state budget ------------------------------------------------------

    def set_policy(self, name: str, policy: Policy | Mapping[str, Any] | None) -> None:
        """Attach a maintenance policy to sketch ``name`` (a :class:`Policy` or its JSON form);
        None detaches it, and the sketch falls back to ``DEFAULT_POLICY`` (maintain when
        stale). Raises PolicyError (a malformed policy) or SketchNotFoundError."""
        self.scheduler.set_policy(name, policy)

    def policy(self, name: str) -> tuple[Policy, bool]:
        """The sketch's policy, and whether it is its own (False: ``DEFAULT_POLICY``)."""
        return self.scheduler.policy(name)

    def check_policies(
        self, names: Sequence[str] | None = None, now: datetime | None = None, record: bool = True
    ) -> list[PolicyCheck]:
        """Check the policies of these sketches (default: all) at ``now`` (an aware datetime,
        default: the clock); one check per sketch, with whether it fires and why. Metastore
        queries only, no Spark; each decision is logged with its reason (``record``). Raises
        ConfigurationError (a naive ``now``) or SketchNotFoundError."""
        return self.scheduler.check_policies(names, now, record)

    def report_sketches(self, sql: str | None = None, report: str | None = None) -> list[str]:
        """The names of the sketches a report uses: those captured for its query's template
        (any binding of its parameters), and those whose policy names ``report``."""
        return self.scheduler.report_sketches(sql, report)

    def announce_report(
        self, report: str, due_at: datetime | None = None, window_seconds: float = REPORT_WINDOW_SECONDS
    ) -> datetime:
        """Record that ``report`` is about to run (at ``due_at``, an aware datetime, default
        now): the policies that name it fire at their next check (see :class:`Policy`), until
        the report has run (:meth:`report_finished`) or, if it never does, ``window_seconds``
        after ``due_at``. Returns when it is due; raises ConfigurationError."""
        return self.scheduler.announce_report(report, due_at, window_seconds)

    def report_finished(self, report: str) -> int:
        """Record that ``report`` has run: its announcements that were due end, so the policies
        naming it stop firing for them (an announcement for a later run stays). Returns how
        many ended; raises ConfigurationError for a malformed name."""
        return self.scheduler.report_finished(report)

    def allocate_state(self, names: Sequence[str] | None = None) -> BudgetRun | None:
        """Choose, within ``settings.state_budget_bytes``, which sketches (``names``, default:
        all) keep their state in full, cut to the top m, or not at all (see
        :mod:`sketch_core.maintenance.budget`); None when there is no budget. Engines kept in memory
        for a sketch whose mode changed are dropped."""
        return self.scheduler.allocate_state(names)

    # -- delta validation ---------------------------------------------------------------------

    def validate_deltas(self, tables: Sequence[str] | None = None) -> list[BatchValidation]:
        """Validate now the commits that maintenance would otherwise validate on its way: those
        of ``tables`` (default: every table a sketch reads) after the oldest newest-version of
        the sketches on each. A step for right after a load, so that maintenance only reads the
        results; returns every result, failed ones included. Raises TableNotFoundError."""
        return self.checks.validate_deltas(tables)

    def quarantined(self, tables: Sequence[str] | None = None) -> list[BatchValidation]:
        """The delta batches (of ``tables``, default all) that failed validation and are not
        yet fixed or overridden."""
        return self.checks.quarantined(tables)

    def blocked(self, name: str) -> DeltaQuarantinedError | None:
        """Whether maintaining ``name`` to the newest commit is blocked by a quarantined delta
        batch (the batches not yet validated are validated now), as the error maintenance
        would raise; None: it is not. Raises SketchNotFoundError."""
        return self.checks.blocked(name)

    def override_validation(self, table: str, seq: int, reason: str) -> None:
        """Accept the quarantined batch at commit ``seq`` of ``table`` (``reason`` is kept): the
        sketches it blocked are maintained again, and its values widen the table's suite.
        Raises ConfigurationError (no reason), TableNotFoundError or ValidationOverrideError
        (no such quarantined batch)."""
        self.checks.override_validation(table, seq, reason)

    def declare_nullable(self, table: str, columns: Sequence[str]) -> None:
        """Let these columns of ``table`` hold NULLs in delta batches (sort key and partition
        attributes must have values otherwise). Raises TableNotFoundError or
        ConfigurationError (a column the table does not have)."""
        self.checks.declare_nullable(table, columns)

    # -- lifecycle ----------------------------------------------------------------------------

    def collect_garbage(self, names: Sequence[str] | None = None) -> GarbageReport:
        """Expire old sketch versions and delete the state files nothing reads any more;
        returns what was removed.

        Each sketch (of ``names``, default all) keeps its newest ``settings.retain_versions``
        versions and every version younger than ``settings.retain_seconds``: a query pinned to
        an older snapshot may still be using one. State directories are deleted when no kept
        version reads them (directly or as the base of its layers) and they are older than that
        too, which also clears what runs that died before publishing left behind. With
        ``settings.expire_table_snapshots``, the tables' snapshots that nothing kept reads are
        expired, and then their files that no snapshot left reaches (and those of writes that
        died) are deleted, past the same retention time.
        """
        return self.lifecycle.collect_garbage(names)

    def drop_sketch(self, name: str) -> None:
        """Delete sketch ``name`` and all its versions; queries stop using it at once. Raises
        SketchNotFoundError."""
        self.lifecycle.drop_sketch(name)

    def drop_table(self, name: str, cascade: bool = False) -> int:
        """Drop table ``name`` with its history, partitions, samples and validation results,
        and delete its files; returns the sequence number of the drop. Refused with
        :class:`TableInUseError` while sketches read it, unless ``cascade`` (then they are
        dropped first). The name can be used again at once, for a table of its own. Raises
        TableNotFoundError."""
        return self.lifecycle.drop_table(name, cascade)

    # -- layouts --------------------------------------------------------------------------------

    def advise_layout(self, table: str) -> Advice:
        """Which layout of ``table`` would let its reports' sketches skip the most files: for
        each sketch with a partition on it (weighted by its query's runs in the last 30 days),
        the data files and row groups it reads now and under each candidate sort or Z-order,
        simulated on a sample of the table's rows, and the recommended layout (None, with the
        reason, when no candidate cuts the reads by 10% without making some report read more);
        and ``page_rows``, Parquet pages of one fragment's rows of the finest partition on the
        table where its pages hold over twice that and a fragment at least 1,500 rows (None
        otherwise; ``pages`` says why, see :mod:`sketch_core.layout.pages`). Nothing is
        written. Raises TableNotFoundError."""
        return self.layouts.advise(table)

    def recluster(self, table: str, layout: Layout | None = None, page_rows: int | None = None) -> int:
        """Rewrite ``table``'s files in ``layout`` (default: :meth:`advise_layout`'s
        recommendation, with its page size; where it recommends pages only, in the table's own
        sort order, or each file's rows in their order where the table declares none) with
        Iceberg's ``rewrite_data_files`` on Spark, as one ``replace`` commit that changes no
        rows: every sketch stays valid, and the sketches that were current before it are
        carried to it at once (their new versions read nothing), so the reports use them right
        away. ``page_rows``: Parquet pages of at most that many rows (Iceberg's default is
        20,000), in this rewrite and in the table's later Spark writes. Smaller pages let a
        sketch's ranges skip more of each file it reads through the page index, and cost the
        reports that read whole files (see :mod:`sketch_core.layout.pages` for the measurements
        the advised size rests on). Returns the commit's sequence. Raises ConfigurationError (no
        recommendation, a column the table lacks, a page size below one row),
        TableNotFoundError or SparkJobError."""
        sequence = self.layouts.recluster(table, layout, page_rows)
        self.maintainer.carry_after_rewrite(self.tables.record(table).name, sequence)
        return sequence

    # -- incremental engines, to inspect and to build on --------------------------------------

    def kept_engine(self, name: str) -> IncrementalSketch | None:
        """The incremental engine kept in memory for ``name`` (None: none kept), to inspect."""
        return self.engine_cache.engine(name)

    def kept_state_entries(self, name: str) -> int | None:
        """Groups and top-k entries of the engine kept in memory for ``name`` (None: none kept)."""
        engine = self.kept_engine(name)
        return engine.state_entries() if engine is not None else None

    def release_engines(self) -> None:
        """Drop the incremental engines kept in memory; the next maintenance of each sketch
        starts from its stored state again."""
        self.engine_cache.clear()

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
        a few hundred thousand rows cost less (TPC-H SF0.01 Q8: the Spark job took 3.4 s).
        Raises UnsupportedQueryError for a query the engine cannot maintain."""
        return self.engines.first_engine(definition, partitions, sequence, keep_top)

    def planned_engine(self, definition: SketchDefinition, sequence: int) -> IncrementalSketch | None:
        """The engine for the sketch's plan at ``sequence``, without state, to decide from
        (None: the plan cannot be maintained in-process)."""
        return self.engines.planned_engine(definition, sequence)

    def spark_ansi(self) -> bool:
        """Whether Spark evaluates expressions in ANSI mode (Spark 4's default): the running
        session's setting, else the configured one. The in-process engine's rules are ANSI
        mode's; without it, Spark evaluates the expressions (see ``remote_evaluator``)."""
        return self.context.spark_ansi()

    def remote_evaluator(self) -> RemoteEvaluator:
        """Evaluates on Spark the expressions the in-process engine has no exact rule for (see
        :mod:`sketch_core.incremental.remote`); the session starts when one is first needed."""
        return self.engines.remote_evaluator()

    def spark_summarizer(self, definition: SketchDefinition) -> Summarizer:
        """Computes an incremental engine's frontier aggregations' state on Spark, for
        :func:`sketch_core.maintenance.driver.build_engine`."""
        return self.engines.spark_summarizer(definition)
