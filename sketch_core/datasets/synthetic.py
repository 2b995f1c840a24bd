"""The synthetic workload of IMP Sec. 10.1: a key, a group attribute ``a``, and b..j.

``a`` is uniform over ``groups`` values; each of b..j is a noisy linear function of ``a`` (so
they correlate with it, as in the paper), centred so that negative values occur.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from sketch_core.errors import DatasetError

CORRELATED = ("b", "c", "d", "e", "f", "g", "h", "i", "j")
# Alternate types, so the workload exercises integer and floating-point columns.
_FLOAT_COLUMNS = frozenset({"c", "e", "g", "i"})
NOISE = 0.1  # noise standard deviation, as a fraction of the number of groups


def synthetic_table(rows: int, groups: int, *, seed: int = 0, key_start: int = 0) -> pa.Table:
    if rows < 0:
        raise DatasetError(f"rows must be non-negative, got {rows}")
    if groups < 1:
        raise DatasetError(f"groups must be at least 1, got {groups}")
    rng = np.random.default_rng(seed)
    a = rng.integers(0, groups, size=rows, dtype=np.int64)
    columns: dict[str, np.ndarray] = {
        "key": np.arange(key_start, key_start + rows, dtype=np.int64),
        "a": a,
    }
    centred = a - groups / 2.0
    for weight, name in enumerate(CORRELATED, start=1):
        values = weight * centred + rng.normal(0.0, NOISE * groups * weight, size=rows)
        columns[name] = values if name in _FLOAT_COLUMNS else np.rint(values).astype(np.int64)
    return pa.table(columns)


def skewed_groups_table(rows: int, groups: int, *, seed: int, c_high: int) -> pa.Table:
    """Rows in ``key`` order; group ``a`` sizes spread widely (lognormal: a few rows to
    hundreds), the data for choosing a sketch attribute; ``b`` follows ``a`` (a correlated
    attribute), ``c`` is uniform over ``0..c_high - 1`` and independent of the group."""
    rng = np.random.default_rng(seed)
    sizes = rng.lognormal(0, 1.2, groups)
    a = rng.choice(groups, size=rows, p=sizes / sizes.sum())
    return pa.table(
        {
            "key": np.arange(rows),
            "a": a,
            "b": a * 10 + rng.integers(0, 30, rows),
            "c": rng.integers(0, c_high, rows),
        }
    )
