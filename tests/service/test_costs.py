"""Every capture, maintenance and query records its timing and sizes, and the sketch's cost
models are fitted from those records (priors until they exist)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from sketch_core.algebra.query_text import template_key
from sketch_core.costs import DEFAULT_PRIORS, CostModel, LinearCost
from sketch_core.datasets import synthetic_table
from sketch_core.datasets.deltas import DeltaGenerator
from sketch_core.errors import SketchNotFoundError
from sketch_core.maintenance.advisor import RECHECK_SKIP_AFTER
from sketch_core.service import SketchService
from tests.oracles.results import sorted_rows
from tests.service.test_maintain import HAVING, captured, fresh_fragments, maintained, sibling


def test_runs_and_queries_are_recorded_and_the_model_is_fitted_from_them(
    spark_svc: SketchService, ns: str
) -> None:
    svc = spark_svc
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(3000, 40, seed=5), sort_by=["a"])
    name, sql = captured(svc, table, "costs", with_state=True)  # incremental runs start from it
    untouched = svc.cost_model(name)
    # No query yet: the query with the sketch is expected to read the rows of the files it keeps.
    assert untouched.costs["use"].runs == 0
    share = svc.context.partitions.sketch_share(name)
    kept = svc.sketch_files(name)[table].files
    assert share == sum(f.record_count for f in kept) / 3000
    assert untouched.costs["use"].per_row == pytest.approx(untouched.costs["plain"].per_row * share)
    assert untouched.costs["capture"].runs == 1

    for _ in range(2):
        svc.query(sql, use_sketches="always")  # timed with the sketch, whatever it costs here
    svc.query(sql, use_sketches=False)
    DeltaGenerator(svc.tables, table, ("key",), seed=6).inserts(40).apply(svc.tables)
    (incremental,) = svc.maintain(name, "incremental")
    DeltaGenerator(svc.tables, table, ("key",), seed=7).deletes(30).apply(svc.tables)
    (full,) = svc.maintain(name, "full")
    svc.query(sql, use_sketches="always")  # the new version

    seen = svc.costs.observations(name)
    rows_now = 3000 + 40 - 30
    assert [o.size for o in seen["capture"]] == [3000]
    assert [o.size for o in seen["incremental"]] == [40]
    assert sorted(o.size for o in seen["full"]) == [3000, rows_now]
    assert sorted(o.size for o in seen["use"]) == [3000, 3000, rows_now]
    assert [o.size for o in seen["plain"]] == [3000]
    assert seen["incremental"][0].seconds == incremental.seconds > 0  # the run returned is the run recorded
    # The run log keeps the delta a recapture caught up with (the chart plots it).
    assert (
        [r["delta_rows"] for r in svc.sketches.runs(name) if r["strategy"] == "full"]
        == [full.delta_rows]
        == [30]
    )

    model = svc.cost_model(name)
    assert {op: cost.runs for op, cost in model.costs.items()} == {
        "capture": 1,
        "incremental": 1,
        "full": 2,  # the recapture, and the capture (a recapture of its time)
        "use": 3,
        "plain": 1,
    }
    assert model.costs["plain"] != DEFAULT_PRIORS["plain"]


def test_a_dropped_sketch_s_runs_do_not_become_plain_runs_of_its_query(
    spark_svc: SketchService, ns: str
) -> None:
    """Dropping a sketch unlinks its query runs from it; they read the sketch's files, so a
    new sketch of the same query must not take them for runs without a sketch (they made the
    plain query look as fast as the sketched one, and the default skip the new sketch)."""
    svc = spark_svc
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(3000, 40, seed=5), sort_by=["a"])
    name, sql = captured(svc, table, "dropped")
    for _ in range(2):
        svc.query(sql, use_sketches="always")
    svc.query(sql, use_sketches=False)
    assert len(svc.costs.observations(name)["plain"]) == 1
    svc.drop_sketch(name)
    again, _ = captured(svc, table, "dropped")
    seen = svc.costs.observations(again)
    assert len(seen["plain"]) == 1 and seen["use"] == []


@pytest.mark.parametrize("strategy", ["incremental", "full"])
def test_a_query_run_is_recorded_with_its_own_seconds_not_the_maintenance_before_it(
    spark_svc: SketchService, ns: str, strategy: str
) -> None:
    svc = sibling(spark_svc, maintain_on_query=strategy)
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(3000, 40, seed=33), sort_by=["a"])
    name, sql = captured(svc, table, f"own_seconds_{strategy}", with_state=True)
    DeltaGenerator(svc.tables, table, ("key",), seed=34).inserts(20).apply(svc.tables)
    result = svc.query(sql)  # maintains on the way
    assert result.sketch == (name, 2)
    run = svc.sketches.runs(name)[-1]
    assert run["strategy"] == strategy and run["seconds"] > 0
    aside = result.seconds - result.query_seconds
    assert result.query_seconds > 0 and aside >= run["seconds"]
    if strategy == "incremental":  # exactly the run's recorded seconds (a capture's: about)
        assert aside == pytest.approx(run["seconds"])
    assert [o.seconds for o in svc.costs.observations(name)["use"]] == [result.query_seconds]


def test_a_self_tuning_capture_on_a_query_s_way_is_not_part_of_its_run(
    spark_svc: SketchService, ns: str
) -> None:
    svc = sibling(spark_svc, self_tuning="eager")
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(3000, 40, seed=35), sort_by=["a"])
    sql = HAVING.format(t=table)
    result = svc.query(sql)  # captures, then uses the sketch
    assert result.sketch is not None
    name = result.sketch[0]
    (capture,) = svc.sketches.runs(name)
    assert capture["strategy"] == "capture" and capture["seconds"] > 0
    assert 0 < result.query_seconds <= result.seconds - capture["seconds"]
    assert [o.seconds for o in svc.costs.observations(name)["use"]] == [result.query_seconds]


@pytest.mark.parametrize("stale", [True, False], ids=["stale-sketch", "current-sketch"])
def test_the_cost_model_s_choice_on_a_query_s_way_is_not_part_of_its_run(
    spark_svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch, stale: bool
) -> None:
    """The choice is paid whichever way the query runs, so it weighs on neither way's model."""
    svc = sibling(spark_svc, maintain_on_query="cost")
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(3000, 40, seed=36), sort_by=["a"])
    name, sql = captured(svc, table, f"choice_aside_{stale}", with_state=True)
    if stale:  # the query decides how to bring the sketch up (or to run without it)
        DeltaGenerator(svc.tables, table, ("key",), seed=37).inserts(20).apply(svc.tables)
    fit_delay = 0.4
    read_runs = svc.costs.recorded_runs
    fitted: list[str] = []

    def slow_read(sketch: str, *args: Any) -> Any:
        time.sleep(fit_delay)  # a metastore slow to answer: the fit takes this long
        fitted.append(sketch)
        return read_runs(sketch, *args)

    monkeypatch.setattr(svc.costs, "recorded_runs", slow_read)
    svc.advisor.forget(name)  # the choice refits the model
    result = svc.query(sql)
    assert fitted == [name]  # on the query's way
    monkeypatch.undo()
    maintenance = sum(r["seconds"] for r in svc.sketches.runs(name)[1:])  # after the capture
    assert result.seconds - result.query_seconds >= fit_delay + maintenance
    kind = "use" if result.sketch is not None else "plain"
    assert result.query_seconds in [o.seconds for o in svc.costs.observations(name)[kind]]


