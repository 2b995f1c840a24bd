"""Deciding whether a sketch's policy fires, from facts read off the metastore (no I/O here).

The clock is an argument: the caller reads it once, tests set it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sketch_core.costs.arrivals import Prediction
from sketch_core.durations import format_duration
from sketch_core.policy.policy import Policy


@dataclass(frozen=True)
class Announcement:
    """A report said it is about to run: it is due at ``due_at``. It counts until ``ends_at``:
    when the report ran, or the end of the window it was announced for."""

    report: str
    due_at: datetime
    announced_at: datetime
    ends_at: datetime


@dataclass(frozen=True)
class PolicyFacts:
    """What a policy is checked against, for one sketch."""

    published_at: datetime | None  # when its newest version was published (None: never)
    pending_commits: int  # commits to its tables after that version
    delta_rows: int  # rows those commits inserted or deleted
    # Announcements of the reports the policy names, made after the newest version.
    announcements: Sequence[Announcement] = field(default_factory=tuple)
    # For forecast_reports: each named report's predicted next run (None: no pattern yet), and
    # the estimated seconds a maintenance run would take now.
    report_forecasts: Mapping[str, datetime | None] = field(default_factory=dict)
    maintenance_seconds: float = 0.0
    # For defer_in_bursts: the arrival prediction of each of the sketch's tables.
    arrivals: Mapping[str, Prediction] = field(default_factory=dict)


@dataclass(frozen=True)
class Condition:
    name: str  # "delta_rows", "elapsed", "report:<name>"
    met: bool
    detail: str  # e.g. "delta rows 1,200 >= 1,000"


@dataclass(frozen=True)
class Decision:
    fire: bool
    reason: str
    conditions: tuple[Condition, ...]


def evaluate(policy: Policy, facts: PolicyFacts, now: datetime) -> Decision:
    """Whether to maintain now, and why (the reason names the conditions that decided)."""
    if facts.published_at is None:
        return Decision(False, "no published version: capture the sketch first", ())
    if facts.pending_commits == 0:
        return Decision(False, "up to date: no commits since its version", ())
    conditions = _conditions(policy, facts, now)
    met = [c for c in conditions if c.met]
    fire = bool(met) if policy.combine == "any" else len(met) == len(conditions)
    pending = f"{facts.pending_commits} commits, {facts.delta_rows:,} rows pending"
    bursting = sorted(t for t, p in facts.arrivals.items() if p.in_burst) if policy.defer_in_bursts else []
    report_due = any(c.met and c.name.startswith("report:") for c in conditions)
    if fire and bursting and not report_due:
        bursts = "; ".join(f"{t}: {facts.arrivals[t].reason}" for t in bursting)
        return Decision(False, f"deferred: a burst is still arriving ({bursts}) ({pending})", conditions)
    if fire:
        deciding = met if policy.combine == "any" else conditions
        return Decision(True, "; ".join(c.detail for c in deciding) + f" ({pending})", conditions)
    unmet = [c for c in conditions if not c.met]
    joined = "; ".join(c.detail for c in unmet)
    lead = "not yet: " if policy.combine == "any" or not met else "not all met: "
    return Decision(False, f"{lead}{joined} ({pending})", conditions)


def _conditions(policy: Policy, facts: PolicyFacts, now: datetime) -> tuple[Condition, ...]:
    assert facts.published_at is not None
    conditions = []
    if policy.delta_rows is not None:
        met = facts.delta_rows >= policy.delta_rows
        sign = ">=" if met else "<"
        conditions.append(
            Condition("delta_rows", met, f"delta rows {facts.delta_rows:,} {sign} {policy.delta_rows:,}")
        )
    if policy.elapsed_seconds is not None:
        elapsed = max(0.0, (now - facts.published_at).total_seconds())
        met = elapsed >= policy.elapsed_seconds
        sign = ">=" if met else "<"
        conditions.append(
            Condition(
                "elapsed",
                met,
                f"{format_duration(elapsed)} since its version {sign} "
                f"{format_duration(policy.elapsed_seconds)}",
            )
        )
    horizon = now + timedelta(seconds=policy.report_lead_seconds)
    for report in policy.before_reports:
        due = sorted(
            (
                a
                for a in facts.announcements
                if a.report == report and a.announced_at > facts.published_at and a.ends_at > now
            ),
            key=lambda a: a.due_at,
        )
        ready = [a for a in due if a.due_at <= horizon]
        if ready:
            when = ready[0].due_at
            detail = f"report {report!r} due at {when:%Y-%m-%d %H:%M:%S}"
            conditions.append(Condition(f"report:{report}", True, detail))
        elif due:
            detail = f"report {report!r} announced for {due[0].due_at:%Y-%m-%d %H:%M:%S}, not yet due"
            conditions.append(Condition(f"report:{report}", False, detail))
        elif policy.forecast_reports:
            conditions.append(_forecast(report, policy, facts, now))
        else:
            conditions.append(Condition(f"report:{report}", False, f"report {report!r} not announced"))
    return tuple(conditions)


def _forecast(report: str, policy: Policy, facts: PolicyFacts, now: datetime) -> Condition:
    """Whether ``report``'s predicted next run is within the maintenance time plus the lead."""
    predicted = facts.report_forecasts.get(report)
    if predicted is None:
        return Condition(f"report:{report}", False, f"report {report!r} not announced, no forecast yet")
    ahead = facts.maintenance_seconds + policy.report_lead_seconds
    start = predicted - timedelta(seconds=ahead)
    when = f"forecast for {predicted:%Y-%m-%d %H:%M:%S}"
    if now >= start:
        detail = f"report {report!r} {when}: maintain now (~{format_duration(ahead)} ahead)"
        return Condition(f"report:{report}", True, detail)
    detail = f"report {report!r} {when}: maintain from {start:%H:%M:%S} on"
    return Condition(f"report:{report}", False, detail)
