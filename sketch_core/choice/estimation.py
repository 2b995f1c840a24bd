"""Estimating a sketch's selectivity from a stratified sample (pure; CBS Sec. 7.2 and 8).

For an aggregation query (GROUP BY with HAVING, or top-k on an aggregate) the provenance is the
rows of the result groups that pass the WHERE clause. From a sample:

1. **Groups.** Each aggregate of each group is estimated by scaling the sample (CBS Def. 7):
   a sampled row stands for ``w = n_g / s_g`` rows of its stratum, so
   ``COUNT = sum(w)``, ``SUM(x) = sum(w * x)`` and ``AVG(x) = sum(w * x) / sum(w)`` over the
   group's sampled rows that pass the WHERE clause; MIN and MAX take the sample's extremes
   (biased toward the middle; the bootstrap shows how much they move).
2. **Result.** The HAVING test, or the top-k ranking, runs on those estimates.
3. **Fragments.** The provenance rows in the sample give, per candidate attribute, the fragments
   of its range partition they fall in. For a group-by attribute that is the whole story: every
   row of a group shares the value. For any other attribute the sample sees only some of the
   fragments a group's rows fall in; the fragments never sampled are estimated with the GEE
   distinct-value estimator (Charikar et al., PODS 2000): ``sqrt(N / s) * f1 + sum_{j>=2} f_j``,
   ``f_j`` the fragments seen j times among the s sampled provenance rows standing for N rows.
4. **Selectivity.** Fragments are equi-depth, so the sketch keeps about ``fragments / n`` of the
   table (CBS Sec. 4.4).
5. **Uncertainty.** Steps 1 and 2 are repeated on bootstrap resamples (rows drawn with
   replacement within each stratum, CBS Sec. 7.2): they give each group's chance of being in
   the result and a confidence interval for each group's aggregates. Step 3 then runs for each
   replicate's result over the sample as drawn, which gives the expected selectivity over which
   groups qualify (CBS Sec. 8.2) and its interval.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from sketch_core.choice.sampling import SamplingError, StratifiedSample

AggregateFunction = Literal["count", "sum", "avg", "min", "max"]
DEFAULT_REPLICATES = 50  # CBS Fig. 4: the error stops improving at about 50 resamples
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class AggregateInput:
    """One aggregate of the query: its output name, function, and per sampled row its argument
    (None for COUNT(*); NaN for a NULL argument, which the aggregate skips)."""

    name: str
    function: AggregateFunction
    values: np.ndarray | None = None


@dataclass(frozen=True)
class ResultSelection:
    """Which groups the query returns: those passing ``having`` (over the estimated aggregates,
    one array per aggregate name), or the ``limit`` first by ``order_by``; or all of them."""

    having: Callable[[Mapping[str, np.ndarray]], np.ndarray] | None = None
    order_by: str | None = None
    descending: bool = True
    limit: int | None = None

    def __post_init__(self) -> None:
        if (self.order_by is None) != (self.limit is None):
            raise SamplingError("a top-k selection needs both order_by and limit")


@dataclass(frozen=True)
class CandidateFragments:
    """Per sampled row, the fragment its value of the candidate attribute falls in; how many
    fragments the partition has; and whether the value is fixed by the row's group."""

    fragments: np.ndarray
    fragment_count: int
    determined_by_group: bool = False


@dataclass(frozen=True)
class SelectivityEstimate:
    attribute: str
    selectivity: float  # expected share of the table the sketch keeps (bootstrap mean)
    low: float  # bootstrap interval at the requested confidence
    high: float
    fragments: float  # expected number of fragments in the sketch
    point: float  # the estimate from the sample as drawn, without resampling


@dataclass(frozen=True)
class GroupEstimates:
    """Per group (by id): each aggregate's estimate and interval, and the chance it is in the result."""

    values: dict[str, np.ndarray]
    low: dict[str, np.ndarray]
    high: dict[str, np.ndarray]
    in_result: np.ndarray  # share of bootstrap replicates whose result holds the group
    selected: np.ndarray  # bool: in the result estimated from the sample as drawn


