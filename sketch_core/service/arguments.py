"""Checks of the public API's arguments, so that a wrong type is a typed error naming the
argument (not an AttributeError from deep inside)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from sketch_core.config import SKETCH_USE
from sketch_core.errors import ConfigurationError, QueryError


def checked_sql(sql: object) -> str:
    if not isinstance(sql, str):
        raise QueryError(
            f"the query must be Spark SQL text, got {type(sql).__name__}", hint="pass the query as a str"
        )
    return sql


def checked_mapping(what: str, value: object, example: str) -> Mapping[str, Any] | None:
    if value is not None and not isinstance(value, Mapping):
        raise ConfigurationError(
            f"{what} must be a mapping, got {type(value).__name__}", hint=f"pass a dict, e.g. {example}"
        )
    return value


def checked_fragments(fragments: object) -> int | Mapping[str, int] | None:
    """None, a count, or a count per table; the counts' range is checked where they are used."""
    counts = fragments.values() if isinstance(fragments, Mapping) else [fragments]
    if fragments is not None and not all(isinstance(c, int) and not isinstance(c, bool) for c in counts):
        raise ConfigurationError(
            f"fragments must be a whole number or one per table, got {fragments!r}",
            hint="pass e.g. fragments=1000 or fragments={'ns.table': 1000}",
        )
    return fragments  # type: ignore[return-value]


def checked_snapshot(snapshot: object) -> int | None:
    if snapshot is not None and (not isinstance(snapshot, int) or isinstance(snapshot, bool)):
        raise ConfigurationError(
            f"snapshot must be a commit sequence number, got {snapshot!r}",
            hint="pass an int (see svc.latest_sequence()), or None for the latest",
        )
    return snapshot


def checked_sketch_use(use_sketches: object, default: str) -> str | None:
    """How a query applies a valid sketch: ``"cost"``, ``"always"``, or None (not at all);
    True means the settings' ``default``."""
    if use_sketches is True:
        return default
    if use_sketches is False:
        return None
    if use_sketches in SKETCH_USE:
        return str(use_sketches)
    raise ConfigurationError(
        f"use_sketches must be True, False, 'cost' or 'always', got {use_sketches!r}",
        hint="True applies a sketch when it is expected to pay (settings.sketch_use), "
        "'always' whenever one is valid, False never",
    )


# "cost": as "auto", but the sketch is left stale ("skip") when the cost model expects the
# queries before the next load to cost less without it than maintaining it and using it.
MAINTENANCE_STRATEGIES = ("auto", "cost", "incremental", "full")


def check_strategy(strategy: str) -> None:
    """A maintenance strategy's name, or ConfigurationError naming the ones there are."""
    if strategy not in MAINTENANCE_STRATEGIES:
        raise ConfigurationError(
            f"unknown maintenance strategy {strategy!r}",
            hint=f"use one of {', '.join(MAINTENANCE_STRATEGIES)}",
        )


def default_sketch_name(template: str, params: Mapping[str, Any], partition_ids: Mapping[str, int]) -> str:
    """The name of a sketch captured without one: from its query template, parameters and
    partitions, so the same capture gets the same name."""
    digest = hashlib.sha256(
        json.dumps([template, params, sorted(partition_ids.items())], sort_keys=True, default=str).encode()
    ).hexdigest()
    return f"sketch_{digest[:16]}"
