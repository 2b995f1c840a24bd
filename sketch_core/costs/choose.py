"""Choosing how to serve the queries that will run before the next update (IMP Sec. 12.1).

At a point in time a sketch is ``delta_rows`` behind and ``queries`` runs of its query are
expected before the tables change again. Three ways to serve them:

- ``incremental``: maintain the sketch incrementally, then run each query with it;
- ``full``: recapture, then run each query with it;
- ``skip``: run each query without the sketch (and leave the sketch behind for now).

The cheapest in total estimated seconds wins. Pure: a model and figures in, a choice with its
estimates and a readable reason out.

Counting only the queries before the next load is myopic, and the more so the longer a sketch is
left behind: once skipped, its delta only grows, catching up only gets dearer, and a sketch that
would pay for itself at every run of its query (maintained over the delta since the last one,
then used) is never brought up again. So the totals also count the ``horizon`` runs of the query
after those (IMP Sec. 12.1's totals over a series of updates): once caught up, each later run
costs the steady way of serving it, the cheapest of running plain, or maintaining (over one
load's delta, the pending delta's average per load, shared by the runs of a load; or over the
loads between two runs, when there are fewer runs than loads) and then using the sketch; skipping
runs plain throughout. A catch-up that the steady savings pay back within the horizon is then
chosen; with no steady savings the choice is as myopic as before.

A model learns an action's cost only from runs of it, and the cheapest-first rule never runs an
action its prior overrates: a plain query estimated a little dearer than maintaining would never
be timed, however much faster it really is. So, exploring, an action timed fewer than
``EXPLORE_RUNS`` times is chosen when its estimate is within ``EXPLORE_MARGIN`` of the best one
(a bounded price, paid a few times, for a model that can correct itself). Those first runs can
be slow ones (a cold start, a busy spell), and an action never chosen is never timed again: on
the workload benchmark a plain query timed three times at 0.37 s kept looking dearer than the
sketch for 350 reports, while it ran in 0.29 s (in another cell, three cold runs at 0.47 s made
it look twice the 0.24 s it took). So a query (with the sketch or without) estimated at most
``RETIME_MARGIN`` dearer than the best is also run again while it has fewer than one run per
``RETIME_EVERY`` of the best's (:func:`seldom_timed`), up to a twentieth of a model's recent
runs: at worst ten runs at twice a report's cost, one in twenty. While a query has fewer runs
than make its cost its runs' alone (``PRIOR_RETIRED_AFTER``), the margin is ``RETIME_FEW_MARGIN``:
its few runs may all be the first, cold ones (auto's first plain runs at 1M rows took 0.77, 0.90
and 0.40 s, later ones ~0.22 s, and at over twice the sketch's estimate plain was never run
again), at worst seven more runs at four times a report's cost. Maintenance is not re-timed
this way: a recapture tried for its timing can cost many reports' worth.

A table's layout drifts as loads come in, and each way's recent runs count most (see
``QUERY_HALF_LIFE`` in :mod:`sketch_core.costs.model`), so a way not run for long is judged
by what it cost back then. While it is estimated within ``CLOSE_MARGIN`` of the best, it is
run again once ``STALE_AFTER`` runs of the query have gone by since it last ran
(:func:`stale`): at worst one run in twenty at a quarter more, about 1% of the reports. When
the best is to skip the sketch, the query with it is timed by bringing the sketch up
incrementally (when that is within the margin too, see :func:`catch_up_rule`): on the
workload benchmark the sketched report, last timed at 0.28 s, ran in 0.21 s by then, and a
report run plain 8% slower was kept for 340 reports. That is also tried once the sketch is half
way to the loads after which only a recapture can bring it up (``Situation.history_loads``):
the last chance to learn whether keeping it pays at the price of an incremental run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sketch_core.costs.model import PRIOR_RETIRED_AFTER, QUERY_OPERATIONS, CostModel
from sketch_core.errors import ConfigurationError

ACTIONS = ("incremental", "full", "skip")
# The cost whose runs teach the model about each action ("use" is common to the first two).
TIMED_BY = {"incremental": "incremental", "full": "full", "skip": "plain"}
EXPLORE_RUNS = 3
EXPLORE_MARGIN = 0.5
RETIME_MARGIN = 1.0
RETIME_FEW_MARGIN = 3.0
RETIME_EVERY = 20
# The operations re-timed when seldom timed: runs of the query, not maintenance.
RETIMED = QUERY_OPERATIONS
# A way of running the query estimated within ``CLOSE_MARGIN`` of the best is run again once
# the sketch's query has run ``STALE_AFTER`` times since it last ran that way (see the note).
CLOSE_MARGIN = 0.25
STALE_AFTER = 20


@dataclass(frozen=True)
class Situation:
    table_rows: int  # rows of the sketch's tables now
    delta_rows: int  # rows inserted or deleted since the sketch's version
    queries: float  # runs of the query expected before the next update
    loads: int = 1  # the loads (commits to the sketch's tables) the delta came in
    rate: float | None = None  # runs of the query expected per load (None: ``queries``)
    horizon: int = 0  # runs of the query after ``queries`` whose costs are counted too
    # Loads behind after which the sketch can only be recaptured (its tables' history between
    # is no longer kept); 0: no limit.
    history_loads: int = 0


@dataclass(frozen=True)
class Choice:
    action: str
    estimates: Mapping[str, float]  # total seconds of each action considered
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"action": self.action, "estimates": dict(self.estimates), "reason": self.reason}


def totals(model: CostModel, situation: Situation, allowed: Sequence[str] = ACTIONS) -> dict[str, float]:
    """Estimated seconds of each action over the expected queries, and over the ``horizon``
    runs after them (see the module's note); ``allowed``: the ways a later run may take."""
    n, q = situation.table_rows, max(0.0, situation.queries)
    use = q * model.estimate("use", n)
    plain = q * model.estimate("plain", n)
    now = {
        "incremental": model.estimate("incremental", situation.delta_rows) + use,
        "full": model.estimate("full", n) + use,
        "skip": plain,
    }
    if situation.horizon <= 0:
        return now
    later = situation.horizon
    steady = steady_run(model, situation, allowed)
    return {
        "incremental": now["incremental"] + later * steady,
        "full": now["full"] + later * steady,
        "skip": plain + later * model.estimate("plain", n),
    }


def steady_run(model: CostModel, situation: Situation, allowed: Sequence[str] = ACTIONS) -> float:
    """Estimated seconds of one later run of the query once the sketch is current: the cheapest
    of running it plain, or using the sketch after its share of the maintenance (incremental or
    by recapture, as allowed): one load's worth shared by the load's runs, or, with fewer runs
    than loads, the loads since the last run at once."""
    plain = model.estimate("plain", situation.table_rows)
    if _rate(situation) == 0:  # no later runs expected: nothing to gain
        return plain
    return min([plain, *(sketched_run(model, situation, a) for a in ("incremental", "full") if a in allowed)])


def sketched_run(model: CostModel, situation: Situation, action: str = "incremental") -> float:
    """Estimated seconds of one later run of the query with the sketch kept current by
    ``action`` (see :func:`steady_run`)."""
    n, rate = situation.table_rows, _rate(situation)
    per_load = situation.delta_rows / max(1, situation.loads)
    delta = per_load * max(1.0, 1 / rate) if rate > 0 else per_load  # rows between two runs
    sharing = max(1.0, rate)  # the runs one maintenance serves
    maintenance = (
        model.estimate("incremental", delta) if action == "incremental" else model.estimate("full", n)
    )
    return maintenance / sharing + model.estimate("use", n)


def _rate(situation: Situation) -> float:
    return max(0.0, situation.queries if situation.rate is None else situation.rate)


def choose(
    model: CostModel, situation: Situation, allowed: Sequence[str] = ACTIONS, explore: bool = False
) -> Choice:
    """The cheapest allowed action (ties go to the earlier one in ``ACTIONS``: keeping the
    sketch current is preferred when it costs no more); with ``explore``, an action seldom
    timed and estimated near the best is tried instead (see the module's note)."""
    unknown = [a for a in allowed if a not in ACTIONS]
    if not allowed or unknown:
        raise ConfigurationError(f"choose among {', '.join(ACTIONS)}, got {list(allowed)}")
    estimates = {a: t for a, t in totals(model, situation, allowed).items() if a in allowed}
    best = min((a for a in ACTIONS if a in estimates), key=lambda a: estimates[a])
    if explore:
        rules = {
            a: exploring_rule(model, TIMED_BY[a], estimates[a], estimates[best], TIMED_BY[best])
            for a in ACTIONS
            if a in estimates and a != best
        }
        if best == "skip" and rules.get("incremental") is None and "incremental" in estimates:
            rules["incremental"] = catch_up_rule(model, situation, estimates["skip"])
        untried = {a: rule for a, rule in rules.items() if rule is not None}
        if untried:
            tried = min(untried, key=lambda a: estimates[a])
            explored = (best, model.costs[TIMED_BY[tried]].runs, untried[tried])
            return Choice(tried, estimates, _reason(tried, estimates, situation, explored=explored))
    return Choice(best, estimates, _reason(best, estimates, situation))


def stateless_choice(why: str) -> Choice:
    """A sketch that keeps no state (``why``: the state budget's choice, or a state that cannot
    be built or costs more than recaptures) can only be recaptured."""
    return Choice("full", {}, f"full: no operator state is kept for this sketch ({why})")


def exploring_rule(
    model: CostModel, operation: str, estimate: float, best: float, best_operation: str | None = None
) -> str | None:
    """Why an alternative is to be tried, in words for a decision's reason, or None when it is
    not: it has fewer than ``EXPLORE_RUNS`` runs and is estimated within ``EXPLORE_MARGIN`` of
    the best, or (a run of the query) it is :func:`seldom_timed` next to the best and within
    ``RETIME_MARGIN`` (``RETIME_FEW_MARGIN`` while it has few runs)."""
    runs = model.costs[operation].runs
    if runs < EXPLORE_RUNS:
        if estimate <= (1 + EXPLORE_MARGIN) * best:
            return f"timed fewer than {EXPLORE_RUNS} times and estimated within {EXPLORE_MARGIN:.0%}"
        return None
    if operation not in RETIMED or best_operation is None:
        return None
    margin = RETIME_MARGIN if runs >= PRIOR_RETIRED_AFTER else RETIME_FEW_MARGIN
    if estimate <= (1 + margin) * best and seldom_timed(model, operation, best_operation):
        every = f"timed less than once per {RETIME_EVERY} runs of {best_operation}"
        return f"{every} and estimated within {margin:.0%}"
    return stale_rule(model, operation, estimate, best)


def stale_rule(model: CostModel, operation: str, estimate: float, best: float) -> str | None:
    """Why a way of running the query is to be run again because it is :func:`stale` and
    estimated within ``CLOSE_MARGIN`` of the best (None: it is not)."""
    if operation in RETIMED and estimate <= (1 + CLOSE_MARGIN) * best and stale(model, operation):
        since = model.costs[operation].since_timed
        return f"last timed {since:.0f} runs of the query ago and estimated within {CLOSE_MARGIN:.0%}"
    return None


def catch_up_rule(model: CostModel, situation: Situation, skipping: float) -> str | None:
    """Why a sketch left behind is to be caught up incrementally to time its query again (None:
    it is not): the query with it is :func:`stale`, or the sketch is half way to the loads after
    which only a recapture can bring it up (``Situation.history_loads``); and catching up, then
    keeping it current over the queries counted, is estimated within ``CLOSE_MARGIN`` of
    ``skipping`` (the totals' later runs take the cheapest way either way, which would hide the
    gap)."""
    late = situation.history_loads > 0 and 2 * situation.loads >= situation.history_loads
    if not (stale(model, "use") or late):
        return None
    n, q = situation.table_rows, max(0.0, situation.queries)
    kept = (
        model.estimate("incremental", situation.delta_rows)
        + q * model.estimate("use", n)
        + situation.horizon * sketched_run(model, situation)
    )
    if kept > (1 + CLOSE_MARGIN) * skipping:
        return None
    if late:
        why = f"{situation.loads} loads behind, half way to needing a recapture"
    else:
        why = f"its query last timed {model.costs['use'].since_timed:.0f} runs of the query ago"
    return f"{why}, and estimated within {CLOSE_MARGIN:.0%}"


def stale(model: CostModel, operation: str) -> bool:
    """Whether the query has run ``STALE_AFTER`` times since it last ran as ``operation``."""
    since = model.costs[operation].since_timed
    return since is not None and since >= STALE_AFTER


def seldom_timed(model: CostModel, operation: str, than: str | None = None) -> bool:
    """Whether ``operation`` has fewer than one run per ``RETIME_EVERY`` runs of ``than``
    (default: of the model's most timed operation)."""
    runs = model.costs[operation].runs
    most = model.costs[than].runs if than is not None else max(c.runs for c in model.costs.values())
    return runs * RETIME_EVERY < most


def _reason(
    chosen: str,
    estimates: Mapping[str, float],
    situation: Situation,
    explored: tuple[str, int, str] | None = None,
) -> str:
    ranked = sorted(estimates.items(), key=lambda item: item[1])
    figures = ", ".join(f"{a} {s:.3g}s" for a, s in ranked)
    basis = f"{situation.delta_rows:,} delta rows, {situation.queries:g} queries expected"
    if situation.horizon > 0:
        rate = situation.queries if situation.rate is None else situation.rate
        basis += f"; and the {situation.horizon} runs after them, {rate:.3g} per load"
    if explored is not None:
        best, runs, rule = explored
        return f"{chosen}, exploring: its cost was timed {runs} times ({rule} of {best}): {figures} ({basis})"
    return f"{chosen} is cheapest: {figures} ({basis})"
