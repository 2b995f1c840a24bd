"""What ``svc.status()`` and ``sketch status`` report about each sketch, read from the metastore.

Staleness is measured against the commit log: the commits to the sketch's tables after the
sequence its newest version is valid for, and the rows they added or deleted. No Spark runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pyroaring import BitMap

from sketch_core.metastore.choices import AttributeChoiceRepository, ChoiceRecord
from sketch_core.metastore.commits import CommitLog, CommitRecord
from sketch_core.metastore.costs import CostDecision, CostRecords
from sketch_core.metastore.policies import DecisionRecord, PolicyRepository
from sketch_core.metastore.sketches import PartitionRecord, SketchDefinition, SketchRepository, VersionRecord
from sketch_core.metastore.state_modes import StateMode, StateModeRepository
from sketch_core.metastore.validations import BatchValidation, ValidationRepository
from sketch_core.policy import effective_policy


@dataclass(frozen=True)
class TableSketchStatus:
    table: str
    attribute: str
    fragments: int  # fragment ids in the sketch (the NULL fragment counts as one)
    fragment_count: int  # ranges in the partition

    @property
    def selectivity(self) -> float:
        """The share of the partition's fragments the sketch keeps (equi-depth: about the share
        of rows a query using it reads)."""
        return self.fragments / max(1, self.fragment_count)


@dataclass(frozen=True)
class RunSummary:
    strategy: str
    status: str
    seconds: float | None
    finished_at: datetime | None
    error: str | None


@dataclass(frozen=True)
class SketchStatus:
    name: str
    query_sql: str
    params: dict[str, Any]
    version: int | None  # newest version; None if none was ever published
    sequence: int | None  # the commit sequence the newest version is valid for
    version_count: int
    commits_behind: int  # commits to the sketch's tables after ``sequence``
    delta_rows_pending: int  # rows those commits added or deleted
    tables: tuple[TableSketchStatus, ...]
    last_run: RunSummary | None
    policy: str  # Policy.describe() of the sketch's policy
    policy_explicit: bool  # False: DEFAULT_POLICY, the sketch has none of its own
    last_decision: DecisionRecord | None  # the newest policy check, with its reason
    table_snapshots: dict[str, int | None]  # the Iceberg snapshot per table the version is valid for
    cost_decision: CostDecision | None = None  # the cost model's newest choice, with its reason
    state_mode: StateMode | None = None  # the state budget's choice (None: no budget, kept in full)
    # Why maintenance is blocked: the quarantined delta batches past its version (None: it is not)
    blocked: str | None = None
    # Per table, the share of its data files the capture expected the sketch to read (from the
    # cost-based attribute choice's estimates; empty when the attributes were given or chosen
    # by the heuristic), and the files the newest query with the sketch read, of the total.
    files_expected: dict[str, float] = field(default_factory=dict)
    last_use: tuple[int, int] | None = None

    @property
    def fresh(self) -> bool:
        return self.version is not None and self.commits_behind == 0


@dataclass(frozen=True)
class StatusSources:
    """The metastore's repositories ``sketch_statuses`` reads from."""

    sketches: SketchRepository
    policies: PolicyRepository
    commits: CommitLog
    costs: CostRecords
    state_modes: StateModeRepository
    validations: ValidationRepository
    choices: AttributeChoiceRepository


def sketch_statuses(sources: StatusSources, names: Sequence[str] | None = None) -> list[SketchStatus]:
    """The status of every sketch (or of those of ``names`` that exist), by name, read in a
    dozen queries whatever their number: the sketches page and ``sketch status`` list them all."""
    listed = sources.sketches.definitions_and_versions(names)
    wanted = [d.name for d, _ in listed]
    if not wanted:
        return []
    records = [r for _, r in listed if r is not None]
    partition_ids = {pid for r in records for pid in r.bitmaps}
    oldest = min((r.sequence for r in records), default=None)
    reads = _StatusReads(
        counts=sources.sketches.version_counts(wanted),
        last_runs=sources.sketches.last_runs(wanted),
        partitions=sources.sketches.partitions_by_id(sorted(partition_ids)) if partition_ids else {},
        policies=sources.policies.policies(),
        decisions=sources.policies.last_decisions(wanted),
        cost_decisions=sources.costs.last_decisions(wanted),
        last_uses=sources.costs.last_uses(wanted),
        state_modes=sources.state_modes.all(wanted),
        quarantined=sources.validations.quarantined(),
        choices=sources.choices.get_many(wanted),
        commits=sources.commits.commits(after_seq=oldest) if oldest is not None else [],
    )
    return [_status(definition, record, reads) for definition, record in listed]


