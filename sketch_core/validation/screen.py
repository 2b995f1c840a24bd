"""A batch that certainly meets its suite, told with Arrow alone.

Great Expectations takes ten seconds to import and a few more to validate a batch, and every
maintenance validates the commits it reads; an Airflow task is a fresh process, so each task
would pay the import. Nearly every batch passes. This screen evaluates the same expectations
(ordered column list, no NULLs in required columns, values within the learned domains, the
stated row count) with Arrow's kernels and answers True only when the batch certainly passes
them all. Anything it cannot decide exactly (NaN in a float column, a timestamp domain, a
type without a domain comparison here) answers False, and the caller runs Great Expectations,
whose results stay the only source of failure reports.

Example: a suite learned ``amount`` in [1.0, 3.0] with slack 1.0, so the allowed range is wider;
a batch ``amount = [2.0, NULL]`` passes here (NULLs are not out of range, as in Great
Expectations); ``[2.0, NaN]`` is not decided here (Great Expectations counts NaN as outside).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sketch_core.validation.suite import TableSuite, domain_bounds


def certainly_passes(
    suite: TableSuite,
    batch: pa.Table,
    required: list[str],
    expected_rows: int | None,
    slack: float,
) -> bool:
    """True only if ``batch`` meets every expectation ``validate_batch`` would check."""
    if [f.name for f in batch.schema] != suite.column_names:
        return False
    learned = {c.name: c.type for c in suite.columns}
    if any(str(f.type) != learned[f.name] for f in batch.schema):
        return False
    if expected_rows is not None and batch.num_rows != expected_rows:
        return False
    if any(batch.column(name).null_count for name in required):
        return False
    for rule in suite.columns:
        bounds = domain_bounds(rule, slack)
        if bounds is not None and not _within(batch.column(rule.name), rule.kind, bounds):
            return False
    return True


def _within(column: pa.ChunkedArray, kind: str, bounds: tuple[Any, Any]) -> bool:
    """Every non-NULL value lies in ``bounds`` (inclusive), decided exactly, else False."""
    if column.null_count == len(column):
        return True
    if kind == "float" and pc.any(pc.is_nan(column)).as_py():
        return False
    if kind in ("int", "float", "decimal"):
        low, high = bounds
    elif kind == "date":
        low, high = dt.date.fromisoformat(bounds[0]), dt.date.fromisoformat(bounds[1])
    else:
        return False  # timestamps and the rest: Great Expectations decides
    extremes = pc.min_max(column)
    smallest, largest = extremes["min"].as_py(), extremes["max"].as_py()
    try:
        return bool(low <= smallest and largest <= high)
    except TypeError:  # a bound not comparable with the column's values
        return False
