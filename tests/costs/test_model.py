"""Fitting the linear cost models on synthetic timings, and choosing by them."""

from __future__ import annotations

import dataclasses
import random

import pytest

from sketch_core.costs import DEFAULT_PRIORS, CostModel, LinearCost, Observation, Situation, choose, fit
from sketch_core.costs.choose import seldom_timed, stale, steady_run
from sketch_core.errors import ConfigurationError

PRIOR = LinearCost(1.0, 1e-5)


def timings(
    fixed: float, per_row: float, sizes: list[int], noise: float = 0.0, seed: int = 1
) -> list[Observation]:
    rng = random.Random(seed)
    return [Observation(s, (fixed + per_row * s) * (1 + rng.uniform(-noise, noise))) for s in sizes]


def mean_size(runs: list[Observation]) -> float:
    return sum(o.size for o in runs) / len(runs)


def test_without_runs_the_prior_is_the_model() -> None:
    model = fit(PRIOR, [])
    assert (model.fixed, model.per_row, model.runs) == (1.0, 1e-5, 0)
    assert model.estimate(100_000) == pytest.approx(2.0)


def test_many_runs_recover_the_true_line_despite_noise() -> None:
    sizes = [1_000 * k for k in range(1, 201)]
    model = fit(PRIOR, timings(0.2, 3e-6, sizes, noise=0.05))
    # 200 runs against a prior worth 3: the fit is within a few percent of the truth.
    assert model.runs == 200
    assert model.per_row == pytest.approx(3e-6, rel=0.05)
    assert model.fixed == pytest.approx(0.2, rel=0.15)
    assert model.estimate(500_000) == pytest.approx(0.2 + 1.5, rel=0.05)


def test_few_runs_move_the_prior_only_part_of_the_way() -> None:
    # Two runs exactly on seconds = 0.1 + 1e-6 x: weight 2 / (2 + 3) on them, 3/5 on the prior.
    model = fit(PRIOR, timings(0.1, 1e-6, [10_000, 20_000]))
    assert model.runs == 2
    assert model.fixed == pytest.approx(0.6 * 1.0 + 0.4 * 0.1)
    assert model.per_row == pytest.approx(0.6 * 1e-5 + 0.4 * 1e-6)


def test_from_ten_runs_on_the_prior_is_left_out() -> None:
    line = timings(0.1, 1e-6, [10_000 * k for k in range(1, 11)])
    ten, nine = fit(PRIOR, line), fit(PRIOR, line[:9])
    assert (ten.fixed, ten.per_row) == (pytest.approx(0.1), pytest.approx(1e-6))
    assert nine.fixed == pytest.approx(0.25 * 1.0 + 0.75 * 0.1)  # 9 / (9 + 3) on the runs


def test_runs_at_one_size_scale_the_prior_keeping_its_shape() -> None:
    # Prior says 2s at 100,000 rows; three runs took 4s there: weight 3/6, scale 1 + 0.5 * (2 - 1).
    model = fit(PRIOR, [Observation(100_000, 4.0)] * 3)
    assert model.per_row / model.fixed == pytest.approx(PRIOR.per_row / PRIOR.fixed)
    assert model.estimate(100_000) == pytest.approx(3.0)


def test_coefficients_never_go_negative() -> None:
    # Timings that fall as the size grows (noise, caching): the slope is clamped at zero.
    falling = [Observation(1_000, 5.0), Observation(2_000, 4.0), Observation(3_000, 3.0)] * 20
    model = fit(PRIOR, falling)
    assert model.per_row >= 0 and model.fixed >= 0
    with pytest.raises(ConfigurationError, match=">= 0"):
        LinearCost(-1.0, 0.0)


def test_a_model_fits_each_operation_from_its_own_runs() -> None:
    model = CostModel.fitted({"incremental": timings(0.01, 1e-5, [10, 100, 1_000, 10_000] * 10)})
    assert model.costs["incremental"].runs == 40
    assert model.costs["capture"] == fit(DEFAULT_PRIORS["capture"], [])
    with pytest.raises(ConfigurationError, match="unknown operations"):
        CostModel.fitted({"recapture": []})