@dataclass(frozen=True)
class _StatusReads:
    """What the statuses of many sketches are made of, each read once for all of them."""

    counts: dict[str, int]
    last_runs: dict[str, dict[str, Any]]
    partitions: dict[int, PartitionRecord]
    policies: dict[str, dict[str, Any]]
    decisions: dict[str, DecisionRecord]
    cost_decisions: dict[str, CostDecision]
    last_uses: dict[str, tuple[int, int]]
    state_modes: dict[str, StateMode]
    quarantined: Sequence[BatchValidation]  # the failed delta batches not yet resolved, of any table
    choices: dict[str, ChoiceRecord]
    commits: Sequence[CommitRecord]  # every commit after the oldest version's sequence


def _status(definition: SketchDefinition, record: VersionRecord | None, reads: _StatusReads) -> SketchStatus:
    name = definition.name
    policy, explicit = effective_policy(reads.policies.get(name))
    policy_fields = (policy.describe(), explicit, reads.decisions.get(name))
    last = reads.last_runs.get(name)
    last_run = (
        RunSummary(last["strategy"], last["status"], last["seconds"], last["finished_at"], last["error"])
        if last
        else None
    )
    cost_decision, state_mode = reads.cost_decisions.get(name), reads.state_modes.get(name)
    expected, last_use = _files_expected(reads.choices.get(name)), reads.last_uses.get(name)
    if record is None:
        return SketchStatus(
            name,
            definition.query_sql,
            definition.params,
            None,
            None,
            0,
            0,
            0,
            (),
            last_run,
            *policy_fields,
            {},
            cost_decision,
            state_mode,
            files_expected=expected,
            last_use=last_use,
        )
    behind = [c for c in reads.commits if c.seq > record.sequence and c.table in record.table_snapshots]
    tables = []
    for partition_id, bitmap in sorted(record.bitmaps.items()):
        partition = reads.partitions[partition_id]
        ranges = len(partition.boundaries["cuts"]) + 1  # fewer than requested on few distinct values
        tables.append(
            TableSketchStatus(partition.table, partition.attribute, len(BitMap.deserialize(bitmap)), ranges)
        )
    return SketchStatus(
        name,
        definition.query_sql,
        definition.params,
        record.version,
        record.sequence,
        reads.counts.get(name, 0),
        len(behind),
        sum(c.added_rows + c.deleted_rows for c in behind),
        tuple(sorted(tables, key=lambda s: s.table)),
        last_run,
        *policy_fields,
        dict(record.table_snapshots),
        cost_decision,
        state_mode,
        dropped_reason(behind) or blocked_reason(reads.quarantined, record.table_snapshots, record.sequence),
        files_expected=expected,
        last_use=last_use,
    )


def _files_expected(choice: ChoiceRecord | None) -> dict[str, float]:
    """Per table, the share of its data files the capture expected the sketch to read (from
    the cost-based choice's estimates; empty when the attributes were given or chosen by the
    heuristic)."""
    expected: dict[str, float] = {}
    if choice is not None and choice.outcome:
        for table, outcome in choice.outcome.items():
            estimate = choice.estimates.get(table, {}).get(outcome.get("attribute"), {})
            if estimate.get("files_read") is not None:
                expected[table] = float(estimate["files_read"])
    return expected


def dropped_reason(behind: Sequence[CommitRecord]) -> str | None:
    """Why a version with the commits ``behind`` it can never be maintained: a table it reads
    was dropped (or renamed) by another engine (None: none was)."""
    dropped = next((c for c in behind if c.operation == "drop"), None)
    if dropped is None:
        return None
    return (
        f"{dropped.table} was dropped (or renamed) at commit {dropped.seq}: drop the sketch and "
        "capture the report again once the table exists"
    )


def blocked_reason(quarantined: Sequence[BatchValidation], tables: Iterable[str], after: int) -> str | None:
    """What blocks a version valid at ``after`` over ``tables``: the quarantined batches it
    would have to take in (None: nothing)."""
    wanted = set(tables)
    blocking = [b for b in quarantined if b.table in wanted and b.seq > after and b.status == "failed"]
    return "; ".join(b.reason() for b in blocking) or None
