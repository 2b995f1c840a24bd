"""Attribute selection strategies (pure)."""

from __future__ import annotations

import pytest

from sketch_core.attribute_choice.strategies import (
    STRATEGIES,
    TableCandidates,
    heuristic_fallbacks,
    preferences,
)
from sketch_core.errors import ConfigurationError

T = "s.sales"
CANDIDATES = {
    T: TableCandidates(
        all=("id", "region", "day", "amount", "note"),
        used=("region", "day", "amount"),
        group_by=("region", "day"),
        key=("id",),
    )
}
ESTIMATES = {f"{T}.id": 0.9, f"{T}.region": 0.3, f"{T}.day": 0.1, f"{T}.amount": 0.5, f"{T}.note": 0.05}


def test_heuristic_prefers_the_sort_key_then_the_group_by_attributes() -> None:
    assert preferences("heuristic", CANDIDATES)[T] == ["id", "region", "day"]


def test_heuristic_falls_back_to_the_columns_a_top_k_over_rows_orders_by() -> None:
    ordered = TableCandidates(
        all=("id", "amount"), used=("amount",), group_by=(), key=(), ordered_by=("amount",)
    )
    assert preferences("heuristic", {T: ordered})[T] == ["amount"]
    keyed = TableCandidates(("id", "amount"), ("amount",), (), ("id",), ordered_by=("amount",))
    assert preferences("heuristic", {T: keyed})[T] == ["id", "amount"]  # the sort key first
    assert preferences("cost-all", {T: ordered}, None)[T] == ["amount"]  # (a top-k has no estimates)


def test_cost_based_strategies_order_their_pool_by_the_estimates() -> None:
    assert preferences("cost-all", CANDIDATES, ESTIMATES)[T] == ["note", "day", "region", "amount", "id"]
    assert preferences("cost-group-by", CANDIDATES, ESTIMATES)[T] == ["day", "region"]


def test_cost_based_ties_go_to_the_sort_key() -> None:
    tied = {**ESTIMATES, f"{T}.id": 0.05}
    assert preferences("cost-all", CANDIDATES, tied)[T][:2] == ["id", "note"]


def test_without_estimates_cost_based_strategies_fall_back_to_the_heuristic() -> None:
    assert preferences("cost-all", CANDIDATES, None)[T] == preferences("heuristic", CANDIDATES)[T]
    assert heuristic_fallbacks("cost-all", CANDIDATES, None) == [T]


def test_a_table_without_any_estimated_candidate_falls_back_alone() -> None:
    other = "s.stores"
    tables = {**CANDIDATES, other: TableCandidates(("store_id", "city"), ("city",), ("city",), ("store_id",))}
    # The stores' candidates never reached the aggregation (read below a DISTINCT, say).
    picks = preferences("cost-all", tables, ESTIMATES)
    assert picks[T] == ["note", "day", "region", "amount", "id"]
    assert picks[other] == ["store_id", "city"]
    assert heuristic_fallbacks("cost-all", tables, ESTIMATES) == [other]
    assert heuristic_fallbacks("heuristic", tables, ESTIMATES) == []


def test_an_empty_pool_is_no_fallback() -> None:
    keyless = {T: TableCandidates(("id", "day"), ("day",), (), ("id",))}
    assert preferences("cost-group-by", keyless, ESTIMATES)[T] == []
    assert heuristic_fallbacks("cost-group-by", keyless, ESTIMATES) == []


@pytest.mark.parametrize(
    ("strategy", "pool"),
    [("random-all", "all"), ("random-used", "used"), ("random-group-by", "group_by"), ("random-key", "key")],
)
def test_random_strategies_draw_from_their_pool_uniformly(strategy: str, pool: str) -> None:
    expected = getattr(CANDIDATES[T], pool)
    firsts = [preferences(strategy, CANDIDATES, seed=seed)[T][0] for seed in range(400)]
    assert set(firsts) == set(expected)
    share = min(firsts.count(a) for a in expected) / len(firsts)
    assert share > 0.5 / len(expected)  # every member comes first about equally often
    assert sorted(preferences(strategy, CANDIDATES, seed=1)[T]) == sorted(expected)


def test_an_unknown_strategy_is_refused_with_the_choices() -> None:
    with pytest.raises(ConfigurationError, match="unknown attribute strategy") as raised:
        preferences("cheapest", CANDIDATES)
    assert all(s in (raised.value.hint or "") for s in STRATEGIES)
