"""Incremental top-k (IMP Sec. 5.8): an ordered map of the input's annotated rows.

State: every input row (with its annotation and multiplicity) in Spark's ORDER BY order. After
a batch the operator compares the first k rows before and after, and emits the difference:
rows that left the top k as deletions, rows that entered it as insertions.

Ties: Spark's LIMIT picks any of the rows tied on the ORDER BY keys at the k-th place. Here
ties are broken by the rows' values and then their annotations, so maintenance is
deterministic; a fresh capture may pick another of the tied rows (both sketches are sound
for a query whose ORDER BY determines the result, which is what a report needs).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from decimal import Decimal
from functools import total_ordering
from typing import Any

import pyarrow as pa
from sortedcontainers import SortedDict

from sketch_core.algebra.ir import SortKey, TopK
from sketch_core.errors import KeptValuesExhaustedError
from sketch_core.gc_pause import collection_paused
from sketch_core.incremental.annotated import FRAGMENTS, MULTIPLICITY, AnnotatedDelta
from sketch_core.incremental.ordering import spark_order


@total_ordering
class _Descending:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and self.value == other.value

    def __lt__(self, other: _Descending) -> bool:
        return bool(other.value < self.value)

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"_Descending({self.value!r})"


def sort_key(row: tuple[Any, ...], positions: Sequence[tuple[int, SortKey]]) -> tuple[Any, ...]:
    return tuple(_key_part(row[index], key) for index, key in positions)


def _key_part(value: Any, key: SortKey) -> Any:
    """One ordering column's part of a row's sort key."""
    if value is None:
        return (0 if key.effective_nulls_first else 2, None)
    orderable = spark_order(value)
    if key.descending and isinstance(orderable[1], _NEGATABLE):
        # A number's descending key is its negation: compared in C, where _Descending's
        # comparisons run in Python (a first load of 38,000 groups spent 2.4 s in them).
        return (1, (-orderable[0], -orderable[1]))
    return (1, _Descending(orderable) if key.descending else orderable)


_NEGATABLE = (int, float, Decimal)


def tiebreak(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(_tiebreak_part(v) for v in row)


def _tiebreak_part(value: Any) -> Any:
    return (0, None) if value is None else (1, spark_order(value))


def _key_parts(values: Sequence[Any], key: SortKey) -> list[Any]:
    """:func:`_key_part` of each value; without a float among them (no NaN to place) the
    parts are written out here, a call per value saved."""
    if any(isinstance(v, float) for v in values):
        return [_key_part(v, key) for v in values]
    nulls = (0 if key.effective_nulls_first else 2, None)
    if not key.descending:
        return [nulls if v is None else (1, (0, v)) for v in values]
    return [
        nulls if v is None else (1, (0, -v)) if isinstance(v, _NEGATABLE) else (1, _Descending((0, v)))
        for v in values
    ]


def _tiebreak_parts(values: Sequence[Any]) -> list[Any]:
    """:func:`_tiebreak_part` of each value (written out where no float needs NaN's place)."""
    if any(isinstance(v, float) for v in values):
        return [_tiebreak_part(v) for v in values]
    return [(0, None) if v is None else (1, (0, v)) for v in values]


def entry_keys(
    columns: Sequence[Sequence[Any]],
    positions: Sequence[tuple[int, SortKey]],
    annotations: Sequence[tuple[Any, ...]],
) -> list[tuple[Any, ...]]:
    """The state's key of every row of ``columns`` (the rows' values, a column at a time) with
    its annotation: :func:`sort_key`, :func:`tiebreak` and the annotation, as
    :meth:`TopKOperator.apply` makes them, built a column at a time. Restoring a top-k state
    builds one per stored row (hundreds of thousands at TPC-H SF10), where a call per row was
    most of a cold maintenance run."""
    ordered = [_key_parts(columns[index], key) for index, key in positions]
    ties = [_tiebreak_parts(column) for column in columns]
    return list(zip(zip(*ordered, strict=True), zip(*ties, strict=True), annotations, strict=True))


class _Entry:
    """A row of the top k: equal and hashed by its ordering key (NaN-safe), carrying the row."""

    __slots__ = ("key", "row")

    def __init__(self, key: tuple[Any, ...], row: tuple[Any, ...]) -> None:
        self.key, self.row = key, row

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Entry) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


