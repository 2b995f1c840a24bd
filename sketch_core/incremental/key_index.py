"""Group keys numbered densely (0, 1, 2, ... in order of first appearance), looked up a batch at
a time with Arrow's hash join.

Columnar aggregation state is indexed by these numbers: per-group values live in arrays at the
group's number, so merging a batch is array arithmetic at the numbers its groups map to. A key
keeps its number for good (a group that vanishes and comes back reuses it).

Arrow's join never matches NULL with NULL, while GROUP BY puts NULL keys in one group: each key
column is joined as two, the value with NULL replaced by a placeholder and a NULL flag.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_ID = "__id"
_ROW = "__row"
# An index this many times a batch's keys is narrowed by their first column before the join.
_NARROWED_BELOW = 8


def _placeholder(kind: pa.DataType) -> pa.Scalar:
    """Some non-NULL value of ``kind`` (which one does not matter: the NULL flag tells)."""
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return pa.scalar("", kind)
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return pa.scalar(b"", kind)
    if pa.types.is_boolean(kind):
        return pa.scalar(False)
    if pa.types.is_decimal(kind):  # an int64 0 cast to a decimal needs precision 21 or more
        return pa.scalar(Decimal(0), kind)
    return pa.scalar(0, kind)  # (ints, dates, timestamps: an int64 0 does not cast to a date)


def _join_columns(keys: pa.Table) -> dict[str, pa.Array]:
    columns: dict[str, pa.Array] = {}
    for i, name in enumerate(keys.column_names):
        column = keys.column(name).combine_chunks()
        columns[f"__v{i}"] = pc.fill_null(column, _placeholder(column.type)) if column.null_count else column
        columns[f"__z{i}"] = pc.cast(column.is_null(), pa.int8())
    return columns


class KeyIndex:
    def __init__(self, types: Sequence[pa.DataType]) -> None:
        self.types = list(types)
        self._names = [f"__k{i}" for i in range(len(types))]
        self.keys = pa.schema([pa.field(n, t) for n, t in zip(self._names, types, strict=True)]).empty_table()
        self._joinable = pa.table({**_join_columns(self.keys), _ID: pa.array([], pa.int64())})

    def __len__(self) -> int:
        return int(self.keys.num_rows)

    def _conform(self, keys: pa.Table) -> pa.Table:
        arrays = [keys.column(i).cast(t) for i, t in enumerate(self.types)]
        return pa.table(dict(zip(self._names, arrays, strict=True)))

    def lookup(self, keys: pa.Table) -> np.ndarray:
        """Each row's number, or -1 for keys not seen yet (columns by position)."""
        count = keys.num_rows
        if count == 0 or len(self) == 0:
            return np.full(count, -1, np.int64)
        probe = pa.table(
            {**_join_columns(self._conform(keys)), _ROW: pa.array(np.arange(count, dtype=np.int64))}
        )
        keys_joined = [c for c in probe.column_names if c != _ROW]
        joinable = self._joinable
        if probe.num_rows * _NARROWED_BELOW < joinable.num_rows:
            # A batch's few keys against a large index: the join would hash every key column of
            # every indexed row, each batch (20 ms of a 70 ms run against TPC-H SF10 Q10's
            # 380,000 groups). The rows whose first column holds one of the batch's values are
            # a superset of the matches (NULLs hold the placeholder on both sides), found in one
            # pass over that column.
            first = probe.column("__v0").combine_chunks()
            joinable = joinable.filter(pc.is_in(joinable.column("__v0"), value_set=first))
        # Arrow builds its hash table on the right side: the smaller one (a batch's keys, mostly).
        if probe.num_rows <= joinable.num_rows:
            joined = joinable.join(probe, keys=keys_joined, join_type="inner", use_threads=False)
        else:
            joined = probe.join(joinable, keys=keys_joined, join_type="inner", use_threads=False)
        ids = np.full(count, -1, np.int64)
        ids[joined.column(_ROW).to_numpy()] = joined.column(_ID).to_numpy()
        return ids

    def numbers(self, keys: pa.Table) -> np.ndarray:
        """Each row's number, new keys numbered on from the last; ``keys`` must be distinct."""
        ids = self.lookup(keys)
        count = len(ids)
        new = np.flatnonzero(ids < 0)
        if len(new):
            first = len(self)
            ids[new] = np.arange(first, first + len(new), dtype=np.int64)
            # Every key new (a restore's whole state, mostly): taken as they are, not copied.
            added = self._conform(keys) if len(new) == count else self._conform(keys).take(pa.array(new))
            joinable = pa.table({**_join_columns(added), _ID: pa.array(ids[new])})
            if first:
                added = pa.concat_tables([self.keys, added])
                joinable = pa.concat_tables([self._joinable, joinable])
            self.keys, self._joinable = added.combine_chunks(), joinable.combine_chunks()
        return ids

    def take(self, ids: np.ndarray) -> pa.Table:
        """The keys with these numbers (columns ``__k0``...)."""
        return self.keys.take(pa.array(ids, pa.int64()))
