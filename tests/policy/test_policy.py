"""Policies and their evaluation (pure): conditions, any/all, a controllable clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sketch_core.errors import PolicyError
from sketch_core.policy import DEFAULT_POLICY, Policy, PolicyFacts, evaluate
from sketch_core.policy.evaluate import Announcement

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
# Announcements that have not ended by any time a test looks at.
LATER = T0 + timedelta(days=30)


def facts(
    rows: int = 0, commits: int | None = None, published: datetime | None = T0, **kw: Any
) -> PolicyFacts:
    return PolicyFacts(published, commits if commits is not None else (1 if rows else 0), rows, **kw)


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({}, "no condition"),
        ({"delta_rows": 0}, "delta_rows must be"),
        ({"delta_rows": 2.5}, "delta_rows must be"),
        ({"delta_rows": True}, "delta_rows must be"),
        ({"elapsed_seconds": -1}, "elapsed_seconds must be"),
        ({"elapsed_seconds": float("nan")}, "elapsed_seconds must be"),
        ({"before_reports": [""]}, "report names"),
        ({"before_reports": ["x" * 201]}, "report names"),
        ({"delta_rows": 5, "combine": "most"}, "combine must be"),
        ({"delta_rows": 5, "report_lead_seconds": -3}, "report_lead_seconds"),
        ({"delta_rows": 5, "when": "now"}, "unknown keys when"),
    ],
)
def test_bad_policies_are_refused_naming_the_problem(spec: dict[str, Any], problem: str) -> None:
    with pytest.raises(PolicyError) as raised:
        Policy.from_json(spec)
    assert problem in raised.value.problem
    assert raised.value.hint and "delta_rows" in raised.value.hint


def test_json_round_trip_and_description() -> None:
    policy = Policy(delta_rows=1000, elapsed_seconds=5400, before_reports=("daily",), combine="all")
    assert Policy.from_json(policy.to_json()) == policy
    assert policy.describe() == "all of: delta rows >= 1,000; 1h30m elapsed; before report 'daily'"
    assert Policy(before_reports="daily").before_reports == ("daily",)  # a name, not its letters
    assert DEFAULT_POLICY.describe() == "delta rows >= 1"


def test_delta_rows_threshold() -> None:
    policy = Policy(delta_rows=100)
    assert not evaluate(policy, facts(99), T0).fire
    decision = evaluate(policy, facts(100), T0)
    assert decision.fire
    assert "delta rows 100 >= 100" in decision.reason


def test_elapsed_time_uses_the_given_clock() -> None:
    policy = Policy(elapsed_seconds=3600)
    pending = facts(rows=1)
    assert not evaluate(policy, pending, T0 + timedelta(minutes=59)).fire
    decision = evaluate(policy, pending, T0 + timedelta(hours=1))
    assert decision.fire
    assert "1h since its version >= 1h" in decision.reason


def test_nothing_pending_never_fires_and_no_version_never_fires() -> None:
    policy = Policy(elapsed_seconds=1)
    later = T0 + timedelta(days=3)
    quiet = evaluate(policy, facts(0), later)
    assert not quiet.fire and "up to date" in quiet.reason
    never = evaluate(policy, facts(10, published=None), later)
    assert not never.fire and "capture" in never.reason


def test_any_and_all() -> None:
    rows_only = facts(500)
    either = Policy(delta_rows=100, elapsed_seconds=3600, combine="any")
    both = Policy(delta_rows=100, elapsed_seconds=3600, combine="all")
    assert evaluate(either, rows_only, T0).fire
    waiting = evaluate(both, rows_only, T0 + timedelta(minutes=10))
    assert not waiting.fire
    assert waiting.reason.startswith("not all met: 10m since its version < 1h")
    assert evaluate(both, rows_only, T0 + timedelta(hours=2)).fire


def test_before_report_fires_once_due_and_only_for_announcements_after_the_version() -> None:
    policy = Policy(before_reports=("daily",), report_lead_seconds=600)
    due = T0 + timedelta(hours=1)
    fresh = Announcement("daily", due, T0 + timedelta(minutes=1), LATER)
    served = Announcement("daily", T0, T0 - timedelta(minutes=1), LATER)  # before the version: answered
    other = Announcement("weekly", T0, T0 + timedelta(minutes=1), LATER)
    pending = facts(7, announcements=(fresh, served, other))
    early = evaluate(policy, pending, due - timedelta(minutes=20))
    assert not early.fire and "not yet due" in early.reason
    assert evaluate(policy, pending, due - timedelta(minutes=10)).fire  # within the lead
    only_old = facts(7, announcements=(served, other))
    assert not evaluate(policy, only_old, due).fire
    assert "'daily' not announced" in evaluate(policy, only_old, due).reason


def test_an_announcement_stops_firing_once_its_report_ran_or_its_window_closed() -> None:
    policy = Policy(before_reports=("daily",))
    ran = T0 + timedelta(minutes=30)
    answered = Announcement("daily", T0 + timedelta(minutes=5), T0 + timedelta(minutes=1), ran)
    pending = facts(7, announcements=(answered,))
    assert evaluate(policy, pending, T0 + timedelta(minutes=10)).fire  # announced, not yet run
    after = evaluate(policy, pending, ran + timedelta(seconds=1))  # the report ran: a later load
    assert not after.fire and "'daily' not announced" in after.reason


conditions = st.fixed_dictionaries(
    {},
    optional={
        "delta_rows": st.integers(1, 1000),
        "elapsed_seconds": st.floats(1, 10_000),
        "before_reports": st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=2, unique=True),
    },
).filter(bool)


@given(
    spec=conditions,
    combine=st.sampled_from(["any", "all"]),
    rows=st.integers(0, 2000),
    minutes=st.integers(0, 400),
    announced=st.lists(st.sampled_from(["a", "b"]), max_size=2),
)
def test_any_fires_iff_one_condition_holds_and_all_iff_every_one(
    spec: dict[str, Any], combine: str, rows: int, minutes: int, announced: list[str]
) -> None:
    policy = Policy.from_json({**spec, "combine": combine})
    now = T0 + timedelta(minutes=minutes)
    marks = tuple(Announcement(r, T0, T0 + timedelta(seconds=1), LATER) for r in announced)
    decision = evaluate(policy, facts(rows, announcements=marks), now)
    held = []
    if policy.delta_rows is not None:
        held.append(rows >= policy.delta_rows)
    if policy.elapsed_seconds is not None:
        held.append(minutes * 60 >= policy.elapsed_seconds)
    held += [r in announced for r in policy.before_reports]
    expected = rows > 0 and (any(held) if combine == "any" else all(held))
    assert decision.fire == expected
    assert [c.met for c in decision.conditions] == (held if rows > 0 else [])


def test_defer_in_bursts_holds_off_while_a_burst_arrives_unless_a_report_is_due() -> None:
    from sketch_core.costs.arrivals import Prediction

    burst = Prediction("bursty", 0.0, 200, True, 3, "bursty: in a burst (2 of ~5 commits, every 10s)")
    calm = Prediction("bursty", 0.0, 200, False, 5, "bursty: bursts of ~5 commits every 1h")
    policy = Policy(delta_rows=10, defer_in_bursts=True)
    held = evaluate(policy, facts(50, arrivals={"s.t": burst, "s.u": calm}), T0)
    assert not held.fire
    assert held.reason.startswith("deferred: a burst is still arriving (s.t: bursty: in a burst (2 of ~5")
    assert evaluate(policy, facts(50, arrivals={"s.t": calm}), T0).fire  # the burst is over
    assert evaluate(Policy(delta_rows=10), facts(50, arrivals={"s.t": burst}), T0).fire  # not asked to
    reported = Policy(delta_rows=10, before_reports=("daily",), defer_in_bursts=True)
    due = Announcement("daily", T0, T0 + timedelta(minutes=1), LATER)
    assert evaluate(
        reported, facts(50, arrivals={"s.t": burst}, announcements=(due,)), T0 + timedelta(minutes=2)
    ).fire


def test_forecast_reports_maintain_ahead_of_the_predicted_run_by_the_estimated_time() -> None:
    policy = Policy(before_reports=("daily",), forecast_reports=True, report_lead_seconds=300)
    due = T0 + timedelta(hours=6)
    pending = facts(7, report_forecasts={"daily": due}, maintenance_seconds=120)
    early = evaluate(policy, pending, due - timedelta(minutes=10))
    assert not early.fire and "forecast for 2026-11-01 18:00:00: maintain from 17:53:00 on" in early.reason
    ahead = evaluate(policy, pending, due - timedelta(minutes=6))  # 7 minutes ahead: time to start
    assert ahead.fire and "maintain now (~7m ahead)" in ahead.reason
    unknown = evaluate(policy, facts(7, report_forecasts={"daily": None}), due)
    assert not unknown.fire and "no forecast yet" in unknown.reason
    # An announcement still decides when there is one.
    announced = Announcement("daily", due, T0 + timedelta(minutes=1), LATER)
    assert evaluate(policy, facts(7, announcements=(announced,), maintenance_seconds=120), due).fire


def test_prediction_options_round_trip_and_are_checked() -> None:
    policy = Policy(before_reports=("daily",), forecast_reports=True, defer_in_bursts=True)
    assert Policy.from_json(policy.to_json()) == policy
    assert (
        policy.describe()
        == "before report 'daily', ahead of the reports' forecast runs, deferred during bursts"
    )
    with pytest.raises(PolicyError, match="forecast_reports needs before_reports"):
        Policy(delta_rows=5, forecast_reports=True)
    with pytest.raises(PolicyError, match="defer_in_bursts must be true or false"):
        Policy.from_json({"delta_rows": 5, "defer_in_bursts": "yes"})
