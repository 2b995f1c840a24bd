"""The IR printed back to Spark SQL: one nested SELECT per operator, in the plan's shape.

Spark's optimizer flattens the nesting again, so the printed query plans like the original.
``source`` decides which relation a scan reads (a table name, or a pinned or annotated view).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sqlglot
from sqlglot import exp

from sketch_core.algebra.dialect import SPARK
from sketch_core.algebra.ir import (
    AggCall,
    Aggregate,
    Distinct,
    Join,
    PlanError,
    Project,
    Relation,
    Scan,
    Select,
    Sort,
    SortKey,
    TopK,
    Union,
    Window,
    WindowCall,
)

Source = Callable[[Scan], str]


def _ident(name: str) -> str:
    return exp.to_identifier(name).sql(dialect=SPARK)


def _expr(expression: exp.Expr) -> str:
    return expression.sql(dialect=SPARK)


def aggregate_sql(call: AggCall) -> str:
    """Spark SQL for an aggregate call (``union_sets``: the union of arrays)."""
    if call.func == "count" and call.arg is None:
        return "COUNT(*)"
    assert call.arg is not None
    if call.func == "opaque":  # the whole call, as the user wrote it (over the plan's names)
        return _expr(call.arg)
    if isinstance(call.arg, exp.Tuple):  # COUNT(DISTINCT x, y): not COUNT of one struct
        arg = ", ".join(_expr(e) for e in call.arg.expressions)
    else:
        arg = _expr(call.arg)
    if call.func == "union_sets":
        return f"ARRAY_DISTINCT(FLATTEN(COLLECT_LIST({arg})))"
    distinct = "DISTINCT " if call.distinct else ""
    return f"{call.func.upper()}({distinct}{arg})"


def _window_call(call: WindowCall, over: str) -> str:
    if call.func == "opaque":  # the whole function as the user wrote it (over the plan's names)
        assert call.arg is not None
        return f"{_expr(call.arg)} OVER ({over})"
    if call.arg is None:
        return f"{'COUNT(*)' if call.func == 'count' else call.func.upper() + '()'} OVER ({over})"
    arg = _expr(call.arg)
    if call.func == "union_sets":  # the OVER belongs to the aggregate, inside the array functions
        return f"ARRAY_DISTINCT(FLATTEN(COLLECT_LIST({arg}) OVER ({over})))"
    return f"{call.func.upper()}({arg}) OVER ({over})"


class _Printer:
    def __init__(self, source: Source) -> None:
        self.source = source
        self.counter = 0

    def alias(self) -> str:
        self.counter += 1
        return f"q{self.counter}"

    def order_by(self, alias: str, order: Sequence[SortKey]) -> str:
        keys = ", ".join(
            f"{alias}.{_ident(k.column)}{' DESC' if k.descending else ''}"
            f" NULLS {'FIRST' if k.effective_nulls_first else 'LAST'}"
            for k in order
        )
        return f" ORDER BY {keys}"

    def select_list(self, items: Sequence[tuple[str, str]]) -> str:
        return ", ".join(sql if sql == _ident(name) else f"{sql} AS {_ident(name)}" for name, sql in items)

    def project(self, node: Relation, items: Sequence[tuple[str, str]]) -> str:
        """SELECT items over node; ORDER BY/LIMIT of a Sort or TopK below are kept in the same block."""
        if isinstance(node, TopK | Sort):
            alias = self.alias()
            limit = ""
            if isinstance(node, TopK):
                limit = f" LIMIT {node.limit}" + (f" OFFSET {node.offset}" if node.offset else "")
            return (
                f"SELECT {self.select_list(items)} FROM ({self.sql(node.child)}) AS {alias}"
                f"{self.order_by(alias, node.order)}{limit}"
            )
        return f"SELECT {self.select_list(items)} FROM ({self.sql(node)}) AS {self.alias()}"

    def sql(self, node: Relation) -> str:
        if isinstance(node, Scan):
            items = [(n, _ident(c)) for c, n in zip(node.source_columns, node.names, strict=True)]
            return f"SELECT {self.select_list(items)} FROM {self.source(node)}"
        if isinstance(node, Select):
            scan = node.child
            if isinstance(scan, Scan) and scan.names == scan.source_columns:
                # Unrenamed columns: the condition can sit on the scan itself. The alias keeps
                # Spark from reading ``WHERE (FALSE)`` (an empty sketch's condition) as an alias
                # with a column list, WHERE being a non-reserved word.
                return f"{self.sql(scan)} AS {self.alias()} WHERE {_expr(node.condition)}"
            return f"SELECT * FROM ({self.sql(node.child)}) AS {self.alias()} WHERE {_expr(node.condition)}"
        if isinstance(node, Project):
            return self.project(node.child, [(n, _expr(e)) for n, e in node.outputs])
        if isinstance(node, Join):
            return self.join(node)
        if isinstance(node, Aggregate):
            items = [(n, _expr(e)) for n, e in node.groups] + [
                (n, aggregate_sql(c)) for n, c in node.aggregates
            ]
            group = f" GROUP BY {', '.join(_expr(e) for _, e in node.groups)}" if node.groups else ""
            return f"SELECT {self.select_list(items)} FROM ({self.sql(node.child)}) AS {self.alias()}{group}"
        if isinstance(node, TopK | Sort):
            return self.project(node, [(c, _ident(c)) for c in node.columns])
        if isinstance(node, Union):
            first, *rest = node.inputs
            renames = [(n, _ident(c)) for n, c in zip(node.names, first.columns, strict=True)]
            head = self.project(first, renames)
            # A branch's own ORDER BY and LIMIT (a top-k per branch) cannot precede UNION ALL
            # in Spark's grammar: the branch becomes a subquery.
            parts = [f"SELECT * FROM ({head}) AS {self.alias()}" if isinstance(first, TopK | Sort) else head]
            parts += [f"SELECT * FROM ({self.sql(other)}) AS {self.alias()}" for other in rest]
            return f"SELECT * FROM ({' UNION ALL '.join(parts)}) AS {self.alias()}"
        if isinstance(node, Distinct):
            return f"SELECT DISTINCT * FROM ({self.sql(node.child)}) AS {self.alias()}"
        if isinstance(node, Window):
            return self.window(node)
        raise PlanError(f"the Spark printer has no rule for {type(node).__name__}")

    def window(self, node: Window) -> str:
        alias = self.alias()
        spec = []
        if node.partition:
            spec.append(f"PARTITION BY {', '.join(f'{alias}.{_ident(c)}' for c in node.partition)}")
        if node.order:
            spec.append(self.order_by(alias, node.order).strip())
        if node.frame:
            spec.append(node.frame)
        over = " ".join(spec)
        items = [(c, _ident(c)) for c in node.child.columns]
        items += [(name, _window_call(call, over)) for name, call in node.calls]
        return f"SELECT {self.select_list(items)} FROM ({self.sql(node.child)}) AS {alias}"

    def join(self, node: Join) -> str:
        left, right = self.alias(), self.alias()
        left_sql, right_sql = self.sql(node.left), self.sql(node.right)
        if node.null_aware:
            assert isinstance(node.condition, exp.EQ)
            probe, key = _expr(node.condition.this), _expr(node.condition.expression)
            return (
                f"SELECT * FROM ({left_sql}) AS {left} WHERE {probe} NOT IN "
                f"(SELECT {key} FROM ({right_sql}) AS {right})"
            )
        keyword = {
            "inner": "JOIN",
            "cross": "CROSS JOIN",
            "semi": "LEFT SEMI JOIN",
            "anti": "LEFT ANTI JOIN",
            "left": "LEFT OUTER JOIN",
            "full": "FULL OUTER JOIN",
            "scalar": "CROSS JOIN",
        }
        on = f" ON {_expr(node.condition)}" if node.condition is not None else ""
        return f"SELECT * FROM ({left_sql}) AS {left} {keyword[node.kind]} ({right_sql}) AS {right}{on}"


def _table_name(scan: Scan) -> str:
    return scan.table


def to_sql(
    plan: Relation,
    *,
    source: Source = _table_name,
    output_names: Sequence[str] | None = None,
    pretty: bool = False,
) -> str:
    """Spark SQL for the plan; ``output_names`` renames the result columns to what the user wrote."""
    printer = _Printer(source)
    if output_names is None:
        text = printer.sql(plan)
    else:
        if len(output_names) != len(plan.columns):
            raise PlanError(f"{len(output_names)} output names for {len(plan.columns)} columns")
        renames = list(zip(output_names, plan.columns, strict=True))
        if isinstance(plan, Project):
            expressions = dict(plan.outputs)
            text = printer.project(plan.child, [(v, _expr(expressions[c])) for v, c in renames])
        else:
            text = printer.project(plan, [(v, _ident(c)) for v, c in renames])
    if pretty:
        return sqlglot.transpile(text, read="spark", write="spark", pretty=True)[0]
    return text