def test_an_incremental_run_that_built_its_state_is_left_out_of_the_incremental_fit(
    spark_svc: SketchService, ns: str
) -> None:
    svc = spark_svc
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(3000, 40, seed=23), sort_by=["a"])
    name, sql = captured(svc, table, "built_state")  # no state: the capture computed none
    DeltaGenerator(svc.tables, table, ("key",), seed=24).inserts(30).apply(svc.tables)
    assert svc.plan_maintenance(name, "incremental").builds_state
    (built,) = svc.maintain(name, "incremental")
    DeltaGenerator(svc.tables, table, ("key",), seed=25).deletes(20).apply(svc.tables)
    assert not svc.plan_maintenance(name, "incremental").builds_state  # kept from the last run
    (kept,) = svc.maintain(name, "incremental")
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())
    flags = [r["built_state"] for r in svc.sketches.runs(name) if r["strategy"] == "incremental"]
    assert flags == [True, False]
    # Only the run that did the incremental work alone is an incremental observation.
    assert [o.size for o in svc.costs.observations(name)["incremental"]] == [kept.delta_rows] == [20]
    assert built.delta_rows == 30


def pinned_model(svc: SketchService, name: str, runs: int = 10, **lines: tuple[float, float]) -> None:
    """Make the service decide for ``name`` with these cost lines (kept for the model's TTL),
    every line as if fitted from ``runs`` runs (the default: timed enough not to be explored)."""
    costs = {op: dataclasses.replace(cost, runs=runs) for op, cost in DEFAULT_PRIORS.items()}
    costs.update({op: LinearCost(a, b, runs=runs) for op, (a, b) in lines.items()})
    svc.advisor.pin(name, CostModel(costs))


