"""Stratified samples and sample-based selectivity estimates (pure), on data with known answers."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pytest

from sketch_core.attribute_choice.estimation import (
    AggregateInput,
    CandidateFragments,
    ResultSelection,
    SampleEstimator,
    SelectivityEstimate,
    _Resampler,
)
from sketch_core.attribute_choice.query import sample_partition
from sketch_core.attribute_choice.sampling import StratifiedSample, draw_stratified, quota, stratum_ids
from sketch_core.errors import SamplingError
from sketch_core.partitions import RangePartition


def grouped_table(groups: int, rows_per_group: int, seed: int = 1, step: float = 1.0) -> pa.Table:
    """Group g has rows_per_group rows; its values average about ``step * g`` (unit noise), so
    larger groups sum more; ``spread`` is uniform over 0..9999 independently of the group."""
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(groups), rows_per_group)
    return pa.table(
        {
            "g": g,
            "v": step * g + rng.normal(0, 1, len(g)),
            "spread": rng.integers(0, 10_000, len(g)),
        }
    )


def estimator_for(
    sample: StratifiedSample, selection: ResultSelection, passes: np.ndarray | None = None
) -> SampleEstimator:
    # Group ids in the order of the group values: id i is group value i (every group is sampled).
    values = sample.rows.column("g").to_numpy()
    order = np.unique(values)
    return SampleEstimator.over_sample(
        sample,
        np.searchsorted(order, values),
        len(order),
        [
            AggregateInput("n", "count"),
            AggregateInput("s", "sum", sample.rows.column("v").to_numpy()),
            AggregateInput("a", "avg", sample.rows.column("v").to_numpy()),
            AggregateInput("hi", "max", sample.rows.column("v").to_numpy()),
        ],
        selection,
        passes,
    )


def candidates_for(sample: StratifiedSample) -> dict[str, CandidateFragments]:
    by_group = RangePartition("t", "g", tuple(range(1, 100)))  # one fragment per group value
    spread = RangePartition("t", "spread", tuple(range(100, 10_000, 100)))  # 100 fragments
    return {
        "g": CandidateFragments(by_group.fragments_of(sample.rows.column("g").to_numpy()), 100, True),
        "spread": CandidateFragments(spread.fragments_of(sample.rows.column("spread").to_numpy()), 100),
    }


def true_fragments(table: pa.Table, chosen_groups: set[int], column: str, width: int) -> int:
    g = table.column("g").to_numpy()
    values = table.column(column).to_numpy()[np.isin(g, list(chosen_groups))]
    return len(np.unique(values // width))


# -- sampling --------------------------------------------------------------------------------
def test_every_stratum_keeps_its_quota_of_its_own_rows() -> None:
    table = pa.table({"g": np.repeat([0, 1, 2], [1, 40, 1000]), "x": np.arange(1041)})
    sample = draw_stratified(table, ["g"], rate=0.1, seed=3)
    assert sample.stratified
    assert list(sample.stratum_rows) == [1, 40, 1000]
    assert list(sample.stratum_samples) == [quota(1, 0.1), quota(40, 0.1), quota(1000, 0.1)] == [1, 4, 100]
    # Each sampled row is a row of its stratum, and no row is drawn twice.
    rows = sample.rows.to_pydict()
    assert len(set(rows["x"])) == len(rows["x"]) == 105
    assert all(table.column("g")[x].as_py() == g for x, g in zip(rows["x"], rows["g"], strict=True))
    assert np.allclose(np.bincount(sample.strata, weights=sample.weights()), [1, 40, 1000])


def test_the_same_seed_draws_the_same_sample_and_another_seed_another() -> None:
    table = grouped_table(10, 200)
    first = draw_stratified(table, ["g"], 0.05, seed=7).rows.column("v").to_pylist()
    assert first == draw_stratified(table, ["g"], 0.05, seed=7).rows.column("v").to_pylist()
    assert first != draw_stratified(table, ["g"], 0.05, seed=8).rows.column("v").to_pylist()


def test_too_many_groups_are_sampled_whole() -> None:
    table = pa.table({"g": np.repeat(np.arange(1000), 3), "x": np.arange(3000)})  # 150-row sample
    sample = draw_stratified(table, ["g"], rate=0.05, seed=1)
    assert not sample.stratified and sample.whole_groups
    kept = sample.rows.column("g").to_numpy()
    assert np.all(np.bincount(kept)[np.unique(kept)] == 3)  # every kept group is complete
    assert 20 < len(np.unique(kept)) < 90  # about 50 of the 1,000 groups
    assert np.allclose(sample.weights(), 1) and sample.population_scale == 20


def many_small_groups(seed: int) -> pa.Table:
    """20,000 groups of 4 rows: too many to stratify, so a 5% sample keeps whole groups."""
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(20_000), 4)
    return pa.table({"g": g, "v": rng.integers(1, 50, len(g)), "spread": rng.integers(0, 10_000, len(g))})


def whole_group_estimate(table: pa.Table, selection: ResultSelection) -> SelectivityEstimate:
    """The estimate of a sketch on ``g`` (1,000 fragments of 20 groups) of ``SUM(v)`` per group
    under ``selection``, from a 5% sample of whole groups."""
    sample = draw_stratified(table, ["g"], rate=0.05, seed=2)
    assert sample.whole_groups and sample.population_scale > 1
    values = sample.rows.column("g").to_numpy()
    order = np.unique(values)
    estimator = SampleEstimator.over_sample(
        sample,
        np.searchsorted(order, values),
        len(order),
        [AggregateInput("s", "sum", sample.rows.column("v").to_numpy())],
        selection,
    )
    by_group = RangePartition("t", "g", tuple(range(20, 20_000, 20)))
    candidate = CandidateFragments(by_group.fragments_of(values), 1000, determined_by_group=True)
    return estimator.estimate({"g": candidate}, replicates=5).candidates["g"]


def test_a_sample_of_whole_groups_estimates_many_group_having_queries() -> None:
    """One row per group in a uniform sample would decide each group's HAVING by noise; whole
    groups decide it exactly, and the sketch's size is scaled up from the groups kept."""
    table = many_small_groups(seed=3)
    totals = np.bincount(table.column("g").to_numpy(), weights=table.column("v").to_numpy())
    threshold = np.percentile(totals, 99)  # 200 groups qualify
    estimate = whole_group_estimate(table, ResultSelection(having=lambda e: e["s"] > threshold))
    truth = len(np.unique(np.flatnonzero(totals > threshold) // 20)) / 1000
    assert abs(estimate.fragment_share - truth) / truth < 0.4


def test_null_group_values_form_their_own_stratum() -> None:
    table = pa.table({"g": pa.array([None, None, 1, 1, 2, 2], type=pa.int64())})
    _, count = stratum_ids(table, ["g"])
    assert count == 3


@pytest.mark.parametrize("rate", [0, 1.5])
def test_a_bad_rate_is_refused(rate: float) -> None:
    with pytest.raises(SamplingError, match="sample rate"):
        draw_stratified(grouped_table(2, 10), ["g"], rate)


# -- estimates with the full table as the "sample": exact answers ----------------------------
def test_a_sample_of_everything_gives_the_exact_aggregates_result_and_sketch() -> None:
    table = grouped_table(100, 50)
    sample = draw_stratified(table, ["g"], rate=1.0)
    threshold = 90 * 50  # groups 90..99 have sums above it
    estimator = estimator_for(sample, ResultSelection(having=lambda e: e["s"] > threshold))
    estimation = estimator.estimate(candidates_for(sample), replicates=5)

    v, g = table.column("v").to_numpy(), table.column("g").to_numpy()
    assert np.allclose(estimation.groups.values["s"], np.bincount(g, weights=v))
    assert np.allclose(estimation.groups.values["n"], 50)
    assert np.allclose(estimation.groups.values["a"], np.bincount(g, weights=v) / 50)
    assert np.allclose(estimation.groups.values["hi"], [v[g == i].max() for i in range(100)])
    chosen = set(np.flatnonzero(estimation.groups.selected))
    assert chosen == {i for i in range(100) if v[g == i].sum() > threshold}
    # Every sampled row is the row itself: the sketch sizes are the true ones.
    assert estimation.candidates["g"].point == len(chosen) / 100
    assert estimation.candidates["spread"].point == true_fragments(table, chosen, "spread", 100) / 100


def test_top_k_returns_exactly_k_groups_in_every_replicate() -> None:
    table = grouped_table(100, 50)
    sample = draw_stratified(table, ["g"], rate=0.2, seed=2)
    estimator = estimator_for(sample, ResultSelection(order_by="s", descending=True, limit=5))
    estimation = estimator.estimate(candidates_for(sample), replicates=20)
    assert estimation.groups.selected.sum() == 5
    assert estimation.groups.in_result.sum() == pytest.approx(5)
    # Group sums grow with the group value, by far more than the sampling noise.
    assert set(np.flatnonzero(estimation.groups.selected)) == {95, 96, 97, 98, 99}
    assert estimation.candidates["g"].selectivity == pytest.approx(0.05)


def test_the_where_clause_keeps_rows_out_of_aggregates_and_provenance() -> None:
    table = grouped_table(20, 100)
    sample = draw_stratified(table, ["g"], rate=1.0)
    passes = sample.rows.column("spread").to_numpy() < 5_000
    estimator = estimator_for(sample, ResultSelection(), passes)  # every group is in the result
    estimation = estimator.estimate(candidates_for(sample), replicates=3)
    g, spread = table.column("g").to_numpy(), table.column("spread").to_numpy()
    assert np.allclose(estimation.groups.values["n"], np.bincount(g[spread < 5_000], minlength=20))
    assert estimation.candidates["spread"].point == 0.5  # only fragments below 5,000


# -- estimates from real samples --------------------------------------------------------------
def test_groups_far_from_the_having_threshold_are_decided_with_confidence() -> None:
    table = grouped_table(100, 200)
    sample = draw_stratified(table, ["g"], rate=0.05, seed=4)
    estimator = estimator_for(sample, ResultSelection(having=lambda e: e["a"] > 49.5))
    estimation = estimator.estimate(candidates_for(sample), replicates=50, seed=1)
    p = estimation.groups.in_result
    assert np.all(p[:45] == 0) and np.all(p[55:] == 1)
    assert estimation.candidates["g"].selectivity == pytest.approx(0.5, abs=0.02)


def test_the_sketch_size_of_a_spread_attribute_is_estimated_within_a_tenth() -> None:
    """Non-group attribute: the sample sees few of each group's fragments; GEE scales them up."""
    table = grouped_table(100, 200, seed=5)
    chosen = set(range(97, 100))  # three groups: about 600 rows over 100 fragments of `spread`
    truth = true_fragments(table, chosen, "spread", 100)
    errors, naive_errors = [], []
    for seed in range(10):
        sample = draw_stratified(table, ["g"], rate=0.1, seed=seed)
        estimator = estimator_for(sample, ResultSelection(having=lambda e: e["a"] > 96.5))
        estimate = estimator.estimate(candidates_for(sample), replicates=20, seed=seed)
        errors.append(abs(estimate.candidates["spread"].fragments - truth) / truth)
        # Counting only the fragments the sample saw: ~60 rows show ~45 of them.
        g, spread = sample.rows.column("g").to_numpy(), sample.rows.column("spread").to_numpy()
        naive_errors.append(abs(len(np.unique(spread[g >= 97] // 100)) - truth) / truth)
    assert float(np.median(errors)) < 0.1 < 0.3 < float(np.median(naive_errors))


@pytest.mark.parametrize(
    "draw",
    [
        lambda rng, n: rng.normal(10, 3, n),
        lambda rng, n: rng.exponential(5, n),
        lambda rng, n: rng.lognormal(1, 0.5, n),
    ],
    ids=["normal", "exponential", "lognormal"],
)
def test_the_bootstrap_interval_covers_the_true_sum_about_as_often_as_it_claims(
    draw: Callable[[np.random.Generator, int], np.ndarray],
) -> None:
    rng = np.random.default_rng(11)
    covered, trials = 0, 200
    population = draw(rng, 4_000)
    table = pa.table({"g": np.zeros(4_000, dtype=np.int64), "v": population, "spread": np.zeros(4_000)})
    truth = population.sum()
    for trial in range(trials):
        sample = draw_stratified(table, ["g"], rate=0.05, seed=trial)  # 200 rows
        estimator = estimator_for(sample, ResultSelection())
        groups = estimator.estimate({}, replicates=50, seed=trial).groups
        covered += bool(groups.low["s"][0] <= truth <= groups.high["s"][0])
    # Nominal 95%; percentile intervals from 200-row samples land a little under it.
    assert 0.88 <= covered / trials <= 0.99


def test_with_many_fragments_the_estimate_keeps_within_gee_ratio_error_bound() -> None:
    """600 provenance rows over 1,000 fragments of ``spread`` (about 450 of them hit), seen
    through 60 sampled rows: GEE's guarantee is a ratio error of at most sqrt(N / s)."""
    table = grouped_table(100, 200, seed=6, step=5.0)  # group means 5 apart: no doubt which qualify
    fine = RangePartition("t", "spread", tuple(range(10, 10_000, 10)))
    truth = true_fragments(table, set(range(97, 100)), "spread", 10)
    sample = draw_stratified(table, ["g"], rate=0.1, seed=1)
    estimator = estimator_for(sample, ResultSelection(having=lambda e: e["a"] > 96.5 * 5))
    spread = CandidateFragments(fine.fragments_of(sample.rows.column("spread").to_numpy()), 1000)
    estimate = estimator.estimate({"spread": spread}, replicates=10).candidates["spread"]
    bound = np.sqrt(600 / 60)
    assert 1 / bound <= estimate.fragments / truth <= bound
    assert estimate.low <= estimate.selectivity <= estimate.high


def test_cuts_from_a_sample_keep_strings_with_trailing_nuls_apart() -> None:
    values = np.array(["b", "a\x00", "a", None, "c", "a\x00\x00"], dtype=object)
    partition = sample_partition(values, 3)
    assert partition is not None and partition.cuts == ("a\x00", "b")
    assert partition.fragments_of(values).tolist() == [partition.fragment_of(v) for v in values]


def test_a_top_k_over_whole_groups_is_not_scaled_up_to_the_table() -> None:
    """A sample of whole groups stands for ``scale`` times as many groups in a HAVING result,
    but a top-k result holds k groups whatever the sample: its sketch is the fragments of the k
    groups the sample returns."""
    table = many_small_groups(seed=4)
    estimate = whole_group_estimate(table, ResultSelection(order_by="s", descending=True, limit=10))
    assert estimate.fragments <= 10  # ten groups occupy at most ten fragments


# -- each replicate's aggregates --------------------------------------------------------------
@pytest.mark.parametrize("all_pass", [True, False])
def test_a_replicates_aggregates_are_the_weighted_aggregates_of_its_rows(all_pass: bool) -> None:
    """Over any resample (rows repeated, some left out), each group's COUNT(*), COUNT, SUM and
    AVG weigh every passing row whose argument is not NULL, and MIN and MAX take its extremes;
    a group none of whose rows pass does not exist."""
    rng = np.random.default_rng(7)
    rows, groups = 3_000, 40
    group_of = rng.integers(0, groups, rows)
    values = rng.normal(10, 5, rows)
    values[rng.random(rows) < 0.1] = np.nan  # NULL arguments
    passes = np.ones(rows, dtype=bool) if all_pass else rng.random(rows) < 0.7
    weights = rng.uniform(1, 5, rows)
    estimator = SampleEstimator(
        weights,
        group_of,  # one stratum per group
        np.bincount(group_of, minlength=groups),
        group_of,
        groups + 1,  # the last group has no rows
        [
            AggregateInput("n", "count"),
            AggregateInput("c", "count", values),
            AggregateInput("s", "sum", values),
            AggregateInput("a", "avg", values),
            AggregateInput("lo", "min", values),
            AggregateInput("hi", "max", values),
        ],
        ResultSelection(),
        passes,
    )
    index = rng.integers(0, rows, rows)
    got, exists = estimator.aggregate_estimates(index)
    for g in range(groups + 1):
        picked = index[(group_of[index] == g) & passes[index]]
        valued = picked[~np.isnan(values[picked])]
        assert exists[g] == (len(picked) > 0)
        assert got["n"][g] == pytest.approx(weights[picked].sum())
        assert got["c"][g] == pytest.approx(weights[valued].sum())
        if len(valued) == 0:
            assert all(np.isnan(got[name][g]) for name in ("s", "a", "lo", "hi"))
            continue
        assert got["s"][g] == pytest.approx((weights[valued] * values[valued]).sum())
        assert got["a"][g] == pytest.approx(np.average(values[valued], weights=weights[valued]))
        assert got["lo"][g] == values[valued].min()
        assert got["hi"][g] == values[valued].max()


@pytest.mark.parametrize("all_given", [True, False])
def test_a_resample_draws_each_stratum_from_its_own_given_rows(all_given: bool) -> None:
    """Every stratum is drawn again at its sample's size, with replacement: all of its draws
    land on its own rows when every sampled row is given; when half failed the query, only the
    draws landing on given rows are returned (about half of the stratum's sample)."""
    strata = np.repeat(np.arange(50), 20)
    samples = np.full(50, 20 if all_given else 40)
    resampler = _Resampler(strata, samples)
    draws = [resampler.draw(np.random.default_rng(seed)) for seed in range(20)]
    for index in draws:
        drawn = np.bincount(strata[index], minlength=50)
        if all_given:
            assert list(drawn) == [20] * 50
        else:
            assert drawn.sum() == pytest.approx(1_000, rel=0.1)
    # With replacement: rows repeat within a replicate, and every row is drawn in some.
    assert all(len(np.unique(index)) < len(index) for index in draws)
    assert set(np.concatenate(draws)) == set(range(len(strata)))
