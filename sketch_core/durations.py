"""Durations: as people read them (for reasons and status lines), and measured (for the
benchmarks and the demo's summary)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def format_duration(seconds: float) -> str:
    """``90`` -> ``1m30s``, ``3600`` -> ``1h``: short, exact to the second."""
    whole = round(seconds)
    if whole < 1:
        return f"{seconds:.2g}s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, whole = divmod(whole, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def median_seconds(run: Callable[[], object], runs: int, *, warm_up: bool = False) -> float:
    """The median wall time of ``runs`` calls of ``run``; with ``warm_up``, after one untimed
    call (caches, JIT, file listings)."""
    if warm_up:
        run()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)
