"""Operator state from a snapshot, computed on Spark (IMP Sec. 8's set-oriented strategy).

An incremental aggregation's state is a set of sums over its input: per group, per group and
fragment, per group and value (:mod:`sketch_core.incremental.partials`). For each aggregation
over a stateless subtree (the engine's frontier) one Spark query computes them all at once
with GROUPING SETS over the annotated subtree, and only those sums come back to the driver:
the snapshot's rows are never read in-process.

Without min/max (no set groups by a value), every set is a coarsening of the finest one (the
groups and every annotation), so the query aggregates the rows once, to that finest grouping,
and the GROUPING SETS run over those few sums: Spark's GROUPING SETS copy every input row once
per set, and for TPC-H Q1 at SF1 (six million rows, two sets) that copy cost 5 s of 7.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from sketch_core.algebra.ir import Project, Scan, column
from sketch_core.algebra.printer import to_sql
from sketch_core.incremental.engine import Frontier
from sketch_core.incremental.partials import COUNT, FRAGMENT, ROWS, VALUE, Partials, combined, group_column
from sketch_core.rewrites.capture import instrument_annotations


def _q(name: str) -> str:
    return f"`{name}`"


def _argument(index: int) -> str:
    return f"__arg{index}"


def _flag(name: str) -> str:
    return f"__in{name}"


@dataclass(frozen=True)
class _Set:
    """One grouping set: the group columns plus ``extra`` (an annotation and/or an argument)."""

    extra: tuple[str, ...]
    annotation: str | None = None
    argument: int | None = None


def _sets(frontier: Frontier) -> list[_Set]:
    annotations = sorted(set(frontier.annotations.values()))
    sets = [_Set(())]
    sets += [_Set((a,), annotation=a) for a in annotations]
    for spec in frontier.specs:
        if not spec.ordered:
            continue
        sets.append(_Set((_argument(spec.index),), argument=spec.index))
        if spec.with_provenance_by_value:
            sets += [_Set((_argument(spec.index), a), annotation=a, argument=spec.index) for a in annotations]
    return sets


def _sums(frontier: Frontier) -> list[tuple[str, str, str]]:
    """The sums every grouping set computes, as (alias, aggregate over the rows, the same
    rolled up from finer sums): rows, and per unordered argument its non-NULL count and sum (a
    double's with its NaN and infinities counted apart). A decimal's rolled-up sum is cast back
    to the type its sum over the rows has (Spark widens every SUM of a decimal by 10 digits)."""
    sums = [(_q(ROWS), "COUNT(*)", f"SUM({_q(ROWS)})")]
    for spec in frontier.specs:
        if spec.ordered:
            continue
        x, j = _q(_argument(spec.index)), spec.index
        sums.append((f"nn{j}", f"COUNT({x})", f"SUM(nn{j})"))
        if not spec.summed:
            continue
        kind = frontier.argument_types[j]
        if pa.types.is_floating(kind):
            special = f"isnan({x}) OR {x} = double('inf') OR {x} = double('-inf')"
            sums.append((f"sum{j}", f"SUM(CASE WHEN {special} THEN NULL ELSE {x} END)", f"SUM(sum{j})"))
            sums.append((f"nan{j}", f"SUM(CASE WHEN isnan({x}) THEN 1 ELSE 0 END)", f"SUM(nan{j})"))
            sums.append(
                (f"pinf{j}", f"SUM(CASE WHEN {x} = double('inf') THEN 1 ELSE 0 END)", f"SUM(pinf{j})")
            )
            sums.append(
                (f"ninf{j}", f"SUM(CASE WHEN {x} = double('-inf') THEN 1 ELSE 0 END)", f"SUM(ninf{j})")
            )
        elif pa.types.is_decimal(kind):
            summed = f"DECIMAL({min(38, kind.precision + 10)}, {kind.scale})"
            sums.append((f"sum{j}", f"SUM({x})", f"CAST(SUM(sum{j}) AS {summed})"))
        else:
            sums.append((f"sum{j}", f"SUM({x})", f"SUM(sum{j})"))
    return sums


def partials_query(
    frontier: Frontier,
    attributes: Mapping[str, str],
    source: Callable[[Scan], str],
    keep_top: int | None = None,
) -> str:
    """The Spark SQL computing every partial aggregate of ``frontier``'s state in one pass.

    With ``keep_top`` (IMP 9.4.3), min/max value rows are cut to the ``2 * keep_top + 1`` most
    extreme values per group: the engine keeps ``keep_top`` of them, and the one past twice
    that tells it the group had more (its state is then partial)."""
    node = frontier.node
    annotated = instrument_annotations(node.child, frontier.annotations, attributes)
    groups = [group_column(i) for i in range(len(node.groups))]
    outputs = [(g, e) for g, (_, e) in zip(groups, node.groups, strict=True)]
    calls = dict(enumerate(c for _, c in node.aggregates))
    outputs += [(_argument(spec.index), calls[spec.index].arg) for spec in frontier.specs]  # type: ignore[misc]
    outputs += [(a, column(a)) for a in sorted(set(frontier.annotations.values()))]
    inner = to_sql(Project(annotated, tuple(outputs)), source=source)

    sets = _sets(frontier)
    extras = list(dict.fromkeys(c for s in sets for c in s.extra))
    keys = [*(_q(g) for g in groups), *(_q(c) for c in extras)]
    sums = _sums(frontier)
    flags = [f"grouping({_q(c)}) AS {_q(_flag(c))}" for c in extras]
    if extras:
        grouping = ", ".join("(" + ", ".join(_q(c) for c in (*groups, *s.extra)) + ")" for s in sets)
        group_by = f" GROUP BY GROUPING SETS ({grouping})"
    else:
        group_by = f" GROUP BY {', '.join(_q(g) for g in groups)}" if groups else ""
    if extras and not any(spec.ordered for spec in frontier.specs):
        # Every set coarsens the finest grouping: aggregate once to it, then the sets over it.
        finest = (
            f"SELECT {', '.join([*keys, *(f'{e} AS {a}' for a, e, _ in sums)])} FROM ({inner}) AS __annotated"
        )
        finest += f" GROUP BY {', '.join(keys)}"
        rolled = [f"{r} AS {a}" for a, _, r in sums]
        return f"SELECT {', '.join([*keys, *flags, *rolled])} FROM ({finest}) AS __finest{group_by}"
    select = [*keys, *flags, *(f"{e} AS {a}" for a, e, _ in sums)]
    query = f"SELECT {', '.join(select)} FROM ({inner}) AS __annotated{group_by}"
    ordered = [spec.index for spec in frontier.specs if spec.ordered]
    if not keep_top or not ordered:
        return query
    # Rank each min/max value within its group and grouping set (rows of other sets: NULL).
    partition = ", ".join([*(_q(g) for g in groups), *(_q(_flag(c)) for c in extras)])
    ranks, kept = [], []
    for j in ordered:
        x = _q(_argument(j))
        direction = "DESC" if calls[j].func == "max" else "ASC"
        ranks.append(
            f"CASE WHEN {_q(_flag(_argument(j)))} = 0 THEN dense_rank() OVER "
            f"(PARTITION BY {partition} ORDER BY {x} {direction} NULLS LAST) END AS __rank{j}"
        )
        kept.append(f"(__rank{j} IS NULL OR __rank{j} <= {2 * keep_top + 1})")
    return f"SELECT * FROM (SELECT *, {', '.join(ranks)} FROM ({query}) AS __sums) WHERE {' AND '.join(kept)}"


def split_partials(frontier: Frontier, result: pa.Table) -> Partials:
    """The query's rows, one table per grouping set, as the engine's :class:`Partials`."""
    sets = _sets(frontier)
    extras = list(dict.fromkeys(c for s in sets for c in s.extra))
    groups = [group_column(i) for i in range(len(frontier.node.groups))]
    keys = {g: result.column(g).cast(t) for g, t in zip(groups, frontier.group_types, strict=True)}

    def rows_of(chosen: _Set) -> pa.ChunkedArray | None:
        mask = None  # (not a Python list of a flag per row: the state may have millions)
        for c in extras:
            this = pc.equal(result.column(_flag(c)), 0 if c in chosen.extra else 1)
            mask = this if mask is None else pc.and_(mask, this)
        return mask

    def table(chosen: _Set, **columns: pa.ChunkedArray) -> pa.Table:
        whole = pa.table({**keys, **columns})
        mask = rows_of(chosen)
        return whole if mask is None else whole.filter(mask)

    summed = [c for s in frontier.specs for c in s.summed_columns(frontier.argument_types[s.index])]
    partials = Partials(table(sets[0], **{c: result.column(c) for c in (ROWS, *summed)}))
    for chosen in sets[1:]:
        columns: dict[str, pa.ChunkedArray] = {}
        if chosen.argument is not None:
            kind = frontier.argument_types[chosen.argument]
            columns[VALUE] = result.column(_argument(chosen.argument)).cast(kind)
        if chosen.annotation is not None:
            columns[FRAGMENT] = result.column(chosen.annotation)
        columns[COUNT] = result.column(ROWS)
        rows = table(chosen, **columns)
        for name in (VALUE, FRAGMENT):
            if name in rows.column_names:
                rows = rows.filter(pc.is_valid(rows.column(name)))
        if chosen.argument is not None and chosen.annotation is not None:
            partials.at_value[(chosen.argument, chosen.annotation)] = rows
        elif chosen.argument is not None:
            partials.values[chosen.argument] = rows
        else:
            assert chosen.annotation is not None
            partials.counters[chosen.annotation] = rows
    return partials


def compute_frontier_partials(
    spark: SparkSession,
    frontier: list[Frontier],
    attributes: Mapping[str, str],
    source: Callable[[Scan], str],
    keep_top: int | None = None,
) -> dict[int, Partials]:
    """Each frontier aggregation's partial aggregates over the snapshot the views are pinned to
    (min/max values cut for ``keep_top``, see :func:`partials_query`)."""
    found = {}
    for item in frontier:
        result = spark.sql(partials_query(item, attributes, source, keep_top)).toArrow()
        found[item.index] = split_partials(item, result)
    return found


def signed_partials(
    spark: SparkSession,
    item: Frontier,
    attributes: Mapping[str, str],
    terms: Sequence[tuple[Callable[[Scan], str], int]],
) -> Partials:
    """The signed sum of ``item``'s partial aggregates over several inputs: one Spark query per
    (source, sign) term (the delta of its subtree is such a sum, see
    :func:`sketch_core.incremental.partials.combined`). Values are never cut here: a delta's
    values all count."""
    parts = [
        (split_partials(item, spark.sql(partials_query(item, attributes, source)).toArrow()), sign)
        for source, sign in terms
    ]
    return combined(parts)