def test_auto_maintains_by_the_cost_model_and_records_why(spark_svc: SketchService, ns: str) -> None:
    svc = spark_svc
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(3000, 40, seed=8), sort_by=["a"])
    name, sql = captured(svc, table, "auto_cost")
    DeltaGenerator(svc.tables, table, ("key",), seed=9).inserts(50).apply(svc.tables)
    # A model in which recapturing this small table is cheaper than 50 delta rows incrementally.
    pinned_model(svc, name, full=(0.01, 0.0), incremental=(0.5, 1e-3))
    plan = svc.plan_maintenance(name, "auto")
    assert plan.strategy == "full" and plan.choice is not None
    assert plan.choice.reason.startswith("full is cheapest: full 0.01s, incremental 0.55s")
    (run,) = svc.maintain(name, "auto")
    assert run.strategy == "full"
    decision = svc.costs.last_decision(name)
    assert decision is not None and (decision.context, decision.action) == ("maintain", "full")
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())
    # The usual model: a small delta goes incrementally.
    DeltaGenerator(svc.tables, table, ("key",), seed=10).inserts(20).apply(svc.tables)
    svc.advisor.forget(name)
    (run,) = svc.maintain(name, "auto")
    assert run.strategy == "incremental"
    shown = svc.status(name)[0].cost_decision
    assert shown is not None and shown.action == "incremental" and "incremental is cheapest" in shown.reason


def test_the_expected_queries_are_the_template_runs_per_load(spark_svc: SketchService, ns: str) -> None:
    svc = spark_svc
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(1000, 20, seed=13), sort_by=["a"])
    name, sql = captured(svc, table, "rate")
    assert svc.costs.expected_queries(name) == 1.0  # one commit: no history, one query per load
    for k in range(3):
        svc.tables.append(table, synthetic_table(5, 20, seed=20 + k, key_start=5000 + 10 * k))
        for _ in range(2):
            svc.query(sql, use_sketches=False)
    # Three loads after the first commit, two runs after each: two per load.
    assert svc.costs.expected_queries(name) == 2.0
    # Over the two newest commits: the four runs since the older of them, for one load between.
    assert svc.costs.expected_queries(name, window=2) == 4.0


def test_a_choice_to_leave_a_sketch_behind_is_made_again_after_a_few_reports(
    spark_svc: SketchService, ns: str
) -> None:
    svc = spark_svc
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(500, 20, seed=41), sort_by=["a"])
    name, _ = captured(svc, table, "recheck_skip")
    fitted = svc.advisor.model(name)  # a fitted model, not pinned
    svc.advisor.skip_from(name, 1)
    assert all(svc.advisor.skipping(name, 1) for _ in range(RECHECK_SKIP_AFTER))
    assert not svc.advisor.skipping(name, 1)  # the next report refits and decides again
    assert svc.advisor.model(name) is not fitted
    assert not svc.advisor.skipping(name, 1)  # the new model has made no choice yet


