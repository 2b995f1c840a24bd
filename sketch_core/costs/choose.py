"""Choosing how to serve the queries that will run before the next update (IMP Sec. 12.1).

At a point in time a sketch is ``delta_rows`` behind and ``queries`` runs of its query are
expected before the tables change again. Three ways to serve them:

- ``incremental``: maintain the sketch incrementally, then run each query with it;
- ``full``: recapture, then run each query with it;
- ``skip``: run each query without the sketch (and leave the sketch behind for now).

The cheapest in total estimated seconds wins. Pure: a model and figures in, a choice with its
estimates and a readable reason out.

A model learns an action's cost only from runs of it, and the cheapest-first rule never runs an
action its prior overrates: a plain query estimated a little dearer than maintaining would never
be timed, however much faster it really is. So, exploring, an action timed fewer than
``EXPLORE_RUNS`` times is chosen when its estimate is within ``EXPLORE_MARGIN`` of the best one
(a bounded price, paid a few times, for a model that can correct itself).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sketch_core.costs.model import CostModel
from sketch_core.errors import ConfigurationError

ACTIONS = ("incremental", "full", "skip")
# The cost whose runs teach the model about each action ("use" is common to the first two).
TIMED_BY = {"incremental": "incremental", "full": "full", "skip": "plain"}
EXPLORE_RUNS = 3
EXPLORE_MARGIN = 0.5


@dataclass(frozen=True)
class Situation:
    table_rows: int  # rows of the sketch's tables now
    delta_rows: int  # rows inserted or deleted since the sketch's version
    queries: float  # runs of the query expected before the next update


@dataclass(frozen=True)
class Choice:
    action: str
    estimates: Mapping[str, float]  # total seconds of each action considered
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"action": self.action, "estimates": dict(self.estimates), "reason": self.reason}


def totals(model: CostModel, situation: Situation) -> dict[str, float]:
    """Estimated seconds of each action over the expected queries."""
    n, q = situation.table_rows, max(0.0, situation.queries)
    use = q * model.estimate("use", n)
    return {
        "incremental": model.estimate("incremental", situation.delta_rows) + use,
        "full": model.estimate("full", n) + use,
        "skip": q * model.estimate("plain", n),
    }


def choose(
    model: CostModel, situation: Situation, allowed: Sequence[str] = ACTIONS, explore: bool = False
) -> Choice:
    """The cheapest allowed action (ties go to the earlier one in ``ACTIONS``: keeping the
    sketch current is preferred when it costs no more); with ``explore``, an action seldom
    timed and estimated near the best is tried instead (see the module's note)."""
    unknown = [a for a in allowed if a not in ACTIONS]
    if not allowed or unknown:
        raise ConfigurationError(f"choose among {', '.join(ACTIONS)}, got {list(allowed)}")
    estimates = {a: t for a, t in totals(model, situation).items() if a in allowed}
    best = min((a for a in ACTIONS if a in estimates), key=lambda a: estimates[a])
    if explore:
        untried = [
            a
            for a in ACTIONS
            if a in estimates
            and a != best
            and worth_exploring(model, TIMED_BY[a], estimates[a], estimates[best])
        ]
        if untried:
            tried = min(untried, key=lambda a: estimates[a])
            runs = model.costs[TIMED_BY[tried]].runs
            return Choice(tried, estimates, _reason(tried, estimates, situation, explored=(best, runs)))
    return Choice(best, estimates, _reason(best, estimates, situation))


def worth_exploring(model: CostModel, operation: str, estimate: float, best: float) -> bool:
    """Whether an alternative costing ``estimate`` (against the best one's ``best``) is to be
    tried to time ``operation``: it has fewer than ``EXPLORE_RUNS`` runs, and is estimated
    within ``EXPLORE_MARGIN`` of the best."""
    return model.costs[operation].runs < EXPLORE_RUNS and estimate <= (1 + EXPLORE_MARGIN) * best


def _reason(
    chosen: str,
    estimates: Mapping[str, float],
    situation: Situation,
    explored: tuple[str, int] | None = None,
) -> str:
    ranked = sorted(estimates.items(), key=lambda item: item[1])
    figures = ", ".join(f"{a} {s:.3g}s" for a, s in ranked)
    basis = f"{situation.delta_rows:,} delta rows, {situation.queries:g} queries expected"
    if explored is not None:
        best, runs = explored
        return (
            f"{chosen}, exploring: its cost was timed {runs} times, and it is estimated within "
            f"{EXPLORE_MARGIN:.0%} of {best}: {figures} ({basis})"
        )
    return f"{chosen} is cheapest: {figures} ({basis})"
