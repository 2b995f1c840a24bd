"""Choosing how to serve the queries that will run before the next update (IMP Sec. 12.1).

At a point in time a sketch is ``delta_rows`` behind and ``queries`` runs of its query are
expected before the tables change again. Three ways to serve them:

- ``incremental``: maintain the sketch incrementally, then run each query with it;
- ``full``: recapture, then run each query with it;
- ``skip``: run each query without the sketch (and leave the sketch behind for now).

The cheapest in total estimated seconds wins. Pure: a model and figures in, a choice with its
estimates and a readable reason out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sketch_core.costs.model import CostModel
from sketch_core.errors import ConfigurationError

ACTIONS = ("incremental", "full", "skip")


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


def choose(model: CostModel, situation: Situation, allowed: Sequence[str] = ACTIONS) -> Choice:
    """The cheapest allowed action (ties go to the earlier one in ``ACTIONS``: keeping the
    sketch current is preferred when it costs no more)."""
    unknown = [a for a in allowed if a not in ACTIONS]
    if not allowed or unknown:
        raise ConfigurationError(f"choose among {', '.join(ACTIONS)}, got {list(allowed)}")
    estimates = {a: t for a, t in totals(model, situation).items() if a in allowed}
    best = min((a for a in ACTIONS if a in estimates), key=lambda a: estimates[a])
    return Choice(best, estimates, _reason(best, estimates, situation))


def _reason(best: str, estimates: Mapping[str, float], situation: Situation) -> str:
    ranked = sorted(estimates.items(), key=lambda item: item[1])
    figures = ", ".join(f"{a} {s:.3g}s" for a, s in ranked)
    basis = f"{situation.delta_rows:,} delta rows, {situation.queries:g} queries expected"
    return f"{best} is cheapest: {figures} ({basis})"
