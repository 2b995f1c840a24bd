"""Incremental aggregation (IMP Sec. 5.6 and 5.7) with per-group, per-fragment counters.

State per group: the row count, one accumulator per aggregate (sum and count of the non-NULL
values; for min and max an ordered map value -> count, so deleting the current extreme finds
the next one), and per annotation a counter fragment -> rows of the group depending on it. A
group's annotation is the set of fragments with a positive counter.

Like the capture, an aggregation computing only min and max keeps the provenance of the rows
holding an extreme value (PBDS rule r3): then the counters are also kept per value, and the
group's annotation is the union over its aggregates of the fragments at the current extreme
(all rows when the extreme is NULL, i.e. every value is NULL).

A batch is first reduced to partial aggregates with Arrow (:mod:`.partials`), then merged into
the state one group, fragment or value at a time. Batches follow IMP Sec. 9.3: the first time
a batch touches a group its output row is remembered; after the batch each touched group emits
its old row as a deletion and its new row as an insertion (nothing when they are equal).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any

import pyarrow as pa
from sortedcontainers import SortedDict

from sketch_core.algebra.ir import AggCall, Aggregate
from sketch_core.errors import KeptValuesExhaustedError, UnsupportedQueryError
from sketch_core.incremental.annotated import FRAGMENTS, MULTIPLICITY, AnnotatedDelta
from sketch_core.incremental.expressions import ExpressionTranslator, evaluate
from sketch_core.incremental.ordering import group_key, key_value, spark_order
from sketch_core.incremental.partials import (
    COUNT,
    FRAGMENT,
    ROWS,
    VALUE,
    ArgumentSpec,
    Partials,
    compute_partials,
    group_column,
)
from sketch_core.incremental.stored_groups import StoredGroups


def result_type(call: AggCall, argument: pa.DataType | None) -> pa.DataType:
    """Spark's result type of an aggregate over an argument of Arrow type ``argument``."""
    if call.func == "count":
        return pa.int64()
    assert argument is not None
    if call.func in ("min", "max"):
        return argument
    if pa.types.is_decimal(argument):
        if call.func == "sum":
            return pa.decimal128(min(38, argument.precision + 10), argument.scale)
        return pa.decimal128(min(38, argument.precision + 4), min(38, argument.scale + 4))
    if call.func == "sum" and pa.types.is_integer(argument):
        return pa.int64()
    return pa.float64()


@dataclass
class Accumulator:
    """One aggregate's state within a group."""

    total: Any = 0
    non_null: int = 0
    values: SortedDict | None = None  # min/max: value -> count (NaN as _NAN sorts last)
    # NaN and infinities are counted apart: once in a float sum they could never be subtracted
    # out again (NaN - NaN is NaN), and a sum holds them only while such rows are present.
    special: Counter[str] = field(default_factory=Counter)
    # Top-m (IMP 9.4.3): ``values`` holds only the values on the extreme's side of its last
    # entry (the bound), exactly; values past the bound are not tracked. ``largest``: max.
    partial: bool = False
    largest: bool = False

    def _past_bound(self, key: Any) -> bool:
        assert self.values is not None
        if not self.values:
            return True
        bound = self.values.peekitem(0 if self.largest else -1)[0]
        return _nan_last(key) < _nan_last(bound) if self.largest else _nan_last(key) > _nan_last(bound)

    def add(self, value: Any, n: int) -> None:
        if value is None or n == 0:  # n nets to 0 when a batch inserts and deletes the same value
            return
        self.non_null += n
        if self.values is not None:
            key = group_key(value)
            if self.partial and self._past_bound(key):
                return  # not tracked: the extreme is among the kept values
            remaining = self.values.get(key, 0) + n
            if remaining:
                self.values[key] = remaining
            else:
                del self.values[key]
        elif isinstance(value, float) and not math.isfinite(value):
            self.special["nan" if math.isnan(value) else ("+inf" if value > 0 else "-inf")] += n
        else:
            self.total += value * n

    @property
    def exhausted(self) -> bool:
        """A partial min/max whose kept values are all gone: whether the group has others, and
        which is the extreme, is not known (its ``non_null`` does not count dropped values)."""
        return self.partial and not self.values

    def trim(self, keep: int) -> None:
        """Keep only the ``keep`` most extreme values, once there are twice that many."""
        if self.values is None or len(self.values) <= 2 * keep:
            return
        doomed = self.values.keys()[: len(self.values) - keep] if self.largest else self.values.keys()[keep:]
        for key in list(doomed):
            del self.values[key]
        self.partial = True

    def float_total(self) -> float:
        if self.special["nan"] or (self.special["+inf"] and self.special["-inf"]):
            return math.nan
        if self.special["+inf"]:
            return math.inf
        if self.special["-inf"]:
            return -math.inf
        return float(self.total)


