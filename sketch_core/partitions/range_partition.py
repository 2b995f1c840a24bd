"""A range partition of one table attribute (pure logic, no I/O).

``n`` fragments are defined by ``n - 1`` sorted cut points ``c_1 < ... < c_{n-1}``: fragment 0
holds values below ``c_1``, fragment ``i`` holds ``[c_i, c_{i+1})`` and fragment ``n - 1`` holds
values from ``c_{n-1}`` up. The ranges cover the whole domain, so values outside the bounds seen
when the partition was computed (later inserts) still map to a fragment. NULLs, which no range
contains, get one extra fragment with id ``n`` (:attr:`RangePartition.null_fragment`).

A sketch is a set of fragment ids. :meth:`RangePartition.intervals` merges adjacent fragments
into one interval each (PBDS Sec. 5.1), and :meth:`RangePartition.predicate_sql` renders them as
a Spark SQL condition that Parquet row-group and file pruning can use.
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
from sqlglot import exp

from sketch_core.errors import SketchError


class PartitionError(SketchError):
    """A range partition cannot be built or used as asked."""


_KINDS: dict[type, str] = {
    bool: "bool",
    int: "int",
    float: "float",
    Decimal: "decimal",
    str: "str",
    dt.datetime: "timestamp",
    dt.date: "date",
}


def _kind(value: Any) -> str:
    for python_type, name in _KINDS.items():  # datetime before date: it is a subclass
        if type(value) is python_type:
            return name
    raise PartitionError(f"cannot partition on values of type {type(value).__name__}")


@dataclass(frozen=True)
class Interval:
    """Fragments ``first..last`` merged: ``low <= a < high``; None means unbounded."""

    first: int
    last: int
    low: Any | None
    high: Any | None


@dataclass(frozen=True)
class RangePartition:
    table: str
    attribute: str
    cuts: tuple[Any, ...]

    def __post_init__(self) -> None:
        if any(c is None for c in self.cuts):
            raise PartitionError("cut points cannot be NULL")
        kinds = {_kind(c) for c in self.cuts}
        if len(kinds) > 1 and kinds != {"int", "float"}:
            raise PartitionError(f"cut points mix types: {sorted(kinds)}")
        if any(not a < b for a, b in zip(self.cuts, self.cuts[1:], strict=False)):
            raise PartitionError("cut points must be strictly increasing")

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def from_distinct_values(cls, table: str, attribute: str, values: Iterable[Any]) -> RangePartition:
        """One fragment per distinct value (used when values are fewer than fragments)."""
        distinct = sorted({v for v in values if v is not None})
        return cls(table, attribute, tuple(distinct[1:]))

    @classmethod
    def from_quantiles(cls, table: str, attribute: str, quantiles: Sequence[Any]) -> RangePartition:
        """Equi-depth cuts from (approximate) quantiles; repeated quantiles collapse (skew)."""
        return cls(table, attribute, tuple(sorted({q for q in quantiles if q is not None})))

    # -- shape -------------------------------------------------------------------------------
    @property
    def fragment_count(self) -> int:
        """Number of ranges (the NULL fragment is not counted)."""
        return len(self.cuts) + 1

    @property
    def null_fragment(self) -> int:
        return self.fragment_count

    # -- lookup ------------------------------------------------------------------------------
    def fragment_of(self, value: Any) -> int:
        """The fragment holding ``value`` (binary search, O(log n))."""
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return self.null_fragment
        return bisect.bisect_right(self.cuts, value)

    def fragments_of(self, values: Sequence[Any] | np.ndarray) -> np.ndarray:
        """Vectorised :meth:`fragment_of` for a column of values."""
        array = np.asarray(values, dtype=object if not isinstance(values, np.ndarray) else None)
        if array.dtype.kind in "iuf" and (not self.cuts or isinstance(self.cuts[0], int | float)):
            out = np.searchsorted(np.asarray(self.cuts, dtype=float), array.astype(float), side="right")
            if array.dtype.kind == "f":
                out[np.isnan(array)] = self.null_fragment
            return out.astype(np.int64)
        return np.fromiter((self.fragment_of(v) for v in array), dtype=np.int64, count=len(array))

    # -- use ---------------------------------------------------------------------------------
    def intervals(self, fragments: Iterable[int]) -> list[Interval]:
        """The sketch's ranges, adjacent fragments merged (the NULL fragment is left out)."""
        ids = sorted({int(f) for f in fragments})
        bad = [f for f in ids if not 0 <= f <= self.null_fragment]
        if bad:
            raise PartitionError(f"fragment ids {bad[:5]} are outside 0..{self.null_fragment}")
        ranges = [f for f in ids if f != self.null_fragment]
        merged: list[Interval] = []
        for fragment in ranges:
            if merged and merged[-1].last == fragment - 1:
                previous = merged[-1]
                merged[-1] = Interval(previous.first, fragment, previous.low, self._high(fragment))
            else:
                merged.append(Interval(fragment, fragment, self._low(fragment), self._high(fragment)))
        return merged

    def _low(self, fragment: int) -> Any | None:
        return None if fragment == 0 else self.cuts[fragment - 1]

    def _high(self, fragment: int) -> Any | None:
        return None if fragment == self.fragment_count - 1 else self.cuts[fragment]

    def predicate(self, fragments: Iterable[int], column: exp.Expr | None = None) -> exp.Expr:
        """A condition selecting exactly the rows of ``fragments`` (FALSE for an empty sketch)."""
        fragments = list(fragments)
        column = column if column is not None else exp.column(self.attribute)
        parts: list[exp.Expr] = []
        for interval in self.intervals(fragments):
            bounds: list[exp.Expr] = []
            if interval.low is not None:
                bounds.append(exp.GTE(this=column.copy(), expression=sql_literal(interval.low)))
            if interval.high is not None:
                bounds.append(exp.LT(this=column.copy(), expression=sql_literal(interval.high)))
            parts.append(
                exp.and_(*bounds)
                if bounds
                else exp.Not(this=exp.Is(this=column.copy(), expression=exp.Null()))
            )
        if self.null_fragment in {int(f) for f in fragments}:
            parts.append(exp.Is(this=column.copy(), expression=exp.Null()))
        if not parts:
            return exp.false()
        return exp.or_(*parts) if len(parts) > 1 else parts[0]

    def predicate_sql(self, fragments: Iterable[int], column: str | None = None) -> str:
        target = exp.column(*reversed(column.split(".", 1))) if column else None
        return self.predicate(fragments, target).sql(dialect="spark")

    # -- storage -----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        kind = _kind(self.cuts[0]) if self.cuts else "int"
        encoders: dict[str, Callable[[Any], Any]] = {
            "decimal": str,
            "date": dt.date.isoformat,
            "timestamp": dt.datetime.isoformat,
        }
        encode = encoders.get(kind)
        return {"kind": kind, "cuts": [encode(c) if encode else c for c in self.cuts]}

    @classmethod
    def from_json(cls, table: str, attribute: str, data: dict[str, Any]) -> RangePartition:
        decoders: dict[str, Callable[[Any], Any]] = {
            "decimal": Decimal,
            "date": dt.date.fromisoformat,
            "timestamp": dt.datetime.fromisoformat,
        }
        decode = decoders.get(data["kind"])
        return cls(table, attribute, tuple(decode(c) if decode else c for c in data["cuts"]))


def sql_literal(value: Any) -> exp.Expr:
    """A typed SQL literal for a cut point (dates and timestamps as casts)."""
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int | float | Decimal):
        return exp.Literal.number(str(value))
    if isinstance(value, dt.datetime):
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), exp.DataType.build("timestamp"))
    if isinstance(value, dt.date):
        return exp.cast(exp.Literal.string(value.isoformat()), exp.DataType.build("date"))
    return exp.Literal.string(str(value))
