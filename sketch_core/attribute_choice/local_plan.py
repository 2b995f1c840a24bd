"""A join-and-filter plan (the input of a query's aggregation) evaluated in-process with Arrow.

Estimating sketch sizes (CBS Sec. 8) needs the aggregation's input rows over a sample of the
fact table: a few hundred thousand rows, joined with the dimension tables it references. As a
Spark job that costs about a second of scheduling and transfer, as much as the capture it is
meant to be a small fraction of; in-process it is a hash join or two.

Covered: scans, selections, projections, union all, inner, semi and anti joins on at least
one column equality (other conjuncts filter the joined rows), and grouped aggregations of
COUNT, SUM, AVG, MIN and MAX (a subquery's ``GROUP BY ... HAVING``, such as TPC-H Q18's
``IN``). Expressions go through the same Spark-aligned Arrow translation the incremental engine
uses. Anything else raises :class:`UnsupportedQueryError`, and the caller falls back to Spark.

The join's other side is read only where its keys meet the rows already joined: ``read`` is
given those key values (the sample's order keys, say), and can skip files and row groups whose
statistics hold none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from sketch_core.algebra.dialect import SPARK
from sketch_core.algebra.ir import AggCall, Aggregate, Join, Project, Relation, Scan, Select, Union
from sketch_core.arrow.membership import is_in
from sketch_core.errors import UnsupportedQueryError
from sketch_core.incremental.expressions import ExpressionTranslator, evaluate, filter_rows
from sketch_core.incremental.join import equi_keys, keyed_like, matching_rows

# (scan, {source column: values wanted} or None) -> the scan's source columns, at least the rows
# holding those values (more is fine: the join drops them).
ScanReader = Callable[[Scan, Mapping[str, pa.Array] | None], pa.Table]
# A scan's read is given at most this many distinct key values (it matches them file by file);
# with more, it reads every row and the keys filter them here, with one hash set per column.
MAX_READ_KEYS = 10_000


def evaluate_plan(plan: Relation, read: ScanReader, driving: str | None = None) -> pa.Table:
    """``plan``'s rows. ``driving``: the table whose scan is small (the sample); each join
    evaluates the side holding it first and reads the other side by its keys."""
    return _Evaluator(read, driving).rows(plan, None)


class _Evaluator:
    def __init__(self, read: ScanReader, driving: str | None) -> None:
        self.read = read
        self.driving = driving

    def rows(self, node: Relation, keys: Mapping[str, pa.Array] | None) -> pa.Table:
        """``node``'s rows; with ``keys`` ({output column: values}) rows without one of those
        values may be left out."""
        if isinstance(node, Scan):
            return self.scan(node, keys)
        if isinstance(node, Select) and isinstance(node.child, Scan):
            return self.scan(node.child, keys, node.condition)
        if isinstance(node, Select):
            table = self.rows(node.child, keys)
            return filter_rows(table, ExpressionTranslator(table.schema)(node.condition))
        if isinstance(node, Project):
            passed = {
                name: (keys or {})[e.name]
                for name, e in node.outputs
                if isinstance(e, exp.Column) and e.name in (keys or {})
            }
            table = self.rows(node.child, {_source(node, n): v for n, v in passed.items()} or None)
            translate = ExpressionTranslator(table.schema)
            return evaluate(table, {name: translate(e) for name, e in node.outputs})
        if isinstance(node, Union):
            parts = [self.rows(child, None).rename_columns(list(node.columns)) for child in node.inputs]
            return pa.concat_tables(parts, promote_options="permissive")
        if isinstance(node, Join):
            return self.join(node, keys)
        if isinstance(node, Aggregate):
            return self.aggregate(node, keys)
        raise UnsupportedQueryError(f"{type(node).__name__} in an in-process estimate", type(node).__name__)

    def scan(
        self, node: Scan, keys: Mapping[str, pa.Array] | None, condition: exp.Expr | None = None
    ) -> pa.Table:
        """The scan's rows (``condition``: of a selection on it). Past ``MAX_READ_KEYS`` the
        read gets no keys; the selection then filters the rows before the keys' hash set is
        probed: at SF10, Q10's quarter of `orders` (540,000 of 15M rows) rather than all."""
        sources = dict(zip(node.names, node.source_columns, strict=True))
        wanted = {n: v for n, v in (keys or {}).items() if n in sources} or None
        few = wanted is not None and sum(map(len, wanted.values())) <= MAX_READ_KEYS
        by_source = {sources[n]: v for n, v in wanted.items()} if wanted and few else None
        table = self.read(node, by_source).select(list(node.source_columns))
        table = table.rename_columns(list(node.names))
        if condition is not None:
            table = filter_rows(table, ExpressionTranslator(table.schema)(condition))
        if wanted is not None and not few and node.table != self.driving:
            table = _having_keys(table, wanted)
        return table

    def join(self, node: Join, keys: Mapping[str, pa.Array] | None) -> pa.Table:
        pairs, residual = equi_keys(node.condition, node.left.columns, node.right.columns)
        outer = node.kind in ("left", "full", "scalar")  # left to Spark
        if not pairs or outer or node.null_aware or (residual and node.kind != "inner"):
            condition = node.condition.sql(dialect=SPARK) if node.condition is not None else "no condition"
            raise UnsupportedQueryError(f"this {node.kind} join in an in-process estimate", condition)
        # Semi and anti joins keep the left's rows: it comes first. An inner join starts from the
        # side holding the sample, unless both do; without the sample, from the side the keys
        # wanted from above restrict (TPC-H Q18's orders, by the sample's order keys, before
        # the customers: not all 15M orders joined with their customers first).
        left_first = node.kind != "inner" or self._holds_driving(node.left)
        if not left_first and not self._holds_driving(node.right):
            left_first = _restricts(keys, node.left) or not _restricts(keys, node.right)
        first, second = (node.left, node.right) if left_first else (node.right, node.left)
        first_keys = [a if left_first else b for a, b in pairs]
        second_keys = [b if left_first else a for a, b in pairs]
        one = self.rows(first, {n: v for n, v in (keys or {}).items() if n in first.columns} or None)
        # The other side's rows are only those meeting the first's keys (and the keys wanted
        # from above that are its columns).
        wanted = {n: v for n, v in (keys or {}).items() if n in second.columns}
        for f, s in zip(first_keys, second_keys, strict=True):
            wanted[s] = pc.unique(one.column(f).combine_chunks()).drop_null()
        other = self.rows(second, wanted)
        if node.kind in ("semi", "anti"):
            kind = "left semi" if node.kind == "semi" else "left anti"
            return _hash_join(one, other, first_keys, second_keys, kind).select(list(node.columns))
        joined = _hash_join(one, other, first_keys, second_keys, "inner")
        if residual:
            joined = filter_rows(joined, ExpressionTranslator(joined.schema)(exp.and_(*residual)))
        return joined.select(list(node.columns))

    def aggregate(self, node: Aggregate, keys: Mapping[str, pa.Array] | None) -> pa.Table:
        """The groups and their aggregates. Wanted values of a group column that is a plain
        column are passed down: a group's rows all share them, so every group kept is whole."""
        if not node.groups:  # one row even over no rows: left to Spark
            raise UnsupportedQueryError(
                "an aggregation without GROUP BY in an in-process estimate", "GROUP BY"
            )
        passed = {
            e.name: (keys or {})[name]
            for name, e in node.groups
            if isinstance(e, exp.Column) and name in (keys or {})
        }
        rows = self.rows(node.child, passed or None)
        translate = ExpressionTranslator(rows.schema)
        inputs = {f"__g{i}": translate(e) for i, (_, e) in enumerate(node.groups)}
        for i, (_, call) in enumerate(node.aggregates):
            if call.arg is not None:
                inputs[f"__a{i}"] = translate(call.arg)
        table = evaluate(rows, inputs)
        groups = [f"__g{i}" for i in range(len(node.groups))]
        specs, outputs = [], []
        for i, (_, call) in enumerate(node.aggregates):
            spec, output = _hash_aggregate(table, f"__a{i}", call)
            table = _widened(table, f"__a{i}", call)
            if spec not in specs:
                specs.append(spec)
            outputs.append(output)
        result = table.group_by(groups, use_threads=False).aggregate(specs)
        return pa.table(
            [result.column(g) for g in groups] + [result.column(o) for o in outputs], names=list(node.columns)
        )

    def _holds_driving(self, node: Relation) -> bool:
        if isinstance(node, Scan):
            return node.table == self.driving
        return any(self._holds_driving(c) for c in node.children)


