"""Partial aggregates of a batch of annotated rows, computed set-at-a-time with Arrow.

An aggregation's state changes by sums: per group, the rows added (signed), per aggregate the
non-NULL values added and their sum, per annotation and fragment the rows depending on it, and
for min/max per value the rows holding it. Arrow's hash aggregation computes all of those for a
whole batch at once (IMP Sec. 8's set-oriented evaluation, in-process), so merging them into
the per-group state costs one step per group, fragment or value touched, not one per row.
The same shape comes from a Spark job when the state is initialized from a snapshot.

Float sums keep NaN and infinities apart (counted, not summed): once in a sum, they could
never be subtracted out again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ROWS = "__rows"
VALUE = "__value"
FRAGMENT = "__fragment"
COUNT = "__n"


def group_column(index: int) -> str:
    return f"__g{index}"


@dataclass(frozen=True)
class ArgumentSpec:
    """How aggregate ``index`` accumulates its argument."""

    index: int
    ordered: bool  # min/max: counts per value
    with_provenance_by_value: bool  # min/max-only aggregations: fragments per value as well
    summed: bool = True  # sum and avg: the values' sum (count(x) needs only the non-NULL count)

    def summed_columns(self, argument: pa.DataType) -> list[str]:
        """The per-group columns this argument contributes."""
        if self.ordered:
            return []
        if not self.summed:
            return [f"nn{self.index}"]
        if pa.types.is_floating(argument):
            return [f"{name}{self.index}" for name in ("nn", "sum", "nan", "pinf", "ninf")]
        return [f"nn{self.index}", f"sum{self.index}"]


@dataclass
class Partials:
    """Per group (columns ``__g0..``): ``__rows``, and per summed aggregate j ``nn{j}`` (non-NULL
    rows), ``sum{j}`` (sum of the finite values) and for floats ``nan{j}``, ``pinf{j}``,
    ``ninf{j}``; ``values[j]``: group, ``__value``, ``__n``; ``counters[a]``: group,
    ``__fragment``, ``__n``; ``at_value[(j, a)]``: group, ``__value``, ``__fragment``, ``__n``."""

    groups: pa.Table
    values: dict[int, pa.Table] = field(default_factory=dict)
    counters: dict[str, pa.Table] = field(default_factory=dict)
    at_value: dict[tuple[int, str], pa.Table] = field(default_factory=dict)


def _masked(condition: pa.Array, values: pa.Array) -> pa.Array:
    """``values`` where ``condition`` holds, else 0 (NULL conditions count as false)."""
    zero = pa.scalar(0, values.type)
    return pc.if_else(pc.fill_null(condition, False), values, zero)


def _times(values: pa.Array, multiplicity: pa.Array) -> pa.Array:
    if pa.types.is_decimal(values.type):
        negative = pc.less(multiplicity, 0)
        if pc.all(pc.equal(pc.abs(multiplicity), 1)).as_py():  # the usual case: no precision growth
            return pc.if_else(negative, pc.negate(values), values)
        return pc.multiply(values, multiplicity.cast(pa.decimal128(19, 0)))
    if pa.types.is_floating(values.type):
        return pc.multiply(values, multiplicity.cast(values.type))
    return pc.multiply(values.cast(pa.int64()), multiplicity)


def _exact(kind: pa.DataType) -> bool:
    """Summed exactly in any order (floats are not: their sums stay with Arrow's plan)."""
    return bool(pa.types.is_integer(kind) or pa.types.is_decimal(kind))


def _sum_by(table: pa.Table, keys: Sequence[str], sums: Sequence[str]) -> pa.Table:
    """``table`` grouped by ``keys`` with each of ``sums`` summed (same column names, types and
    NULLs as Arrow's hash aggregation gives).

    Two shapes of a run's batch are summed without a plan: no keys (a global aggregate) and
    one integer key over int64 sums (a global aggregate's rows per fragment). A plan costs
    ~0.3 ms at a delta's few thousand rows, most of it setting up; these take a pass or a sort.
    """
    if table.num_rows and not keys and all(_exact(table.schema.field(c).type) for c in sums):
        return pa.table({c: pa.repeat(pc.sum(table.column(c)), 1) for c in sums})
    if table.num_rows and len(keys) == 1 and _summable_by_sorting(table, keys[0], sums):
        return _sorted_sums(table, keys[0], sums)
    result = table.group_by(list(keys), use_threads=False).aggregate([(c, "sum") for c in sums])
    return result.rename_columns([c.removesuffix("_sum") for c in result.column_names])


def _summable_by_sorting(table: pa.Table, key: str, sums: Sequence[str]) -> bool:
    columns = [table.column(key), *(table.column(c) for c in sums)]
    return (
        pa.types.is_integer(columns[0].type)
        and all(c.type == pa.int64() for c in columns[1:])
        and not any(c.null_count for c in columns)
    )


def _sorted_sums(table: pa.Table, key: str, sums: Sequence[str]) -> pa.Table:
    """One row per distinct ``key`` (in key order) with ``sums`` summed: a sort and a
    reduction, exact for int64."""
    keys = table.column(key).to_numpy()
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    columns = {key: pa.array(ordered[starts], table.schema.field(key).type)}
    for c in sums:
        columns[c] = pa.array(np.add.reduceat(table.column(c).to_numpy()[order], starts), pa.int64())
    return pa.table(columns)


def compute_partials(
    keys: Sequence[pa.Array],
    arguments: Mapping[int, pa.Array],
    specs: Sequence[ArgumentSpec],
    multiplicity: pa.Array,
    fragments: Mapping[str, pa.Array],
) -> Partials:
    """The partial aggregates of one batch: group ``keys`` (evaluated), aggregate arguments by
    aggregate index, the rows' signed multiplicities and their ``list<int32>`` annotations."""
    multiplicity = multiplicity.cast(pa.int64())
    group_names = [group_column(i) for i in range(len(keys))]
    base = {name: key for name, key in zip(group_names, keys, strict=True)}

    columns: dict[str, pa.Array] = {**base, ROWS: multiplicity}
    for spec in specs:
        if spec.ordered:
            continue
        argument = arguments[spec.index]
        j = spec.index
        columns[f"nn{j}"] = _masked(pc.is_valid(argument), multiplicity)
        if not spec.summed:
            continue
        if pa.types.is_floating(argument.type):
            finite = pc.is_finite(argument)
            columns[f"sum{j}"] = _masked(finite, _times(argument, multiplicity))
            columns[f"nan{j}"] = _masked(pc.is_nan(argument), multiplicity)
            columns[f"pinf{j}"] = _masked(pc.equal(argument, float("inf")), multiplicity)
            columns[f"ninf{j}"] = _masked(pc.equal(argument, float("-inf")), multiplicity)
        else:
            added = _times(pc.fill_null(argument, 0), multiplicity)
            columns[f"sum{j}"] = _masked(pc.is_valid(argument), added)
    summed = [c for c in columns if c not in base]
    partials = Partials(_sum_by(pa.table(columns), group_names, summed))

    for spec in specs:
        if not spec.ordered:
            continue
        argument = arguments[spec.index]
        valued = pa.table({**base, VALUE: argument, COUNT: multiplicity}).filter(pc.is_valid(argument))
        partials.values[spec.index] = _sum_by(valued, [*group_names, VALUE], [COUNT])

    for annotation, lists in fragments.items():
        parents = pc.list_parent_indices(lists)
        exploded = {name: pc.take(key, parents) for name, key in base.items()}
        exploded[FRAGMENT] = pc.list_flatten(lists)
        exploded[COUNT] = pc.take(multiplicity, parents)
        partials.counters[annotation] = _sum_by(pa.table(exploded), [*group_names, FRAGMENT], [COUNT])
        for spec in specs:
            if not spec.with_provenance_by_value:
                continue
            by_value = pa.table({**exploded, VALUE: pc.take(arguments[spec.index], parents)})
            by_value = by_value.filter(pc.is_valid(by_value.column(VALUE)))
            partials.at_value[(spec.index, annotation)] = _sum_by(
                by_value, [*group_names, VALUE, FRAGMENT], [COUNT]
            )
    return partials


def _signed(table: pa.Table, keys: Sequence[str], sign: int) -> pa.Table:
    if sign == 1:
        return table
    return pa.table(
        {c: table.column(c) if c in keys else pc.negate(table.column(c)) for c in table.column_names}
    )


def _combined_table(tables: Sequence[tuple[pa.Table, int]], keys: Sequence[str]) -> pa.Table:
    present = [(t, s) for t, s in tables if t.num_rows]
    if not present:
        return tables[0][0]
    merged = pa.concat_tables([_signed(t, keys, s) for t, s in present], promote_options="permissive")
    return _sum_by(merged, keys, [c for c in merged.column_names if c not in keys])


def combined(parts: Sequence[tuple[Partials, int]]) -> Partials:
    """The signed sum of partial aggregates of the same aggregation (each part with sign +1 or
    -1): partial aggregates add, so those of a bag difference are the difference of those of
    its two sides. Every table of the parts is summed by its keys."""
    first = parts[0][0]
    groups = [c for c in first.groups.column_names if c.startswith("__g")]
    result = Partials(_combined_table([(p.groups, s) for p, s in parts], groups))
    for j in first.values:
        result.values[j] = _combined_table([(p.values[j], s) for p, s in parts], [*groups, VALUE])
    for a in first.counters:
        result.counters[a] = _combined_table([(p.counters[a], s) for p, s in parts], [*groups, FRAGMENT])
    for key in first.at_value:
        result.at_value[key] = _combined_table(
            [(p.at_value[key], s) for p, s in parts], [*groups, VALUE, FRAGMENT]
        )
    return result
