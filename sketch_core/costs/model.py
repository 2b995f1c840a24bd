"""Linear cost models of a sketch's five operations (IMP Sec. 12), fitted from recorded runs.

Each cost is ``seconds = a + b * x``, where ``x`` is the size that drives it:

- ``capture`` and ``full`` (recapture): the rows of the sketch's tables;
- ``incremental``: the delta rows (inserted plus deleted) since the sketch's version;
- ``use`` (the query with the sketch) and ``plain`` (without): the rows of the tables.

Until a cost has enough runs of its own, its model leans on a prior: the prior's coefficients
count as ``PRIOR_WEIGHT`` runs, so a few odd timings cannot swing a decision, and many runs
outweigh the prior (from ten runs on it is left out). Coefficients are never negative (no cost
falls as its input grows). Runs at one size over twice their median (cold starts, a busy
machine) are left out.
Pure: observations in, coefficients out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sketch_core.errors import ConfigurationError

OPERATIONS = ("capture", "incremental", "full", "use", "plain")
# How many runs the prior counts as. Three: two agreeing runs do not yet overrule it entirely.
PRIOR_WEIGHT = 3.0
# From this many runs on, a cost is its runs' alone: the prior is a guess (for the plain query,
# that the sketch saves its share of the rows), and counted as three runs it still held a
# plain query timed ten times at 0.24 s at 0.28 s, above the sketch's 0.26 s with maintenance.
PRIOR_RETIRED_AFTER = 10
# Runs whose sizes' standard deviation is below this share of their mean count as one size.
MIN_RELATIVE_SPREAD = 0.1
# Runs at one size taking more than this many times their median are left out of the fit: a
# cold start (the JVM compiling a plan it has not run before, a new Spark session) or a busy
# machine, not the operation's cost. A way seldom run (the plain query beside a sketch kept
# current) has few runs, often its first, cold ones: at 1M rows three runs of 0.5-0.9 s next to
# later ones of ~0.25 s made it look 60% dearer than it was, and the sketch was kept where
# running without it was cheaper. The runs left count by their mean, not their median: what is
# minimized is total time, and a way's heavier tail is part of it (at 1M rows the sketched
# report's median was the plain one's, its mean 3% above).
OUTLIER_FACTOR = 2.0
# The fewest runs at one size whose median can tell an outlier.
OUTLIER_MIN_RUNS = 3


@dataclass(frozen=True)
class Observation:
    """One recorded run: the size that drives its cost, and the seconds it took."""

    size: float
    seconds: float


@dataclass(frozen=True)
class LinearCost:
    """``seconds = fixed + per_row * size``."""

    fixed: float
    per_row: float
    runs: int = 0  # how many observed runs the fit used (0: the prior alone)
    basis: str = ""  # how a line with no runs of its own was set, when not from its prior alone

    def __post_init__(self) -> None:
        if self.fixed < 0 or self.per_row < 0:
            raise ConfigurationError(
                f"cost coefficients must be >= 0, got fixed={self.fixed}, per_row={self.per_row}",
                hint="a prior is seconds of fixed cost plus seconds per row",
            )

    def estimate(self, size: float) -> float:
        return self.fixed + self.per_row * max(0.0, size)

    def describe(self) -> str:
        basis = f"{self.runs} runs" if self.runs else (self.basis or "prior")
        return f"{self.fixed:.3g}s + {self.per_row * 1e6:.3g}us/row ({basis})"


def fit(
    prior: LinearCost, observations: Sequence[Observation], prior_weight: float = PRIOR_WEIGHT
) -> LinearCost:
    """The prior, updated with observed runs.

    With runs over a range of sizes, the least-squares line through them is blended with the
    prior, weighted by run count (``prior_weight`` for the prior; none from
    ``PRIOR_RETIRED_AFTER`` runs on). With runs at about one size (spread below
    ``MIN_RELATIVE_SPREAD`` of their mean: a table of steady size, queried after each small
    load), the slope cannot be told from the intercept, and a line through timing noise over a
    few rows' difference would be wild: the prior's line is scaled to pass closer to the
    runs' mean (less outliers, see ``OUTLIER_FACTOR``), keeping its shape.
    """
    runs = [o for o in observations if o.seconds >= 0 and o.size >= 0]
    n = len(runs)
    if n == 0:
        return LinearCost(prior.fixed, prior.per_row, 0)
    sizes = [o.size for o in runs]
    mean_x = sum(sizes) / n
    mean_y = sum(o.seconds for o in runs) / n
    spread = sum((x - mean_x) ** 2 for x in sizes)
    if math.sqrt(spread / n) <= MIN_RELATIVE_SPREAD * max(1.0, mean_x):
        kept = _without_outliers([o.seconds for o in runs])
        typical = sum(kept) / len(kept)
        weight = _weight(len(kept), n, prior_weight)
        predicted = prior.estimate(mean_x)
        scale = typical / predicted if predicted > 0 else 1.0
        scale = (1 - weight) + weight * scale
        return LinearCost(prior.fixed * scale, prior.per_row * scale, n)  # n: all were timed
    weight = _weight(n, n, prior_weight)
    slope = sum((o.size - mean_x) * (o.seconds - mean_y) for o in runs) / spread
    slope = max(0.0, slope)
    intercept = max(0.0, mean_y - slope * mean_x)
    return LinearCost(
        (1 - weight) * prior.fixed + weight * intercept,
        (1 - weight) * prior.per_row + weight * slope,
        n,
    )


def _weight(fitted: int, timed: int, prior_weight: float) -> float:
    """The share of a fit that its ``fitted`` runs make against the prior's ``prior_weight``:
    all of it once the operation was ``timed`` ``PRIOR_RETIRED_AFTER`` times (outliers among
    them count as timed)."""
    return 1.0 if timed >= PRIOR_RETIRED_AFTER else fitted / (fitted + prior_weight)


def _without_outliers(seconds: Sequence[float]) -> list[float]:
    """The timings of runs at one size, less those over ``OUTLIER_FACTOR`` times their median."""
    if len(seconds) < OUTLIER_MIN_RUNS:
        return list(seconds)
    limit = OUTLIER_FACTOR * statistics.median(seconds)
    return [s for s in seconds if s <= limit]


# Priors for this project's engines on one machine: Spark jobs pay seconds of fixed cost
# (planning, a job, the metastore), in-process incremental runs tens of milliseconds. The
# query with the sketch costs as much as without it here; ``CostModel.fitted`` replaces that
# with the plain query's line scaled by the share of the data the sketch keeps.
DEFAULT_PRIORS: Mapping[str, LinearCost] = {
    "capture": LinearCost(2.0, 1.0e-6),
    "full": LinearCost(2.0, 1.0e-6),
    "incremental": LinearCost(0.05, 2.0e-5),
    "use": LinearCost(0.3, 1.0e-7),
    "plain": LinearCost(0.3, 1.0e-7),
}


@dataclass(frozen=True)
class CostModel:
    """The five costs of one sketch."""

    costs: Mapping[str, LinearCost] = field(default_factory=lambda: dict(DEFAULT_PRIORS))

    @classmethod
    def fitted(
        cls,
        observations: Mapping[str, Iterable[Observation]],
        priors: Mapping[str, LinearCost] = DEFAULT_PRIORS,
        share: float | None = None,
    ) -> CostModel:
        """Each cost fitted from its runs. ``share``: the fraction of the data the sketch keeps
        (its fragments of the partition); the query with the sketch is then expected, until
        timed, to cost the plain query's fixed part plus ``share`` of its per-row part. Without
        a share, the prior for it is as slow as the plain query.

        The two queries are the same query over more or less data, so each informs the other:
        once the sketch has been used, the plain query's prior is scaled by how the runs with
        the sketch compared with what the plain prior predicted for them, and the plain query's
        own runs (if any) are fitted on top of that. Otherwise a sketch that is always kept
        current, leaving few or no plain runs, would be compared forever with an unscaled prior.
        A report is never run the slow way just to time it."""
        unknown = set(observations) - set(OPERATIONS)
        if unknown:
            raise ConfigurationError(
                f"unknown operations {sorted(unknown)}", hint=f"use {', '.join(OPERATIONS)}"
            )
        costs = {op: fit(priors[op], list(observations.get(op, ()))) for op in OPERATIONS if op != "use"}
        use_prior = priors["use"]
        if share is not None:
            use_prior = _shared(costs["plain"], share)
        used = list(observations.get("use", ()))
        costs["use"] = fit(use_prior, used)
        if share is not None and costs["use"].runs > 0:
            unscaled = _shared(priors["plain"], share)  # what the plain prior expects of the use runs
            scaled = _scaled_like(priors["plain"], unscaled, costs["use"], used)
            costs["plain"] = fit(scaled, list(observations.get("plain", ())))
            if costs["plain"].runs == 0:
                costs["plain"] = scaled
        return cls({op: costs[op] for op in OPERATIONS})

    def estimate(self, operation: str, size: float) -> float:
        return self.costs[operation].estimate(size)


def _shared(line: LinearCost, share: float) -> LinearCost:
    """``line``'s fixed part plus ``share`` of its per-row part: the query reading that share."""
    return LinearCost(line.fixed, line.per_row * min(1.0, max(0.0, share)))


def _scaled_like(
    line: LinearCost, prior: LinearCost, fitted: LinearCost, observed: Sequence[Observation]
) -> LinearCost:
    """``line`` scaled by ``fitted / prior`` at the observed sizes (still counting no runs)."""
    mean = sum(o.size for o in observed) / len(observed)
    expected = prior.estimate(mean)
    if expected <= 0:
        return line
    scale = fitted.estimate(mean) / expected
    return LinearCost(
        line.fixed * scale, line.per_row * scale, 0, "prior scaled like the runs with the sketch"
    )
