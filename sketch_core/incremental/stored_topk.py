"""A top-k's ordered entries over its stored state, with a key built only for the entries used.

A top-k operator keeps every row of its input in Spark's ORDER BY order (see :mod:`topk`).
Restoring that map from a stored state built a Python key per stored entry and sorted them:
at TPC-H SF10, 380,000 entries and seconds of every cold maintenance run, while a run's delta
changes a handful of them and its result reads the first k.

A whole state is stored in the map's order (``topk_state`` writes ``rows.items()``), so it is
searchable as it is: :class:`StoredEntries` keeps it in Arrow and finds an entry by binary
search, building keys for the positions it probes only (the first levels of the search are
shared by every lookup, and cached). The entries changed since (the stored layers of changes,
then the runs' own changes) live in an overlay that wins over the stored rows; an entry whose
count fell to 0 stays in the overlay to hide its stored row. Writing a whole state again needs
every entry in order: :meth:`StoredEntries.materialized` builds the ordered map then.

The search relies on the stored order being the order of today's keys (:mod:`topk`'s
``sort_key`` and ``tiebreak``): a change to how keys order rows must raise ``STATE_FORMAT``
(:mod:`state`), so that states stored in the old order are not read.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa
from sortedcontainers import SortedDict

from sketch_core.algebra.ir import SortKey
from sketch_core.incremental.topk import _key_part, entry_keys, tiebreak

Key = tuple[Any, ...]
Entry = tuple[tuple[Any, ...], int]  # (row, multiplicity)

COUNT = "__count"


def annotation_column(annotation: str) -> str:
    return f"__ann_{annotation}"


def id_tuples(column: pa.ChunkedArray | pa.Array) -> list[tuple[int, ...]]:
    """A list column of fragment ids as a tuple per row (a NULL list as the empty tuple), sliced
    from the flat values: ``to_pylist`` builds a list object per row first, and a top-k state's
    rows carry a list per annotation (at TPC-H SF1 Q10's restore spent half its time there)."""
    array = _one_array(column)
    if array.null_count:
        return [tuple(ids) if ids else () for ids in array.to_pylist()]
    offsets = array.offsets.to_numpy().tolist()
    values = array.values.to_numpy(zero_copy_only=False).tolist()
    return [tuple(values[start:end]) for start, end in pairwise(offsets)]


def _one_array(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(column, pa.Array):
        return column
    return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)


def stored_entries(
    table: pa.Table,
    names: Sequence[str],
    positions: Sequence[tuple[int, SortKey]],
    annotations: Sequence[str],
) -> tuple[list[Key], list[tuple[Any, ...]], list[int]]:
    """Every stored row of ``table`` as the operator keys it: (keys, rows, counts)."""
    columns = [table.column(n).to_pylist() for n in names]
    rows = list(zip(*columns, strict=True))
    annotated = [id_tuples(table.column(annotation_column(a))) for a in annotations]
    ids = list(zip(*annotated, strict=True)) if annotated else [()] * len(rows)
    return entry_keys(columns, positions, ids), rows, table.column(COUNT).to_pylist()


class StoredEntries:
    """``TopKOperator.rows`` (entry key -> (row, multiplicity), in key order) over a stored
    whole state ``base`` (every entry once, in key order, no zero count), the entries changed
    since in ``overlay`` (a zero count: gone), and ``entries``, how many there are in all (the
    stored state says; kept exact as entries come and go)."""

    def __init__(
        self,
        base: pa.Table,
        names: Sequence[str],
        positions: Sequence[tuple[int, SortKey]],
        annotations: Sequence[str],
        overlay: dict[Key, Entry],
        entries: int,
    ) -> None:
        self._names, self._positions, self._annotations = list(names), list(positions), list(annotations)
        self._base = base
        self._columns = [_one_array(base.column(n)) for n in names]
        self._ids = [_one_array(base.column(annotation_column(a))) for a in annotations]
        self._counts = base.column(COUNT).to_numpy()
        self._size = base.num_rows
        self._prefixes: dict[int, Key] = {}  # position -> its ORDER BY part of the key
        self._keys: dict[int, Key] = {}  # position -> its whole key
        self.overlay: SortedDict = SortedDict(overlay)
        self._entries = entries

    # -- the stored rows, a position at a time ---------------------------------------------------
    def _prefix(self, i: int) -> Key:
        prefix = self._prefixes.get(i)
        if prefix is None:
            prefix = tuple(_key_part(self._columns[index][i].as_py(), key) for index, key in self._positions)
            self._prefixes[i] = prefix
        return prefix

    def _row(self, i: int) -> tuple[Any, ...]:
        return tuple(column[i].as_py() for column in self._columns)

    def _key(self, i: int) -> Key:
        key = self._keys.get(i)
        if key is None:
            ids = tuple(tuple(column[i].as_py() or ()) for column in self._ids)  # stored sorted
            key = (self._prefix(i), tiebreak(self._row(i)), ids)
            self._keys[i] = key
        return key

    def _find(self, key: Key) -> int | None:
        """The stored position of ``key`` (None: not stored)."""
        prefix = key[0]
        low, high = 0, self._size
        while low < high:  # the first position whose ORDER BY part is not below the key's
            middle = (low + high) // 2
            if self._prefix(middle) < prefix:
                low = middle + 1
            else:
                high = middle
        while low < self._size and self._prefix(low) == prefix:  # rows tied on the ORDER BY
            if self._key(low) == key:
                return low
            low += 1
        return None

    def _stored(self, i: int) -> Entry:
        return self._row(i), int(self._counts[i])

    # -- the map ---------------------------------------------------------------------------------
    def get(self, key: Key, default: Entry | None = None) -> Entry | None:
        changed = self.overlay.get(key)
        if changed is not None:
            return changed if changed[1] else default
        i = self._find(key)
        return self._stored(i) if i is not None else default

    def __setitem__(self, key: Key, entry: Entry) -> None:
        if entry[1] <= 0:
            raise ValueError("a top-k entry holds at least one row: pop it instead")
        if self.get(key) is None:
            self._entries += 1
        self.overlay[key] = entry

    def pop(self, key: Key, default: Entry | None = None) -> Entry | None:
        entry = self.get(key)
        if entry is None:
            return default
        self._entries -= 1
        self.overlay[key] = (entry[0], 0)
        return entry

    def __len__(self) -> int:
        return self._entries

    def items(self) -> Iterator[tuple[Key, Entry]]:
        """The entries in key order: the stored ones merged with the overlay, which wins."""
        changed = iter(self.overlay.items())
        pending = next(changed, None)
        for i in range(self._size):
            key = self._key(i)
            while pending is not None and pending[0] < key:
                if pending[1][1]:
                    yield pending
                pending = next(changed, None)
            if pending is not None and pending[0] == key:
                if pending[1][1]:
                    yield pending
                pending = next(changed, None)
                continue
            yield key, self._stored(i)
        while pending is not None:
            if pending[1][1]:
                yield pending
            pending = next(changed, None)

    def materialized(self) -> SortedDict:
        """Every entry in an ordered map, as an eager restore builds it."""
        keys, rows, counts = stored_entries(self._base, self._names, self._positions, self._annotations)
        entries = dict(zip(keys, zip(rows, counts, strict=True), strict=True))
        for key, entry in self.overlay.items():
            if entry[1]:
                entries[key] = entry
            else:
                entries.pop(key, None)
        ordered = SortedDict()
        ordered.update(entries)  # one sort, not an insertion per entry
        return ordered


def is_searchable(table: pa.Table) -> bool:
    """Whether a stored whole state can serve as a :class:`StoredEntries` base: some rows, none
    with a zero count (rows in key order are what ``topk_state`` writes)."""
    counts = table.column(COUNT)
    return table.num_rows > 0 and bool(np.all(counts.to_numpy() > 0))