def model_of(**lines: tuple[float, float]) -> CostModel:
    costs = dict(DEFAULT_PRIORS)
    costs.update({op: LinearCost(a, b) for op, (a, b) in lines.items()})
    return CostModel(costs)


# One million rows; capture 3s, use 0.2s, plain 1.2s, incremental 0.05s + 20us/row.
MODEL = model_of(full=(2.0, 1e-6), use=(0.1, 1e-7), plain=(0.2, 1e-6), incremental=(0.05, 2e-5))


def test_the_choice_is_the_cheapest_total_by_hand() -> None:
    small = choose(MODEL, Situation(1_000_000, 100, queries=1))
    # incremental 0.05 + 0.002 + 0.2 = 0.252; full 3 + 0.2 = 3.2; skip 1.2.
    assert small.action == "incremental"
    assert small.estimates == pytest.approx({"incremental": 0.252, "full": 3.2, "skip": 1.2})
    assert small.reason.startswith("incremental is cheapest: incremental 0.252s, skip 1.2s, full 3.2s")
    # A big delta with one query: incremental 0.05 + 4 + 0.2 = 4.25 > skip 1.2.
    assert choose(MODEL, Situation(1_000_000, 200_000, queries=1)).action == "skip"
    # The same delta with ten queries: full 3 + 2 = 5 < incremental 6.05 < skip 12.
    assert choose(MODEL, Situation(1_000_000, 200_000, queries=10)).action == "full"
    # No query before the next update: nothing is worth doing now.
    assert choose(MODEL, Situation(1_000_000, 100, queries=0)).action == "skip"


def test_a_horizon_brings_up_a_sketch_left_behind_when_steady_savings_pay_the_catch_up_back() -> None:
    # Use 0.15s, plain 0.2s; incremental 0.01s + 1ms/row. Twenty loads of 20 rows behind (400
    # rows), one report per load: catching up costs 0.41 + 0.15 = 0.56s against 0.2s plain now
    # (myopic: skip), but each later report then costs 0.03 + 0.15 = 0.18s against 0.2s.
    model = model_of(full=(5.0, 0.0), use=(0.15, 0.0), plain=(0.2, 0.0), incremental=(0.01, 1e-3))
    behind = Situation(1_000_000, 400, queries=1, loads=20)
    assert choose(model, behind).action == "skip"
    # Ten runs ahead do not pay back the 0.36s extra (0.2s saved): skip 0.2*11 = 2.2 against
    # incremental 0.56 + 10*0.18 = 2.36.
    ten = choose(model, dataclasses.replace(behind, horizon=10))
    assert ten.action == "skip" and ten.estimates == pytest.approx(
        {"incremental": 2.36, "full": 6.95, "skip": 2.2}
    )
    assert ten.reason.endswith("and the 10 runs after them, 1 per load)")
    # Thirty do: incremental 0.56 + 30*0.18 = 5.96 against skip 6.2.
    assert choose(model, dataclasses.replace(behind, horizon=30)).action == "incremental"
    # Just one load behind, ten ahead pay the 0.01s extra back at once.
    assert choose(model, Situation(1_000_000, 20, queries=1, loads=1, horizon=10)).action == "incremental"
    # Without steady savings (each run's maintenance dearer than what the sketch saves) the
    # horizon changes nothing: plain now and later.
    dear = model_of(full=(5.0, 0.0), use=(0.15, 0.0), plain=(0.2, 0.0), incremental=(0.06, 1e-3))
    far = choose(dear, Situation(1_000_000, 20, queries=1, loads=1, horizon=100))
    assert far.action == "skip" and far.estimates["skip"] == pytest.approx(0.2 * 101)
    # A later run may take only the allowed ways: without incremental, a recapture per run
    # (5.15s) is dearer than plain, so the steady cost is plain's.
    only_full = choose(model, dataclasses.replace(behind, horizon=10), allowed=("full", "skip"))
    assert only_full.estimates == pytest.approx({"full": 5.15 + 10 * 0.2, "skip": 2.2})


