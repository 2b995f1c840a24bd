"""Incremental inner join and cross product (IMP Sec. 5.5) over annotated deltas.

With R' = R + ΔR and S' = S + ΔS (signed bags):

    Δ(R ⋈ S) = ΔR ⋈ S' + R' ⋈ ΔS - ΔR ⋈ ΔS

so only the *new* state of each side is needed, which is what the engine has after processing
the children. A joined row's multiplicity is the product of its parents', and its annotation
is both parents' annotations (their scans differ, so their columns do).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from sketch_core.algebra.ir import conjuncts
from sketch_core.errors import UnsupportedQueryError
from sketch_core.incremental.annotated import MULTIPLICITY, AnnotatedDelta

_LEFT, _RIGHT = "__left_row", "__right_row"
# In-process joins without an equality build every pair; past this many, leave it to Spark.
MAX_CROSS_PRODUCT_ROWS = 5_000_000


def equi_keys(
    condition: exp.Expr | None, left: Sequence[str], right: Sequence[str]
) -> tuple[list[tuple[str, str]], list[exp.Expr]]:
    """The condition's column equalities between the two sides, and the other conjuncts."""
    keys: list[tuple[str, str]] = []
    residual: list[exp.Expr] = []
    for conjunct in conjuncts(condition):
        if (
            isinstance(conjunct, exp.EQ)
            and isinstance(conjunct.this, exp.Column)
            and isinstance(conjunct.expression, exp.Column)
        ):
            a, b = conjunct.this.name, conjunct.expression.name
            if a in left and b in right:
                keys.append((a, b))
                continue
            if b in left and a in right:
                keys.append((b, a))
                continue
        residual.append(conjunct)
    return keys, residual


def _indexed(table: pa.Table, columns: Sequence[str], name: str) -> pa.Table:
    part = table.select(list(columns)).append_column(name, pa.array(np.arange(table.num_rows)))
    for column in columns:  # SQL equality never matches NULL
        part = part.filter(pc.is_valid(part.column(column)))
    return part


def join_rows(
    left: AnnotatedDelta,
    right: AnnotatedDelta,
    keys: Sequence[tuple[str, str]],
    null_safe: Sequence[bool] = (),
) -> AnnotatedDelta:
    """Annotated rows of ``left`` and ``right`` with equal keys (all pairs for no keys; NULL
    equals NULL for the keys ``null_safe`` marks)."""
    if left.num_rows == 0 or right.num_rows == 0:
        return combine_pairs(left, right, np.zeros(0, np.int64), np.zeros(0, np.int64))
    if not keys:
        pairs = left.num_rows * right.num_rows
        if pairs > MAX_CROSS_PRODUCT_ROWS:
            raise UnsupportedQueryError(
                f"a join without an equality over {left.num_rows:,} x {right.num_rows:,} rows in "
                "incremental maintenance",
                f"{pairs:,} pairs",
                hint="maintain this sketch with strategy='full'",
            )
        li = np.repeat(np.arange(left.num_rows), right.num_rows)
        ri = np.tile(np.arange(right.num_rows), left.num_rows)
        return combine_pairs(left, right, li, ri)
    li, ri = matching_rows(left.table, right.table, keys, null_safe=null_safe)
    return combine_pairs(left, right, li, ri)


def matching_rows(
    left: pa.Table,
    right: pa.Table,
    keys: Sequence[tuple[str, str]],
    *,
    use_threads: bool = False,
    null_safe: Sequence[bool] = (),
) -> tuple[np.ndarray, np.ndarray]:
    """Row numbers of the pairs of ``left`` and ``right`` rows whose ``keys`` ((left column,
    right column) pairs) are equal (NULL equals nothing, except for the keys ``null_safe``
    marks, where NULL equals NULL as in ``<=>``). Deltas are small: by default the join runs on
    the calling thread."""
    if any(null_safe):
        left, right, keys = _null_safe_keys(left, right, keys, null_safe)
    left_keys = [k for k, _ in keys]
    right_keys = [f"__key{i}" for i in range(len(keys))]
    lpart = _indexed(left, left_keys, _LEFT)
    rpart = _indexed(keyed_like(left, right, keys), [r for _, r in keys], _RIGHT)
    rpart = rpart.rename_columns([*right_keys, _RIGHT])
    matched = lpart.join(
        rpart, keys=left_keys, right_keys=right_keys, join_type="inner", use_threads=use_threads
    )
    return matched.column(_LEFT).to_numpy(), matched.column(_RIGHT).to_numpy()


