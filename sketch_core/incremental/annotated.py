"""Annotated deltas (IMP Sec. 4.5): signed rows, each with the fragments it depends on.

Columnar, as IMP's data chunks (Sec. 9.1): an Arrow table of the data columns, a signed
multiplicity (``+n``: n copies inserted, ``-n``: n copies deleted) and one ``list<int32>``
column per annotation, holding the fragment ids of one sketched scan that the row depends on.
Annotations are named like the capture rewrite's (one per sketched scan), so a query that reads
a table twice keeps the two apart until the final merge maps them to tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from sketch_core.incremental.ordering import group_key
from sketch_core.partitions import RangePartition

MULTIPLICITY = "__mult"
FRAGMENTS = pa.list_(pa.int32())


@dataclass(frozen=True)
class AnnotatedDelta:
    table: pa.Table  # data columns, then MULTIPLICITY, then one column per annotation
    annotations: tuple[str, ...]

    @property
    def columns(self) -> list[str]:
        return [c for c in self.table.column_names if c != MULTIPLICITY and c not in self.annotations]

    @property
    def num_rows(self) -> int:
        return int(self.table.num_rows)

    def data(self) -> pa.Table:
        return self.table.select(self.columns)

    @staticmethod
    def empty(schema: pa.Schema, annotations: Sequence[str]) -> AnnotatedDelta:
        fields = [*schema, pa.field(MULTIPLICITY, pa.int64()), *(pa.field(a, FRAGMENTS) for a in annotations)]
        return AnnotatedDelta(pa.schema(fields).empty_table(), tuple(annotations))

    @staticmethod
    def build(
        data: pa.Table, multiplicity: Sequence[int] | np.ndarray, annotations: Mapping[str, pa.Array]
    ) -> AnnotatedDelta:
        table = data.append_column(MULTIPLICITY, pa.array(np.asarray(multiplicity, dtype=np.int64)))
        for name, fragments in annotations.items():
            table = table.append_column(name, fragments.cast(FRAGMENTS))
        return AnnotatedDelta(table, tuple(annotations))

    def with_data(self, data: pa.Table) -> AnnotatedDelta:
        """The same multiplicities and annotations with other data columns (a projection)."""
        rest = {a: self.table.column(a) for a in self.annotations}
        return AnnotatedDelta.build(data, self.table.column(MULTIPLICITY).to_numpy(), rest)


def single_fragments(partition: RangePartition, values: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Each value's fragment as a one-element list (annotate(R, F, a), Def. 4.4)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    cuts = partition.integer_cuts if pa.types.is_integer(values.type) else None
    if cuts is not None:
        filled = values.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        ids = np.searchsorted(cuts, filled, side="right")
        ids[values.is_null().to_numpy(zero_copy_only=False)] = partition.null_fragment
    else:
        ids = partition.fragments_of(values.to_pylist())
    offsets = np.arange(len(ids) + 1, dtype=np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(ids.astype(np.int32)))


def annotate_rows(
    inserted: pa.Table,
    deleted: pa.Table,
    annotation: str | None,
    partition: RangePartition | None,
    attribute: str | None,
) -> AnnotatedDelta:
    """A table delta as an annotated delta: inserted rows +1, deleted rows -1."""
    data = pa.concat_tables([inserted, deleted.cast(inserted.schema)])
    signs = np.concatenate([np.ones(inserted.num_rows, np.int64), -np.ones(deleted.num_rows, np.int64)])
    if annotation is None:
        return AnnotatedDelta.build(data, signs, {})
    assert partition is not None and attribute is not None
    return AnnotatedDelta.build(
        data, signs, {annotation: single_fragments(partition, data.column(attribute))}
    )


Fragments = tuple[tuple[int, ...], ...]


RowKey = tuple[tuple[Any, ...], Fragments]


def _signed_rows(rows: AnnotatedDelta) -> list[tuple[RowKey, int]]:
    """Each row as (its data, its fragments) with its signed count, in row order."""
    columns = [rows.table.column(c).to_pylist() for c in rows.columns]
    fragments = [rows.table.column(a).to_pylist() for a in rows.annotations]
    counts = rows.table.column(MULTIPLICITY).to_numpy().tolist()
    return [
        ((tuple(c[i] for c in columns), tuple(tuple(f[i]) for f in fragments)), count)
        for i, count in enumerate(counts)
    ]


def _identity(key: RowKey) -> RowKey:
    """``key`` as a dictionary key: a row inserted and deleted with a NaN in it is one row."""
    data, fragments = key
    return tuple(group_key(v) for v in data), fragments


def consolidated(rows: AnnotatedDelta) -> dict[RowKey, int]:
    """The net count of each distinct row (its data and fragments) of a signed bag, those
    above zero only."""
    counts: dict[RowKey, list[Any]] = {}  # identity -> [the row, count]
    for key, count in _signed_rows(rows):
        counts.setdefault(_identity(key), [key, 0])[1] += count
    return {key: count for key, count in counts.values() if count > 0}


def cancelled(rows: AnnotatedDelta) -> AnnotatedDelta:
    """``rows`` with the copies of a row inserted and deleted in it cancelled (net counts,
    zeros left out)."""
    if rows.num_rows == 0:
        return rows
    net: dict[RowKey, list[int]] = {}  # key -> [first row, count]
    for i, (key, count) in enumerate(_signed_rows(rows)):
        net.setdefault(_identity(key), [i, 0])[1] += count
    kept = [(i, count) for i, count in net.values() if count != 0]
    table = rows.table.take(pa.array([i for i, _ in kept], pa.int64()))
    index = table.schema.get_field_index(MULTIPLICITY)
    counts = pa.array([count for _, count in kept], pa.int64())
    return AnnotatedDelta(table.set_column(index, MULTIPLICITY, counts), rows.annotations)
