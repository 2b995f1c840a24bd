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
   ``f_j`` the fragments seen j times among the s sampled provenance rows standing for N rows,
   but no more than the fragments between the smallest and largest one seen (fragments are
   ranges: provenance clustered in a range of the attribute stays in it).
4. **Selectivity.** Fragments are equi-depth, so the sketch keeps about ``fragments / n`` of the
   table (CBS Sec. 4.4).
5. **Uncertainty.** Steps 1 and 2 are repeated on bootstrap resamples (rows drawn with
   replacement within each stratum, CBS Sec. 7.2): they give each group's chance of being in
   the result and a confidence interval for each group's aggregates. Step 3 then runs for each
   replicate's result over the sample as drawn, which gives the expected selectivity over which
   groups qualify (CBS Sec. 8.2) and its interval. Up to 50 replicates (CBS Fig. 4: the error
   stops improving there); fewer when the result has settled (``settle``), and one for a sample
   of whole groups, which resamples to itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from sketch_core.attribute_choice.sampling import StratifiedSample
from sketch_core.errors import SamplingError

AggregateFunction = Literal["count", "sum", "avg", "min", "max"]
DEFAULT_REPLICATES = 50  # CBS Fig. 4: the error stops improving at about 50 resamples
DEFAULT_CONFIDENCE = 0.95
# The service's bootstrap stops once this many replicates in a row repeat earlier results.
DEFAULT_SETTLE = 10


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
    one array per aggregate name), or the ``limit`` first by ``order_by``; or all of them.
    ``choose`` replaces both: given the estimates and which groups exist, the groups returned."""

    having: Callable[[Mapping[str, np.ndarray]], np.ndarray] | None = None
    order_by: str | None = None
    descending: bool = True
    limit: int | None = None
    choose: Callable[[Mapping[str, np.ndarray], np.ndarray], np.ndarray] | None = None
    top_k: bool = False  # ``choose`` returns at most a fixed number of groups (a LIMIT)

    def __post_init__(self) -> None:
        if (self.order_by is None) != (self.limit is None):
            raise SamplingError("a top-k selection needs both order_by and limit")


@dataclass(frozen=True)
class CandidateFragments:
    """Per sampled row, the fragment its value of the candidate attribute falls in; how many
    fragments the partition has; and whether the value is fixed by the row's group.

    With ``occupancy`` the ids are distinct values, not fragments (no partition is known): the
    estimated count of values k becomes the fragments that k values spread over equi-depth
    fragments are expected to occupy, ``n * (1 - (1 - 1/n) ** k)``."""

    fragments: np.ndarray
    fragment_count: int
    determined_by_group: bool = False
    occupancy: bool = False
    # Estimated table rows per fragment id (fragments need not hold equal shares: repeated
    # quantiles collapse); None: equal shares.
    fragment_rows: np.ndarray | None = None


@dataclass(frozen=True)
class SelectivityEstimate:
    attribute: str
    selectivity: float  # expected share of the table's rows the sketch keeps (bootstrap mean)
    low: float  # bootstrap interval at the requested confidence
    high: float
    fragments: float  # expected number of fragments in the sketch
    point: float  # the estimate from the sample as drawn, without resampling
    fragment_share: float = 0.0  # expected fragments / the partition's fragments


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
    # ``table.attribute`` -> why no estimate could be made for it (it is left to the fallback)
    unestimated: dict[str, str] = field(default_factory=dict)


class SampleEstimator:
    """Estimates for one query over the rows of a sample.

    The per-row inputs cover the sampled rows the query reads (all of them, or only those that
    passed its joins and WHERE clause: a row left out counts as one that failed). ``weights``
    are the table rows each sampled row stands for; ``strata`` number their strata and
    ``stratum_samples`` says how many rows each stratum's sample has in all.
    """

    def __init__(
        self,
        weights: np.ndarray,
        strata: np.ndarray,
        stratum_samples: np.ndarray,
        groups: np.ndarray,
        group_count: int,
        aggregates: Sequence[AggregateInput],
        selection: ResultSelection,
        passes: np.ndarray | None = None,
        population_scale: float = 1.0,
    ) -> None:
        rows = len(weights)
        if len(strata) != rows or len(groups) != rows or (passes is not None and len(passes) != rows):
            raise SamplingError("every per-row input must have one entry per sampled row")
        for aggregate in aggregates:
            if aggregate.values is not None and len(aggregate.values) != rows:
                raise SamplingError(f"aggregate {aggregate.name!r} has the wrong number of values")
        if np.any(np.bincount(strata, minlength=len(stratum_samples)) > stratum_samples):
            raise SamplingError("a stratum has more rows than its sample")
        self.weights = weights.astype(float)
        self.strata = strata.astype(np.int64)
        self.stratum_samples = stratum_samples.astype(np.int64)
        self.groups = groups.astype(np.int64)
        self.group_count = group_count
        self.aggregates = list(aggregates)
        self.selection = selection
        self.passes = np.ones(rows, dtype=bool) if passes is None else passes.astype(bool)
        # A top-k result holds k groups however many the table has: a sample of whole groups
        # finds k of its own, which stand for themselves, not for ``scale`` times as many.
        self.bounded = selection.limit is not None or selection.top_k
        # Table rows per unit of weight: 1, or 1 / rate for a sample of whole groups.
        self.population_scale = population_scale
        # Each replicate sums these per group: computed once, not once per replicate.
        self._passing_weights = self.weights * self.passes
        self._inputs = [_AggregateRows.of(a, self._passing_weights, self.passes) for a in self.aggregates]
        # Weights are positive: a group exists in a replicate iff its passing weight is.
        self._weights_positive = bool(np.all(self.weights > 0))

    @classmethod
    def over_sample(
        cls,
        sample: StratifiedSample,
        groups: np.ndarray,
        group_count: int,
        aggregates: Sequence[AggregateInput],
        selection: ResultSelection,
        passes: np.ndarray | None = None,
    ) -> SampleEstimator:
        """An estimator over every row of ``sample``."""
        return cls(
            sample.weights(),
            sample.strata,
            sample.stratum_samples,
            groups,
            group_count,
            aggregates,
            selection,
            passes,
            sample.population_scale,
        )

    # -- one estimate -----------------------------------------------------------------------
    def aggregate_estimates(self, index: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Per group, each aggregate estimated over the rows at ``index``; and which groups exist
        (have a row passing the WHERE clause)."""
        groups, size = self.groups[index], self.group_count
        # The passing weight per group is COUNT(*), and the weight of every aggregate whose
        # argument is never NULL; it also says which groups exist.
        passing = np.bincount(groups, weights=self._passing_weights[index], minlength=size)
        if self._weights_positive:
            exists = passing > 0
        else:
            exists = np.bincount(groups, weights=self.passes[index], minlength=size) > 0
        out: dict[str, np.ndarray] = {}
        for aggregate, rows in zip(self.aggregates, self._inputs, strict=True):
            out[aggregate.name] = rows.estimate(index, groups, passing, size)
        return out, exists

    def result(self, estimates: Mapping[str, np.ndarray], exists: np.ndarray) -> np.ndarray:
        """Which groups the query would return, were the estimates the true values."""
        if self.selection.choose is not None:
            chosen_groups = np.asarray(self.selection.choose(estimates, exists), dtype=bool)
            return np.asarray(chosen_groups & exists, dtype=bool)
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

    def sketch_size(self, provenance: _FragmentCounts, candidate: CandidateFragments) -> tuple[float, float]:
        """Expected fragments of ``candidate`` holding the result's provenance, and the share of
        the table's rows those fragments hold, from the provenance rows' fragment counts."""
        rows = int(provenance.counts.sum())
        if rows == 0:
            return 0.0, 0.0
        ids = np.flatnonzero(provenance.counts)
        counts = provenance.counts[ids]
        seen = float(len(ids))
        if self.population_scale > 1 and not self.bounded:
            distinct = self._whole_group_fragments(provenance.pairs, seen, candidate)
        elif self.population_scale > 1 or candidate.determined_by_group:
            distinct = seen
        else:
            # The table rows the sampled provenance rows stand for.
            represented = provenance.weight * self.population_scale
            once = float(np.count_nonzero(counts == 1))
            guess = np.sqrt(max(represented, 1.0) / rows) * once + (seen - once)
            distinct = min(max(guess, seen), max(represented, seen))
            if not candidate.occupancy:
                distinct = min(distinct, max(seen, _span(ids, candidate.fragment_count, rows)))
        total = max(1, candidate.fragment_count)
        if candidate.occupancy:
            occupied = _occupied(distinct, total)
            return occupied, occupied / total
        count = float(min(distinct, total))
        table_rows = candidate.fragment_rows
        if table_rows is None or table_rows.sum() <= 0:
            return count, count / total
        # The fragments seen hold what they hold; those estimated but not seen hold what an
        # unseen fragment holds on average.
        seen_rows = float(table_rows[ids].sum())
        unseen = max(1.0, len(table_rows) - seen)
        extra = max(0.0, count - seen) * (float(table_rows.sum()) - seen_rows) / unseen
        return count, min(1.0, (seen_rows + extra) / float(table_rows.sum()))

    def _whole_group_fragments(self, pairs: float, seen: float, candidate: CandidateFragments) -> float:
        """Fragments holding the provenance when whole groups were sampled, each with
        probability ``q = 1 / scale``. The sample's distinct (group, fragment) ``pairs`` stand
        for ``scale`` times as many; ``occupied(k) = n (1 - (1 - 1/n) ** k)`` fragments is what
        k pairs would occupy spread at random, and the sample shows how far they cluster
        instead: the estimate is ``seen * occupied(scale * pairs) / occupied(pairs)``."""
        total = max(1, candidate.fragment_count)
        spread = _occupied(pairs * self.population_scale, total) / max(_occupied(pairs, total), 1e-9)
        guess = seen * spread
        return min(max(guess, seen), float(total))

    def _sizes(
        self, results: Mapping[bytes, np.ndarray], candidates: Mapping[str, CandidateFragments]
    ) -> dict[tuple[str, bytes], tuple[float, float]]:
        """:meth:`sketch_size` of every candidate for every result (a set of groups). Results
        differ only in their borderline groups: the rows of groups every result holds are
        counted once per candidate, and each result adds its own borderline rows."""
        chosen_sets = list(results.values())
        always, ever = np.logical_and.reduce(chosen_sets), np.logical_or.reduce(chosen_sets)
        index = np.flatnonzero(ever[self.groups] & self.passes)
        groups, weights = self.groups[index], self.weights[index]
        core = always[groups]
        edge_groups, edge_weights = groups[~core], weights[~core]
        core_weight = float(weights[core].sum())
        whole_groups = self.population_scale > 1
        # Per result: which borderline rows it holds, and the table rows its provenance stands for.
        picks = {key: chosen[edge_groups] for key, chosen in results.items()}
        weights_of = {key: core_weight + float(edge_weights[pick].sum()) for key, pick in picks.items()}
        sizes = {}
        for name, candidate in candidates.items():
            fragments = candidate.fragments[index]
            length = int(fragments.max()) + 1 if len(fragments) else 1
            base = np.bincount(fragments[core], minlength=length)
            edge = fragments[~core]
            core_pairs = _distinct_pairs(groups[core], fragments[core], length) if whole_groups else 0
            for key, pick in picks.items():
                counts = base + np.bincount(edge[pick], minlength=length)
                pairs = core_pairs
                if whole_groups:
                    pairs += _distinct_pairs(edge_groups[pick], edge[pick], length)
                provenance = _FragmentCounts(counts, weights_of[key], float(pairs))
                sizes[name, key] = self.sketch_size(provenance, candidate)
        return sizes

    # -- with the bootstrap -----------------------------------------------------------------
    def estimate(
        self,
        candidates: Mapping[str, CandidateFragments],
        replicates: int = DEFAULT_REPLICATES,
        confidence: float = DEFAULT_CONFIDENCE,
        seed: int = 0,
        settle: int | None = None,
    ) -> Estimation:
        """With ``settle``, the bootstrap stops early once that many replicates in a row (and at
        least twice that many in all) have returned no set of groups an earlier one did not:
        the result is then stable, and more replicates would only repeat it."""
        for name, candidate in candidates.items():
            if len(candidate.fragments) != len(self.weights):
                raise SamplingError(f"candidate {name!r} has the wrong number of fragment ids")
        everything = np.arange(len(self.weights))
        values, exists = self.aggregate_estimates(everything)
        selected = self.result(values, exists)

        rng = np.random.default_rng(seed)
        resample = _Resampler(self.strata, self.stratum_samples)
        in_result = np.zeros(self.group_count)
        draws: dict[str, list[np.ndarray]] = {a.name: [] for a in self.aggregates}
        results: dict[bytes, np.ndarray] = {selected.tobytes(): selected}
        replicate_results: list[bytes] = []
        # A sample of one row per stratum (whole groups) resamples to itself: every replicate
        # would be the same, and one stands for them all.
        planned = 1 if np.all(self.stratum_samples <= 1) else max(1, replicates)
        rounds, unchanged = 0, 0
        while rounds < planned and (settle is None or rounds < 2 * settle or unchanged < settle):
            rounds += 1
            index = resample.draw(rng)
            estimates, present = self.aggregate_estimates(index)
            chosen = self.result(estimates, present)
            in_result += chosen
            for name, array in estimates.items():
                draws[name].append(array)
            # Most replicates return the same groups: their fragments are counted once.
            replicate_results.append(chosen.tobytes())
            unchanged = unchanged + 1 if replicate_results[-1] in results else 0
            results.setdefault(replicate_results[-1], chosen)

        # The fragments of the groups a replicate returns are counted over the sample as drawn
        # (a resample repeats rows, which a distinct-value estimate would read as fewer
        # fragments).
        counted = self._sizes(results, candidates)
        point = {name: counted[name, selected.tobytes()][1] for name in candidates}
        sizes = {name: [counted[name, key] for key in replicate_results] for name in candidates}

        tail = (1 - confidence) / 2 * 100
        low: dict[str, np.ndarray] = {}
        high: dict[str, np.ndarray] = {}
        for name, arrays in draws.items():
            low[name], high[name] = _column_percentiles(np.vstack(arrays), (tail, 100 - tail))
        groups = GroupEstimates(values, low, high, in_result / rounds, selected)
        estimates_by_candidate = {}
        for name in candidates:
            counts, shares = (np.asarray(column) for column in zip(*sizes[name], strict=True))
            mean = float(shares.mean())
            estimates_by_candidate[name] = SelectivityEstimate(
                attribute=name,
                selectivity=mean,
                low=min(mean, float(np.percentile(shares, tail))),
                high=max(mean, float(np.percentile(shares, 100 - tail))),
                fragments=float(counts.mean()),
                point=point[name],
                fragment_share=float(counts.mean()) / max(1, candidates[name].fragment_count),
            )
        return Estimation(groups, estimates_by_candidate)


