"""The arrival predictor on regular, bursty and irregular commit histories."""

from __future__ import annotations

import itertools
import random

import pytest

from sketch_core.costs.arrivals import Commit, predict

HOUR = 3600.0


def test_a_regular_history_predicts_one_gap_after_the_last_commit() -> None:
    rng = random.Random(3)
    history = [Commit(k * HOUR + rng.uniform(-60, 60), 1000 + rng.randint(-50, 50)) for k in range(24)]
    last = max(c.at for c in history)
    prediction = predict(history, now=last + 600)
    assert prediction.pattern == "regular" and not prediction.in_burst
    assert prediction.next_at == pytest.approx(last + HOUR, abs=120)
    assert prediction.next_rows == pytest.approx(1000, abs=50)
    assert prediction.reason.startswith(("regular: every 59m", "regular: every 1h"))


def bursts(count: int, length: int, gap: float, period: float, rows: int = 200) -> list[Commit]:
    return [Commit(b * period + k * gap, rows) for b in range(count) for k in range(length)]


def test_inside_a_burst_more_commits_are_expected_shortly() -> None:
    history = bursts(5, 5, gap=10, period=HOUR)[:-3]  # the fifth burst has had 2 of its 5 commits
    last = history[-1].at
    prediction = predict(history, now=last + 3)
    assert (prediction.pattern, prediction.in_burst, prediction.burst_remaining) == ("bursty", True, 3)
    assert prediction.next_at == pytest.approx(last + 10)
    assert "in a burst (2 of ~5 commits, every 10s)" in prediction.reason
    assert prediction.rows_before(last + 60) == 3 * 200  # the rest of the burst


def test_after_a_burst_the_next_one_starts_a_period_after_the_last_began() -> None:
    history = bursts(5, 5, gap=10, period=HOUR)
    last = history[-1].at
    prediction = predict(history, now=last + 300)
    assert (prediction.pattern, prediction.in_burst) == ("bursty", False)
    assert prediction.next_at == pytest.approx(4 * HOUR + HOUR)
    assert prediction.rows_before(4 * HOUR + HOUR - 1) == 0.0  # nothing comes before then


def test_a_burst_that_had_its_commits_is_over_even_if_the_last_was_recent() -> None:
    history = bursts(4, 5, gap=10, period=HOUR)
    prediction = predict(history, now=history[-1].at + 2)
    assert not prediction.in_burst and prediction.burst_remaining == 5


def test_an_irregular_history_predicts_the_mean_gap_and_says_so() -> None:
    rng = random.Random(11)
    at, history = 0.0, []
    for _ in range(40):
        at += rng.expovariate(1 / 600)  # Poisson arrivals, 10 minutes apart on average
        history.append(Commit(at, rng.randint(1, 5000)))
    prediction = predict(history, now=at + 1)
    gaps = [b.at - a.at for a, b in itertools.pairwise(history)]
    assert prediction.pattern == "irregular"
    assert prediction.next_at == pytest.approx(at + sum(gaps) / len(gaps))
    assert prediction.reason.startswith("irregular: mean gap")


def test_too_short_a_history_predicts_nothing() -> None:
    prediction = predict([Commit(0, 10), Commit(60, 30)], now=100)
    assert (prediction.pattern, prediction.next_at, prediction.next_rows) == ("unknown", None, 20)
    assert prediction.rows_before(10**9) == 0.0
    assert predict([], now=0).pattern == "unknown"


def test_a_daily_event_is_forecast_for_the_next_day_and_rolled_past_missed_runs() -> None:
    from sketch_core.costs.arrivals import forecast_next

    DAY = 24 * HOUR
    runs = [6 * HOUR + k * DAY for k in range(7)]  # every day at 06:00
    assert forecast_next(runs, now=runs[-1] + HOUR) == runs[-1] + DAY
    # Runs missed: a run an hour overdue is taken as late (still expected); one more than half
    # a day overdue as skipped, and the forecast moves on to the coming 06:00.
    assert forecast_next(runs, now=runs[-1] + 2 * DAY + HOUR) == runs[-1] + 2 * DAY
    assert forecast_next(runs, now=runs[-1] + 2 * DAY + 13 * HOUR) == runs[-1] + 3 * DAY
    assert forecast_next(runs[:2], now=runs[1]) is None


def test_the_load_rate_sums_the_tables_and_takes_the_median_size() -> None:
    from sketch_core.costs.arrivals import Commit, load_rate

    facts = [Commit(0.0, 1_000_000)] + [Commit(600.0 * k, 100 + k) for k in range(1, 7)]  # 6 in 1h
    dims = [Commit(0.0, 500), Commit(1800.0, 20), Commit(3600.0, 30)]  # 2 in 1h
    per_hour, rows = load_rate([facts, dims])
    assert per_hour == 8.0
    assert rows == 102.5  # median of 101..106, 20 and 30: the creating commits left out
    assert load_rate([[Commit(5.0, 10)]]) == (1.0, 0.0)  # too short to tell: one an hour