def _hash_aggregate(table: pa.Table, column: str, call: AggCall) -> tuple[tuple[Any, str], str]:
    """Arrow's hash aggregation for ``call`` over ``column``, and the column it outputs."""
    if call.arg is None:
        return ([], "count_all"), "count_all"
    if call.distinct and call.func in ("sum", "avg"):
        raise UnsupportedQueryError(f"{call.func}(DISTINCT ...) in an in-process estimate", call.func)
    function = {"count": "count_distinct" if call.distinct else "count", "sum": "sum", "avg": "mean"}.get(
        call.func, call.func
    )
    if function not in ("count", "count_distinct", "sum", "mean", "min", "max"):
        raise UnsupportedQueryError(f"{call.func} in an in-process estimate", call.func)
    return (column, function), f"{column}_{function}"


def _widened(table: pa.Table, column: str, call: AggCall) -> pa.Table:
    """The aggregate's input as Spark sums it: decimals of a SUM ten digits wider (as Spark's
    result type; Arrow would keep the input's precision in some versions), decimals of an AVG
    as doubles (an estimate compares it with a threshold; Spark's exact scale is not needed)."""
    if call.arg is None or call.func not in ("sum", "avg"):
        return table
    kind = table.schema.field(column).type
    if not pa.types.is_decimal(kind):
        return table
    target = pa.float64() if call.func == "avg" else pa.decimal128(min(38, kind.precision + 10), kind.scale)
    index = table.schema.get_field_index(column)
    return table.set_column(index, column, table.column(column).cast(target))


