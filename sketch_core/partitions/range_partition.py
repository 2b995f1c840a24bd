"""A range partition of one table attribute (pure logic, no I/O).

``n`` fragments are defined by ``n - 1`` sorted cut points ``c_1 < ... < c_{n-1}``: fragment 0
holds values below ``c_1``, fragment ``i`` holds ``[c_i, c_{i+1})`` and fragment ``n - 1`` holds
values from ``c_{n-1}`` up. The ranges cover the whole domain, so values outside the bounds seen
when the partition was computed (later inserts) still map to a fragment. NULLs, which no range
contains, get one extra fragment with id ``n`` (:attr:`RangePartition.null_fragment`).

A sketch is a set of fragment ids. :meth:`RangePartition.intervals` merges adjacent fragments
into one interval each (PBDS Sec. 5.1), and :meth:`RangePartition.predicate` renders them as
a Spark SQL condition that Parquet row-group and file pruning can use.
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp

from sketch_core.algebra.dialect import SPARK
from sketch_core.errors import SketchError


class PartitionError(SketchError):
    """A range partition cannot be built or used as asked."""


# The most fragments a partition may have: far above the paper's 1,000 to 10,000, far below
# what would exhaust memory (the boundaries are computed, stored and searched in full).
MAX_FRAGMENTS = 1_000_000


_KINDS: dict[type, str] = {
    bool: "bool",
    int: "int",
    float: "float",
    Decimal: "decimal",
    str: "str",
    dt.datetime: "timestamp",
    dt.date: "date",
}


def null_mask(values: np.ndarray) -> np.ndarray:
    """Which of ``values`` are NULL: NaT in dates and timestamps, NaN in doubles (how Arrow
    hands NULLs to numpy there), None in object arrays."""
    if values.dtype.kind == "M":
        return np.asarray(np.isnat(values), dtype=bool)
    if values.dtype.kind == "f":
        return np.asarray(np.isnan(values), dtype=bool)
    if values.dtype.kind == "O":
        return np.fromiter((v is None for v in values), dtype=bool, count=len(values))
    return np.zeros(len(values), dtype=bool)


def _chunks(values: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    return list(values.chunks) if isinstance(values, pa.ChunkedArray) else [values]


# Cut kinds numpy can binary-search in, with the dtype to search them as.
_SEARCHABLE = {"str": "str", "date": "datetime64[D]", "timestamp": "datetime64[us]"}


def _aware(value: Any) -> bool:
    return isinstance(value, dt.datetime) and value.tzinfo is not None


def _naive_utc(value: Any) -> Any:
    """An aware datetime (a timestamptz column read through Arrow: Spark's TIMESTAMP) as the
    naive UTC one the cuts hold: Spark computes them in its UTC session, and comparing aware
    with naive datetimes raises."""
    return value.astimezone(dt.UTC).replace(tzinfo=None) if _aware(value) else value


def _kind(value: Any) -> str:
    for python_type, name in _KINDS.items():  # datetime before date: it is a subclass
        if type(value) is python_type:
            return name
    raise PartitionError(f"cannot partition on values of type {type(value).__name__}")


# The binary search grows with the sketch's ranges; Spark's code generator fails on a query
# holding several searches over thousands of bounds (Spark copies a condition to the other side
# of a join) and falls back to slow interpreted evaluation. Beyond this many ranges the search
# tests a coarsened superset; such a sketch keeps most of the table anyway, and file pruning
# still uses every range.
MAX_TREE_INTERVALS = 128


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

    @cached_property
    def integer_cuts(self) -> np.ndarray | None:
        """The cuts as int64, when every cut is an integer (exact search for integer columns,
        which the float path of :meth:`fragments_of` would round above 2**53); else None.
        Computed once: a maintenance run annotates every delta with it."""
        if all(isinstance(c, int) for c in self.cuts):
            return np.asarray(self.cuts, dtype=np.int64)
        return None

    # -- lookup ------------------------------------------------------------------------------
    def fragment_of(self, value: Any) -> int:
        """The fragment holding ``value`` (binary search, O(log n))."""
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return self.null_fragment
        return bisect.bisect_right(self.cuts, _naive_utc(value))

    def fragments_of(self, values: Sequence[Any] | np.ndarray) -> np.ndarray:
        """Vectorised :meth:`fragment_of` for a column of values."""
        array = np.asarray(values, dtype=object if not isinstance(values, np.ndarray) else None)
        if array.dtype == object and _aware(next((v for v in array if v is not None), None)):
            array = np.array([_naive_utc(v) for v in array], dtype=object)
        numeric_cuts = not self.cuts or isinstance(self.cuts[0], int | float)
        # Decimal cuts against doubles (estimates from samples): compared as doubles, which can
        # misplace a value within a rounding error of a cut; exact callers pass Decimals.
        doubles = array.dtype.kind == "f" and bool(self.cuts) and isinstance(self.cuts[0], Decimal)
        if array.dtype.kind in "iuf" and (numeric_cuts or doubles):
            out = np.searchsorted(np.asarray(self.cuts, dtype=float), array.astype(float), side="right")
            if array.dtype.kind == "f":
                out[np.isnan(array)] = self.null_fragment
            return out.astype(np.int64)
        searchable = _SEARCHABLE.get(_kind(self.cuts[0])) if self.cuts else None
        if searchable is not None and len(array) > 32:
            return self._search(array, searchable)
        return np.fromiter((self.fragment_of(v) for v in array), dtype=np.int64, count=len(array))

    def fragments_of_strings(self, values: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """:meth:`fragments_of` for an Arrow string column, by one sort in Arrow of the cuts and
        the values together (UTF-8 byte order is code point order: Python's and Spark's),
        instead of turning every value into a Python object and back: 10x faster on a sample's
        hundreds of thousands of strings."""
        count, cuts = len(values), len(self.cuts)
        if cuts == 0 or _kind(self.cuts[0]) != "str":
            return self.fragments_of(values.to_numpy(zero_copy_only=False))
        both = pa.chunked_array(
            [pa.array(self.cuts, pa.large_string()), *_chunks(values.cast(pa.large_string()))],
            pa.large_string(),
        )
        is_value = np.r_[np.zeros(cuts, np.int8), np.ones(count, np.int8)]
        # A cut sorts before a value equal to it: the count of cuts up to a value is then the
        # number of cuts <= it, bisect_right's answer.
        order = pc.sort_indices(
            pa.table({"v": both, "value": is_value}),
            sort_keys=[("v", "ascending"), ("value", "ascending")],
        ).to_numpy()  # (NULLs sort anywhere: they count no cut, and get the NULL fragment)
        cuts_so_far = np.cumsum(is_value[order] == 0)
        out = np.empty(count, np.int64)
        values_at = order >= cuts
        out[order[values_at] - cuts] = cuts_so_far[values_at]
        out[np.asarray(values.is_null(), dtype=bool)] = self.null_fragment
        return out

    def _search(self, array: np.ndarray, dtype: str) -> np.ndarray:
        """Binary search in numpy for dates and timestamps, and in Arrow for strings (numpy's
        fixed-width strings drop trailing NUL characters, which would misorder them), NULLs to
        the NULL fragment."""
        nulls = null_mask(array)
        out = np.full(len(array), self.null_fragment, dtype=np.int64)
        present = array[~nulls]
        if dtype == "str":
            out[~nulls] = self.fragments_of_strings(pa.array(present.tolist(), pa.string()))
            return out
        cuts, keys = np.array(self.cuts, dtype=dtype), present.astype(dtype)
        out[~nulls] = np.searchsorted(cuts, keys, side="right")
        return out

    # -- use ---------------------------------------------------------------------------------
    def intervals(self, fragments: Iterable[int], max_intervals: int | None = None) -> list[Interval]:
        """The sketch's ranges, adjacent fragments merged (the NULL fragment is left out).

        With ``max_intervals``, the narrowest gaps (fewest fragments between two ranges) are
        closed until at most that many ranges remain: a superset of a sketch is still a sound
        filter, and it reads the fewest extra fragments (equi-depth: the fewest extra rows)
        while keeping the condition short enough for Spark and Parquet to evaluate cheaply.
        """
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
        if max_intervals is None or len(merged) <= max_intervals:
            return merged
        return self._coarsen(merged, max(1, max_intervals))

    def _coarsen(self, intervals: list[Interval], limit: int) -> list[Interval]:
        def width(gap: int) -> int:  # fragments between interval ``gap`` and the next one
            return intervals[gap + 1].first - intervals[gap].last

        gaps = sorted(range(len(intervals) - 1), key=lambda gap: (width(gap), gap))
        closed = set(gaps[: len(intervals) - limit])  # close gap i: join interval i with i + 1
        coarse: list[Interval] = []
        for index, interval in enumerate(intervals):
            if index - 1 in closed:
                previous = coarse[-1]
                coarse[-1] = Interval(previous.first, interval.last, previous.low, interval.high)
            else:
                coarse.append(interval)
        return coarse

    def _low(self, fragment: int) -> Any | None:
        return None if fragment == 0 else self.cuts[fragment - 1]

    def _high(self, fragment: int) -> Any | None:
        return None if fragment == self.fragment_count - 1 else self.cuts[fragment]

    def predicate_sql(
        self, fragments: Iterable[int], column: str | None = None, max_intervals: int | None = None
    ) -> str:
        """A Spark SQL condition selecting the rows of ``fragments`` (FALSE for an empty sketch):
        exactly them, or for a sketch of more than :data:`MAX_TREE_INTERVALS` ranges a superset.
        ``column`` is the SQL that reads the attribute (default: its name).

        A sketch of at most ``max_intervals`` ranges becomes an OR of ranges, which Spark pushes
        into Parquet to skip row groups. A longer OR is slow: Spark evaluates every branch for
        every row, and past a few dozen ranges the generated method gets too large for the JIT
        (ten times slower on TPC-H SF1). Then the condition is a binary search over the range
        bounds (:func:`membership_tree_sql`, log n comparisons per row) AND the coarsened ranges
        (:meth:`intervals`), which are still pushed down and only evaluated for rows the
        search kept.

        The text is rendered directly rather than through sqlglot trees: a sketched query is
        planned on every run, and building and copying trees of a few hundred bounds per table
        cost tens of milliseconds of a report that takes a few hundred.
        """
        ids = {int(f) for f in fragments}
        target = column if column is not None else _identifier_sql(self.attribute)
        tested = self._tested_intervals(ids, max_intervals)
        with_nulls = self.null_fragment in ids
        if max_intervals is None or len(tested) <= max_intervals:
            condition = ranges_sql(tested, target, with_nulls)
        else:
            coarse = ranges_sql(self.intervals(ids, max_intervals), target, with_nulls)
            tree = membership_tree_sql(tested, target, with_nulls)
            condition = ConditionSql(f"{tree.operand()} AND {coarse.operand()}", True)
        if not self.holds_nan:
            return condition.text
        # NaN is in the NULL fragment (as every lookup puts it), while Spark orders it above
        # every number: a range open above would take it. (An AND keeps the ranges pushable.)
        if with_nulls:
            return f"isnan({target}) OR {condition.operand()}"
        return f"NOT isnan({target}) AND {condition.operand()}"

    @property
    def holds_nan(self) -> bool:
        """Whether the attribute is a floating-point one, whose NaN values are in the NULL
        fragment."""
        return bool(self.cuts) and isinstance(self.cuts[0], float)

    def predicate(
        self, fragments: Iterable[int], column: exp.Expr | None = None, max_intervals: int | None = None
    ) -> exp.Expr:
        """:meth:`predicate_sql` parsed, for callers that inspect or evaluate the condition."""
        target = None if column is None else column.sql(dialect=SPARK)
        return sqlglot.parse_one(self.predicate_sql(fragments, target, max_intervals), dialect=SPARK)

    def _tested_intervals(self, ids: set[int], max_intervals: int | None) -> list[Interval]:
        """The ranges :meth:`predicate` tests: the sketch's own, or past
        :data:`MAX_TREE_INTERVALS` ranges (only when a tree is built) a coarsened superset."""
        exact = self.intervals(ids)
        if max_intervals is None or len(exact) <= max(max_intervals, MAX_TREE_INTERVALS):
            return exact
        return self.intervals(ids, MAX_TREE_INTERVALS)

    def predicate_share(self, fragments: Iterable[int], max_intervals: int | None = None) -> float:
        """The share of the table's fragments that :meth:`predicate` lets through; with
        equi-depth fragments, about the share of its rows (NULLs aside)."""
        tested = self._tested_intervals({int(f) for f in fragments}, max_intervals)
        return sum(i.last - i.first + 1 for i in tested) / self.fragment_count

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


@dataclass(frozen=True)
class ConditionSql:
    """Rendered condition text; ``connective`` if its top level is an AND or OR, which must be
    parenthesized where it becomes an operand of another AND (as sqlglot prints it)."""

    text: str
    connective: bool

    def operand(self) -> str:
        return f"({self.text})" if self.connective else self.text


def ranges_sql(intervals: Sequence[Interval], column: str, with_nulls: bool) -> ConditionSql:
    """``intervals`` as an OR of range conditions (plus ``IS NULL``), the form Parquet can use."""
    parts: list[ConditionSql] = []
    for interval in intervals:
        bounds: list[str] = []
        if interval.low is not None:
            bounds.append(f"{column} >= {literal_sql(interval.low)}")
        if interval.high is not None:
            bounds.append(f"{column} < {literal_sql(interval.high)}")
        if bounds:
            parts.append(ConditionSql(" AND ".join(bounds), len(bounds) > 1))
        else:
            parts.append(ConditionSql(f"NOT {column} IS NULL", False))
    if with_nulls:
        parts.append(ConditionSql(f"{column} IS NULL", False))
    if not parts:
        return ConditionSql("FALSE", False)
    if len(parts) == 1:
        return parts[0]
    return ConditionSql(" OR ".join(part.operand() for part in parts), True)


def membership_tree_sql(intervals: Sequence[Interval], column: str, with_nulls: bool) -> ConditionSql:
    """Whether ``column`` lies in one of the disjoint, sorted ``intervals``, as nested IFs.

    The interval bounds are the points where membership flips: a value is in the set iff the
    number of bounds at or below it is odd (even if the first interval is unbounded below).
    Each IF halves the bounds still in question, so a row costs log2(2 n) comparisons.
    """
    points = [literal_sql(bound) for i in intervals for bound in (i.low, i.high) if bound is not None]
    starts_inside = bool(intervals) and intervals[0].low is None

    def count_between(low: int, high: int) -> str:
        # The value has between ``low`` and ``high`` bounds at or below it.
        if low == high:
            return "TRUE" if starts_inside != (low % 2 == 1) else "FALSE"
        if high == low + 1:
            # IF(v < p, x, NOT x) as one comparison: a third fewer nodes for Spark to analyze.
            # (v is not NULL here: NULLs are settled before the search.)
            below_is_inside = starts_inside != (low % 2 == 1)
            return f"{column} {'<' if below_is_inside else '>='} {points[low]}"
        middle = (low + high) // 2
        return (
            f"IF({column} < {points[middle]}, "
            f"{count_between(low, middle)}, {count_between(middle + 1, high)})"
        )

    # A NULL comparison takes IF's false branch, so NULLs are settled before the search.
    if with_nulls:
        return ConditionSql(f"{column} IS NULL OR {count_between(0, len(points))}", True)
    return ConditionSql(f"NOT {column} IS NULL AND {count_between(0, len(points))}", True)


def _identifier_sql(name: str) -> str:
    return exp.to_identifier(name).sql(dialect=SPARK)


def literal_sql(value: Any) -> str:
    """:func:`sql_literal` as Spark SQL text; integers, the usual cut points, without sqlglot."""
    if type(value) is int:
        return str(value)
    return sql_literal(value).sql(dialect=SPARK)


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
