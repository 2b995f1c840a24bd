"""A brute-force lineage evaluator: runs an IR plan over Python rows, each row carrying the set
of input rows (table, index) it was derived from. It shares no code with the capture rewrite,
so the two can check each other. Min/max-only aggregations keep the lineage of the rows holding
the extreme value, the provenance model PBDS's capture uses (Sec. 4.2, rule r3)."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from functools import cmp_to_key
from typing import Any

from sqlglot import exp

from sketch_core.algebra.ir import (
    Aggregate,
    Distinct,
    Join,
    Project,
    Relation,
    Scan,
    Select,
    Sort,
    TopK,
    Union,
    Window,
)
from sketch_core.algebra.top_rows import TopRows, top_rows

Row = dict[str, Any]
Lineage = frozenset[tuple[str, int]]
_TOP: dict[int, TopRows] = {}  # id(window) -> the top-N filter above it (noted by the filter)
Annotated = list[tuple[Row, Lineage]]


def spark_order(value: Any) -> Any:
    """Spark's total order on doubles: NaN equals NaN and sorts above every number."""
    if isinstance(value, float) and math.isnan(value):
        return (1, 0.0)
    if isinstance(value, int | float):
        return (0, value)
    return value


def _compare_with(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    return lambda a, b: op(spark_order(a), spark_order(b))


_BINARY: dict[type[exp.Expr], Callable[[Any, Any], Any]] = {
    exp.Add: operator.add,
    exp.Sub: operator.sub,
    exp.Mul: operator.mul,
    exp.Div: operator.truediv,
    exp.EQ: _compare_with(operator.eq),
    exp.NEQ: _compare_with(operator.ne),
    exp.GT: _compare_with(operator.gt),
    exp.GTE: _compare_with(operator.ge),
    exp.LT: _compare_with(operator.lt),
    exp.LTE: _compare_with(operator.le),
}


def evaluate(node: exp.Expr, row: Row) -> Any:
    if isinstance(node, exp.Paren):
        return evaluate(node.this, row)
    if isinstance(node, exp.Column):
        return row[node.name]
    if isinstance(node, exp.Literal):
        return (
            node.name
            if node.is_string
            else (int(node.name) if node.name.lstrip("-").isdigit() else float(node.name))
        )
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Neg):
        value = evaluate(node.this, row)
        return None if value is None else -value
    if isinstance(node, exp.And):
        a, b = evaluate(node.this, row), evaluate(node.expression, row)
        return False if a is False or b is False else (None if a is None or b is None else True)
    if isinstance(node, exp.Or):
        a, b = evaluate(node.this, row), evaluate(node.expression, row)
        return True if a is True or b is True else (None if a is None or b is None else False)
    if isinstance(node, exp.Not):
        value = evaluate(node.this, row)
        return None if value is None else not value
    if isinstance(node, exp.Is):
        return evaluate(node.this, row) is None
    if isinstance(node, exp.Between):
        x = evaluate(node.this, row)
        low, high = evaluate(node.args["low"], row), evaluate(node.args["high"], row)
        return None if None in (x, low, high) else low <= x <= high
    if isinstance(node, exp.Tuple):  # COUNT(DISTINCT x, y)'s argument: skipped if any is NULL
        values = tuple(evaluate(e, row) for e in node.expressions)
        return None if None in values else values
    if isinstance(node, exp.NullSafeEQ):  # <=>: NULL equals NULL, never unknown
        a, b = evaluate(node.this, row), evaluate(node.expression, row)
        if a is None or b is None:
            return a is None and b is None
        return bool(spark_order(a) == spark_order(b))
    if type(node) in _BINARY:
        a, b = evaluate(node.this, row), evaluate(node.expression, row)
        return None if a is None or b is None else _BINARY[type(node)](a, b)
    raise NotImplementedError(f"the lineage oracle cannot evaluate {node.sql()}")


def _aggregate(func: str, values: list[Any], distinct: bool, star: bool) -> Any:
    present = [v for v in values if v is not None]
    if distinct:
        present = list(set(present))
    if func == "count":
        return len(values) if star else len(present)
    if not present:
        return None
    extremes = {"min": min, "max": max}
    if func in extremes:
        return extremes[func](present, key=spark_order)
    return {"sum": sum, "avg": lambda v: sum(v) / len(v)}[func](present)


