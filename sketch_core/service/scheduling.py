"""Scheduling: maintenance policies (stale, delta size, time, predicted arrivals, reports about
to run), the sketches a report uses, and the state budget's allocation."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sketch_core.algebra.query_text import referenced_tables, template_key
from sketch_core.costs.arrivals import forecast_next, predict
from sketch_core.errors import ConfigurationError, SketchNotFoundError
from sketch_core.maintenance.budget import BudgetRun
from sketch_core.policy import REPORT_WINDOW_SECONDS, Policy, PolicyFacts, effective_policy, evaluate
from sketch_core.service.context import ServiceContext
from sketch_core.service.engines import EngineCache
from sketch_core.service.maintenance import LEFT_BEHIND, Maintainer
from sketch_core.service.results import MaintenanceRun, PolicyCheck

log = logging.getLogger(__name__)


def _check_report(report: object) -> None:
    if not isinstance(report, str) or not 0 < len(report) <= 200:
        raise ConfigurationError(
            f"report name {report!r} is not 1 to 200 characters", hint="name the report as its policy does"
        )


class Scheduler:
    """Deciding when sketches are maintained."""

    def __init__(self, context: ServiceContext, maintainer: Maintainer, cache: EngineCache) -> None:
        self.context = context
        self.maintainer = maintainer
        self.cache = cache

    def allocate_state(self, names: Sequence[str] | None = None) -> BudgetRun | None:
        """See :meth:`SketchService.allocate_state`."""
        run = self.context.budget.allocate(names)
        for name in run.changed if run is not None else ():
            self.cache.forget(name)
        return run

    def set_policy(self, name: str, policy: Policy | Mapping[str, Any] | None) -> None:
        """See :meth:`SketchService.set_policy`."""
        if policy is not None and not isinstance(policy, Policy):
            policy = Policy.from_json(policy)
        self.context.policies.set_policy(name, policy.to_json() if policy is not None else None)

    def policy(self, name: str) -> tuple[Policy, bool]:
        """See :meth:`SketchService.policy`."""
        return effective_policy(self.context.policies.policy(name))

    def check_policies(
        self, names: Sequence[str] | None = None, now: datetime | None = None, record: bool = True
    ) -> list[PolicyCheck]:
        """See :meth:`SketchService.check_policies`."""
        ctx = self.context
        now = now if now is not None else datetime.now(UTC)
        if now.tzinfo is None:
            raise ConfigurationError(
                f"now={now.isoformat()} has no time zone", hint="pass an aware datetime (e.g. UTC)"
            )
        names = list(names) if names is not None else [d.name for d in ctx.sketches.definitions()]
        if record and ctx.budget.due(names):  # new sketches, or the workload may have moved
            self.allocate_state()
        checks = []
        for name in names:
            policy, explicit = self.policy(name)
            facts = ctx.policies.facts(name, policy.before_reports)
            if facts.pending_commits and (policy.forecast_reports or policy.defer_in_bursts):
                facts = self._predicted_facts(name, policy, facts, now)
            decision = evaluate(policy, facts, now)
            if record:
                ctx.policies.record_decision(name, decision.fire, decision.reason, policy.to_json(), now)
            checks.append(PolicyCheck(name, policy, explicit, decision, now))
        return checks

    def _predicted_facts(self, name: str, policy: Policy, facts: PolicyFacts, now: datetime) -> PolicyFacts:
        """``facts`` with what the policy's predictions need: the arrival prediction of each of
        the sketch's tables, each named report's forecast next run, and the estimated seconds
        of maintaining now (the cheaper of incremental and recapture, by the cost model)."""
        ctx = self.context
        definition = ctx.sketches.definition(name)
        tables = sorted(referenced_tables(definition.query_sql))
        moment = now.timestamp()
        arrivals = {
            table: predict(history, moment) for table, history in ctx.policies.commit_history(tables).items()
        }
        forecasts: dict[str, datetime | None] = {}
        for report in policy.before_reports if policy.forecast_reports else ():
            times = [due.timestamp() for due in ctx.policies.report_due_times(report)]
            at = forecast_next(times, moment)
            forecasts[report] = datetime.fromtimestamp(at, UTC) if at is not None else None
        model = ctx.advisor.model(name)  # within the advisor's ttl: a check per poke refits nothing
        table_rows = ctx.policies.table_rows(tables)
        seconds = min(model.estimate("incremental", facts.delta_rows), model.estimate("full", table_rows))
        return dataclasses.replace(
            facts, arrivals=arrivals, report_forecasts=forecasts, maintenance_seconds=seconds
        )

    def maintain_due(
        self, names: Sequence[str] | None = None, strategy: str = "auto", now: datetime | None = None
    ) -> list[MaintenanceRun]:
        """See :meth:`SketchService.maintain_due`."""
        due = [c.name for c in self.check_policies(names, now) if c.fire]
        return self.maintain_each(due, strategy)

    def maintain_each(self, names: Sequence[str], strategy: str = "auto") -> list[MaintenanceRun]:
        """See :meth:`SketchService.maintain_each`."""
        runs = []
        for name in names:
            try:
                runs.extend(self.maintainer.maintain(name, strategy))
            except LEFT_BEHIND as exc:
                log.warning("%s", exc)
            except SketchNotFoundError:
                self.context.sketches.definition(name)  # raises when the name is not a sketch at all
                log.warning("%s has no published version: not maintained", name)
        return runs

    def report_sketches(self, sql: str | None = None, report: str | None = None) -> list[str]:
        """See :meth:`SketchService.report_sketches`."""
        names: set[str] = set()
        if sql is not None:
            names |= {d.name for d in self.context.sketches.definitions(template_key(sql))}
        if report is not None:
            names |= {
                name
                for name, spec in self.context.policies.policies().items()
                if report in Policy.from_json(spec).before_reports
            }
        return sorted(names)

    def announce_report(
        self, report: str, due_at: datetime | None = None, window_seconds: float = REPORT_WINDOW_SECONDS
    ) -> datetime:
        """See :meth:`SketchService.announce_report`."""
        _check_report(report)
        if due_at is not None and due_at.tzinfo is None:
            raise ConfigurationError(
                f"due_at {due_at.isoformat()} has no time zone", hint="pass an aware datetime (e.g. UTC)"
            )
        if (
            isinstance(window_seconds, bool)
            or not isinstance(window_seconds, int | float)
            or not (0 < window_seconds < 366 * 86400)
        ):
            raise ConfigurationError(
                f"window_seconds={window_seconds} is not between 0 and a year",
                hint="how long after it is due the report may still run, e.g. 3600",
            )
        return self.context.policies.announce(report, due_at, float(window_seconds))

    def report_finished(self, report: str) -> int:
        """See :meth:`SketchService.report_finished`."""
        _check_report(report)
        return self.context.policies.finish_report(report)
