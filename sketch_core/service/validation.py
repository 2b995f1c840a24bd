"""The delta-batch gate: a batch that failed validation blocks the maintenance of the sketches
that read it (they stay at their last good version) until it is fixed or overridden."""

from __future__ import annotations

from collections.abc import Sequence

from sketch_core.errors import ConfigurationError, DeltaQuarantinedError, ValidationOverrideError
from sketch_core.metastore.sketches import VersionRecord
from sketch_core.metastore.validations import BatchValidation
from sketch_core.service.context import ServiceContext


class DeltaChecks:
    """Validating delta batches on maintenance's way."""

    def __init__(self, context: ServiceContext) -> None:
        self.context = context

    def check(self, name: str, record: VersionRecord, target: int) -> None:
        """Raise :class:`DeltaQuarantinedError` when a delta batch between the version and
        ``target`` failed validation and is neither fixed nor overridden (the sketch then stays
        at its version: a recapture would take the batch in just the same)."""
        if not self.context.settings.validate_deltas:
            return
        quarantine = self.context.gate.check(dict.fromkeys(record.table_snapshots, record.sequence), target)
        if quarantine is not None:
            raise DeltaQuarantinedError(
                name, [(b.table, b.seq, "; ".join(map(str, b.failures))) for b in quarantine.batches]
            )

    def override_validation(self, table: str, seq: int, reason: str) -> None:
        """See :meth:`SketchService.override_validation`."""
        ctx = self.context
        table = ctx.tables.record(table).name
        if not reason.strip():
            raise ConfigurationError("an override needs a reason", hint="say why the batch is acceptable")
        if not ctx.gate.override(table, seq, reason):
            found = ctx.validations.results(table, seq - 1, seq)
            raise ValidationOverrideError(table, seq, found[0].status if found else None)

    def declare_nullable(self, table: str, columns: Sequence[str]) -> None:
        """See :meth:`SketchService.declare_nullable`."""
        table = self.context.tables.record(table).name
        try:
            self.context.gate.declare_nullable(table, set(columns))
        except ValueError as exc:
            raise ConfigurationError(str(exc), hint="name columns the table has") from exc

    def validate_deltas(self, tables: Sequence[str] | None = None) -> list[BatchValidation]:
        """See :meth:`SketchService.validate_deltas`."""
        ctx = self.context
        starts: dict[str, int] = {}
        for definition in ctx.sketches.definitions():
            record = ctx.sketches.version(definition.name)
            if record is None:
                continue
            for table in record.table_snapshots:
                starts[table] = min(starts.get(table, record.sequence), record.sequence)
        wanted = {ctx.tables.record(t).name for t in tables} if tables is not None else set(starts)
        return [v for table in sorted(wanted & set(starts)) for v in ctx.gate.validate(table, starts[table])]

    def quarantined(self, tables: Sequence[str] | None = None) -> list[BatchValidation]:
        """See :meth:`SketchService.quarantined`."""
        return self.context.validations.quarantined(tables)

    def blocked(self, name: str) -> DeltaQuarantinedError | None:
        """See :meth:`SketchService.blocked`."""
        _, record = self.context.definition_and_version(name)
        try:
            self.check(name, record, self.context.latest_sequence())
        except DeltaQuarantinedError as exc:
            return exc
        return None
