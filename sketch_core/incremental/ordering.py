"""Spark's order within one column, for the ordered state of min/max and top-k, and NaN as one
value in dictionary keys."""

from __future__ import annotations

import math
from typing import Any


def spark_order(value: Any) -> tuple[int, Any]:
    """A sort key: NaN above every number and equal to itself, as Spark orders doubles."""
    if isinstance(value, float) and math.isnan(value):
        return (1, 0)
    return (0, value)


_NAN = ("NaN",)  # dictionary key standing for every NaN (Spark groups NaNs together)


def group_key(value: Any) -> Any:
    """``value`` as a dictionary key: NaN != NaN, but Spark takes every NaN for one value."""
    return _NAN if isinstance(value, float) and math.isnan(value) else value


def key_value(key: Any) -> Any:
    return math.nan if key == _NAN else key
