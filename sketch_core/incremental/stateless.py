"""The stateless incremental operators (IMP Sec. 5.2 to 5.4 and 5.9): scan, selection,
projection and union pass each delta row on by itself, its annotation unchanged."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
from sqlglot import exp

from sketch_core.algebra.ir import Scan
from sketch_core.incremental.annotated import FRAGMENTS, MULTIPLICITY, AnnotatedDelta
from sketch_core.incremental.expressions import Translated, evaluate, filter_rows
from sketch_core.incremental.remote import RemoteEvaluator


def scan(node: Scan, rows: AnnotatedDelta) -> AnnotatedDelta:
    """A table's annotated delta, its source columns renamed to the scan's output names."""
    data = rows.data().select(list(node.source_columns)).rename_columns(list(node.names))
    return rows.with_data(data)


# The name a selection's condition has in its :class:`Translated`.
CONDITION = "condition"
_POSITION = "__position"  # (numbers rows to find which a condition keeps)


def selection(condition: exp.Expr, remote: RemoteEvaluator | None = None, ansi: bool = True) -> Translated:
    """A selection's condition, to be translated once per input schema (``remote``: evaluates
    it when the translation refuses it; ``ansi``: see :class:`.ExpressionTranslator`)."""
    return Translated({CONDITION: condition}, remote, ansi)


def select(rows: AnnotatedDelta, condition: Translated) -> AnnotatedDelta:
    """``condition``: made by :func:`selection`."""
    if rows.num_rows == 0:
        return rows
    table, translated = condition.over(rows.table)
    kept = filter_rows(table, translated[CONDITION]).select(range(rows.table.num_columns))
    return AnnotatedDelta(kept, rows.annotations)


def kept_positions(table: pa.Table, condition: Translated) -> np.ndarray:
    """The positions of ``table``'s rows that ``condition`` (made by :func:`selection`) keeps."""
    numbered = table.append_column(_POSITION, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    over, translated = condition.over(numbered)
    kept: np.ndarray = filter_rows(over, translated[CONDITION]).column(_POSITION).to_numpy()
    return kept


def project(rows: AnnotatedDelta, outputs: Translated) -> AnnotatedDelta:
    """``outputs``: the projection's named expressions."""
    table, translated = outputs.over(rows.data())
    return rows.with_data(evaluate(table, translated))


def union(inputs: Sequence[AnnotatedDelta], names: Sequence[str]) -> AnnotatedDelta:
    """Bag union: the inputs' rows under the union's column names. An annotation comes from
    one input; the other inputs' rows carry it empty (they do not depend on that scan)."""
    annotations = tuple(dict.fromkeys(a for i in inputs for a in i.annotations))
    parts = []
    for delta in inputs:
        table = delta.data().rename_columns(list(names))
        table = table.append_column(MULTIPLICITY, delta.table.column(MULTIPLICITY))
        for annotation in annotations:
            column = (
                delta.table.column(annotation)
                if annotation in delta.annotations
                else pa.array([[]] * delta.num_rows, FRAGMENTS)
            )
            table = table.append_column(annotation, column)
        parts.append(table)
    return AnnotatedDelta(pa.concat_tables(parts, promote_options="permissive"), annotations)