@dataclass
class GroupState:
    rows: int = 0
    accumulators: list[Accumulator] = field(default_factory=list)
    counters: dict[str, Counter[int]] = field(default_factory=dict)  # annotation -> fragment -> rows
    # Min/max-only aggregations: per aggregate, value key -> annotation -> fragment -> rows.
    at_value: list[dict[Any, dict[str, Counter[int]]]] = field(default_factory=list)


def _nan_last(key: Any) -> tuple[int, Any]:
    return spark_order(key_value(key))


def ordered_values() -> SortedDict:
    """value -> count, in Spark's order (NaN above every number)."""
    return SortedDict(_nan_last)


class AggregateShape:
    """What an aggregation computes, independent of how its state is kept: the group and
    argument expressions over its input, their Arrow types and Spark's result types."""

    def __init__(self, node: Aggregate, input_schema: pa.Schema, annotations: Sequence[str]) -> None:
        for _, call in node.aggregates:
            if call.distinct or call.func not in ("count", "sum", "avg", "min", "max"):
                raise UnsupportedQueryError(
                    f"{call.label}{'(DISTINCT)' if call.distinct else ''} in incremental maintenance",
                    call.label,
                    hint="maintain this sketch with strategy='full'",
                )
        self.node = node
        self.annotations = tuple(annotations)
        self.extremes_only = bool(node.aggregates) and all(
            c.func in ("min", "max") for _, c in node.aggregates
        )
        translate = ExpressionTranslator(input_schema)
        self.group_expressions = {name: translate(e) for name, e in node.groups}
        self.argument_expressions = {
            f"__arg{i}": translate(call.arg)
            for i, (_, call) in enumerate(node.aggregates)
            if call.arg is not None
        }
        probe = evaluate(input_schema.empty_table(), {**self.group_expressions, **self.argument_expressions})
        self.group_names = [n for n, _ in node.groups]
        self.group_types = [probe.schema.field(n).type for n in self.group_expressions]
        self.argument_types: list[pa.DataType | None] = [
            probe.schema.field(f"__arg{i}").type if call.arg is not None else None
            for i, (_, call) in enumerate(node.aggregates)
        ]
        self.output_types = [
            result_type(call, probe.schema.field(f"__arg{i}").type if call.arg is not None else None)
            for i, (_, call) in enumerate(node.aggregates)
        ]

    def is_extreme(self, index: int) -> bool:
        return self.node.aggregates[index][1].func in ("min", "max")

    def argument_specs(self) -> list[ArgumentSpec]:
        return [
            ArgumentSpec(j, call.func in ("min", "max"), self.extremes_only, call.func in ("sum", "avg"))
            for j, (_, call) in enumerate(self.node.aggregates)
            if call.arg is not None
        ]

    def partials(self, rows: AnnotatedDelta) -> Partials:
        """The batch's partial aggregates (see :mod:`sketch_core.incremental.partials`)."""
        expressions = {**self.group_expressions, **self.argument_expressions}
        evaluated = evaluate(rows.data(), expressions) if expressions else None
        keys = [evaluated.column(n).combine_chunks() for n in self.group_expressions] if evaluated else []
        arguments = {
            spec.index: evaluated.column(f"__arg{spec.index}").combine_chunks()
            for spec in self.argument_specs()
            if evaluated is not None
        }
        return compute_partials(
            keys,
            arguments,
            self.argument_specs(),
            rows.table.column(MULTIPLICITY).combine_chunks(),
            {a: rows.table.column(a).combine_chunks() for a in self.annotations},
        )