def test_the_steady_cost_spreads_one_loads_maintenance_over_its_runs_or_covers_loads_between_runs() -> None:
    model = model_of(full=(5.0, 0.0), use=(0.15, 0.0), plain=(0.2, 0.0), incremental=(0.01, 1e-3))
    # Five runs per load: one maintenance over 20 rows (0.03s) serves five: 0.006 + 0.15.
    five = Situation(1_000_000, 20, queries=5, loads=1, horizon=10)
    assert steady_run(model, five) == pytest.approx(0.156)
    # One run per five loads (rate 0.2): each run would first maintain over five loads' 100
    # rows, 0.11 + 0.15 = 0.26s, dearer than plain's 0.2s; so the steady way is plain, and skip.
    sparse = Situation(1_000_000, 100, queries=1, loads=5, rate=0.2, horizon=10)
    assert steady_run(model, sparse) == pytest.approx(0.2)
    assert choose(model, sparse).action == "skip"
    # Cheaper maintenance (0.01s + 0.1ms/row): 0.02 + 0.15 per run beats plain.
    cheap = model_of(full=(5.0, 0.0), use=(0.15, 0.0), plain=(0.2, 0.0), incremental=(0.01, 1e-4))
    assert steady_run(cheap, sparse) == pytest.approx(0.17)
    # No runs expected: nothing to gain later.
    assert steady_run(model, dataclasses.replace(sparse, rate=0.0)) == pytest.approx(0.2)
    # Recapture shared by many runs per load can be the steady way: 5.0 / 100 + 0.15 = 0.2 ties
    # plain, 200 runs make it cheaper.
    many = Situation(1_000_000, 20, queries=200, loads=1, horizon=10)
    assert steady_run(model, many, allowed=("full", "skip")) == pytest.approx(5.0 / 200 + 0.15)


def test_exploring_tries_a_way_seldom_timed_whose_estimate_is_close_to_the_best() -> None:
    # incremental 0.252 (timed often), skip 0.3 (plain timed once): within 50%, tried.
    model = model_of(full=(2.0, 1e-6), use=(0.1, 1e-7), plain=(0.2, 1e-7), incremental=(0.05, 2e-5))
    timed = {op: dataclasses.replace(cost, runs=10) for op, cost in model.costs.items()}
    seldom = CostModel({**timed, "plain": dataclasses.replace(timed["plain"], runs=1)})
    situation = Situation(1_000_000, 100, queries=1)
    assert choose(seldom, situation).action == "incremental"  # without exploring: the cheapest
    tried = choose(seldom, situation, explore=True)
    assert tried.action == "skip" and tried.reason.startswith("skip, exploring: its cost was timed 1 times")
    assert "fewer than 3 times and estimated within 50% of incremental" in tried.reason
    # Timed enough times, or estimated too far from the best: the cheapest.
    assert choose(CostModel(timed), situation, explore=True).action == "incremental"
    far = CostModel({**seldom.costs, "plain": LinearCost(0.2, 1e-6, runs=1)})  # skip 1.2 > 1.5 * 0.252
    assert choose(far, situation, explore=True).action == "incremental"
    # Not allowed: never tried.
    assert choose(seldom, situation, ("incremental", "full"), explore=True).action == "incremental"