@dataclass(frozen=True)
class Estimation:
    groups: GroupEstimates
    candidates: dict[str, SelectivityEstimate]

    def ranked(self) -> list[SelectivityEstimate]:
        """Candidates from the smallest expected sketch to the largest."""
        return sorted(self.candidates.values(), key=lambda e: (e.selectivity, e.attribute))


class SampleEstimator:
    """Estimates for one query over one sample; the inputs are per sampled row."""

    def __init__(
        self,
        sample: StratifiedSample,
        groups: np.ndarray,
        group_count: int,
        aggregates: Sequence[AggregateInput],
        selection: ResultSelection,
        passes: np.ndarray | None = None,
    ) -> None:
        rows = sample.rows.num_rows
        if len(groups) != rows or (passes is not None and len(passes) != rows):
            raise SamplingError("every per-row input must have one entry per sampled row")
        for aggregate in aggregates:
            if aggregate.values is not None and len(aggregate.values) != rows:
                raise SamplingError(f"aggregate {aggregate.name!r} has the wrong number of values")
        self.sample = sample
        self.groups = groups.astype(np.int64)
        self.group_count = group_count
        self.aggregates = list(aggregates)
        self.selection = selection
        self.passes = np.ones(rows, dtype=bool) if passes is None else passes.astype(bool)
        self.weights = sample.weights()

    # -- one estimate -----------------------------------------------------------------------
    def aggregate_estimates(self, index: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Per group, each aggregate estimated over the rows at ``index``; and which groups exist
        (have a row passing the WHERE clause)."""
        groups, weights = self.groups[index], self.weights[index] * self.passes[index]
        size = self.group_count
        exists = np.bincount(groups, weights=self.passes[index], minlength=size) > 0
        out: dict[str, np.ndarray] = {}
        for aggregate in self.aggregates:
            out[aggregate.name] = _aggregate(aggregate, index, groups, weights, self.passes[index], size)
        return out, exists

    def result(self, estimates: Mapping[str, np.ndarray], exists: np.ndarray) -> np.ndarray:
        """Which groups the query would return, were the estimates the true values."""
        chosen = exists.copy()
        if self.selection.having is not None:
            with np.errstate(invalid="ignore"):
                chosen &= np.asarray(self.selection.having(estimates), dtype=bool)
        if self.selection.order_by is not None and self.selection.limit is not None:
            key = estimates[self.selection.order_by].astype(float)
            key = np.where(chosen & ~np.isnan(key), key, np.nan)
            ranking = np.argsort(-key if self.selection.descending else key, kind="stable")
            ranking = ranking[~np.isnan(key[ranking])][: self.selection.limit]
            chosen = np.zeros_like(chosen)
            chosen[ranking] = True
        return chosen

    def selectivity(self, index: np.ndarray, chosen: np.ndarray, candidate: CandidateFragments) -> float:
        """Expected number of fragments of ``candidate`` holding the result's provenance."""
        provenance = chosen[self.groups[index]] & self.passes[index]
        fragments = candidate.fragments[index][provenance]
        if len(fragments) == 0:
            return 0.0
        _, counts = np.unique(fragments, return_counts=True)
        seen = float(len(counts))
        if candidate.determined_by_group:
            return seen
        represented = float(self.weights[index][provenance].sum())  # table rows the provenance rows stand for
        once = float(np.count_nonzero(counts == 1))
        guess = np.sqrt(max(represented, 1.0) / len(fragments)) * once + (seen - once)
        return float(min(max(guess, seen), candidate.fragment_count, max(represented, seen)))

    # -- with the bootstrap -----------------------------------------------------------------
    def estimate(
        self,
        candidates: Mapping[str, CandidateFragments],
        replicates: int = DEFAULT_REPLICATES,
        confidence: float = DEFAULT_CONFIDENCE,
        seed: int = 0,
    ) -> Estimation:
        for name, candidate in candidates.items():
            if len(candidate.fragments) != self.sample.rows.num_rows:
                raise SamplingError(f"candidate {name!r} has the wrong number of fragment ids")
        everything = np.arange(self.sample.rows.num_rows)
        values, exists = self.aggregate_estimates(everything)
        selected = self.result(values, exists)
        point = {name: self.selectivity(everything, selected, c) for name, c in candidates.items()}

        rng = np.random.default_rng(seed)
        resample = _Resampler(self.sample.strata)
        in_result = np.zeros(self.group_count)
        draws: dict[str, list[np.ndarray]] = {a.name: [] for a in self.aggregates}
        fragments: dict[str, list[float]] = {name: [] for name in candidates}
        for _ in range(max(1, replicates)):
            index = resample.draw(rng)
            estimates, present = self.aggregate_estimates(index)
            chosen = self.result(estimates, present)
            in_result += chosen
            for name, array in estimates.items():
                draws[name].append(array)
            # The fragments of the groups this replicate returns are counted over the sample
            # as drawn: a resample repeats rows, which a distinct-value estimate would read
            # as fewer fragments.
            for name, candidate in candidates.items():
                fragments[name].append(self.selectivity(everything, chosen, candidate))

        tail = (1 - confidence) / 2 * 100
        low: dict[str, np.ndarray] = {}
        high: dict[str, np.ndarray] = {}
        for name, arrays in draws.items():
            stacked = np.vstack(arrays)
            with np.errstate(invalid="ignore"):
                low[name] = np.nanpercentile(stacked, tail, axis=0) if stacked.size else stacked
                high[name] = np.nanpercentile(stacked, 100 - tail, axis=0) if stacked.size else stacked
        groups = GroupEstimates(values, low, high, in_result / max(1, replicates), selected)
        estimates_by_candidate = {}
        for name, candidate in candidates.items():
            counts = np.asarray(fragments[name])
            total = max(1, candidate.fragment_count)
            mean = float(counts.mean())
            estimates_by_candidate[name] = SelectivityEstimate(
                attribute=name,
                selectivity=mean / total,
                low=min(mean, float(np.percentile(counts, tail))) / total,
                high=max(mean, float(np.percentile(counts, 100 - tail))) / total,
                fragments=mean,
                point=point[name] / total,
            )
        return Estimation(groups, estimates_by_candidate)


class _Resampler:
    """Bootstrap resamples of the sample: within each stratum, as many rows as it has, drawn
    with replacement (the strata keep their sizes, so the weights stay valid)."""

    def __init__(self, strata: np.ndarray) -> None:
        self.order = np.argsort(strata, kind="stable")
        ordered = strata[self.order]
        sizes = np.bincount(ordered) if len(ordered) else np.zeros(0, dtype=np.int64)
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1])) if len(sizes) else sizes
        self.row_start = starts[ordered]
        self.row_size = sizes[ordered]

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        offsets = np.floor(rng.random(len(self.order)) * self.row_size).astype(np.int64)
        return np.asarray(self.order[self.row_start + offsets], dtype=np.int64)


