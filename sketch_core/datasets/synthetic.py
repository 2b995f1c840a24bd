"""The synthetic workload of IMP Sec. 10.1: a key, a group attribute ``a``, and b..j.

``a`` is uniform over ``groups`` values; each of b..j is a noisy linear function of ``a`` (so
they correlate with it, as in the paper), centred so that negative values occur.
"""

from __future__ import annotations

from decimal import Decimal

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


# The retail tables of the generator-style report corpus (``generator_style.SYNTHETIC_REPORTS``).
REGIONS = ("north", "south", "east", "west", "central")
CHANNELS = ("web", "store", "phone")


def sales_tables(rows: int, stores: int = 60, *, seed: int = 0) -> dict[str, pa.Table]:
    """``sales`` (sorted by ``sale_id``) and its ``stores`` dimension, with the types reports
    meet: dates over two years (a leap day among them), decimals, doubles, strings with mixed
    case and padding, and NULLs in ``discount`` and ``note``."""
    if rows < 0 or stores < 1:
        raise DatasetError(f"rows must be non-negative and stores positive, got {rows}, {stores}")
    rng = np.random.default_rng(seed)
    start = np.datetime64("2023-01-01")
    days = rng.integers(0, 731, rows)
    quantity = rng.integers(1, 20, rows)
    price = np.round(rng.gamma(2.0, 20.0, rows), 2)
    amounts = [f"{q * p:.2f}" for q, p in zip(quantity, price, strict=True)]
    discount = np.round(rng.choice([0.0, 0.05, 0.1, 0.2], rows), 2)
    sales = pa.table(
        {
            "sale_id": np.arange(rows, dtype=np.int64),
            "store_id": rng.integers(0, stores, rows).astype(np.int64),
            "ship_store_id": rng.integers(0, stores, rows).astype(np.int64),
            "customer_id": rng.integers(0, max(1, rows // 8), rows).astype(np.int64),
            "sale_date": pa.array(start + days.astype("timedelta64[D]"), pa.date32()),
            "channel": pa.array(rng.choice(CHANNELS, rows)),
            "quantity": quantity.astype(np.int32),
            "unit_price": price,
            "amount": pa.array([Decimal(a) for a in amounts], pa.decimal128(12, 2)),
            "discount": pa.array(np.where(rng.random(rows) < 0.1, np.nan, discount), from_pandas=True),
            "note": pa.array([None if r < 0.7 else f" Note {int(r * 100)} " for r in rng.random(rows)]),
        }
    )
    cities = [f"City{i % 17:02d}" for i in range(stores)]
    store_table = pa.table(
        {
            "store_id": np.arange(stores, dtype=np.int64),
            "city": pa.array(cities),
            "region": pa.array([REGIONS[i % len(REGIONS)] for i in range(stores)]),
            "opened": pa.array(start - rng.integers(0, 3000, stores).astype("timedelta64[D]"), pa.date32()),
            "size_sqm": rng.integers(100, 5000, stores).astype(np.int32),
        }
    )
    return {"sales": sales, "stores": store_table}
