"""Maintenance policies against the real metastore: stored per sketch, checked with a
controllable clock (metastore queries only), logged with their reasons, acted on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select, update

from sketch_core.datasets import synthetic_table
from sketch_core.errors import ConfigurationError, PolicyError, SketchNotFoundError
from sketch_core.metastore import schema
from sketch_core.policy import DEFAULT_POLICY, Policy
from sketch_core.service import SketchService
from tests.service.test_maintain import captured, fresh_fragments, maintained


@pytest.fixture
def sketch(spark_svc: SketchService, ns: str) -> tuple[str, str, str]:
    table = f"{ns}.facts"
    spark_svc.tables.create(table, synthetic_table(3000, 40, seed=9), sort_by=["a"])
    name, sql = captured(spark_svc, table, "policy")
    return table, name, sql


def test_default_policy_and_nothing_to_do(spark_svc: SketchService, sketch: tuple[str, str, str]) -> None:
    _, name, _ = sketch
    assert spark_svc.policy(name) == (DEFAULT_POLICY, False)
    (check,) = spark_svc.check_policies([name])
    assert not check.fire and not check.explicit
    assert "up to date" in check.decision.reason


def test_combined_policy_fires_on_the_given_clock_and_maintenance_follows(
    spark_svc: SketchService, sketch: tuple[str, str, str]
) -> None:
    svc = spark_svc
    table, name, sql = sketch
    svc.set_policy(name, {"delta_rows": 50, "elapsed_seconds": 3600, "combine": "all"})
    published = svc.policies.facts(name).published_at
    assert published is not None
    svc.tables.append(table, synthetic_table(30, 40, seed=10, key_start=10_000))
    (check,) = svc.check_policies([name], now=published + timedelta(hours=2))
    assert not check.fire and "delta rows 30 < 50" in check.decision.reason
    svc.tables.append(table, synthetic_table(30, 40, seed=11, key_start=20_000))
    early = published + timedelta(minutes=5)
    assert not svc.check_policies([name], now=early)[0].fire
    assert svc.maintain_due([name], now=early) == []
    late = published + timedelta(hours=2)
    (run,) = svc.maintain_due([name], now=late)
    assert run.strategy == "incremental"
    sequence = svc.sketch(name).sequence
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, sequence)
    after = svc.check_policies([name], now=late + timedelta(hours=5))[0]
    assert not after.fire and "up to date" in after.decision.reason


def test_before_report_fires_once_per_announcement(
    spark_svc: SketchService, sketch: tuple[str, str, str]
) -> None:
    svc = spark_svc
    table, name, _ = sketch
    svc.set_policy(name, Policy(before_reports=("daily_revenue",)))
    svc.tables.append(table, synthetic_table(20, 40, seed=12, key_start=30_000))
    assert "not announced" in svc.check_policies([name])[0].decision.reason
    svc.announce_report("daily_revenue")
    assert [r.name for r in svc.maintain_due([name])] == [name]
    svc.tables.append(table, synthetic_table(20, 40, seed=13, key_start=40_000))
    # The announcement was answered by the version it caused: it does not fire again.
    (check,) = svc.check_policies([name])
    assert not check.fire and "not announced" in check.decision.reason


def test_a_report_that_ran_stops_its_announcement_firing_and_one_that_never_ran_expires(
    spark_svc: SketchService, sketch: tuple[str, str, str]
) -> None:
    """The refresh found the sketch up to date (no version published after the announcement):
    once the report has run, a later small load must not fire for it; without the report
    finishing, the announcement ends with its window."""
    svc = spark_svc
    table, name, _ = sketch
    svc.set_policy(name, Policy(delta_rows=10_000, before_reports=("weekly",)))
    svc.maintain(name)  # up to date before the refresh
    svc.announce_report("weekly", window_seconds=600)
    assert [r.strategy for r in svc.maintain(name)] == ["none"]  # the refresh: nothing to do
    assert svc.report_finished("weekly") == 1
    svc.tables.append(table, synthetic_table(20, 40, seed=15, key_start=60_000))
    (check,) = svc.check_policies([name])
    assert not check.fire and "'weekly' not announced" in check.decision.reason
    # Announced again, never run: fires within the window, not after it.
    due = svc.announce_report("weekly", window_seconds=600)
    assert svc.check_policies([name], now=due + timedelta(seconds=599))[0].fire
    late = svc.check_policies([name], now=due + timedelta(seconds=601))[0]
    assert not late.fire and "'weekly' not announced" in late.decision.reason
    for bad in (0, "an hour", True):
        with pytest.raises(ConfigurationError, match="window_seconds"):
            svc.announce_report("weekly", window_seconds=bad)  # type: ignore[arg-type]


def test_decisions_are_logged_without_growing_on_every_poll(
    spark_svc: SketchService, sketch: tuple[str, str, str]
) -> None:
    svc = spark_svc
    table, name, _ = sketch
    svc.set_policy(name, Policy(delta_rows=1000))
    svc.tables.append(table, synthetic_table(10, 40, seed=14, key_start=50_000))
    for _ in range(5):
        svc.check_policies([name])
    svc.set_policy(name, Policy(delta_rows=5))
    svc.check_policies([name])
    decisions = svc.policies.decisions(name)
    assert [d.fired for d in decisions] == [True, False]
    assert "delta rows 10 >= 5" in decisions[0].reason
    assert "delta rows 10 < 1,000" in decisions[1].reason
    (status,) = svc.status(name)
    assert status.policy == "delta rows >= 5" and status.policy_explicit
    assert status.last_decision is not None and status.last_decision.fired


def test_bad_policy_keeps_the_stored_one_and_drop_removes_it(
    spark_svc: SketchService, sketch: tuple[str, str, str]
) -> None:
    svc = spark_svc
    _, name, _ = sketch
    svc.set_policy(name, Policy(delta_rows=7))
    with pytest.raises(PolicyError):
        svc.set_policy(name, {"delta_rows": -1})
    assert svc.policy(name) == (Policy(delta_rows=7), True)
    with pytest.raises(SketchNotFoundError):
        svc.set_policy("no_such_sketch", Policy(delta_rows=7))
    svc.check_policies([name])
    with svc.engine.connect() as conn:
        sketch_id = conn.execute(
            select(schema.sketches.c.sketch_id).where(schema.sketches.c.name == name)
        ).scalar_one()
    svc.drop_sketch(name)
    with svc.engine.connect() as conn:
        for table in (schema.sketch_policies, schema.policy_decisions):
            left = conn.execute(select(func.count()).where(table.c.sketch_id == sketch_id)).scalar_one()
            assert left == 0, table.name
    with pytest.raises(SketchNotFoundError):
        svc.policy(name)


def _set_commit_times(svc: SketchService, table: str, times: list[datetime]) -> None:
    """Give the table's commits, oldest first, these times: a commit history to predict from."""
    c, tb = schema.table_commits.c, schema.tables.c
    with svc.engine.begin() as conn:
        seqs = (
            conn.execute(
                select(c.seq)
                .select_from(schema.table_commits.join(schema.tables, tb.table_id == c.table_id))
                .where(tb.name == table)
                .order_by(c.seq)
            )
            .scalars()
            .all()
        )
        assert len(seqs) == len(times)
        for seq, at in zip(seqs, times, strict=True):
            conn.execute(update(schema.table_commits).where(c.seq == seq).values(committed_at=at))


