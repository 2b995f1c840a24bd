"""Linear cost models of a sketch's five operations (IMP Sec. 12), fitted from recorded runs.

Each cost is ``seconds = a + b * x``, where ``x`` is the size that drives it:

- ``capture`` and ``full`` (recapture): the rows of the sketch's tables;
- ``incremental``: the delta rows (inserted plus deleted) since the sketch's version;
- ``use`` (the query with the sketch) and ``plain`` (without): the rows of the tables.

Until a cost has enough runs of its own, its model leans on a prior: the prior's coefficients
count as ``PRIOR_WEIGHT`` runs, so a few odd timings cannot swing a decision, and many runs
outweigh the prior (from ten runs on it is left out). Coefficients are never negative (no cost
falls as its input grows). Runs at one size over twice their median (cold starts, a busy
machine) are left out. Runs of the query (with the sketch or without) count less the older
they are (``QUERY_HALF_LIFE``): the table's layout drifts as loads come in.
Pure: observations in, coefficients out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sketch_core.errors import ConfigurationError

OPERATIONS = ("capture", "incremental", "full", "use", "plain")
# The runs of the query itself, with the sketch and without (the others are maintenance).
QUERY_OPERATIONS = ("use", "plain")
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
# Runs of the query (with the sketch or without) count less the older they are: a run this
# many of the sketch's query runs ago counts half as much as the newest. A table's layout
# drifts as loads come in (the workload's tables go from ~13 to ~300 files), so a way run
# seldom, compared by all its runs with the recent runs of the way run often, was compared
# with itself as it was: on the workload benchmark the sketched report's estimate stayed at
# its early runs' 0.28 s while it ran in 0.21 s, and the plain report was kept, 8% slower.
# (A half-life of 50 counts the newest ~140 runs of a way run every time.)
QUERY_HALF_LIFE = 50.0


@dataclass(frozen=True)
class Observation:
    """One recorded run: the size that drives its cost, and the seconds it took; ``age``: for
    a run of the query, how many of the sketch's query runs (either way) came after it."""

    size: float
    seconds: float
    age: float = 0.0


@dataclass(frozen=True)
class LinearCost:
    """``seconds = fixed + per_row * size``."""

    fixed: float
    per_row: float
    runs: int = 0  # how many observed runs the fit used (0: the prior alone)
    basis: str = ""  # how a line with no runs of its own was set, when not from its prior alone
    # For the query's two ways: the sketch's query runs since this way's newest (None: unknown).
    since_timed: float | None = None

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
    prior: LinearCost,
    observations: Sequence[Observation],
    prior_weight: float = PRIOR_WEIGHT,
    half_life: float | None = None,
) -> LinearCost:
    """The prior, updated with observed runs.

    With runs over a range of sizes, the least-squares line through them is blended with the
    prior, weighted by run count (``prior_weight`` for the prior; none from
    ``PRIOR_RETIRED_AFTER`` runs on). With runs at about one size (spread below
    ``MIN_RELATIVE_SPREAD`` of their mean: a table of steady size, queried after each small
    load), the slope cannot be told from the intercept, and a line through timing noise over a
    few rows' difference would be wild: the prior's line is scaled to pass closer to the
    runs' mean (less outliers, see ``OUTLIER_FACTOR``), keeping its shape. With a
    ``half_life``, a run ``age`` runs old counts ``0.5 ** (age / half_life)`` as much as a new
    one in the line and the mean (not in the counts that retire the prior).
    """
    runs = [o for o in observations if o.seconds >= 0 and o.size >= 0]
    n = len(runs)
    if n == 0:
        return LinearCost(prior.fixed, prior.per_row, 0)
    since = min(o.age for o in runs) if half_life is not None else None
    weighted = [(0.5 ** (o.age / half_life) if half_life is not None else 1.0, o) for o in runs]
    total = sum(w for w, _ in weighted)
    mean_x = sum(w * o.size for w, o in weighted) / total
    mean_y = sum(w * o.seconds for w, o in weighted) / total
    spread = sum(w * (o.size - mean_x) ** 2 for w, o in weighted)
    if math.sqrt(spread / total) <= MIN_RELATIVE_SPREAD * max(1.0, mean_x):
        limit = _outlier_limit([o.seconds for o in runs])
        kept = [(w, o.seconds) for w, o in weighted if o.seconds <= limit]
        typical = sum(w * t for w, t in kept) / sum(w for w, _ in kept)
        weight = _weight(len(kept), n, prior_weight)
        predicted = prior.estimate(mean_x)
        scale = typical / predicted if predicted > 0 else 1.0
        scale = (1 - weight) + weight * scale
        return LinearCost(prior.fixed * scale, prior.per_row * scale, n, since_timed=since)  # n: all timed
    weight = _weight(n, n, prior_weight)
    slope = sum(w * (o.size - mean_x) * (o.seconds - mean_y) for w, o in weighted) / spread
    slope = max(0.0, slope)
    intercept = max(0.0, mean_y - slope * mean_x)
    return LinearCost(
        (1 - weight) * prior.fixed + weight * intercept,
        (1 - weight) * prior.per_row + weight * slope,
        n,
        since_timed=since,
    )


def _weight(fitted: int, timed: int, prior_weight: float) -> float:
    """The share of a fit that its ``fitted`` runs make against the prior's ``prior_weight``:
    all of it once the operation was ``timed`` ``PRIOR_RETIRED_AFTER`` times (outliers among
    them count as timed)."""
    return 1.0 if timed >= PRIOR_RETIRED_AFTER else fitted / (fitted + prior_weight)


def _outlier_limit(seconds: Sequence[float]) -> float:
    """The slowest a run at one size may take and still count: ``OUTLIER_FACTOR`` times the
    runs' median (no limit with fewer than ``OUTLIER_MIN_RUNS`` runs)."""
    if len(seconds) < OUTLIER_MIN_RUNS:
        return math.inf
    return OUTLIER_FACTOR * statistics.median(seconds)


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

        def fitted(op: str, prior: LinearCost) -> LinearCost:
            half_life = QUERY_HALF_LIFE if op in QUERY_OPERATIONS else None
            return fit(prior, list(observations.get(op, ())), half_life=half_life)

        costs = {op: fitted(op, priors[op]) for op in OPERATIONS if op != "use"}
        use_prior = priors["use"]
        if share is not None:
            use_prior = _shared(costs["plain"], share)
        used = list(observations.get("use", ()))
        costs["use"] = fitted("use", use_prior)
        if share is not None and costs["use"].runs > 0:
            unscaled = _shared(priors["plain"], share)  # what the plain prior expects of the use runs
            scaled = _scaled_like(priors["plain"], unscaled, costs["use"], used)
            costs["plain"] = fitted("plain", scaled)
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
