"""Which rows of another side each row matches, for semi and anti joins over annotated deltas.

A semi or anti join keeps or drops each left row by its matches alone, so it needs no state:
the matches are counted over a signed bag of the other side's rows (its new rows, or its new
rows less its delta for the old ones), where a row inserted and deleted again cancels. A match
is a pair with equal keys (NULL equals nothing) for which the rest of the condition (a
``residual`` such as TPC-H Q21's ``l3.l_suppkey <> l1.l_suppkey``) is true.

A semi join's row also carries the fragments of the rows it matches (the provenance of EXISTS
is the left row and every right row that satisfies the condition with it). Over a signed bag,
fragment ``f`` belongs to a row's union when the matching rows that carry ``f`` have a positive
net count: each real row's count is never negative, so the sum is positive exactly when one
of them is there.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sketch_core.incremental import stateless
from sketch_core.incremental.annotated import MULTIPLICITY, AnnotatedDelta
from sketch_core.incremental.expressions import Translated
from sketch_core.incremental.join import combine_pairs, matching_rows

_PAIR = "__pair"


def matched_pairs(
    rows: AnnotatedDelta,
    other: AnnotatedDelta,
    keys: Sequence[tuple[str, str]],
    residual: Translated | None,
    null_safe: Sequence[bool] = (),
) -> tuple[np.ndarray, np.ndarray]:
    """Row numbers (of ``rows``, of ``other``) of the pairs with equal keys (NULL equal to NULL
    for the ``null_safe`` ones) for which ``residual`` (a :func:`.stateless.selection` over both
    sides' columns) holds."""
    if rows.num_rows == 0 or other.num_rows == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    li, ri = matching_rows(rows.table, other.table, keys, null_safe=null_safe)
    if residual is None or len(li) == 0:
        return li, ri
    joined = combine_pairs(rows, other, li, ri)
    numbered = AnnotatedDelta.build(
        joined.data().append_column(_PAIR, pa.array(np.arange(len(li)))), np.zeros(len(li), np.int64), {}
    )
    kept = stateless.select(numbered, residual).table.column(_PAIR).to_numpy()
    return li[kept], ri[kept]


def match_counts(count: int, li: np.ndarray, ri: np.ndarray, other: AnnotatedDelta) -> np.ndarray:
    """Per row (of ``count`` rows), the signed number of ``other``'s rows it matches."""
    if len(li) == 0:
        return np.zeros(count, np.int64)
    weights = other.table.column(MULTIPLICITY).to_numpy()[ri]
    return np.bincount(li, weights=weights, minlength=count).astype(np.int64)


def matched_fragments(
    count: int, li: np.ndarray, ri: np.ndarray, other: AnnotatedDelta, name: str
) -> pa.Array:
    """Per row (of ``count`` rows), the sorted fragment ids of annotation ``name`` that its
    matches in ``other`` (a signed bag) carry with a positive net count."""
    offsets = np.zeros(count + 1, np.int32)
    if len(li) == 0:
        return pa.ListArray.from_arrays(pa.array(offsets), pa.array([], pa.int32()))
    lists = other.table.column(name).combine_chunks().take(pa.array(ri, pa.int64()))
    fragments = pc.list_flatten(lists).to_numpy().astype(np.int64)
    parents = pc.list_parent_indices(lists).to_numpy()
    if len(fragments) == 0:
        return pa.ListArray.from_arrays(pa.array(offsets), pa.array([], pa.int32()))
    weights = other.table.column(MULTIPLICITY).to_numpy()[ri][parents]
    width = int(fragments.max()) + 1
    combined, inverse = np.unique(li[parents].astype(np.int64) * width + fragments, return_inverse=True)
    present = combined[np.bincount(inverse, weights=weights) > 0]  # sorted by row, then fragment
    offsets = np.searchsorted(present // width, np.arange(count + 1)).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array((present % width).astype(np.int32)))
