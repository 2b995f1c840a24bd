"""Predicting a table's next delta from its commit history (IQP's delta prediction, Sec. 2 and 4.2).

Three shapes of history are told apart by their gaps between commits:

- **bursty**: the sorted gaps jump by ``BURST_RATIO`` or more somewhere, splitting them into
  short gaps (within a burst) and long ones (between bursts). While the time since the last
  commit is below the split, a burst is still arriving: more commits follow at the short gap
  until the burst has its typical length; after it, the next burst starts a typical period
  after the current one started.
- **regular**: the gaps vary little (coefficient of variation below ``REGULAR_CV``): the next
  commit comes one median gap after the last.
- **irregular**: anything else: one mean gap after the last (a Poisson process's best guess),
  flagged as such.

Sizes are predicted as the median rows per commit. Pure: times are epoch seconds, passed in.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sketch_core.durations import format_duration

BURST_RATIO = 8.0
REGULAR_CV = 0.5
MIN_COMMITS = 3  # fewer, and there is no pattern to speak of


@dataclass(frozen=True)
class Commit:
    at: float  # epoch seconds
    rows: int  # rows inserted plus deleted


@dataclass(frozen=True)
class Prediction:
    pattern: str  # "bursty", "regular", "irregular" or "unknown"
    next_at: float | None  # when the next commit is expected (None: no idea)
    next_rows: float  # rows it is expected to bring
    in_burst: bool  # a burst is arriving now: more commits are expected shortly
    burst_remaining: int  # commits still expected in the current burst
    reason: str

    def rows_before(self, deadline: float) -> float:
        """Rows expected to arrive before ``deadline`` (the next commit only, or the rest of
        the current burst): what maintaining now would leave for later."""
        if self.next_at is None or self.next_at > deadline:
            return 0.0
        return self.next_rows * max(1, self.burst_remaining)


def predict(history: Sequence[Commit], now: float) -> Prediction:
    commits = sorted(history, key=lambda c: c.at)
    rows = statistics.median([c.rows for c in commits]) if commits else 0.0
    if len(commits) < MIN_COMMITS:
        return Prediction("unknown", None, rows, False, 0, f"{len(commits)} commits: too few to predict")
    gaps = [b.at - a.at for a, b in itertools.pairwise(commits)]
    split = _burst_split(gaps)
    if split is not None:
        return _bursty(commits, gaps, split, rows, now)
    mean = statistics.fmean(gaps)
    cv = statistics.pstdev(gaps) / mean if mean > 0 else 0.0
    last = commits[-1].at
    if cv < REGULAR_CV:
        gap = statistics.median(gaps)
        return Prediction(
            "regular", last + gap, rows, False, 0, f"regular: every {format_duration(gap)} (cv {cv:.2f})"
        )
    return Prediction(
        "irregular", last + mean, rows, False, 0, f"irregular: mean gap {format_duration(mean)} (cv {cv:.2f})"
    )


def _burst_split(gaps: Sequence[float]) -> float | None:
    """The gap length that separates bursts, if the gaps fall into short and long ones: the
    geometric middle of the biggest jump between consecutive sorted gaps. Both sides need
    two gaps at least, so one odd pause does not make a pattern."""
    ordered = sorted(gaps)
    best, split = BURST_RATIO, None
    for i in range(1, len(ordered) - 2):
        low, high = ordered[i], ordered[i + 1]
        ratio = high / low if low > 0 else math.inf
        if ratio >= best:
            best, split = ratio, math.sqrt(max(low, 1e-9) * high)
    return split


def _bursty(
    commits: Sequence[Commit], gaps: Sequence[float], split: float, rows: float, now: float
) -> Prediction:
    bursts: list[list[Commit]] = [[commits[0]]]
    for commit, gap in zip(commits[1:], gaps, strict=False):
        if gap < split:
            bursts[-1].append(commit)
        else:
            bursts.append([commit])
    short = statistics.median([g for g in gaps if g < split])
    length = round(statistics.median([len(b) for b in bursts[:-1]] or [len(bursts[-1])]))
    starts = [b[0].at for b in bursts]
    period = statistics.median([b - a for a, b in itertools.pairwise(starts)])
    current, last = bursts[-1], commits[-1].at
    remaining = max(0, length - len(current))
    if now - last < split and remaining > 0:
        return Prediction(
            "bursty",
            last + short,
            rows,
            True,
            remaining,
            f"bursty: in a burst ({len(current)} of ~{length} commits, every {format_duration(short)})",
        )
    next_start = current[0].at + period
    return Prediction(
        "bursty",
        next_start,
        rows,
        False,
        length,
        f"bursty: bursts of ~{length} commits every {format_duration(period)}; "
        f"the next in {format_duration(max(0.0, next_start - now))}",
    )


def forecast_next(times: Sequence[float], now: float) -> float | None:
    """When a recurring event (a report's runs) comes next, from the times it came before;
    None without a pattern. A forecast already half a gap in the past is rolled forward by the
    gap: a run that was skipped does not leave the forecast stuck behind the clock."""
    prediction = predict([Commit(t, 0) for t in times], now)
    if prediction.next_at is None:
        return None
    ordered = sorted(times)
    gap = statistics.median([b - a for a, b in itertools.pairwise(ordered)])
    at = prediction.next_at
    if gap > 0 and prediction.pattern != "bursty":
        while at + gap / 2 < now:
            at += gap
    return at


HOUR = 3600.0


def load_rate(histories: Iterable[Sequence[Commit]]) -> tuple[float, float]:
    """Loads per hour into a sketch's tables (each table's commits over the span of its
    history, summed) and rows per load (the median); one load an hour when a table's history
    is too short to tell."""
    per_hour = 0.0
    sizes: list[int] = []
    for history in histories:
        commits = sorted(history, key=lambda c: c.at)
        # The oldest commit only starts the span (it may be the table's creation, all its rows).
        sizes.extend(c.rows for c in commits[1:])
        span = commits[-1].at - commits[0].at if len(commits) > 1 else 0.0
        per_hour += (len(commits) - 1) * HOUR / span if span > 0 else 1.0
    return per_hour, float(statistics.median(sizes)) if sizes else 0.0
