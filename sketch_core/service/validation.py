"""The delta-batch gate: a batch that failed validation blocks the maintenance of the sketches
that read it (they stay at their last good version) until it is fixed or overridden."""

from __future__ import annotations

from collections.abc import Sequence

from sketch_core.errors import ConfigurationError, DeltaQuarantinedError, ValidationOverrideError
from sketch_core.metastore.sketches import VersionRecord
from sketch_core.metastore.validations import BatchValidation
from sketch_core.service.core import ServiceCore


class Validating(ServiceCore):
    """Validating delta batches on maintenance's way."""

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
