"""What the service's calls return: sketch versions, maintenance runs and plans, policy checks,
query results and garbage reports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa

from sketch_core.costs.choose import Choice
from sketch_core.policy import Decision, Policy
from sketch_core.tables.orphans import RemovedFiles


@dataclass(frozen=True)
class SketchVersion:
    """One published version of a sketch: valid for exactly ``table_snapshots``."""

    name: str
    version: int
    sequence: int
    table_snapshots: dict[str, int | None]
    fragments: dict[str, list[int]]
    partitions: dict[str, tuple[str, int]]  # table -> (attribute, fragment count)


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
    # (IMP Sec. 8's set-oriented strategy, for deltas above the in-process threshold); or
    # "spark-submit": the run was a submitted job (see sketch_core.service.runner); or
    # "carried": the commits only rewrote files, and the version was published again at them.
    where: str = "in-process"

    @property
    def published(self) -> bool:
        """Whether the run published a new version (else it found the sketch up to date, or
        the cost model chose to leave it stale)."""
        return self.strategy in ("incremental", "full") and self.to_version is not None


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
    # The commits since the version only rewrote files (compactions, sorts): the sketch and its
    # state are carried to them as they are (an incremental run that reads nothing).
    rewrites_only: bool = False

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
    # Why the valid sketch found was applied, or not ("" when none was found or none asked for).
    sketch_reason: str = ""
    # The valid sketch (name, version) left unused because the query is expected to run faster
    # without it (see ``sketch_reason``).
    sketch_skipped: tuple[str, int] | None = None


@dataclass(frozen=True)
class SketchedFrame:
    """A report as a lazy Spark DataFrame (see ``SketchService.sketched_frame``), with what was
    decided for it: the sketch applied (or None, and why), the sequence read, and the data files
    of the snapshots against those whose bounds overlap the sketch's fragments."""

    frame: Any  # a pyspark DataFrame (not imported here: results load without pyspark)
    sketch: tuple[str, int] | None
    sketch_reason: str
    sequence: int
    files_total: int
    files_in_sketch: int


@dataclass(frozen=True)
class GarbageReport:
    versions: Mapping[str, list[int]]  # sketch -> the version numbers expired
    state_directories: int
    table_snapshots: Mapping[str, int] = field(default_factory=dict)  # table -> snapshots expired
    table_files: Mapping[str, RemovedFiles] = field(default_factory=dict)  # table -> files deleted

    @property
    def version_count(self) -> int:
        return sum(len(v) for v in self.versions.values())