def test_a_query_maintains_or_skips_the_sketch_by_the_cost_model_once_per_snapshot(
    spark_svc: SketchService, ns: str
) -> None:
    svc = sibling(spark_svc, maintain_on_query="cost")
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(3000, 40, seed=14), sort_by=["a"])
    name, sql = captured(svc, table, "reuse_choice")
    DeltaGenerator(svc.tables, table, ("key",), seed=15).mixed(30).apply(svc.tables)
    plain = sorted_rows(svc.query(sql, use_sketches=False).table)
    pinned_model(svc, name, full=(9.0, 0.0), incremental=(5.0, 0.0), use=(0.1, 0.0), plain=(0.5, 0.0))
    # Maintaining costs more than running the expected queries without the sketch: skipped,
    # and the reports that follow at the same snapshots reuse the choice (recorded once).
    for _ in range(4):
        skipped = svc.query(sql)
        assert skipped.sketch is None and sorted_rows(skipped.table) == plain
    assert [d.action for d in svc.costs.decisions(name, context="query")] == ["skip"]
    assert svc.sketch(name).version == 1  # left behind
    # A later load only makes maintaining dearer: while the model stands, the choice holds.
    assert svc.advisor.skipping(name, 1)
    DeltaGenerator(svc.tables, table, ("key",), seed=18).mixed(10).apply(svc.tables)
    plain = sorted_rows(svc.query(sql, use_sketches=False).table)
    later = svc.query(sql)
    assert later.sketch is None and sorted_rows(later.table) == plain
    assert [d.action for d in svc.costs.decisions(name, context="query")] == ["skip"]
    # Cheap incremental maintenance (a new model drops the choices made with the old one): the
    # next report decides again, brings the sketch up and uses it.
    pinned_model(svc, name, full=(9.0, 0.0), incremental=(0.01, 0.0), use=(0.1, 0.0), plain=(0.5, 0.0))
    used = svc.query(sql)
    assert used.sketch == (name, 2) and sorted_rows(used.table) == plain
    assert [d.action for d in svc.costs.decisions(name, context="query")] == ["incremental", "skip"]


def test_a_report_brings_up_a_sketch_left_loads_behind_when_keeping_it_current_pays(
    spark_svc: SketchService, ns: str
) -> None:
    table = f"{ns}.facts"
    spark_svc.tables.create(table, synthetic_table(3000, 40, seed=31), sort_by=["a"])
    name, sql = captured(spark_svc, table, "horizon")
    for k in range(5):  # five loads of ten rows behind, the report run plain after each
        spark_svc.tables.append(table, synthetic_table(10, 40, seed=40 + k, key_start=9000 + 10 * k))
        plain = sorted_rows(spark_svc.query(sql, use_sketches=False).table)
    assert spark_svc.costs.expected_queries(name) == 1.0
    # Catching up (0.25s + use 0.1s) costs more than this report plain (0.2s); keeping the
    # sketch current then costs 0.05s + 0.1s per load against 0.2s plain.
    lines = {"full": (9.0, 0.0), "incremental": (0.0, 5e-3), "use": (0.1, 0.0), "plain": (0.2, 0.0)}
    myopic = sibling(spark_svc, maintain_on_query="cost", cost_horizon_queries=0)
    pinned_model(myopic, name, **lines)
    skipped = myopic.query(sql)
    assert skipped.sketch is None and sorted_rows(skipped.table) == plain
    (decision,) = myopic.costs.decisions(name, context="query")
    assert decision.action == "skip" and "skip 0.2s, incremental 0.35s" in decision.reason
    # Counting ten runs ahead, at the 1.2 runs per load recorded by now (six runs, five loads):
    # 0.25 + 1.2 * 0.1 now, then 0.05 / 1.2 + 0.1 per run: 1.79s, against 1.2 * 0.2 + 10 * 0.2
    # = 2.24s plain.
    ahead = sibling(spark_svc, maintain_on_query="cost")
    assert ahead.settings.cost_horizon_queries == 10
    pinned_model(ahead, name, **lines)
    used = ahead.query(sql)
    assert used.sketch == (name, 2) and sorted_rows(used.table) == plain
    latest = ahead.costs.decisions(name, context="query")[0]
    assert latest.action == "incremental"
    assert "incremental 1.79s, skip 2.24s" in latest.reason
    assert "the 10 runs after them, 1.2 per load" in latest.reason
    assert maintained(ahead, name) == fresh_fragments(ahead, sql, name, ahead.latest_sequence())


