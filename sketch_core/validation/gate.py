"""The gate every maintenance passes: the delta batches it would use must have passed validation.

A batch is one commit of a table. Each is validated once, the first time some maintenance
needs it (its result is stored, so sketches on one table share it), against the table's suite:
learned from the table's history the first time, and widened by every batch that passes. A
batch that fails is quarantined: sketches whose delta includes it stay at their last good
version, blocked, until

- the batch is **fixed**: a later commit repairs its rows, so the *net* delta from the
  sketch's version to the target passes the suite (an insert and a delete of the same row
  cancel out there); or
- an operator **overrides** it (``svc.override_validation``), and its rows widen the suite.

Row counts are checked against the commits' metadata: the delta's inserted minus deleted rows
must equal the change in the table's total rows that Iceberg's snapshot summaries record.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from sketch_core.errors import SnapshotExpiredError, UnsupportedTableFeatureError
from sketch_core.metastore.commits import CommitLog, CommitRecord
from sketch_core.metastore.validations import BatchValidation, Failure, ValidationRepository
from sketch_core.tables.deltas import TableDelta, read_files
from sketch_core.tables.service import TableService
from sketch_core.validation.expectations import validate_batch
from sketch_core.validation.suite import TableSuite, column_kind, identifier_columns, learn_suite

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Quarantine:
    """Why a sketch cannot advance: the failed batches in its delta."""

    batches: tuple[BatchValidation, ...]

    def reason(self) -> str:
        return "; ".join(b.reason() for b in self.batches)


class DeltaGate:
    def __init__(
        self, tables: TableService, commit_log: CommitLog, repository: ValidationRepository, slack: float
    ) -> None:
        self.tables = tables
        self.commit_log = commit_log
        self.repository = repository
        self.slack = slack

    def check(self, starts: Mapping[str, int], target: int) -> Quarantine | None:
        """Validate every commit of each table after its start sequence (``starts``: table ->
        the sequence a sketch's version read it at) through ``target``, resolve the failed ones
        the net delta has fixed, and return those still quarantined (None: the way is clear)."""
        blocked: list[BatchValidation] = []
        for table, start in sorted(starts.items()):
            commits = self.commit_log.commits(table, after_seq=start, until_seq=target)
            if not commits:
                continue
            failed = [v for v in self.validate(table, start, target) if v.blocks(target)]
            if failed and self._net_delta_passes(table, start, commits[-1]):
                last = commits[-1].seq
                fixed = self.repository.fix(
                    table, [v.seq for v in failed], last, f"the net delta through commit {last} passes"
                )
                log.info("%s: batches %s fixed by commit %d or before", table, fixed, last)
                failed = []
            blocked.extend(failed)
        return Quarantine(tuple(sorted(blocked, key=lambda v: v.seq))) if blocked else None

    def validate(self, table: str, after: int, through: int | None = None) -> list[BatchValidation]:
        """Validate the commits of ``table`` in (``after``, ``through``] (None: to the newest)
        that have no result yet; returns every one's result, oldest first."""
        commits = self.commit_log.commits(table, after_seq=after, until_seq=through)
        if not commits:
            return []
        done = {v.seq: v for v in self.repository.results(table, after, commits[-1].seq)}
        for commit in commits:
            if commit.seq not in done:
                done[commit.seq] = self._validate_commit(table, commit)
        return [done[c.seq] for c in commits]

    def override(self, table: str, seq: int, reason: str) -> bool:
        """Accept a quarantined batch; its rows widen the suite. False: it was not quarantined."""
        if not self.repository.override(table, seq, reason):
            return False
        commit = self.commit_log.commit_at(table, seq)
        before = self._previous(table, seq)
        if commit is not None and commit.seq == seq:
            suite, learned = self._suite(table, before if before is not None else seq)
            delta = self.tables.delta(table, before, seq)
            self._save_suite(table, suite.widened(delta.inserted), max(learned, seq))
        log.warning("%s: batch at commit %d accepted by override: %s", table, seq, reason)
        return True

    def declare_nullable(self, table: str, columns: set[str]) -> TableSuite:
        suite, learned = self._suite(table, self.commit_log.latest_sequence())
        declared = suite.declaring_nullable(columns)
        self._save_suite(table, declared, learned)
        return declared

    # -- internals ----------------------------------------------------------------------------
    def _validate_commit(self, table: str, commit: CommitRecord) -> BatchValidation:
        previous = self.commit_log.commit_at(table, commit.seq - 1)
        before = previous.seq if previous is not None else None
        try:
            delta = self.tables.delta(table, before, commit.seq)
        except (SnapshotExpiredError, UnsupportedTableFeatureError) as exc:
            # Its rows can no longer be told apart (a sketch version that outlived the
            # retention time), or cannot be read here (ORC files, equality deletes, since
            # rewritten: maintenance reads its own delta, and refuses while they last):
            # recorded as unchecked, and a recapture reads the table as it is.
            log.warning("%s: batch at commit %d cannot be validated: %s", table, commit.seq, exc)
            self.repository.record(table, commit.seq, [], 0, 0, unchecked=f"not validated: {exc}")
            (stored,) = self.repository.results(table, commit.seq - 1, commit.seq)
            return stored
        suite, learned = self._suite(
            table, before if before is not None else commit.seq, delta.inserted.schema
        )
        # A rewrite changes no rows (Iceberg's "replace"), but its totals may move: see
        # _net_change. Its delta is empty, and its count is not checked.
        net_change = (
            None
            if commit.operation == "replace"
            else commit.total_rows - (previous.total_rows if previous is not None else 0)
        )
        failures = self._failures(table, suite, delta, net_change)
        self.repository.record(table, commit.seq, failures, delta.inserted.num_rows, delta.deleted.num_rows)
        if failures:
            log.warning(
                "%s: batch at commit %d quarantined: %s", table, commit.seq, "; ".join(map(str, failures))
            )
        elif delta.inserted.num_rows and commit.seq > learned:
            self._save_suite(table, suite.widened(delta.inserted), commit.seq)
        (stored,) = self.repository.results(table, commit.seq - 1, commit.seq)
        return stored

    def _save_suite(self, table: str, suite: TableSuite, learned_seq: int) -> None:
        self.repository.save_suite(table, suite.to_json(), learned_seq)

    def _net_delta_passes(self, table: str, start: int, last: CommitRecord) -> bool:
        """Whether the net delta from ``start`` through ``last`` passes: its inserted rows meet
        the suite, and its counts the change in the table's total rows."""
        net_change = self._net_change(table, start, last)
        try:
            delta = self.tables.delta(table, start, last.seq)
        except SnapshotExpiredError:
            return False
        suite, _ = self._suite(table, start, delta.inserted.schema)
        return not self._failures(table, suite, delta, net_change)

    def _net_change(self, table: str, start: int | None, last: CommitRecord) -> int:
        """The change in the table's rows from sequence ``start`` (None: the empty table)
        through commit ``last``, by the commits' metadata, leaving out rewrites: a compaction
        of a merge-on-read table writes its files without the deleted rows while the position
        deletes that pointed at them stay counted, so its totals drop by rows no one deleted
        (and rise again when those deletes are removed, by another rewrite)."""
        previous = self.commit_log.commit_at(table, start) if start is not None else None
        change = 0
        for commit in self.commit_log.commits(table, after_seq=start or 0, until_seq=last.seq):
            if commit.operation != "replace":
                change += commit.total_rows - (previous.total_rows if previous is not None else 0)
            previous = commit
        return change

    def _failures(
        self, table: str, suite: TableSuite, delta: TableDelta, net_change: int | None
    ) -> list[Failure]:
        """What the delta breaks: its inserted rows against the suite, and the inserted row
        count that the deleted rows and the metadata's net change imply (None: not checked)."""
        expected_inserted = None if net_change is None else delta.deleted.num_rows + net_change
        required = suite.required(self.repository.required_columns(table))
        return validate_batch(suite, delta.inserted, required, expected_inserted, self.slack)

    def _suite(self, table: str, at: int, schema: pa.Schema | None = None) -> tuple[TableSuite, int]:
        """The table's suite, learned from its state at sequence ``at`` when it has none yet;
        adapted to ``schema`` (the table's, as batches are read) after a schema evolution."""
        stored = self.repository.suite(table)
        if stored is not None:
            suite, learned = TableSuite.from_json(stored[0]), stored[1]
            if schema is not None and [(f.name, str(f.type)) for f in schema] != [
                (c.name, c.type) for c in suite.columns
            ]:
                suite = suite.adapted_to(schema)
                self._save_suite(table, suite, learned)
                log.info("%s: the expectation suite follows the table's new schema", table)
            return suite, learned
        pinned = self.tables.pin(table, at)
        integers = [f.name for f in pinned.schema if column_kind(str(f.type)) == "int"]
        # One data file of the history tells identifiers (all values distinct) from measures.
        sample = read_files(pinned.files[:1], pinned.schema, integers) if integers else None
        identifiers = identifier_columns(sample) if sample is not None else frozenset()
        # A column the history already holds NULLs in may get more: only the others must have
        # values (counted from the data files' statistics, before merge-on-read deletes).
        holding_nulls = frozenset(c for f in pinned.files for c, n in f.null_counts.items() if n)
        suite = learn_suite(table, pinned.schema, pinned.column_bounds(), identifiers, holding_nulls)
        self._save_suite(table, suite, pinned.sequence)
        return suite, pinned.sequence

    def _previous(self, table: str, seq: int) -> int | None:
        """The table's commit before ``seq`` (None: ``seq`` created it)."""
        earlier = self.commit_log.commit_at(table, seq - 1)
        return earlier.seq if earlier is not None else None
