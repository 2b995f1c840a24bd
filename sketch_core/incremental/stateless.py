"""The stateless incremental operators (IMP Sec. 5.2 to 5.4 and 5.9): scan, selection,
projection and union pass each delta row on by itself, its annotation unchanged."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from sqlglot import exp

from sketch_core.algebra.ir import Scan
from sketch_core.incremental.annotated import FRAGMENTS, MULTIPLICITY, AnnotatedDelta
from sketch_core.incremental.expressions import ExpressionTranslator, Translated, evaluate, filter_rows


def scan(node: Scan, rows: AnnotatedDelta) -> AnnotatedDelta:
    """A table's annotated delta, its source columns renamed to the scan's output names."""
    data = rows.data().select(list(node.source_columns)).rename_columns(list(node.names))
    return rows.with_data(data)


def select(rows: AnnotatedDelta, condition: exp.Expr | Translated) -> AnnotatedDelta:
    """``condition``: as :class:`Translated` (under the name ``condition``) where the same
    selection runs batch after batch."""
    if rows.num_rows == 0:
        return rows
    if isinstance(condition, Translated):
        translated = condition(rows.table.schema)[CONDITION]
    else:
        translated = ExpressionTranslator(rows.table.schema)(condition)
    return AnnotatedDelta(filter_rows(rows.table, translated), rows.annotations)


def project(rows: AnnotatedDelta, outputs: Sequence[tuple[str, exp.Expr]] | Translated) -> AnnotatedDelta:
    """``outputs``: as :class:`Translated` where the same projection runs batch after batch."""
    if isinstance(outputs, Translated):
        translated = outputs(rows.data().schema)
    else:
        translate = ExpressionTranslator(rows.data().schema)
        translated = {name: translate(expression) for name, expression in outputs}
    return rows.with_data(evaluate(rows.data(), translated))


def selection(condition: exp.Expr) -> Translated:
    """A selection's condition, to be translated once per input schema."""
    return Translated({CONDITION: condition})


CONDITION = "condition"


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