def test_maintain_by_cost_leaves_a_sketch_stale_where_the_queries_cost_less_without_it(
    spark_svc: SketchService, ns: str
) -> None:
    svc = spark_svc  # maintain_on_query off: the choice is the refresh's alone
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(3000, 40, seed=21), sort_by=["a"])
    name, sql = captured(svc, table, "refresh_cost")
    DeltaGenerator(svc.tables, table, ("key",), seed=22).mixed(30).apply(svc.tables)
    pinned_model(svc, name, full=(9.0, 0.0), incremental=(5.0, 0.0), use=(0.1, 0.0), plain=(0.5, 0.0))
    assert svc.plan_maintenance(name, "cost").strategy == "skip"
    (run,) = svc.maintain(name, "cost")
    assert (run.strategy, run.published, run.to_version) == ("skip", False, 1)
    assert svc.sketch(name).version == 1  # nothing published
    decision = svc.costs.last_decision(name)
    assert decision is not None and (decision.context, decision.action) == ("maintain", "skip")
    shown = svc.status(name)[0].cost_decision
    assert shown is not None and shown.action == "skip" and "skip" in decision.reason
    # "auto" never leaves it stale: the same model makes it maintain, the cheaper way.
    assert svc.plan_maintenance(name, "auto").strategy == "incremental"
    # Cheap incremental maintenance: "cost" maintains, and the result is a fresh capture's.
    pinned_model(svc, name, full=(9.0, 0.0), incremental=(0.01, 0.0), use=(0.1, 0.0), plain=(0.5, 0.0))
    (run,) = svc.maintain(name, "cost")
    assert (run.strategy, run.published, run.to_version) == ("incremental", True, 2)
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())


def test_a_young_model_learns_from_each_new_run_at_once(spark_svc: SketchService, ns: str) -> None:
    svc = spark_svc
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(2000, 20, seed=16), sort_by=["a"])
    name, sql = captured(svc, table, "young")
    assert svc.advisor.model(name).costs["plain"].runs == 0
    assert svc.advisor.model(name).costs["plain"].basis == ""  # the prior: nothing timed yet
    svc.query(sql, use_sketches="always")  # with the sketch: the plain line is scaled like it
    assert svc.advisor.model(name).costs["plain"].basis.startswith("prior scaled")
    svc.query(sql, use_sketches=False)  # the cached model is refitted, not kept for its ttl
    assert svc.advisor.model(name).costs["plain"].runs == 1
    assert svc.advisor.model(name).costs["use"].runs == 1


def test_a_current_sketch_is_left_unused_where_the_query_runs_faster_without_it(
    spark_svc: SketchService, ns: str
) -> None:
    svc = sibling(spark_svc, maintain_on_query="cost")
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(3000, 40, seed=17), sort_by=["a"])
    name, sql = captured(svc, table, "slow_use")
    plain = sorted_rows(svc.query(sql, use_sketches=False).table)
    # The sketched query is timed slower than the plain one (a small table's extra planning).
    pinned_model(svc, name, use=(0.5, 0.0), plain=(0.1, 0.0))
    for _ in range(3):
        unused = svc.query(sql)
        assert unused.sketch is None and sorted_rows(unused.table) == plain
    (decision,) = svc.costs.decisions(name, context="query")
    assert decision.action == "skip" and "faster without the sketch" in decision.reason
    # Within the margin, or where sketches are always applied, the current sketch is used.
    pinned_model(svc, name, use=(0.104, 0.0), plain=(0.1, 0.0))
    assert svc.query(sql).sketch == (name, 1)
    assert sibling(svc, sketch_use="always").query(sql).sketch == (name, 1)


def test_a_way_seldom_timed_and_estimated_close_is_tried_and_recorded_as_exploring(
    spark_svc: SketchService, ns: str
) -> None:
    svc = sibling(spark_svc, maintain_on_query="cost")
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(3000, 40, seed=26), sort_by=["a"])
    name, sql = captured(svc, table, "explore")
    plain = sorted_rows(svc.query(sql, use_sketches=False).table)
    # The current sketch is estimated a little faster, but the plain query was never timed.
    pinned_model(svc, name, runs=0, use=(0.1, 0.0), plain=(0.12, 0.0))
    tried = svc.query(sql)
    assert tried.sketch is None and sorted_rows(tried.table) == plain
    (decision,) = svc.costs.decisions(name, context="query")
    assert decision.action == "skip" and "exploring: timed 0 times (timed fewer than 3" in decision.reason
    assert "estimated within 50%" in decision.reason
    # Timed enough, the same figures keep the sketch in use.
    pinned_model(svc, name, use=(0.1, 0.0), plain=(0.12, 0.0))
    assert svc.query(sql).sketch == (name, 1)
    # A stale sketch: maintaining is estimated cheapest, the plain query close and never timed.
    DeltaGenerator(svc.tables, table, ("key",), seed=27).inserts(20).apply(svc.tables)
    lines = {"full": (9.0, 0.0), "incremental": (0.01, 0.0), "use": (0.1, 0.0), "plain": (0.12, 0.0)}
    pinned_model(svc, name, runs=0, **lines)
    assert svc.plan_maintenance(name, "cost").strategy == "skip"
    assert svc.plan_maintenance(name, "auto").strategy == "incremental"  # auto never explores
    pinned_model(svc, name, **lines)
    assert svc.plan_maintenance(name, "cost").strategy == "incremental"
    # The report that maintains the sketch uses it; at the next report the figures decide again.
    assert svc.query(sql).sketch == (name, 2)
    pinned_model(svc, name, use=(0.5, 0.0), plain=(0.1, 0.0))
    assert svc.query(sql).sketch is None


