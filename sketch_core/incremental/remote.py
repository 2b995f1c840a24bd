"""Expressions the in-process engine cannot evaluate exactly, evaluated where Spark does.

The engine translates selections, projections, join conditions and aggregation arguments to
Arrow (:mod:`.expressions`) and refuses an expression it has no Spark-exact rule for. Without
help, such a refusal sends every maintenance run of the sketch to a full recapture. With a
:data:`RemoteEvaluator` (the maintenance service passes one backed by its SparkSession), the
refused expression is evaluated by Spark on the rows of that operator's delta only, and the
rest of the plan stays in-process: a delta of five rows costs a five-row Spark job, not a
recapture of the whole query.

The unit of remote evaluation is a whole named expression (a selection's condition, one
projected output, one aggregation argument), never a piece of one, so that Spark applies its
own evaluation order to it: ``CASE WHEN x > 0 THEN f(x) END`` never evaluates ``f`` on rows
where the condition is false, here as in the captured query.

Example: ``SELECT ... WHERE to_date(o_note, 'dd.MM.yyyy') > DATE '1995-03-15'``. The pattern
is outside what the engine rules for, so the selection's condition over an inserted batch of
orders is computed by Spark as one boolean column; the engine filters the batch with it and
joins and aggregates the survivors in-process.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pyarrow as pa
from sqlglot import exp

# Evaluates named expressions over the rows of a table (whose columns are the ones they
# reference) and returns a table of one column per name, row for row; the types are Spark's.
RemoteEvaluator = Callable[[pa.Table, Mapping[str, exp.Expr]], pa.Table]


def referenced_columns(expression: exp.Expr) -> list[str]:
    """The input columns ``expression`` reads, in first-use order."""
    return list(dict.fromkeys(c.name for c in expression.find_all(exp.Column)))


def remote_column(name: str) -> str:
    """The column that holds the remotely evaluated value of the expression named ``name``."""
    return f"__remote_{name}"
