"""Window functions over whole partitions, in-process, with Spark's results.

The incremental window operator hands this module every row of each partition a delta touches
(before and after the change) and subtracts one result from the other. Evaluated here, as Spark
evaluates them:

* ``ROW_NUMBER``, ``RANK`` and ``DENSE_RANK`` over the partition's ORDER BY (Spark's order:
  NULLs first when ascending, NaN above every number). Peers tie in RANK and DENSE_RANK;
  ROW_NUMBER numbers peers in an order of its own, as Spark does in one of its own, so a
  report should order by a unique column last;
* ``COUNT``, ``MIN``, ``MAX``, ``SUM`` and ``AVG`` over the whole partition (no ORDER BY), or
  with an ORDER BY over SQL's default frame: from the partition's first row to the current
  row's last peer. Sums of decimals are exact (Python's Decimal), as Spark's are; an average
  of decimals is rounded half up to its result's scale, as Spark rounds it; sums of doubles
  are added in window order (Spark adds them in an order of its own: the last bits may
  differ, as between two Spark plans).

Each output row's provenance is its whole partition (see the capture rewrite's ``window``),
so every row of a partition carries the union of the partition's fragments.

Example: partition g = 1 holds (id 1, v 5), (id 2, v 9), (id 3, v 9); ``RANK() OVER (PARTITION
BY g ORDER BY v DESC)`` gives 1, 1, 3 to ids 2, 3, 1, and ``COUNT(*) OVER (PARTITION BY g ORDER
BY v)`` gives 1, 3, 3 to ids 1, 2, 3.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any

from sketch_core.algebra.ir import RANKING_FUNCTIONS, SortKey, WindowCall
from sketch_core.incremental.ordering import spark_order
from sketch_core.incremental.topk import sort_key

Row = tuple[Any, ...]
# The functions evaluated here.
IN_PROCESS = frozenset({*RANKING_FUNCTIONS, "count", "min", "max", "sum", "avg"})


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
) -> list[tuple[Row, tuple[Any, ...]]]:
    """The rows of one partition in window order, each with its calls' values. ``order``:
    (column position, key); ``calls``: each call and the position of its argument column
    (None for COUNT(*) and the ranking functions); ``scales``: per call, the decimal scale of an
    AVG's result (None, or left out: a double)."""
    ordered = sorted(rows, key=lambda r: sort_key(r, order)) if order else list(rows)
    keys = [sort_key(r, order) for r in ordered] if order else [()] * len(ordered)
    # Per row: the index of its first peer, and one past its last (the default frame's end).
    first = [0] * len(ordered)
    last = [len(ordered)] * len(ordered)
    groups = [1] * len(ordered)
    for i in range(1, len(ordered)):
        same = keys[i] == keys[i - 1]
        first[i] = first[i - 1] if same else i
        groups[i] = groups[i - 1] + (0 if same else 1)
    for i in range(len(ordered) - 2, -1, -1):
        last[i] = last[i + 1] if keys[i] == keys[i + 1] else i + 1

    def prefixes_of(func: str, p: int | None) -> list[Any]:
        return _prefixes(func, [1 if p is None else r[p] for r in ordered])

    summed = {"avg": "sum"}  # (an average is a sum over a count)
    prefixes = [
        None if call.func in RANKING_FUNCTIONS else prefixes_of(summed.get(call.func, call.func), p)
        for call, p in calls
    ]
    counts = [prefixes_of("count", p) if call.func == "avg" else None for call, p in calls]
    scales = list(scales) or [None] * len(calls)
    out = []
    for i, row in enumerate(ordered):
        values: list[Any] = []
        end = last[i] if order else len(ordered)
        for (call, _), prefix, count, scale in zip(calls, prefixes, counts, scales, strict=True):
            if call.func == "row_number":
                values.append(i + 1)
            elif call.func == "rank":
                values.append(first[i] + 1)
            elif call.func == "dense_rank":
                values.append(groups[i])
            elif count is not None:  # AVG
                assert prefix is not None
                values.append(average(prefix[end], count[end], scale))
            else:
                assert prefix is not None
                values.append(prefix[end])
        out.append((row, tuple(values)))
    return out