def test_a_close_query_is_timed_again_once_per_twenty_runs_of_the_best() -> None:
    # incremental 0.252 per report (timed 100 times); skip 0.28 (plain timed 3 times, long ago):
    # at most twice the best, so plain is run again while it has fewer than 100 / 20 = 5 runs.
    lines = {"full": (2.0, 1e-6), "use": (0.1, 1e-7), "plain": (0.18, 1e-7), "incremental": (0.05, 2e-5)}

    def timed(runs: dict[str, int], **changed: tuple[float, float]) -> CostModel:
        costs = {op: LinearCost(*line, runs=100) for op, line in (lines | changed).items()}
        costs.update({op: dataclasses.replace(costs[op], runs=n) for op, n in runs.items()})
        return CostModel({**DEFAULT_PRIORS, **costs})

    situation = Situation(1_000_000, 100, queries=1)
    retimed = choose(timed({"plain": 3}), situation, explore=True)
    assert retimed.action == "skip" and "timed 3 times" in retimed.reason
    # The reason names the rule that fired: the re-timing margin, not the first runs' 50%.
    assert "once per 20 runs of incremental and estimated within 300% of incremental" in retimed.reason
    assert seldom_timed(timed({"plain": 4}), "plain", "incremental")
    assert choose(timed({"plain": 3}), situation).action == "incremental"  # not exploring
    assert choose(timed({"plain": 3}, plain=(0.4, 1e-7)), situation, explore=True).action == "skip"  # 0.5
    # Once it has its share of runs: the best.
    assert choose(timed({"plain": 5}), situation, explore=True).action == "incremental"
    # Timed fewer than ten times (its runs may all be cold ones), it is run again while
    # estimated at most four times the best: 0.6 is, 1.1 is not.
    few = choose(timed({"plain": 3}, plain=(0.5, 1e-7)), situation, explore=True)
    assert few.action == "skip" and "estimated within 300% of incremental" in few.reason
    assert choose(timed({"plain": 3}, plain=(1.0, 1e-7)), situation, explore=True).action == "incremental"
    # Timed ten times, its runs are trusted: over twice the best (0.6 > 2 * 0.252), not again.
    many = timed({"plain": 10, "incremental": 300}, plain=(0.5, 1e-7))
    assert seldom_timed(many, "plain", "incremental")
    assert choose(many, situation, explore=True).action == "incremental"
    # Maintenance is not run again for its timing once timed 3 times: skip (0.2) stays, though
    # incremental (0.252) is close and seldom timed.
    cheap_plain = {"plain": (0.1, 1e-7)}
    assert choose(timed({"incremental": 3}, **cheap_plain), situation, explore=True).action == "skip"
    assert choose(timed({"incremental": 2}, **cheap_plain), situation, explore=True).action == "incremental"


def test_recent_runs_of_the_query_count_more_than_old_ones() -> None:
    # Ten runs at 0.3 s, 100 to 109 runs ago; five at 0.2 s just now: the old ones count a
    # quarter each (half-life 50), so the estimate is nearer 0.2 than the plain mean (0.267).
    old = [Observation(1000, 0.3, age=100 + k) for k in range(10)]
    new = [Observation(1000, 0.2, age=k) for k in range(5)]
    flat = LinearCost(0.1, 0.0)
    assert fit(flat, old + new).estimate(1000) == pytest.approx(4 / 15)
    recent = fit(flat, old + new, half_life=50)
    assert 0.2 < recent.estimate(1000) < 0.24 and recent.runs == 15 and recent.since_timed == 0
    assert fit(flat, old, half_life=50).since_timed == 100  # last timed 100 runs ago
    assert fit(flat, old).since_timed is None  # not aged: unknown
    # Over a range of sizes the line follows the recent runs too: old runs on a steeper line.
    steep = [Observation(s, 0.1 + 1e-6 * s, age=200 + s / 1000) for s in (1000, 50_000, 100_000)]
    gentle = [Observation(s, 0.1 + 1e-7 * s, age=s / 1000) for s in (1000, 50_000, 100_000)]
    line = fit(flat, steep + gentle, half_life=50)
    assert line.per_row == pytest.approx(1e-7, rel=0.2)


def test_a_close_way_not_run_for_long_is_run_again() -> None:
    # use 0.2 per report, timed often; plain 0.24 (within 25%), its newest run 30 runs ago.
    lines = {"full": (2.0, 0.0), "use": (0.2, 0.0), "plain": (0.24, 0.0), "incremental": (0.01, 0.0)}

    def model(since: float | None, plain: float = 0.24) -> CostModel:
        costs = {op: LinearCost(*line, runs=200) for op, line in lines.items()}
        costs["plain"] = LinearCost(plain, 0.0, runs=40, since_timed=since)
        return CostModel({**DEFAULT_PRIORS, **costs})

    situation = Situation(1_000_000, 10, queries=1)
    assert stale(model(30), "plain") and not stale(model(19), "plain") and not stale(model(None), "plain")
    retimed = choose(model(30), situation, explore=True)
    assert retimed.action == "skip" and "last timed 30 runs of the query ago" in retimed.reason
    assert choose(model(10), situation, explore=True).action == "incremental"  # timed lately
    assert choose(model(30, plain=0.3), situation, explore=True).action == "incremental"  # not close
    assert choose(model(30), situation).action == "incremental"  # not exploring