def _null_safe_keys(
    left: pa.Table, right: pa.Table, keys: Sequence[tuple[str, str]], null_safe: Sequence[bool]
) -> tuple[pa.Table, pa.Table, list[tuple[str, str]]]:
    """The tables with each null-safe key replaced by two that never hold NULL: the value with
    NULLs filled in (by a value of the column: any will do), and whether it was NULL."""
    plain: list[tuple[str, str]] = []
    for i, ((a, b), safe) in enumerate(zip(keys, null_safe, strict=True)):
        if not safe:
            plain.append((a, b))
            continue
        lv = left.column(a)
        rv = right.column(b).cast(lv.type)
        present = pa.chunked_array([*lv.chunks, *rv.chunks], lv.type).drop_null()
        if len(present):
            lv, rv = pc.fill_null(lv, present[0]), pc.fill_null(rv, present[0])
        else:  # NULL on both sides: only the flags tell rows apart
            lv, rv = pa.array(np.zeros(left.num_rows, np.int8)), pa.array(np.zeros(right.num_rows, np.int8))
        value, flag = f"__null_safe{i}", f"__null_flag{i}"
        left = left.append_column(value, lv).append_column(flag, pc.is_null(left.column(a)).cast(pa.int8()))
        right = right.append_column(value, rv).append_column(
            flag, pc.is_null(right.column(b)).cast(pa.int8())
        )
        plain += [(value, value), (flag, flag)]
    return left, right, plain


def keyed_like(left: pa.Table, right: pa.Table, keys: Sequence[tuple[str, str]]) -> pa.Table:
    """``right`` with each of its join keys cast to the type of the left key it is compared
    with (Arrow joins only keys of one type)."""
    for lk, rk in keys:
        wanted = left.schema.field(lk).type
        if right.schema.field(rk).type != wanted:
            right = right.set_column(right.schema.get_field_index(rk), rk, right.column(rk).cast(wanted))
    return right


def combine_pairs(
    left: AnnotatedDelta, right: AnnotatedDelta, li: np.ndarray, ri: np.ndarray
) -> AnnotatedDelta:
    """The joined rows of the pairs (``left`` row ``li[i]``, ``right`` row ``ri[i]``)."""
    lrows = left.table.take(pa.array(li, pa.int64()))
    rrows = right.table.take(pa.array(ri, pa.int64()))
    data = lrows.select(left.columns)
    for name in right.columns:
        data = data.append_column(name, rrows.column(name))
    multiplicity = lrows.column(MULTIPLICITY).to_numpy() * rrows.column(MULTIPLICITY).to_numpy()
    annotations = {a: lrows.column(a) for a in left.annotations}
    annotations.update({a: rrows.column(a) for a in right.annotations})
    return AnnotatedDelta.build(data, multiplicity, {a: c.combine_chunks() for a, c in annotations.items()})


def negated(rows: AnnotatedDelta) -> AnnotatedDelta:
    index = rows.table.schema.get_field_index(MULTIPLICITY)
    flipped = pc.negate(rows.table.column(MULTIPLICITY))
    return AnnotatedDelta(rows.table.set_column(index, MULTIPLICITY, flipped), rows.annotations)


def concat(parts: Sequence[AnnotatedDelta]) -> AnnotatedDelta:
    return AnnotatedDelta(pa.concat_tables([p.table for p in parts]), parts[0].annotations)