class AggregateOperator(AggregateShape):
    """The aggregation's state as Python objects, one per group (any aggregate, any key)."""

    def __init__(
        self, node: Aggregate, input_schema: pa.Schema, annotations: Sequence[str], keep: int | None = None
    ) -> None:
        super().__init__(node, input_schema, annotations)
        self.keep = keep or None  # min/max keep their top m values only (IMP 9.4.3)
        # A dict, or after a restore the lazily read StoredGroups (the same mapping).
        self.groups: MutableMapping[tuple[Any, ...], GroupState] = {}
        # Groups changed since the state was last persisted (vanished ones included): only
        # these need writing when the next state file is stored as changes to the last one.
        self.dirty: set[tuple[Any, ...]] = set()
        self._announced = bool(node.groups)
        if not node.groups:  # a global aggregate has its one row even over no input
            self.groups[()] = self.new_group()

    # -- state ---------------------------------------------------------------------------------
    def new_group(self) -> GroupState:
        """The empty state of a group: one seen for the first time, or the global aggregate's."""
        return GroupState(
            accumulators=[
                Accumulator(
                    values=ordered_values() if c.func in ("min", "max") else None, largest=c.func == "max"
                )
                for _, c in self.node.aggregates
            ],
            counters={a: Counter() for a in self.annotations},
            at_value=[{} for _ in self.node.aggregates] if self.extremes_only else [],
        )

    def _result(self, call: AggCall, accumulator: Accumulator, group: GroupState, kind: pa.DataType) -> Any:
        if call.func == "count":
            return group.rows if call.arg is None else accumulator.non_null
        if call.func in ("min", "max"):
            # From the values themselves: a top-m state does not count the values it dropped.
            assert accumulator.values is not None
            if not accumulator.values:
                return None
            key = accumulator.values.peekitem(0 if call.func == "min" else -1)[0]
            return key_value(key)
        if accumulator.non_null == 0:
            return None
        if call.func == "sum":
            return accumulator.float_total() if pa.types.is_floating(kind) else accumulator.total
        if pa.types.is_decimal(kind):  # avg of decimals: rounded half up to the result scale
            with localcontext() as context:
                context.prec = 80
                quotient = Decimal(accumulator.total) / accumulator.non_null
                return quotient.quantize(Decimal(1).scaleb(-kind.scale), rounding=ROUND_HALF_UP)
        return accumulator.float_total() / accumulator.non_null

    def _extreme_key(self, call: AggCall, accumulator: Accumulator) -> Any:
        assert accumulator.values is not None
        if not accumulator.values:
            return None
        return accumulator.values.peekitem(0 if call.func == "min" else -1)[0]

    def _annotation(self, group: GroupState, annotation: str) -> frozenset[int]:
        if self.extremes_only:
            found: set[int] = set()
            for i, (_, call) in enumerate(self.node.aggregates):
                key = self._extreme_key(call, group.accumulators[i])
                if key is None:  # the extreme is NULL: every row of the group holds it
                    return frozenset(f for f, n in group.counters[annotation].items() if n > 0)
                counter = group.at_value[i].get(key, {}).get(annotation, Counter())
                found.update(f for f, n in counter.items() if n > 0)
            return frozenset(found)
        return frozenset(f for f, n in group.counters[annotation].items() if n > 0)

    def output_row(self, key: tuple[Any, ...]) -> tuple[tuple[Any, ...], tuple[frozenset[int], ...]] | None:
        group = self.groups.get(key)
        if group is None or (group.rows == 0 and self.node.groups):
            return None
        values = tuple(
            self._result(call, group.accumulators[i], group, self.output_types[i])
            for i, (_, call) in enumerate(self.node.aggregates)
        )
        annotations = tuple(self._annotation(group, a) for a in self.annotations)
        return tuple(key_value(k) for k in key) + values, annotations

    # -- processing ----------------------------------------------------------------------------
    def apply(self, rows: AnnotatedDelta) -> AnnotatedDelta:
        touched: dict[tuple[Any, ...], Any] = {}
        if not self._announced:  # a global aggregate's row exists before any input: emit it once
            touched[()] = None
            self._announced = True
        if rows.num_rows:
            self.merge(self.partials(rows), touched)
        return self._finish(touched)

    def load(self, partials: Partials) -> AnnotatedDelta:
        """Apply partial aggregates computed elsewhere (by Spark, over a whole snapshot): the
        output changes, as :meth:`apply` gives them for the rows they summarize."""
        touched: dict[tuple[Any, ...], Any] = {}
        if not self._announced:
            touched[()] = None
            self._announced = True
        self.merge(partials, touched)
        return self._finish(touched)

    def _finish(self, touched: dict[tuple[Any, ...], Any]) -> AnnotatedDelta:
        self.dirty.update(touched)
        changes = []
        for key, old in touched.items():
            group = self.groups[key]
            if group.rows < 0:
                raise AssertionError(f"group {key} has {group.rows} rows: a deletion without its row")
            if group.rows > 0 and any(a.exhausted for a in group.accumulators):
                raise KeptValuesExhaustedError("min/max", self.keep or 0)
            new = self.output_row(key)
            if group.rows == 0 and self.node.groups:
                del self.groups[key]  # the group vanished; it is recreated if rows come back
            else:
                if self.keep is not None:
                    for accumulator in group.accumulators:
                        accumulator.trim(self.keep)
                self._drop_empty_values(group)
            if old != new:
                changes.append((old, new))
        return self._emit(changes)

    def merge(self, partials: Partials, touched: dict[tuple[Any, ...], Any]) -> None:
        """Add a batch's partial aggregates to the state. Every group the batch touches is put in
        ``touched`` with its output row from before the batch (the first time it is seen)."""

        def keys_of(table: pa.Table) -> list[tuple[Any, ...]]:
            names = [group_column(i) for i in range(len(self.node.groups))]
            if not names:
                return [()] * table.num_rows
            columns = [table.column(n).to_pylist() for n in names]
            return [tuple(group_key(v) for v in raw) for raw in zip(*columns, strict=True)]

        groups = partials.groups
        summed = [spec.index for spec in self.argument_specs() if not spec.ordered]
        sums = {
            j: {
                name: groups.column(f"{name}{j}").to_pylist()
                for name in ("nn", "sum", "nan", "pinf", "ninf")
                if f"{name}{j}" in groups.column_names
            }
            for j in summed
        }
        added_rows = groups.column(ROWS).to_pylist()
        batch_keys = keys_of(groups)
        if isinstance(self.groups, StoredGroups):
            self.groups.preload(batch_keys)  # the touched groups' stored rows, in one read
        for i, key in enumerate(batch_keys):
            if key not in touched:
                touched[key] = self.output_row(key)
            group = self.groups.get(key)
            if group is None:
                group = self.groups[key] = self.new_group()
            group.rows += added_rows[i]
            for j, columns in sums.items():
                accumulator = group.accumulators[j]
                accumulator.non_null += columns["nn"][i]
                if "sum" in columns:
                    accumulator.total += columns["sum"][i] or 0
                if "nan" in columns:
                    accumulator.special["nan"] += columns["nan"][i]
                    accumulator.special["+inf"] += columns["pinf"][i]
                    accumulator.special["-inf"] += columns["ninf"][i]
        for j, table in partials.values.items():
            counts = table.column(COUNT).to_pylist()
            for key, value, n in zip(keys_of(table), table.column(VALUE).to_pylist(), counts, strict=True):
                self.groups[key].accumulators[j].add(value, n)
        for annotation, table in partials.counters.items():
            fragment_ids = table.column(FRAGMENT).to_pylist()
            counts = table.column(COUNT).to_pylist()
            for key, fragment, n in zip(keys_of(table), fragment_ids, counts, strict=True):
                self.groups[key].counters[annotation][fragment] += n
        for (j, annotation), table in partials.at_value.items():
            values = table.column(VALUE).to_pylist()
            fragment_ids = table.column(FRAGMENT).to_pylist()
            counts = table.column(COUNT).to_pylist()
            for key, value, fragment, n in zip(keys_of(table), values, fragment_ids, counts, strict=True):
                at_value = self.groups[key].at_value[j].setdefault(group_key(value), {})
                at_value.setdefault(annotation, Counter())[fragment] += n

    def current(self) -> AnnotatedDelta:
        """Every output row now, each as one inserted row."""
        rows = (self.output_row(key) for key in list(self.groups))
        return self._emit([(None, row) for row in rows if row is not None])

    def _drop_empty_values(self, group: GroupState) -> None:
        for counters in group.counters.values():
            for fragment in [f for f, n in counters.items() if n == 0]:
                del counters[fragment]
        for j, accumulator in enumerate(group.accumulators):
            if self.extremes_only and accumulator.values is not None:
                for key in [k for k in group.at_value[j] if k not in accumulator.values]:
                    del group.at_value[j][key]

    def _emit(self, changes: list[tuple[Any, Any]]) -> AnnotatedDelta:
        names = [n for n, _ in self.node.groups] + [n for n, _ in self.node.aggregates]
        types = self.group_types + self.output_types
        records: list[tuple[tuple[Any, ...], tuple[frozenset[int], ...], int]] = []
        for old, new in changes:
            if old is not None:
                records.append((old[0], old[1], -1))
            if new is not None:
                records.append((new[0], new[1], 1))
        columns = {
            name: pa.array([r[0][i] for r in records], kind)
            for i, (name, kind) in enumerate(zip(names, types, strict=True))
        }
        assert columns, "an aggregation outputs at least one column"
        data = pa.table(columns)
        annotations = {
            a: pa.array([sorted(r[1][k]) for r in records], FRAGMENTS) for k, a in enumerate(self.annotations)
        }
        return AnnotatedDelta.build(data, [r[2] for r in records], annotations)