class TopKOperator:
    """Top-k over its input's annotated rows.

    With ``keep`` (IMP 9.4.3) only a prefix of the input is kept: after a batch leaves more
    than twice ``keep`` entries, those past the first ``keep`` rows are dropped and the state is
    marked ``partial``. A partial state is exact up to its last entry (the bound): changes past
    the bound are ignored, and when deletions leave fewer than k rows in it the top k is no
    longer known (:class:`KeptValuesExhaustedError`; maintenance then recaptures).
    """

    def __init__(
        self, node: TopK, schema: pa.Schema, annotations: Sequence[str], keep: int | None = None
    ) -> None:
        self.node = node
        self.schema = schema
        self.annotations = tuple(annotations)
        names = schema.names
        self.positions = [(names.index(k.column), k) for k in node.order]
        # (sort key, tiebreak, annotation) -> (row, multiplicity), in output order. The row
        # itself stays out of the key: NaN values would not compare. Restored from a stored
        # state, a StoredEntries (get, set, pop, len, items in order) unless top-m is kept.
        self.rows: SortedDict = SortedDict()
        # Entries changed since the state was last persisted -> their row (see AggregateOperator).
        self.dirty: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self.keep = max(keep, node.reach) if keep else None
        self.partial = False  # rows past the last kept entry were dropped

    def top(self) -> Counter[_Entry]:
        """The first k rows (with their annotations) and how many copies of each."""
        taken: Counter[_Entry] = Counter()
        remaining = self.node.reach
        for key, (row, count) in self.rows.items():
            if remaining <= 0:
                break
            copies = min(count, remaining)
            taken[_Entry(key, row)] += copies
            remaining -= copies
        return taken

    def current(self) -> AnnotatedDelta:
        """The top k rows now, as inserted rows."""
        return self._emit(list(self.top().items()))

    def apply(self, rows: AnnotatedDelta) -> AnnotatedDelta:
        if rows.num_rows == 0:
            return AnnotatedDelta.empty(self.schema, self.annotations)
        with collection_paused():  # a first load makes an entry per input row (see restore_topk)
            return self._apply(rows)

    def _apply(self, rows: AnnotatedDelta) -> AnnotatedDelta:
        before = self.top()
        data = rows.data()
        columns = [data.column(c).to_pylist() for c in data.column_names]
        values = list(zip(*columns, strict=True))
        multiplicities = rows.table.column(MULTIPLICITY).to_pylist()
        fragments = [
            [tuple(sorted(ids)) if ids else () for ids in rows.table.column(a).to_pylist()]
            for a in self.annotations
        ]
        annotations = list(zip(*fragments, strict=True)) if fragments else [()] * len(values)
        # Net each entry over the batch first: a batch may list a row's deletion before its
        # insertion, and only the end state has to be a valid bag.
        net: dict[tuple[Any, ...], tuple[tuple[Any, ...], int]] = {}
        for entry, row, multiplicity in zip(
            entry_keys(columns, self.positions, annotations), values, multiplicities, strict=True
        ):
            net[entry] = (row, net.get(entry, (row, 0))[1] + multiplicity)
        if not self.rows and not self.partial:  # the first load: one sort, not an insertion per entry
            if any(change < 0 for _, change in net.values()):
                raise AssertionError("top-k input rows deleted more often than inserted")
            loaded = {entry: (row, change) for entry, (row, change) in net.items() if change}
            self.dirty.update((entry, row) for entry, (row, _) in loaded.items())
            self.rows = SortedDict(loaded)
            net = {}
        bound = self.rows.peekitem(-1)[0] if self.partial and self.rows else None
        for entry, (row, change) in net.items():
            if self.partial and (bound is None or entry > bound):
                continue  # past the kept prefix: not tracked
            self.dirty[entry] = row
            count = self.rows.get(entry, (row, 0))[1] + change
            if count < 0:
                raise AssertionError(f"top-k input row {row} deleted more often than inserted")
            if count:
                self.rows[entry] = (row, count)
            else:
                self.rows.pop(entry, None)
        if self.partial and sum(count for _, count in self.rows.values()) < self.node.reach:
            raise KeptValuesExhaustedError("top-k", self.keep or 0)
        self._trim()
        after = self.top()
        # Counter subtraction keeps positive counts only: the two differences are the rows that
        # entered and the rows that left. Rows are compared by tiebreak key (NaN-safe).
        changes = [(key, n) for key, n in (after - before).items()]
        changes += [(key, -n) for key, n in (before - after).items()]
        return self._emit(changes)

    def _trim(self) -> None:
        """Drop the entries past the first ``keep`` rows once there are twice that many."""
        if self.keep is None or len(self.rows) <= 2 * self.keep:
            return
        kept, cut = 0, 0
        while kept < self.keep:  # the first entries holding ``keep`` rows
            kept += self.rows.peekitem(cut)[1][1]
            cut += 1
        for entry in list(self.rows.keys()[cut:]):
            self.dirty[entry] = self.rows.pop(entry)[0]
        self.partial = True

    def _emit(self, changes: list[tuple[_Entry, int]]) -> AnnotatedDelta:
        columns = {
            name: pa.array([entry.row[i] for entry, _ in changes], self.schema.field(name).type)
            for i, name in enumerate(self.schema.names)
        }
        annotations = {
            a: pa.array([list(entry.key[2][k]) for entry, _ in changes], FRAGMENTS)
            for k, a in enumerate(self.annotations)
        }
        return AnnotatedDelta.build(
            pa.table(columns, schema=self.schema), [n for _, n in changes], annotations
        )
