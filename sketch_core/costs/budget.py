"""A global memory budget for operator state (IQP's DISS, Sec. 4, applied to sketch state).

Each sketch can keep its incremental state in full, keep only the top ``m`` values per group
(smaller, but a run that uses them up recaptures), or keep none (every maintenance recaptures).
Each choice costs memory and implies an expected maintenance time. Choosing one per sketch so
that the expected time is lowest and the memory fits the budget is a multiple-choice knapsack;
like DISS, it is solved by dynamic programming over the budget in units: exact when the sizes
share a unit that splits the budget into at most ``EXACT_UNITS``, else a thousandth of the
budget with sizes rounded up (a solution never exceeds the budget). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sketch_core.costs.model import CostModel
from sketch_core.errors import ConfigurationError

MODES = ("full", "top_m", "none")
DEFAULT_UNITS = 1000  # the budget's granularity when sizes have no small common unit
EXACT_UNITS = 100_000


@dataclass(frozen=True)
class StateOption:
    mode: str  # "full", "top_m" or "none"
    bytes: int  # memory the state takes in this mode
    seconds: float  # expected maintenance seconds (per period) in this mode


@dataclass(frozen=True)
class SketchState:
    name: str
    options: Sequence[StateOption]


@dataclass(frozen=True)
class Allocation:
    modes: dict[str, str]  # sketch -> chosen mode
    bytes: int
    seconds: float
    reasons: dict[str, str]  # sketch -> why


def state_options(
    model: CostModel,
    table_rows: int,
    delta_rows: float,
    maintenances: float,
    full_bytes: int,
    top_m_bytes: int | None = None,
    exhaust_probability: float = 0.0,
) -> list[StateOption]:
    """A sketch's options, with expected seconds over ``maintenances`` runs of ``delta_rows``:
    full state maintains incrementally; top-m too, but recaptures when its kept values run
    out (with ``exhaust_probability`` per run); no state recaptures every time."""
    incremental = model.estimate("incremental", delta_rows)
    full = model.estimate("full", table_rows)
    options = [
        StateOption("full", full_bytes, maintenances * incremental),
        StateOption("none", 0, maintenances * full),
    ]
    if top_m_bytes is not None:
        expected = incremental + exhaust_probability * full
        options.insert(1, StateOption("top_m", top_m_bytes, maintenances * expected))
    return options


def exhaust_probability(groups: int, table_rows: int, deleted_rows: float, keep: int) -> float:
    """The chance that one maintenance run uses up some group's kept top ``keep`` values, if
    the run's ``deleted_rows`` fall uniformly on the table's rows: a kept value is deleted
    with chance d/N, all ``keep`` of a group's with (d/N)^keep, and some group's with at most
    the sum over the groups (a union bound). Deletes aimed at the extremes do worse; the
    engine then recaptures, and the recorded runs show it."""
    if table_rows <= 0 or deleted_rows <= 0 or groups <= 0:
        return 0.0
    per_value = min(1.0, deleted_rows / table_rows)
    return min(1.0, groups * per_value**keep)


def allocate(sketches: Sequence[SketchState], budget_bytes: int, units: int = DEFAULT_UNITS) -> Allocation:
    """One mode per sketch, with the lowest total expected seconds within ``budget_bytes``."""
    if budget_bytes < 0 or units < 1:
        raise ConfigurationError(f"a budget needs bytes >= 0 and units >= 1, got {budget_bytes}, {units}")
    unit = _unit(sketches, budget_bytes, units)
    capacity = budget_bytes // unit
    # best[u]: the least seconds for the sketches so far within u units; picks[i][u]: its choice.
    best = [0.0] * (capacity + 1)
    picks: list[list[int]] = []
    for sketch in sketches:
        if not sketch.options or any(o.mode not in MODES for o in sketch.options):
            raise ConfigurationError(f"{sketch.name}: options must be among {', '.join(MODES)}")
        sizes = [math.ceil(o.bytes / unit) for o in sketch.options]
        nxt, pick = [math.inf] * (capacity + 1), [-1] * (capacity + 1)
        for u in range(capacity + 1):
            for i, (option, size) in enumerate(zip(sketch.options, sizes, strict=True)):
                if size <= u and best[u - size] + option.seconds < nxt[u]:
                    nxt[u], pick[u] = best[u - size] + option.seconds, i
        if math.isinf(nxt[capacity]):
            raise ConfigurationError(
                f"{sketch.name}: no option fits the state budget of {budget_bytes:,} bytes",
                hint="give every sketch a 'none' option (0 bytes), or raise the budget",
            )
        best = nxt
        picks.append(pick)
    modes, reasons, used, u = {}, {}, 0, capacity
    for sketch, pick in zip(reversed(sketches), reversed(picks), strict=True):
        option = sketch.options[pick[u]]
        modes[sketch.name] = option.mode
        reasons[sketch.name] = _reason(option, sketch.options)
        used += option.bytes
        u -= math.ceil(option.bytes / unit)
    return Allocation(dict(reversed(modes.items())), used, best[capacity], dict(reversed(reasons.items())))


def _unit(sketches: Sequence[SketchState], budget_bytes: int, units: int) -> int:
    """Bytes per unit: exact (the sizes' greatest common divisor) when that needs at most
    ``EXACT_UNITS`` units, else the budget split into ``units`` (sizes rounded up)."""
    exact = math.gcd(budget_bytes, *(o.bytes for s in sketches for o in s.options))
    if exact and budget_bytes // exact <= EXACT_UNITS:
        return exact
    return max(1, math.ceil(budget_bytes / units))


def _reason(chosen: StateOption, options: Sequence[StateOption]) -> str:
    figures = ", ".join(f"{o.mode} {o.seconds:.3g}s in {_size(o.bytes)}" for o in options)
    cheapest = min(options, key=lambda o: o.seconds)
    if chosen is cheapest:
        return f"{chosen.mode}: the fastest to maintain ({figures})"
    return f"{chosen.mode}: {cheapest.mode} would be faster but does not fit the budget ({figures})"


def _size(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{count} B"
