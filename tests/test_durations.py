"""Durations: formatted for people, and measured as medians."""

from __future__ import annotations

from sketch_core.durations import format_duration, median_seconds


def test_format_duration_is_short_and_exact_to_the_second() -> None:
    assert format_duration(90) == "1m30s"
    assert format_duration(3600) == "1h"
    assert format_duration(0.25) == "0.25s"


def test_median_seconds_times_each_run_and_warms_up_only_when_asked() -> None:
    calls: list[int] = []
    seconds = median_seconds(lambda: calls.append(1), 3)
    assert len(calls) == 3 and 0 <= seconds < 1
    calls.clear()
    median_seconds(lambda: calls.append(1), 3, warm_up=True)
    assert len(calls) == 4
