"""Window functions over whole partitions, in-process, with Spark's results.

The incremental window operator hands this module every row of each partition a delta touches
(before and after the change) and subtracts one result from the other. Evaluated here, as Spark
evaluates them:

* ``ROW_NUMBER``, ``RANK`` and ``DENSE_RANK`` over the partition's ORDER BY (Spark's order:
  NULLs first when ascending, NaN above every number). Peers tie in RANK and DENSE_RANK;
  ROW_NUMBER numbers peers in an order of its own, as Spark does in one of its own, so a
  report should order by a unique column last;
* ``COUNT``, ``MIN``, ``MAX``, ``SUM`` and ``AVG`` over a frame (:class:`Frame`): SQL's
  default (the whole partition without ORDER BY; with one, from the partition's first row to
  the current row's last peer), or one written out. ``ROWS`` frames count rows from the current
  one; ``RANGE`` frames take the current row's peers for ``CURRENT ROW`` and, over a single
  numeric order key, the rows whose key lies within the offsets of the current row's (a NULL
  key's bounded side stops at its NULL peers, as in Spark). Sums of decimals are exact
  (Python's Decimal), as Spark's are; an average of decimals is rounded half up to its
  result's scale, as Spark rounds it; sums of doubles are added in window order, over each
  row's frame from its first row as Spark adds them (across Spark plans the last bits may
  still differ).

Each output row's provenance is its whole partition (see the capture rewrite's ``window``),
so every row of a partition carries the union of the partition's fragments.

Example: partition g = 1 holds (id 1, v 5), (id 2, v 9), (id 3, v 9); ``RANK() OVER (PARTITION
BY g ORDER BY v DESC)`` gives 1, 1, 3 to ids 2, 3, 1, and ``COUNT(*) OVER (PARTITION BY g ORDER
BY v)`` gives 1, 3, 3 to ids 1, 2, 3. ``SUM(v) OVER (PARTITION BY g ORDER BY id ROWS
BETWEEN 1 PRECEDING AND CURRENT ROW)`` gives 5, 14, 18, and with ``RANGE BETWEEN 4 PRECEDING AND
CURRENT ROW`` over ``ORDER BY v`` it gives 5, 23, 23 (9 - 4 = 5 reaches back to id 1).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any

import sqlglot
from sqlglot import exp

from sketch_core.algebra.dialect import SPARK
from sketch_core.algebra.ir import RANKING_FUNCTIONS, SortKey, WindowCall
from sketch_core.incremental.ordering import spark_order
from sketch_core.incremental.topk import sort_key

Row = tuple[Any, ...]
# The functions evaluated here.
IN_PROCESS = frozenset({*RANKING_FUNCTIONS, "count", "min", "max", "sum", "avg"})


Offset = int | Decimal | None


@dataclass(frozen=True)
class Frame:
    """The rows of its partition a window call reads for each row. ``rows``: the bounds count
    rows (ROWS), else they compare order-key values (RANGE). ``start`` and ``end`` are offsets
    in window order: negative PRECEDING, 0 CURRENT ROW, positive FOLLOWING, None UNBOUNDED."""

    rows: bool
    start: Offset
    end: Offset

    @property
    def by_value(self) -> bool:
        """A RANGE frame with an offset other than CURRENT ROW: needs one numeric order key."""
        return not self.rows and any(b not in (None, 0) for b in (self.start, self.end))


class FrameNotEvaluated(ValueError):
    """A frame clause this module does not evaluate; the message names the part."""


def frame_of(text: str | None, ordered: bool) -> Frame:
    """The frame of a window's ``text`` (its frame clause as the IR keeps it, None: SQL's
    default, which depends on whether the window has an ORDER BY)."""
    if text is None:
        return Frame(False, None, 0) if ordered else Frame(True, None, None)
    spec = sqlglot.parse_one(f"SUM(x) OVER (ORDER BY x {text})", dialect=SPARK).find(exp.WindowSpec)
    assert spec is not None
    if spec.args.get("exclude"):
        raise FrameNotEvaluated(f"the frame exclusion in {text}")

    def bound(value: Any, side: str | None) -> Offset:
        literal = value.sql() if isinstance(value, exp.Expr) else value
        if literal in (None, "CURRENT ROW"):
            return 0
        if literal == "UNBOUNDED":
            return None
        if not (isinstance(value, exp.Literal) and value.is_number):
            raise FrameNotEvaluated(f"the frame offset {literal}")
        number = Decimal(value.this)
        offset: int | Decimal = int(number) if number == number.to_integral_value() else number
        return -offset if side == "PRECEDING" else offset

    return Frame(
        spec.args.get("kind") == "ROWS",
        bound(spec.args.get("start"), spec.args.get("start_side")),
        bound(spec.args.get("end"), spec.args.get("end_side")),
    )


def _bounds(
    frame: Frame,
    keys: list[tuple[Any, ...]],
    first: list[int],
    last: list[int],
    values: list[Any],
    key: SortKey | None,
) -> list[tuple[int, int]]:
    """Per row (in window order), its frame as [lo, hi) indices. ``keys`` are the rows' sort
    keys, ``first``/``last`` their peers' span, ``values`` the order key's values (RANGE by
    value only), ``key`` that order key."""
    n = len(keys)
    out = []
    for i in range(n):
        if frame.rows:
            lo = 0 if frame.start is None else min(max(i + int(frame.start), 0), n)
            hi = n if frame.end is None else min(max(i + int(frame.end) + 1, 0), n)
        else:
            lo = 0 if frame.start is None else _edge(frame.start, i, keys, first, values, key, start=True)
            hi = n if frame.end is None else _edge(frame.end, i, keys, last, values, key, start=False)
        out.append((lo, max(hi, lo)))
    return out


def _edge(
    offset: int | Decimal,
    i: int,
    keys: list[tuple[Any, ...]],
    peers: list[int],
    values: list[Any],
    key: SortKey | None,
    start: bool,
) -> int:
    """Where a RANGE frame's bound falls for row ``i``: its peers' edge at CURRENT ROW (and for
    a NULL key, as Spark does), else the first row at (start) or past (end) the key value
    ``offset`` away in window order."""
    value = values[i] if values else None
    if offset == 0 or value is None:
        return peers[i]
    assert key is not None
    if isinstance(value, float):
        offset = float(offset)  # type: ignore[assignment]  # (a float key takes float offsets)
    target = value - offset if key.descending else value + offset
    probe = sort_key((target,), [(0, key)])
    return bisect_left(keys, probe) if start else bisect_right(keys, probe)


def average(total: Any, count: int, scale: int | None) -> Any:
    """AVG from a sum and a count: a double, or for decimals (``scale``: the result's) the
    quotient rounded half up to that scale."""
    if count == 0:
        return None
    if scale is None:
        return float(total) / count
    with localcontext() as context:
        context.prec = 80
        return (Decimal(total) / count).quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)


def _prefixes(func: str, values: list[Any]) -> list[Any]:
    """``out[j]``: COUNT, SUM, MIN or MAX of ``values[:j]`` (Spark's order; NULLs skipped)."""
    out: list[Any] = [0 if func == "count" else None]
    for v in values:
        now = out[-1]
        if v is None:
            out.append(now)
        elif func == "count":
            out.append(now + 1)
        elif now is None:
            out.append(v)
        elif func == "sum":
            out.append(now + v)
        else:
            a, b = spark_order(v), spark_order(now)
            out.append(v if (a < b if func == "min" else a > b) else now)
    return out


def evaluate_partition(
    rows: Sequence[Row],
    order: Sequence[tuple[int, SortKey]],
    calls: Sequence[tuple[WindowCall, int | None]],
    scales: Sequence[int | None] = (),
    frame: Frame | None = None,
) -> list[tuple[Row, tuple[Any, ...]]]:
    """The rows of one partition in window order, each with its calls' values. ``order``:
    (column position, key); ``calls``: each call and the position of its argument column
    (None for COUNT(*) and the ranking functions); ``scales``: per call, the decimal scale of an
    AVG's result (None, or left out: a double); ``frame``: the calls' frame (None: SQL's
    default). A RANGE frame by value needs exactly one order key (Spark's rule too)."""
    frame = frame or frame_of(None, bool(order))
    # Each row's key built once, to sort by and then to find its peers.
    unsorted = [sort_key(r, order) for r in rows] if order else [()] * len(rows)
    positions = sorted(range(len(rows)), key=unsorted.__getitem__)  # stable, as sorted(rows) was
    ordered = [rows[i] for i in positions]
    keys = [unsorted[i] for i in positions]
    # Per row: the index of its first peer, and one past its last.
    first = [0] * len(ordered)
    last = [len(ordered)] * len(ordered)
    groups = [1] * len(ordered)
    for i in range(1, len(ordered)):
        same = keys[i] == keys[i - 1]
        first[i] = first[i - 1] if same else i
        groups[i] = groups[i - 1] + (0 if same else 1)
    for i in range(len(ordered) - 2, -1, -1):
        last[i] = last[i + 1] if keys[i] == keys[i + 1] else i + 1
    by_value = [r[order[0][0]] for r in ordered] if frame.by_value else []
    bounds = _bounds(frame, keys, first, last, by_value, order[0][1] if frame.by_value else None)

    def column_of(p: int | None) -> list[Any]:
        return [1 if p is None else r[p] for r in ordered]

    def framed(func: str, p: int | None) -> list[Any]:
        """Per row, ``func`` over its frame: from prefixes where every frame starts at the first
        row (Spark grows those frames too) or the difference is exact (counts, sums of integers
        and decimals), else folded over the frame's rows in order (MIN, MAX, sums of doubles,
        as Spark adds them)."""
        values = column_of(p)
        if frame.start is None:
            prefix = _prefixes(func, values)
            return [prefix[hi] for _, hi in bounds]
        exact = func == "count" or (func == "sum" and not any(isinstance(v, float) for v in values))
        if not exact:
            return [_prefixes(func, values[lo:hi])[-1] for lo, hi in bounds]
        counts = _prefixes("count", values)
        sums = _prefixes(func, values)
        return [
            (counts[hi] - counts[lo] if func == "count" else (sums[hi] or 0) - (sums[lo] or 0))
            if counts[hi] > counts[lo] or func == "count"
            else None
            for lo, hi in bounds
        ]

    scales = list(scales) or [None] * len(calls)
    out_values: list[list[Any]] = []
    for (call, p), scale in zip(calls, scales, strict=True):
        if call.func in RANKING_FUNCTIONS:
            out_values.append([])
        elif call.func == "avg":
            totals, counts = framed("sum", p), framed("count", p)
            out_values.append([average(t, c, scale) for t, c in zip(totals, counts, strict=True)])
        else:
            out_values.append(framed(call.func, p))
    out = []
    for i, row in enumerate(ordered):
        values: list[Any] = []
        for (call, _), column in zip(calls, out_values, strict=True):
            if call.func == "row_number":
                values.append(i + 1)
            elif call.func == "rank":
                values.append(first[i] + 1)
            elif call.func == "dense_rank":
                values.append(groups[i])
            else:
                values.append(column[i])
        out.append((row, tuple(values)))
    return out
