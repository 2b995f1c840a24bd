"""Spark's order within one column, for the ordered state of min/max and top-k."""

from __future__ import annotations

import math
from typing import Any


def spark_order(value: Any) -> tuple[int, Any]:
    """A sort key: NaN above every number and equal to itself, as Spark orders doubles."""
    if isinstance(value, float) and math.isnan(value):
        return (1, 0)
    return (0, value)