def test_a_policy_deferring_in_bursts_waits_for_the_burst_to_end(spark_svc: SketchService, ns: str) -> None:
    svc = spark_svc
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(2000, 40, seed=1), sort_by=["a"])
    for k in range(8):  # with the create: three bursts of three commits
        svc.tables.append(table, synthetic_table(10, 40, seed=10 + k, key_start=10_000 + 100 * k))
    name, _ = captured(svc, table, "bursts")
    svc.tables.append(table, synthetic_table(10, 40, seed=30, key_start=50_000))  # a fourth burst begins
    start = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
    times = [start + timedelta(hours=b, seconds=10 * k) for b in range(3) for k in range(3)]
    times.append(start + timedelta(hours=3))
    _set_commit_times(svc, table, times)
    svc.set_policy(name, {"delta_rows": 1, "defer_in_bursts": True})

    (held,) = svc.check_policies([name], now=times[-1] + timedelta(seconds=3))
    assert not held.fire
    assert (
        "deferred: a burst is still arriving" in held.decision.reason
        and "1 of ~3 commits" in held.decision.reason
    )
    (after,) = svc.check_policies([name], now=times[-1] + timedelta(minutes=20))
    assert after.fire and "delta rows 10 >= 1" in after.decision.reason


def test_a_forecast_report_gets_its_sketch_maintained_ahead_of_its_next_run(
    spark_svc: SketchService, ns: str
) -> None:
    svc = spark_svc
    table = f"{ns}.facts"
    report = f"{ns}_daily"
    svc.tables.create(table, synthetic_table(2000, 40, seed=2), sort_by=["a"])
    six = datetime(2026, 11, 2, 6, 0, tzinfo=UTC)
    for day in range(5):  # the report ran at 06:00 on five days, before the sketch existed
        svc.announce_report(report, six + timedelta(days=day))
    name, _ = captured(svc, table, "forecast")
    svc.tables.append(table, synthetic_table(25, 40, seed=3, key_start=9000))
    svc.set_policy(name, {"before_reports": [report], "forecast_reports": True, "report_lead_seconds": 300})
    upcoming = six + timedelta(days=5)

    (early,) = svc.check_policies([name], now=upcoming - timedelta(minutes=30))
    assert not early.fire and f"forecast for {upcoming:%Y-%m-%d %H:%M:%S}" in early.decision.reason
    (ahead,) = svc.check_policies([name], now=upcoming - timedelta(minutes=4))
    assert ahead.fire and "maintain now" in ahead.decision.reason
    (run,) = svc.maintain_due([name], now=upcoming - timedelta(minutes=4))
    assert run.strategy == "incremental" and run.delta_rows == 25
