"""The state budget chooser on cases small enough to compute by hand."""

from __future__ import annotations

import itertools

import pytest

from sketch_core.costs.budget import SketchState, StateOption, allocate, state_options
from sketch_core.costs.model import CostModel, LinearCost
from sketch_core.errors import ConfigurationError

MiB = 1 << 20


def options(full: tuple[int, float], top_m: tuple[int, float], none: float) -> list[StateOption]:
    return [
        StateOption("full", full[0] * MiB, full[1]),
        StateOption("top_m", top_m[0] * MiB, top_m[1]),
        StateOption("none", 0, none),
    ]


A = SketchState("a", options(full=(60, 1.0), top_m=(10, 3.0), none=20.0))
B = SketchState("b", options(full=(50, 2.0), top_m=(20, 2.5), none=9.0))


def test_a_budget_for_everything_keeps_all_state_in_full() -> None:
    allocation = allocate([A, B], 200 * MiB)
    assert allocation.modes == {"a": "full", "b": "full"}
    assert (allocation.bytes, allocation.seconds) == (110 * MiB, 3.0)
    assert allocation.reasons["a"].startswith("full: the fastest to maintain")


def test_a_tight_budget_picks_the_best_combination_by_hand() -> None:
    # 70 MiB: a full (60) + b top_m? 80, too big. By hand: a full + b none = 1 + 9 = 10;
    # a top_m + b full = 3 + 2 = 5 (60 MiB); a top_m + b top_m = 5.5 (30); so a top_m, b full.
    allocation = allocate([A, B], 70 * MiB)
    assert allocation.modes == {"a": "top_m", "b": "full"}
    assert allocation.seconds == pytest.approx(5.0) and allocation.bytes == 60 * MiB
    assert "full would be faster but does not fit the budget" in allocation.reasons["a"]


def test_no_budget_keeps_no_state() -> None:
    allocation = allocate([A, B], 0)
    assert allocation.modes == {"a": "none", "b": "none"} and allocation.seconds == 29.0


def test_the_choice_equals_exhaustive_search() -> None:
    sketches = [A, B, SketchState("c", options(full=(40, 0.5), top_m=(5, 4.0), none=6.0))]
    for budget in range(0, 160, 7):
        best = min(
            (sum(o.seconds for o in combo), combo)
            for combo in itertools.product(*(s.options for s in sketches))
            if sum(o.bytes for o in combo) <= budget * MiB
        )
        allocation = allocate(sketches, budget * MiB)
        assert allocation.seconds == pytest.approx(best[0]), budget
        assert allocation.bytes <= budget * MiB


def test_a_sketch_without_a_stateless_option_may_not_fit() -> None:
    stubborn = SketchState("d", [StateOption("full", 100 * MiB, 1.0)])
    with pytest.raises(ConfigurationError, match="no option fits"):
        allocate([stubborn], 10 * MiB)


def test_options_follow_the_cost_model() -> None:
    model = CostModel(
        {
            "capture": LinearCost(2.0, 0.0),
            "full": LinearCost(2.0, 1e-6),
            "incremental": LinearCost(0.1, 1e-5),
            "use": LinearCost(0.1, 0.0),
            "plain": LinearCost(1.0, 0.0),
        }
    )
    full, top_m, none = state_options(model, 1_000_000, 1_000, 10, 50 * MiB, 5 * MiB, exhaust_probability=0.1)
    # Per run: incremental 0.1 + 0.01 = 0.11; recapture 2 + 1 = 3; top-m 0.11 + 0.1 * 3 = 0.41.
    assert (full.seconds, top_m.seconds, none.seconds) == pytest.approx((1.1, 4.1, 30.0))
    assert (full.bytes, top_m.bytes, none.bytes) == (50 * MiB, 5 * MiB, 0)


def test_sizes_without_a_common_unit_are_rounded_up_and_never_exceed_the_budget() -> None:
    # Sizes in odd bytes (no common unit): the budget is cut in a thousand units.
    odd = [
        SketchState(
            f"s{i}", [StateOption("full", 7_000_003 * (i + 1), 1.0), StateOption("none", 0, 10.0 + i)]
        )
        for i in range(6)
    ]
    budget = 50_000_000
    allocation = allocate(odd, budget)
    assert allocation.bytes <= budget
    # By hand: full sizes are 7, 14, 21, 28, 35, 42 MB (plus a few bytes), keeping s_i saves
    # 9 + i seconds. Four cost 70 MB at least; of the threes within 50 MB, s0 + s1 + s3 (49 MB)
    # saves 31, s0 + s1 + s2 (42 MB) 30; the pairs save 23 at most.
    assert [n for n, m in allocation.modes.items() if m == "full"] == ["s0", "s1", "s3"]
    assert allocation.seconds == pytest.approx(sum(10.0 + i for i in range(6)) - 31)