def test_a_fit_reads_the_newest_runs_of_each_operation_and_the_template_in_one_read(
    spark_svc: SketchService, ns: str
) -> None:
    svc = spark_svc
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(2000, 30, seed=31), sort_by=["a"])
    name, sql = captured(svc, table, "one_read", with_state=True)
    for k in range(2):
        DeltaGenerator(svc.tables, table, ("key",), seed=32 + k).inserts(10 + k).apply(svc.tables)
        svc.maintain(name, "incremental")
        svc.query(sql, use_sketches="always")
        svc.query(sql, use_sketches=False)

    recorded = svc.costs.recorded_runs(name, recent=1)
    assert recorded.template == template_key(sql)
    # The newest incremental run (11 delta rows), query with and without the sketch.
    assert [o.size for o in recorded.observations["incremental"]] == [11]
    assert [o.size for o in recorded.observations["use"]] == [2021]
    assert [o.size for o in recorded.observations["plain"]] == [2021]
    assert [o.size for o in recorded.observations["full"]] == [2000]  # the capture, as a recapture
    assert svc.costs.recorded_runs(name).observations["incremental"] != recorded.observations["incremental"]
    # Query runs are aged by the runs of the query (either way) after them: the last ran plain.
    everything = svc.costs.recorded_runs(name).observations
    ages = {op: sorted(o.age for o in everything[op]) for op in ("use", "plain")}
    assert ages["plain"][0] == 0.0 and ages["use"][0] == 1.0
    assert sorted(ages["use"] + ages["plain"]) == [
        float(k) for k in range(len(ages["use"]) + len(ages["plain"]))
    ]
    assert {o.age for o in everything["incremental"]} == {0.0}  # maintenance is not aged
    with pytest.raises(SketchNotFoundError):
        svc.costs.recorded_runs(f"{name}_unknown")


def test_a_sketch_s_share_is_the_rows_of_the_files_it_keeps(
    small_files: None, spark_svc: SketchService, ns: str
) -> None:
    """The cost model expects a query with the sketch to read the rows of the files that may
    hold its fragments, not its share of fragments: where the layout scatters them, a sketch of
    a few fragments reads every file."""
    svc = spark_svc
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(20_000, 200, seed=8), sort_by=["key"])
    assert len(svc.tables.pin(table).files) > 2
    top = f"SELECT key, b FROM {table} WHERE c > 0 ORDER BY b DESC, key LIMIT 3"
    clustered = svc.capture(top, name=f"{ns}_by_key", attributes={table: "key"}, fragments=100)
    scattered = svc.capture(top, name=f"{ns}_by_a", attributes={table: "a"}, fragments=100)
    kept_share = len(scattered.fragments[table]) / 100
    assert kept_share <= 0.05, "the sketch on a keeps a few fragments"
    # Every file holds every value of a: the sketch on it reads all of them.
    assert svc.context.partitions.sketch_share(scattered.name) == pytest.approx(1.0)
    # On the sort key the fragments it keeps lie in some of the files only: as many rows read.
    read = svc.sketch_files(clustered.name)[table]
    rows = sum(f.record_count for f in read.files) / sum(f.record_count for f in svc.tables.pin(table).files)
    assert svc.context.partitions.sketch_share(clustered.name) == pytest.approx(
        max(rows, len(clustered.fragments[table]) / 100)
    )