def _compare(keys: Sequence[Any]) -> Callable[[tuple[Row, Lineage], tuple[Row, Lineage]], int]:
    def compare(x: tuple[Row, Lineage], y: tuple[Row, Lineage]) -> int:
        for key in keys:
            a, b = x[0][key.column], y[0][key.column]
            if a == b:
                continue
            if a is None or b is None:
                first = key.effective_nulls_first
                return (-1 if first else 1) if a is None else (1 if first else -1)
            smaller = -1 if a < b else 1
            return -smaller if key.descending else smaller
        return 0

    return compare


def run(plan: Relation, tables: Mapping[str, list[Row]]) -> Annotated:
    if isinstance(plan, Scan):
        return [
            (
                {n: row[c] for c, n in zip(plan.source_columns, plan.names, strict=True)},
                frozenset({(plan.table, i)}),
            )
            for i, row in enumerate(tables[plan.table])
        ]
    if isinstance(plan, Select):
        if (shape := top_rows(plan)) is not None:  # the ranks depend on the first N rows only
            _TOP[id(shape.window)] = shape
        return [(r, lin) for r, lin in run(plan.child, tables) if evaluate(plan.condition, r) is True]
    if isinstance(plan, Project):
        return [({n: evaluate(e, r) for n, e in plan.outputs}, lin) for r, lin in run(plan.child, tables)]
    if isinstance(plan, Join):
        left, right = run(plan.left, tables), run(plan.right, tables)
        out: Annotated = []
        padding = dict.fromkeys(plan.right.columns)
        for lr, ll in left:
            outcomes = [
                (rr, rl, True if plan.condition is None else evaluate(plan.condition, {**lr, **rr}))
                for rr, rl in right
            ]
            matches = [(rr, rl) for rr, rl, holds in outcomes if holds is True]
            if plan.kind in ("inner", "cross", "left"):
                out += [({**lr, **rr}, ll | rl) for rr, rl in matches]
                if plan.kind == "left" and not matches:  # padded: its own row is its lineage
                    out.append(({**lr, **padding}, ll))
            elif plan.kind == "scalar":  # the subquery's input is read whole, never sketched
                out += [({**lr, **rr}, ll) for rr, _ in matches]
            elif plan.kind == "semi" and matches:
                out.append((lr, ll.union(*(rl for _, rl in matches))))
            elif plan.kind == "anti" and plan.null_aware:  # NOT IN: every comparison false
                if all(holds is False for _, _, holds in outcomes):
                    out.append((lr, ll))
            elif plan.kind == "anti" and not matches:
                out.append((lr, ll))
        return out
    if isinstance(plan, Aggregate):
        groups: dict[tuple[Any, ...], Annotated] = {}
        for r, lin in run(plan.child, tables):
            key = tuple(spark_order(evaluate(e, r)) for _, e in plan.groups)
            groups.setdefault(key, []).append((r, lin))
        if not plan.groups and not groups:
            groups[()] = []
        extremes_only = bool(plan.aggregates) and all(c.func in ("min", "max") for _, c in plan.aggregates)
        out = []
        for members in groups.values():
            first = members[0][0] if members else {}
            row = {n: evaluate(e, first) for n, e in plan.groups}
            contributing: list[Lineage] = [lin for _, lin in members]
            if extremes_only:
                contributing = []
            for name, call in plan.aggregates:
                values = [evaluate(call.arg, r) if call.arg is not None else 1 for r, _ in members]
                row[name] = _aggregate(call.func, values, call.distinct, call.arg is None)
                if extremes_only:
                    contributing += [
                        lin
                        for (r, lin), v in zip(members, values, strict=True)
                        if row[name] is None or spark_order(v) == spark_order(row[name])
                    ]
            out.append((row, frozenset().union(*contributing)))
        return out
    if isinstance(plan, Distinct):
        merged: dict[tuple[Any, ...], tuple[Row, Lineage]] = {}
        for r, lin in run(plan.child, tables):
            key = tuple(spark_order(r[c]) for c in plan.columns)
            merged[key] = (r, merged[key][1] | lin) if key in merged else (r, lin)
        return list(merged.values())
    if isinstance(plan, TopK):
        return sorted(run(plan.child, tables), key=cmp_to_key(_compare(plan.order)))[: plan.limit]
    if isinstance(plan, Sort):
        return run(plan.child, tables)
    if isinstance(plan, Union):
        out = []
        for child in plan.inputs:
            out += [
                (dict(zip(plan.names, (r[c] for c in child.columns), strict=True)), lin)
                for r, lin in run(child, tables)
            ]
        return out
    if isinstance(plan, Window):
        return _window(plan, run(plan.child, tables), _TOP.get(id(plan)))
    raise NotImplementedError(type(plan).__name__)