@dataclass(frozen=True)
class _FragmentCounts:
    """A result's provenance rows in the sample: how many fall in each fragment id, the table
    rows they stand for, and (for a sample of whole groups) their distinct (group, fragment)
    pairs."""

    counts: np.ndarray
    weight: float
    pairs: float = 0.0


def _span(ids: np.ndarray, null_fragment: int, rows: int) -> float:
    """The fragments provenance clustered in a range of the attribute (dates of one quarter)
    can lie in: from the smallest to the largest of ``ids`` (sorted) seen among ``rows``
    sampled rows, widened by ``(rows + 1) / (rows - 1)`` for the outermost rows the sample
    missed (the unbiased width of a uniform range from its sampled extremes), and the NULL
    fragment if seen. GEE, which assumes the values unbounded, can count far more fragments
    than the range has."""
    ranged = ids[ids < null_fragment]
    if rows < 2 or len(ranged) == 0:
        return float("inf")
    span = float(ranged[-1] - ranged[0] + 1) * (rows + 1) / (rows - 1)
    return span + float(len(ranged) < len(ids))


def _distinct_pairs(groups: np.ndarray, fragments: np.ndarray, width: int) -> int:
    return len(np.unique(groups * width + fragments))


class _Resampler:
    """Bootstrap resamples: each stratum's whole sample drawn again with replacement (so the
    strata keep their sizes and the weights stay valid). A draw of one of the stratum's sampled
    rows that are not among the rows given (they failed the query's joins or WHERE) is a row
    that contributes nothing, and is left out of the returned positions: so only the draws that
    land on given rows are made, their number per stratum drawn from its binomial
    distribution (a selective query's resamples cost what its rows do, not the sample's)."""

    def __init__(self, strata: np.ndarray, stratum_samples: np.ndarray) -> None:
        self.order = np.argsort(strata, kind="stable")
        present = np.bincount(strata, minlength=len(stratum_samples))
        self.start = np.concatenate(([0], np.cumsum(present)[:-1])) if len(present) else present
        self.present = present
        self.samples = stratum_samples
        self.hit_chance = np.divide(
            present, stratum_samples, out=np.zeros(len(present)), where=stratum_samples > 0
        )
        # Every sampled row given (a query without a selective join or WHERE clause): each
        # stratum's draws all hit, and where they land is known but for the offsets.
        self.certain: tuple[np.ndarray, np.ndarray] | None = None
        if np.array_equal(present, stratum_samples):
            stratum = np.repeat(np.arange(len(present)), present)
            self.certain = self.start[stratum], self.present[stratum].astype(float)

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        if self.certain is not None:
            start, present = self.certain
        else:
            hits = rng.binomial(self.samples, self.hit_chance)
            stratum = np.repeat(np.arange(len(hits)), hits)
            start, present = self.start[stratum], self.present[stratum]
        # Truncation is the floor for these non-negative offsets.
        offsets = (rng.random(len(start)) * present).astype(np.int64)
        return np.asarray(self.order[start + offsets], dtype=np.int64)


