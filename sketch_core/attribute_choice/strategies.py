"""Strategies that pick the attribute a table's sketch is built on (pure; CBS Sec. 9).

Each strategy orders a table's safe candidates; the capture takes, table by table, the first one
that keeps the whole set of sketches safe (:func:`sketch_core.analysis.safety.choose_attributes`).

- ``heuristic``: the sort key, then the group-by attributes (PBDS Sec. 9.2's practice; the
  default before cost-based choice).
- ``random-all``, ``random-used``, ``random-group-by``, ``random-key``: uniformly at random
  among all safe attributes, those the query reads, its group-by attributes, or the table's key
  (CBS's RAND-ALL, RAND-REL, RAND-GB, RAND-PK).
- ``cost-all``, ``cost-group-by``: among all safe attributes, or among the group-by attributes
  (CBS's CB-OPT-REL and CB-OPT-GB), the one whose estimated sketch reads the fewest data files
  (:mod:`~sketch_core.attribute_choice.layout`: a small sketch on an attribute the files scatter skips
  nothing), then the smallest estimated sketch. Remaining ties go to the sort key.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from sketch_core.attribute_choice.layout import share_to_the_percent
from sketch_core.config import ATTRIBUTE_STRATEGIES
from sketch_core.errors import ConfigurationError

STRATEGIES = ATTRIBUTE_STRATEGIES
COST_BASED = frozenset({"cost-all", "cost-group-by"})


@dataclass(frozen=True)
class TableCandidates:
    """A table's safe candidate attributes, by where they come from (each in table order)."""

    all: tuple[str, ...]
    used: tuple[str, ...]
    group_by: tuple[str, ...]
    key: tuple[str, ...]
    # The columns a top-k over rows orders by (see safety.ordering_attributes).
    ordered_by: tuple[str, ...] = ()

    def pool(self, kind: str) -> tuple[str, ...]:
        return {"all": self.all, "used": self.used, "group-by": self.group_by, "key": self.key}[kind]


def check_strategy(strategy: str) -> str:
    if strategy not in STRATEGIES:
        raise ConfigurationError(
            f"unknown attribute strategy {strategy!r}", hint=f"one of: {', '.join(STRATEGIES)}"
        )
    return strategy


def preferences(
    strategy: str,
    tables: Mapping[str, TableCandidates],
    estimates: Mapping[str, float] | None = None,
    seed: int | None = None,
    files_read: Mapping[str, float] | None = None,
) -> dict[str, list[str]]:
    """Per table, its candidates in the order ``strategy`` prefers them. ``estimates`` maps
    ``table.attribute`` to the expected selectivity, ``files_read`` to the expected share of the
    table's files a sketch on it reads (cost-based strategies rank by files read, then by
    selectivity; :mod:`~sketch_core.attribute_choice.layout`; without estimates, or
    for a table none of whose candidates could be estimated, they fall back to ``heuristic``).
    A table with no candidate in the strategy's pool gets none."""
    check_strategy(strategy)
    rng = random.Random(seed)
    ordered: dict[str, list[str]] = {}
    falling_back = set(heuristic_fallbacks(strategy, tables, estimates))
    for table, candidates in tables.items():
        if strategy == "heuristic" or table in falling_back:
            pool = list(dict.fromkeys(candidates.key[:1] + candidates.group_by + candidates.ordered_by))
        elif strategy.startswith("random-"):
            pool = list(candidates.pool(strategy.removeprefix("random-")))
            rng.shuffle(pool)
        else:
            assert estimates is not None
            key = candidates.key[:1]
            files = files_read or {}
            pool = sorted(
                (a for a in candidates.pool(strategy.removeprefix("cost-")) if f"{table}.{a}" in estimates),
                # Fewest files read first (closer than a percent is a tie), then the smallest sketch.
                key=lambda a: (
                    share_to_the_percent(files.get(f"{table}.{a}", 1.0)),
                    estimates[f"{table}.{a}"],
                    a not in key,
                    a,
                ),
            )
        ordered[table] = pool
    return ordered


def heuristic_fallbacks(
    strategy: str, tables: Mapping[str, TableCandidates], estimates: Mapping[str, float] | None
) -> list[str]:
    """The tables a cost-based ``strategy`` orders by the heuristic instead: it has candidates
    but none of them has an estimate (no estimates at all, or none reached the aggregation)."""
    if strategy not in COST_BASED:
        return []
    pool = strategy.removeprefix("cost-")
    fallbacks = []
    for table, candidates in tables.items():
        attributes = candidates.pool(pool)
        if estimates is None or (attributes and not any(f"{table}.{a}" in estimates for a in attributes)):
            fallbacks.append(table)
    return fallbacks