def test_a_sketch_left_behind_is_brought_up_to_time_its_query_again() -> None:
    # Skipping is best (plain 0.2 per report against 0.21 + maintenance); the query with the
    # sketch was last timed 40 runs ago: catching up incrementally is tried, if close.
    def model(use: float, since: float) -> CostModel:
        costs = {
            "full": LinearCost(2.0, 0.0, runs=5),
            "incremental": LinearCost(0.01, 0.0, runs=50),
            "plain": LinearCost(0.2, 0.0, runs=200, since_timed=0),
            "use": LinearCost(use, 0.0, runs=200, since_timed=since),
        }
        return CostModel({**DEFAULT_PRIORS, **costs})

    situation = Situation(1_000_000, 20, queries=1, horizon=10)
    assert choose(model(0.21, 40), situation).action == "skip"
    tried = choose(model(0.21, 40), situation, explore=True)
    assert tried.action == "incremental" and "last timed 40 runs of the query ago" in tried.reason
    assert choose(model(0.21, 5), situation, explore=True).action == "skip"  # timed lately
    assert choose(model(0.4, 40), situation, explore=True).action == "skip"  # far dearer
    assert choose(model(0.21, 40), situation, ("incremental", "skip"), explore=True).action == "incremental"
    only_full = choose(model(0.21, 40), situation, ("full", "skip"), explore=True)
    assert only_full.action == "skip"  # caught up only incrementally
    # Timed lately, but half way to the loads after which only a recapture brings it up: the
    # last chance to catch up incrementally.
    limited = dataclasses.replace(situation, loads=50, history_loads=100)
    late = choose(model(0.21, 5), limited, explore=True)
    assert late.action == "incremental" and "50 loads behind, half way to needing a recapture" in late.reason
    assert choose(model(0.21, 5), dataclasses.replace(limited, loads=49), explore=True).action == "skip"
    assert choose(model(0.4, 5), limited, explore=True).action == "skip"  # far dearer


def test_the_choice_keeps_to_the_allowed_actions() -> None:
    forced = choose(MODEL, Situation(1_000_000, 200_000, queries=1), allowed=("incremental", "full"))
    assert forced.action == "full" and set(forced.estimates) == {"incremental", "full"}
    with pytest.raises(ConfigurationError):
        choose(MODEL, Situation(1, 1, 1), allowed=("recapture",))


def test_until_timed_the_query_with_the_sketch_reads_its_share_of_the_plain_querys_rows() -> None:
    plain_runs = timings(0.2, 1e-6, [1_000_000] * 5 + [2_000_000] * 5)
    model = CostModel.fitted({"plain": plain_runs}, share=0.1)
    plain, use = model.costs["plain"], model.costs["use"]
    assert use.runs == 0 and use.fixed == pytest.approx(plain.fixed)
    assert use.per_row == pytest.approx(plain.per_row * 0.1)
    # Without a share there is no expected speedup: the prior is as slow as the plain query.
    assert CostModel.fitted({}).costs["use"] == fit(DEFAULT_PRIORS["use"], [])
    # Timed runs with the sketch take over from the share.
    timed = CostModel.fitted(
        {"plain": plain_runs, "use": timings(0.1, 0.0, [1_000_000, 2_000_000] * 30)}, share=0.1
    )
    assert timed.costs["use"].estimate(1_000_000) == pytest.approx(0.1, rel=0.1)


def test_an_untimed_plain_query_is_scaled_like_the_timed_runs_with_the_sketch() -> None:
    prior_plain = DEFAULT_PRIORS["plain"]
    # This machine runs the query with the sketch at a third of what its prior expected.
    share, rows = 0.05, 200_000
    expected_use = prior_plain.fixed + share * prior_plain.per_row * rows
    used = [Observation(rows, expected_use / 3)] * 60
    model = CostModel.fitted({"use": used}, share=share)
    plain = model.costs["plain"]
    scale = model.costs["use"].estimate(rows) / expected_use
    assert scale == pytest.approx(1 / 3, rel=1e-6)  # 60 runs: the prior is retired
    assert plain.runs == 0 and plain.basis.startswith("prior scaled")
    assert plain.fixed == pytest.approx(prior_plain.fixed * scale)
    assert plain.per_row == pytest.approx(prior_plain.per_row * scale)
    assert "prior scaled" in plain.describe()
    # Once the plain query has runs of its own, they decide its line.
    timed = CostModel.fitted({"use": used, "plain": [Observation(rows, 2.0)] * 60}, share=share)
    assert timed.costs["plain"].runs == 60 and timed.costs["plain"].estimate(rows) == pytest.approx(2.0)
    # No runs with the sketch: nothing to scale by, the prior stands.
    assert CostModel.fitted({}, share=share).costs["plain"] == fit(prior_plain, [])