@dataclass(frozen=True)
class _AggregateRows:
    """One aggregate's per-row inputs, weighted once for every replicate: ``weights`` are the
    passing rows' weights where the argument is present (None: wherever the row passes, the
    estimator's passing weights), ``weighted`` those times the argument (SUM, AVG), ``values``
    the argument (MIN, MAX) and ``kept`` the rows that count for MIN and MAX."""

    function: AggregateFunction
    weights: np.ndarray | None = None
    weighted: np.ndarray | None = None
    values: np.ndarray | None = None
    kept: np.ndarray | None = None

    @classmethod
    def of(cls, aggregate: AggregateInput, passing_weights: np.ndarray, passes: np.ndarray) -> _AggregateRows:
        if aggregate.function not in ("count", "sum", "avg", "min", "max"):
            raise SamplingError(f"no estimator for {aggregate.function}")
        if aggregate.values is None:  # COUNT(*)
            return cls(aggregate.function)
        values = aggregate.values.astype(float)
        present = passes & ~np.isnan(values)
        weights = None if bool(present.all()) else np.where(present, passing_weights, 0.0)
        if aggregate.function in ("min", "max"):
            return cls(aggregate.function, weights, values=values, kept=present)
        if aggregate.function == "count":
            return cls(aggregate.function, weights)
        w = passing_weights if weights is None else weights
        return cls(aggregate.function, weights, weighted=np.where(present, w * values, 0.0))

    def estimate(self, index: np.ndarray, groups: np.ndarray, passing: np.ndarray, size: int) -> np.ndarray:
        """Per group, the aggregate over the rows at ``index`` (``groups`` their groups,
        ``passing`` the groups' passing weights)."""
        counted = (
            passing
            if self.weights is None
            else np.bincount(groups, weights=self.weights[index], minlength=size)
        )
        if self.function == "count":
            return counted
        if self.weighted is not None:
            total = np.bincount(groups, weights=self.weighted[index], minlength=size)
            with np.errstate(invalid="ignore", divide="ignore"):
                if self.function == "sum":
                    return np.where(counted > 0, total, np.nan)
                return np.where(counted > 0, total / counted, np.nan)
        assert self.values is not None and self.kept is not None
        kept = self.kept[index]
        kept_groups, kept_values = groups[kept], self.values[index][kept]
        if self.function == "max":
            extreme = np.full(size, -np.inf)
            np.maximum.at(extreme, kept_groups, kept_values)
        else:
            extreme = np.full(size, np.inf)
            np.minimum.at(extreme, kept_groups, kept_values)
        # Groups without a value have none (infinite values in the data stay what they are).
        return np.where(np.bincount(kept_groups, minlength=size) > 0, extreme, np.nan)


def _occupied(k: float, total: int) -> float:
    """The fragments k values spread at random over ``total`` equi-depth fragments occupy."""
    return float(total * (1 - (1 - 1 / total) ** k))


def _column_percentiles(stacked: np.ndarray, percents: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """Per column, the nearest-rank percentiles of its non-NaN values (NaN when it has none).
    numpy's nanpercentile loops over the columns in Python: minutes for a million groups."""
    stacked.sort(axis=0)  # in place (the caller's own copy); NaNs last
    valid = np.count_nonzero(~np.isnan(stacked), axis=0)
    columns = np.arange(stacked.shape[1])
    out = []
    for percent in percents:
        rank = np.clip(np.round(percent / 100 * (valid - 1)), 0, None).astype(np.int64)
        picked = stacked[np.minimum(rank, len(stacked) - 1), columns] if len(stacked) else rank
        out.append(np.where(valid > 0, picked, np.nan))
    return out[0], out[1]