def _source(node: Project, name: str) -> str:
    """The child column a passed-through output ``name`` of ``node`` reads."""
    expression = dict(node.outputs)[name]
    assert isinstance(expression, exp.Column)
    return expression.name


def _restricts(keys: Mapping[str, pa.Array] | None, node: Relation) -> bool:
    return any(name in node.columns for name in keys or {})


def _having_keys(table: pa.Table, keys: Mapping[str, pa.Array]) -> pa.Table:
    """``table``'s rows whose value in each key column is among the wanted ones (a column whose
    type the values do not cast to is not filtered: leaving rows in is always right)."""
    mask: pa.ChunkedArray | None = None
    for name, values in keys.items():
        column = table.column(name)
        try:
            found = is_in(column, values.cast(column.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
        mask = found if mask is None else pc.and_(mask, found)
    return table.filter(mask) if mask is not None else table


def _hash_join(left: pa.Table, right: pa.Table, lkeys: list[str], rkeys: list[str], kind: str) -> pa.Table:
    """Arrow's hash join, keys of differing types cast to the left's (as Spark widens both),
    NULL keys never matching; for inner joins the left's and then the right's columns."""
    pairs = list(zip(lkeys, rkeys, strict=True))
    if right.num_rows > 2 * left.num_rows:
        # Arrow builds its hash table on the right side, and an estimate's other side is read
        # whole when the sample holds many keys (at SF10, 15M `orders` rows for the ~470,000
        # orders of a 500,000-row `lineitem` sample): a set of the left's keys is cheaper to probe.
        right = _having_keys(right, {r: pc.unique(left.column(lk).combine_chunks()) for lk, r in pairs})
    if kind == "inner":
        li, ri = matching_rows(left, right, pairs, use_threads=True)
        joined = left.take(pa.array(li, pa.int64()))
        taken = right.take(pa.array(ri, pa.int64()))
        for name in right.column_names:
            joined = joined.append_column(name, taken.column(name))
        return joined
    right = keyed_like(left, right, pairs)
    return left.join(right.select(rkeys), keys=lkeys, right_keys=rkeys, join_type=kind)