def test_runs_at_nearly_one_size_scale_the_prior_instead_of_fitting_noise() -> None:
    # A table of steady size: 200,000 rows give or take a load, timings with 30% noise. A line
    # through them would have a slope of the noise over a few rows (seconds per row).
    runs = timings(0.2, 0.0, [200_000 + 20 * (k % 3) for k in range(30)], noise=0.3, seed=4)
    model = fit(PRIOR, runs)
    mean = sum(o.seconds for o in runs) / len(runs)
    # The prior scaled to the runs' mean (none is an outlier; 30 runs retire the prior).
    assert model.estimate(mean_size(runs)) == pytest.approx(mean, rel=1e-9)
    # Below ten runs the prior still counts as three.
    few = runs[:6]
    prior_at = PRIOR.estimate(mean_size(few))
    expected = (3 / 9) * prior_at + (6 / 9) * sum(o.seconds for o in few) / 6
    assert fit(PRIOR, few).estimate(mean_size(few)) == pytest.approx(expected, rel=1e-9)
    assert model.per_row / model.fixed == pytest.approx(PRIOR.per_row / PRIOR.fixed)


def test_cold_runs_at_one_size_are_left_out_of_the_fit_but_counted_as_timed() -> None:
    # The plain query run seldom: its first three runs cold (a plan compiled for the first time,
    # a JVM warming up), four later ones at its steady cost.
    cold, steady = [0.9, 0.8, 0.75], [0.3, 0.31, 0.29, 0.3]
    runs = [Observation(200_000, s) for s in cold + steady]
    model = fit(PRIOR, runs)
    assert model.runs == 7  # timed seven times: no need to run it again to learn it
    prior_at = PRIOR.estimate(200_000)
    expected = (3 / 7) * prior_at + (4 / 7) * sum(steady) / 4  # the steady runs alone
    assert model.estimate(200_000) == pytest.approx(expected, rel=1e-6)
    # A run at twice the median is noise, not an outlier; nor is anything when runs are few.
    kept = [Observation(200_000, s) for s in (0.3, 0.3, 0.6)]
    assert fit(PRIOR, kept).estimate(200_000) == pytest.approx(0.5 * prior_at + 0.5 * 0.4)
    few = [Observation(200_000, s) for s in (0.3, 3.0)]
    assert fit(PRIOR, few).estimate(200_000) == pytest.approx(0.6 * prior_at + 0.4 * 1.65)


def test_a_plain_query_timed_once_is_fitted_on_the_prior_scaled_like_the_runs_with_the_sketch() -> None:
    # The sketch is kept current and used 80 times; the query ran once without it (0.2 s).
    share, rows = 0.05, 200_000
    used = [Observation(rows, 0.25)] * 80
    once = [Observation(rows, 0.2)]
    prior = DEFAULT_PRIORS["plain"]
    model = CostModel.fitted({"use": used, "plain": once}, share=share)
    expected_use = prior.fixed + share * prior.per_row * rows  # by the plain prior
    scale = 0.25 / expected_use  # 80 runs with the sketch: their line, the prior retired
    scaled_at = prior.estimate(rows) * scale
    assert model.costs["plain"].runs == 1
    assert model.costs["plain"].estimate(rows) == pytest.approx(0.75 * scaled_at + 0.25 * 0.2, rel=1e-6)
    # Below what the unscaled prior and the one run give: the runs with the sketch showed this
    # machine faster than the prior thinks.
    assert model.costs["plain"].estimate(rows) < fit(prior, once).estimate(rows)
