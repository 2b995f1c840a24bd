"""Comparing query results across plans: floats rounded, since summation order differs."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pyarrow as pa


def rounded(rows: Iterable[Iterable[Any]]) -> list[tuple[Any, ...]]:
    return [tuple(round(v, 6) if isinstance(v, float) and math.isfinite(v) else v for v in r) for r in rows]


def sorted_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """The rows as a sorted list: equal results from plans that order ties differently compare equal."""
    return sorted(rounded(r.values() for r in table.to_pylist()), key=repr)