def _aggregate(
    aggregate: AggregateInput,
    index: np.ndarray,
    groups: np.ndarray,
    weights: np.ndarray,
    passes: np.ndarray,
    size: int,
) -> np.ndarray:
    if aggregate.values is None:  # COUNT(*)
        return np.bincount(groups, weights=weights, minlength=size)
    values = aggregate.values[index].astype(float)
    present = passes & ~np.isnan(values)
    w = np.where(present, weights, 0.0)
    x = np.where(present, values, 0.0)
    if aggregate.function == "count":
        return np.bincount(groups, weights=w, minlength=size)
    total = np.bincount(groups, weights=w * x, minlength=size)
    counted = np.bincount(groups, weights=w, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        if aggregate.function == "sum":
            return np.where(counted > 0, total, np.nan)
        if aggregate.function == "avg":
            return np.where(counted > 0, total / counted, np.nan)
    extreme = np.full(size, np.nan)
    if aggregate.function not in ("min", "max"):
        raise SamplingError(f"no estimator for {aggregate.function}")
    kept_groups, kept_values = groups[present], values[present]
    if len(kept_values):
        order = np.lexsort((kept_values if aggregate.function == "min" else -kept_values, kept_groups))
        first = np.ones(len(order), dtype=bool)
        first[1:] = kept_groups[order][1:] != kept_groups[order][:-1]
        extreme[kept_groups[order][first]] = kept_values[order][first]
    return extreme
