"""Strategies that pick the attribute a table's sketch is built on (pure; CBS Sec. 9).

Each strategy orders a table's safe candidates; the capture takes, table by table, the first one
that keeps the whole set of sketches safe (:func:`sketch_core.rewrites.safety.choose_attributes`).

- ``heuristic``: the sort key, then the group-by attributes (PBDS Sec. 9.2's practice; the
  default before cost-based choice).
- ``random-all``, ``random-used``, ``random-group-by``, ``random-key``: uniformly at random
  among all safe attributes, those the query reads, its group-by attributes, or the table's key
  (CBS's RAND-ALL, RAND-REL, RAND-GB, RAND-PK).
- ``cost-all``, ``cost-group-by``: the smallest estimated sketch among all safe attributes, or
  among the group-by attributes (CBS's CB-OPT-REL and CB-OPT-GB). Ties go to the sort key, whose
  sketch also skips whole files (the data is clustered on it).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

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
) -> dict[str, list[str]]:
    """Per table, its candidates in the order ``strategy`` prefers them. ``estimates`` maps
    ``table.attribute`` to the expected selectivity (cost-based strategies; without them they
    fall back to ``heuristic``). A table with no candidate in the strategy's pool gets none."""
    check_strategy(strategy)
    rng = random.Random(seed)
    ordered: dict[str, list[str]] = {}
    for table, candidates in tables.items():
        if strategy == "heuristic" or (strategy in COST_BASED and estimates is None):
            pool = list(dict.fromkeys(candidates.key[:1] + candidates.group_by))
        elif strategy.startswith("random-"):
            pool = list(candidates.pool(strategy.removeprefix("random-")))
            rng.shuffle(pool)
        else:
            assert estimates is not None
            key = candidates.key[:1]
            pool = sorted(
                (a for a in candidates.pool(strategy.removeprefix("cost-")) if f"{table}.{a}" in estimates),
                key=lambda a: (estimates[f"{table}.{a}"], a not in key, a),
            )
        ordered[table] = pool
    return ordered