def _offset(text: str) -> Decimal | None:
    """A frame bound as a signed offset (None: UNBOUNDED)."""
    words = text.split()
    if words[0] == "UNBOUNDED":
        return None
    if words[0] == "CURRENT":
        return Decimal(0)
    return -Decimal(words[0]) if words[1] == "PRECEDING" else Decimal(words[0])


def _frame(
    plan: Window, ordered: Annotated, i: int, compare: Callable[[Any, Any], int]
) -> list[tuple[Row, Lineage]]:
    """The rows of row ``i``'s frame, by definition: a ROWS frame by position, a RANGE frame by
    where each row falls against the bound's value in window order (CURRENT ROW, and any
    bound of a NULL key: its peers)."""
    current = ordered[i]
    if plan.frame is None:
        return [m for m in ordered if not plan.order or compare(m, current) <= 0]
    kind, rest = plan.frame.split(" ", 1)
    start_text, _, end_text = rest.removeprefix("BETWEEN ").partition(" AND ")
    start, end = _offset(start_text), _offset(end_text or "CURRENT ROW")
    if kind == "ROWS":
        return [
            m
            for j, m in enumerate(ordered)
            if (start is None or j >= i + start) and (end is None or j <= i + end)
        ]

    def bound(offset: Decimal) -> tuple[Row, Lineage]:
        key = plan.order[0]
        value = current[0][key.column]
        if offset == 0 or value is None:
            return current
        moved = value - offset if key.descending else value + offset
        return ({**current[0], key.column: moved}, current[1])

    return [
        m
        for m in ordered
        if (start is None or compare(m, bound(start)) >= 0) and (end is None or compare(m, bound(end)) <= 0)
    ]


def _window(plan: Window, rows: Annotated, top: TopRows | None = None) -> Annotated:
    """Each row with its calls' values over its partition, its lineage the whole partition's.
    By definition, row by row: RANK counts the rows ordered before, DENSE_RANK their distinct
    keys, and COUNT/MIN/MAX/SUM/AVG read their frame's rows (:func:`_frame`). ROW_NUMBER
    numbers the sorted rows (ties: the tests avoid them).
    Under a top-N filter (``top``) the lineage is that of the partition's rows ranked at most N."""
    partitions: dict[tuple[Any, ...], Annotated] = {}
    for r, lin in rows:
        partitions.setdefault(tuple(spark_order(r[c]) for c in plan.partition), []).append((r, lin))
    compare = _compare(plan.order)
    out: Annotated = []
    owns: list[Lineage] = []
    for members in partitions.values():
        lineage = frozenset().union(*(lin for _, lin in members))
        ordered = sorted(members, key=cmp_to_key(compare)) if plan.order else members
        for i, (r, own) in enumerate(ordered):
            before = [m for m in ordered if plan.order and compare(m, (r, lineage)) < 0]
            frame = _frame(plan, ordered, i, compare)
            values = dict(r)
            for name, call in plan.calls:
                if call.func == "row_number":
                    values[name] = i + 1
                elif call.func == "rank":
                    values[name] = len(before) + 1
                elif call.func == "dense_rank":
                    values[name] = len({tuple(m[0][k.column] for k in plan.order) for m in before}) + 1
                else:
                    args = [evaluate(call.arg, m[0]) if call.arg is not None else 1 for m in frame]
                    values[name] = _aggregate(call.func, args, False, call.arg is None)
            out.append((values, lineage))
            owns.append(own)
    if top is not None:  # each partition's lineage: its rows ranked at most N

        def key(values: Row) -> tuple[Any, ...]:
            return tuple(spark_order(values[c]) for c in plan.partition)

        firsts: dict[tuple[Any, ...], Lineage] = {}
        for (values, _), own in zip(out, owns, strict=True):
            kept = values[top.rank] <= top.limit
            firsts[key(values)] = firsts.get(key(values), frozenset()) | (own if kept else frozenset())
        out = [(values, firsts[key(values)]) for values, _ in out]
    return out


def provenance(plan: Relation, tables: Mapping[str, list[Row]]) -> set[tuple[str, int]]:
    """The union of the lineage of every result row."""
    return set().union(*(lin for _, lin in run(plan, tables)))
