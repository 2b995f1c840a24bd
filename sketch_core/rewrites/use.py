"""Use instrumentation Q[P] (PBDS Sec. 5): a range condition on every positive scan of a sketched table.

The condition is the sketch's merged ranges (Sec. 5.1). Scans under an anti join's right side
are left whole (see :func:`positive_scans`). A scan that does not read the sketch attribute gets
it added for the condition and projected away again, so operators above see the same columns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from sqlglot import exp

from sketch_core.algebra.dialect import SPARK
from sketch_core.algebra.ir import Project, Relation, Scan, Select, column, positive_scans, replace_children
from sketch_core.partitions import RangePartition

# Given the column that holds the attribute, the condition selecting the sketch's fragments.
Condition = Callable[[exp.Expr], exp.Expr]


def sketch_condition(
    partition: RangePartition, fragments: Iterable[int], max_intervals: int | None = None
) -> Condition:
    """The condition of :meth:`RangePartition.predicate_sql` for :func:`instrument_use`.

    It stays Spark SQL text (parenthesized, so it is safe as an operand) instead of becoming a
    sqlglot tree: the plan is only printed, and trees of a few hundred bounds are slow to build.
    """
    kept = frozenset(int(f) for f in fragments)

    def condition(target: exp.Expr) -> exp.Expr:
        text = partition.predicate_sql(kept, target.sql(dialect=SPARK), max_intervals)
        return exp.Paren(this=exp.Var(this=text))

    return condition


def instrument_use(
    plan: Relation, conditions: Mapping[str, tuple[str, Condition | None]]
) -> tuple[Relation, list[Scan]]:
    """``conditions`` maps a table to (sketch attribute, condition builder); a builder of None
    marks the table's scans as filtered (they read the pruned files) without a row condition.

    Returns the instrumented plan and its filtered scans (they may read pruned file lists).
    """
    targets = {id(s) for s in positive_scans(plan) if s.table in conditions}
    filtered_scans: list[Scan] = []

    def filtered(scan: Scan) -> Relation:
        attribute, condition = conditions[scan.table]
        if condition is None:
            filtered_scans.append(scan)
            return scan
        name = scan.name_of(attribute)
        if name is not None:
            filtered_scans.append(scan)
            return Select(scan, condition(column(name)))
        extra = f"__sketch_{attribute}"
        types = (*scan.types, "") if scan.types else ()
        widened = Scan(scan.table, scan.alias, (*scan.source_columns, attribute), (*scan.names, extra), types)
        filtered_scans.append(widened)
        return Project(Select(widened, condition(column(extra))), tuple((n, column(n)) for n in scan.names))

    def visit(node: Relation) -> Relation:
        if isinstance(node, Scan):
            return filtered(node) if id(node) in targets else node
        return replace_children(node, tuple(visit(c) for c in node.children))

    return visit(plan), filtered_scans
