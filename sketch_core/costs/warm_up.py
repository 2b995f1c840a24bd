"""Which query runs warm a way up: the first run of a report after runs of it the other way.

A report runs either with a sketch (over the pruned files, with range conditions) or without
one. The first run one way after a streak of runs the other way is slow: on the workload
benchmark a plain report after sketched ones took ~0.55 s where the same report took ~0.3 s
from its second plain run on, run after run. Fitting the query models on such runs makes the
way just switched to look dearer than it is, and the model switches back. So they are marked,
and the fits leave them out (as they leave out incremental runs that first built their state).

Kept per service: what was warmed up is in its process (its Spark session). Pure, thread-safe.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

# Reports remembered: the most recently run ones (a bounded memory for long-lived services).
REPORTS_KEPT = 1024


class WayChanges:
    """Per report (template), whether its last run in this process used a sketch."""

    def __init__(self, kept: int = REPORTS_KEPT) -> None:
        self._kept = kept
        self._last: OrderedDict[str, bool] = OrderedDict()
        self._lock = threading.Lock()

    def warms_up(self, report: str, sketched: bool) -> bool:
        """Record a run of ``report`` (``sketched``: with a sketch) and say whether it is the
        first one this way after runs the other way (never for a report's first run here:
        nothing tells a cold way from a warm one then, and every fit needs some runs)."""
        with self._lock:
            last = self._last.get(report)
            self._last[report] = sketched
            self._last.move_to_end(report)
            while len(self._last) > self._kept:
                self._last.popitem(last=False)
        return last is not None and last != sketched
