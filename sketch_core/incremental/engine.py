"""An IR plan as a tree of incremental annotated operators, ending in the merge μ.

``IncrementalSketch(plan, partitions, schemas)`` starts from the empty database; applying the
whole table contents as one insert delta initializes it to a snapshot, and each later batch of
table deltas yields the sketch delta and moves the state along. Sketched scans are annotated
as the capture rewrite annotates them (every positive scan of a sketched table), so a
maintained sketch can be compared with a fresh capture fragment for fragment.

An uncorrelated scalar subquery is a cross product with its one row (``Join.kind == "scalar"``,
its input read whole and never sketched). When its value changes, its delta is the old row out
and the new one in, and ``L_new ⋈ ΔR`` re-evaluates every row of the other side: whatever
depends on the value (a WHERE or HAVING comparison) is decided again, and rows whose outcome did
not change cancel in the operators above.

Joins need the current contents of the other side (IMP Sec. 5.5). Each node can produce its
full annotated output at the new snapshot (``current``): stateful nodes from their state,
stateless subtrees from storage through a ``reader`` that reads a table at the new snapshot,
restricted where possible to the join keys the delta holds (the read can then skip files and
row groups by their statistics). Anti joins (NOT EXISTS, NOT IN, EXCEPT), semi joins the
grouped form cannot express (a condition beyond equalities, INTERSECT's null-safe keys) and
left joins read the same way: each row's matches are decided by key, before and after (see
``_AntiJoin`` and ``_SemiJoin``). Windows read the partitions a delta touches, whole, and
evaluate them before and after (``_Window``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from sketch_core.algebra.dialect import SPARK
from sketch_core.algebra.ir import (
    AggCall,
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
    WindowCall,
    column,
    conjuncts,
    positive_scans,
    referenced,
)
from sketch_core.algebra.top_rows import top_rows
from sketch_core.errors import IncrementalTooCostlyError, UnsupportedQueryError
from sketch_core.incremental import stateless
from sketch_core.incremental.aggregate import AggregateOperator, result_type
from sketch_core.incremental.annotated import (
    FRAGMENTS,
    MULTIPLICITY,
    AnnotatedDelta,
    annotate_rows,
    cancelled,
    consolidated,
)
from sketch_core.incremental.bloom import EMPTY_BLOOM, KeyBloom, hashable
from sketch_core.incremental.columnar_aggregate import ColumnarAggregate, columnar_supports
from sketch_core.incremental.expressions import ExpressionTranslator, Translated
from sketch_core.incremental.join import concat, equi_keys, join_rows, negated
from sketch_core.incremental.matches import match_counts, matched_fragments, matched_pairs
from sketch_core.incremental.merge import MergeState, SketchDelta
from sketch_core.incremental.partials import ArgumentSpec, Partials
from sketch_core.incremental.remote import RemoteEvaluator
from sketch_core.incremental.state import (
    aggregate_state,
    merge_state,
    restore_aggregate,
    restore_merge,
    restore_topk,
    topk_state,
)
from sketch_core.incremental.stored_groups import StoredGroups
from sketch_core.incremental.topk import TopKOperator, tiebreak
from sketch_core.incremental.window import IN_PROCESS as WINDOW_IN_PROCESS
from sketch_core.incremental.window import Frame, FrameNotEvaluated, evaluate_partition, frame_of
from sketch_core.partitions import RangePartition
from sketch_core.rewrites.distinct_aggregates import distinct_rows_first
from sketch_core.rewrites.prune_outputs import prune_outputs
from sketch_core.rewrites.push_selections import push_selections
from sketch_core.rewrites.semi_joins import null_safe_semi_join, semi_join_as_inner_join, split_semi_condition

# Reads ``columns`` of a table at the new snapshot; with keys ({source column: values}), at
# least the rows whose values are among those, NULL included when it is among them (more is
# fine: the engine filters again).
Reader = Callable[[str, Sequence[str], Mapping[str, pa.Array] | None], pa.Table]
KeyValues = dict[str, pa.Array]  # output column -> the values wanted


@dataclass(frozen=True)
class RowDelta:
    """One table's rows inserted and deleted (the columns the plan reads, at least)."""

    inserted: pa.Table
    deleted: pa.Table


def _no_reader(table: str, columns: Sequence[str], keys: Mapping[str, pa.Array] | None) -> pa.Table:
    raise UnsupportedQueryError(
        f"a join over {table} without a reader for its current rows", table, hint="pass reader=..."
    )


@dataclass
class _Context:
    deltas: Mapping[str, RowDelta]
    reader: Reader = field(default=_no_reader)
    blooms: bool = True  # probe join deltas against Bloom filters of the other side (IMP 9.4.1)
    # id()s of the selections whose delta rows all passed them already (see delta_filters)
    passed: frozenset[int] = frozenset()


def _keep_keys(rows: AnnotatedDelta, keys: KeyValues | None) -> AnnotatedDelta:
    if not keys or rows.num_rows == 0:
        return rows
    mask = None
    for name, values in keys.items():
        hit = pc.is_in(rows.table.column(name), value_set=values.cast(rows.table.schema.field(name).type))
        mask = hit if mask is None else pc.and_(mask, hit)
    return AnnotatedDelta(rows.table.filter(mask), rows.annotations)


class _Node:
    schema: pa.Schema
    annotations: tuple[str, ...]

    def process(self, ctx: _Context) -> AnnotatedDelta:
        raise NotImplementedError

    def current(self, ctx: _Context, keys: KeyValues | None) -> AnnotatedDelta:
        """The subtree's whole annotated output at the new snapshot (rows with these key
        values only, when ``keys`` is given)."""
        raise NotImplementedError


_N = TypeVar("_N", bound=_Node)


class _Scan(_Node):
    def __init__(
        self, node: Scan, table_schema: pa.Schema, annotation: str | None, partition: RangePartition | None
    ):
        self.node, self.annotation, self.partition = node, annotation, partition
        self.table_schema = table_schema
        renamed = zip(node.source_columns, node.names, strict=True)
        self.schema = pa.schema([table_schema.field(c).with_name(n) for c, n in renamed])
        self.annotations = (annotation,) if annotation else ()
        self.source_of = dict(zip(node.names, node.source_columns, strict=True))

    def _annotated(self, inserted: pa.Table, deleted: pa.Table) -> AnnotatedDelta:
        attribute = self.partition.attribute if self.partition is not None else None
        rows = annotate_rows(inserted, deleted, self.annotation, self.partition, attribute)
        return stateless.scan(self.node, rows)

    def process(self, ctx: _Context) -> AnnotatedDelta:
        delta = ctx.deltas.get(self.node.table)
        if delta is None:
            return AnnotatedDelta.empty(self.schema, self.annotations)
        return self._annotated(delta.inserted, delta.deleted)

    def current(self, ctx: _Context, keys: KeyValues | None) -> AnnotatedDelta:
        columns = list(dict.fromkeys(self.node.source_columns))
        if self.partition is not None and self.partition.attribute not in columns:
            columns.append(self.partition.attribute)
        wanted = {self.source_of[name]: values for name, values in (keys or {}).items()}
        rows = ctx.reader(self.node.table, columns, wanted or None)
        return _keep_keys(self._annotated(rows, rows.schema.empty_table()), keys)

    def unannotated(self, ctx: _Context) -> AnnotatedDelta:
        """Every row at the new snapshot, without the fragments they are in."""
        rows = ctx.reader(self.node.table, list(dict.fromkeys(self.node.source_columns)), None)
        return stateless.scan(self.node, annotate_rows(rows, rows.schema.empty_table(), None, None, None))


class _Select(_Node):
    def __init__(self, node: Select, child: _Node, remote: RemoteEvaluator | None = None, ansi: bool = True):
        self.node, self.child = node, child
        self.schema, self.annotations = child.schema, child.annotations
        self.condition = stateless.selection(node.condition, remote, ansi)

    def process(self, ctx: _Context) -> AnnotatedDelta:
        if id(self) in ctx.passed:  # its scan's delta was read through this very condition
            return self.child.process(ctx)
        return stateless.select(self.child.process(ctx), self.condition)

    def current(self, ctx: _Context, keys: KeyValues | None) -> AnnotatedDelta:
        return stateless.select(self.child.current(ctx, keys), self.condition)


class _Project(_Node):
    def __init__(self, node: Project, child: _Node, remote: RemoteEvaluator | None = None, ansi: bool = True):
        self.node, self.child = node, child
        self.outputs = Translated(dict(node.outputs), remote, ansi)
        probe = AnnotatedDelta.empty(child.schema, ())
        self.schema = stateless.project(probe, self.outputs).data().schema
        self.annotations = child.annotations
        self.passed = {n: e.name for n, e in node.outputs if isinstance(e, exp.Column)}

    def process(self, ctx: _Context) -> AnnotatedDelta:
        return stateless.project(self.child.process(ctx), self.outputs)

    def current(self, ctx: _Context, keys: KeyValues | None) -> AnnotatedDelta:
        below = {self.passed[n]: v for n, v in (keys or {}).items() if n in self.passed}
        rows = stateless.project(self.child.current(ctx, below or None), self.outputs)
        return _keep_keys(rows, keys)


class _Aggregate(_Node):
    def __init__(self, node: Aggregate, child: _Node, keep: int | None = None, columnar: bool = True):
        self.child = child
        self.operator: AggregateOperator | ColumnarAggregate = AggregateOperator(
            node, child.schema, child.annotations, keep
        )
        if columnar and columnar_supports(self.operator):  # state in arrays: count, sum, avg
            self.operator = ColumnarAggregate(node, child.schema, child.annotations)
        names = [n for n, _ in node.groups] + [n for n, _ in node.aggregates]
        types = self.operator.group_types + self.operator.output_types
        self.schema = pa.schema([pa.field(n, t) for n, t in zip(names, types, strict=True)])
        self.annotations = child.annotations
        self.loaded: AnnotatedDelta | None = None  # output of a load, passed up by the next batch

    def process(self, ctx: _Context) -> AnnotatedDelta:
        if self.loaded is not None:  # the input was summarized elsewhere: its rows are not read
            loaded, self.loaded = self.loaded, None
            return loaded
        return self.operator.apply(self.child.process(ctx))

    def current(self, ctx: _Context, keys: KeyValues | None) -> AnnotatedDelta:
        return _keep_keys(self.operator.current(), keys)

    # -- state: the operator's, kept in arrays or as objects --------------------------------------
    def state_table(self, changes_only: bool) -> pa.Table:
        if isinstance(self.operator, ColumnarAggregate):
            return self.operator.state_table(changes_only)
        return aggregate_state(self.operator, changes_only)

    def restore(self, layers: Sequence[pa.Table]) -> None:
        if isinstance(self.operator, ColumnarAggregate):
            self.operator.restore(layers)
        else:  # groups read as they are used
            restore_aggregate(self.operator, layers)

    def changed_entries(self) -> int:
        if isinstance(self.operator, ColumnarAggregate):
            return self.operator.changed_count()
        return len(self.operator.dirty)

    def entries(self) -> int:
        if isinstance(self.operator, ColumnarAggregate):
            return self.operator.size()
        return len(self.operator.groups)

    def mark_stored(self) -> None:
        if isinstance(self.operator, ColumnarAggregate):
            self.operator.mark_stored()
        else:
            self.operator.dirty.clear()

    def ordered_values(self) -> int:
        """Values kept in min/max state, over every group."""
        if isinstance(self.operator, ColumnarAggregate):
            return 0  # count, sum and avg keep no values
        total = 0
        groups = self.operator.groups
        if isinstance(groups, StoredGroups):  # counted without reading the groups in
            untouched = groups.untouched_rows()
            for name in untouched.column_names:
                if name.endswith("_values"):
                    total += pc.sum(pc.list_value_length(untouched.column(name))).as_py() or 0
            groups = groups.loaded
        for group in groups.values():
            total += sum(len(a.values) for a in group.accumulators if a.values is not None)
        return total


class _TopK(_Node):
    def __init__(self, node: TopK, child: _Node, keep: int | None = None):
        self.child = child
        self.schema, self.annotations = child.schema, child.annotations
        self.operator = TopKOperator(node, child.schema, child.annotations, keep)

    def process(self, ctx: _Context) -> AnnotatedDelta:
        return self.operator.apply(self.child.process(ctx))

    def current(self, ctx: _Context, keys: KeyValues | None) -> AnnotatedDelta:
        return _keep_keys(self.operator.current(), keys)

    # -- state ------------------------------------------------------------------------------------
    def state_table(self, changes_only: bool) -> pa.Table:
        return topk_state(self.operator, changes_only)

    def restore(self, layers: Sequence[pa.Table]) -> None:
        restore_topk(self.operator, layers)

    def changed_entries(self) -> int:
        return len(self.operator.dirty)

    def entries(self) -> int:
        return len(self.operator.rows)

    def mark_stored(self) -> None:
        self.operator.dirty.clear()

    def ordered_values(self) -> int:
        """Top-k entries kept."""
        return len(self.operator.rows)


class _Union(_Node):
    def __init__(self, node: Union, inputs: list[_Node]):
        self.node, self.inputs = node, inputs
        self.schema = pa.schema([f.with_name(n) for f, n in zip(inputs[0].schema, node.names, strict=True)])
        self.annotations = tuple(dict.fromkeys(a for i in inputs for a in i.annotations))

    def process(self, ctx: _Context) -> AnnotatedDelta:
        return stateless.union([i.process(ctx) for i in self.inputs], self.node.names)

    def current(self, ctx: _Context, keys: KeyValues | None) -> AnnotatedDelta:
        rows = stateless.union([i.current(ctx, None) for i in self.inputs], self.node.names)
        return _keep_keys(rows, keys)


class _Join(_Node):
    def __init__(
        self, node: Join, left: _Node, right: _Node, remote: RemoteEvaluator | None = None, ansi: bool = True
    ):
        if node.kind not in ("inner", "cross", "scalar"):
            raise UnsupportedQueryError(
                f"a {node.kind} join in incremental maintenance (not yet)",
                node.kind,
                hint="maintain this sketch with strategy='full'",
            )
        self.left, self.right = left, right
        self.schema = pa.schema([*left.schema, *right.schema])
        self.annotations = left.annotations + right.annotations
        # (<=> keys: the groups of a split aggregation, see distinct_aggregates)
        self.keys, self.null_safe, residual = _join_keys(
            node.condition, left.schema.names, right.schema.names
        )
        self.residual = stateless.selection(exp.and_(*residual), remote, ansi) if residual else None
        # Per side, a Bloom filter over the key values of its output at the engine's snapshot,
        # first built from the side's join-free source of those keys (see _bloom_source).
        self.blooms: list[KeyBloom | None] = [None, None]
        self.bloom_sources = [
            _bloom_source(left, [a for a, _ in self.keys]),
            _bloom_source(right, [b for _, b in self.keys]),
        ]
        key_types = [
            [left.schema.field(a).type for a, _ in self.keys],
            [right.schema.field(b).type for _, b in self.keys],
        ]
        self.bloomable = (
            bool(self.keys) and not any(self.null_safe) and all(hashable(types) for types in key_types)
        )
        self.probed = self.passed = 0  # delta rows probed against a filter, and those let through

    def _side(self, side: int) -> _Node:
        return self.left if side == 0 else self.right

    def _key_columns(self, rows: AnnotatedDelta, side: int) -> list[pa.ChunkedArray]:
        return [rows.table.column(pair[side]) for pair in self.keys]

    def _track(self, side: int, delta: AnnotatedDelta) -> None:
        """Keep a side's filter up to date with its delta: inserted keys are added (before any
        probe of this batch: the other side's delta must find them), deleted ones counted."""
        bloom = self.blooms[side]
        if bloom is None or delta.num_rows == 0:
            return
        multiplicity = delta.table.column(MULTIPLICITY)
        inserted = delta.table.filter(pc.greater(multiplicity, 0))
        if inserted.num_rows:
            bloom.add([inserted.column(pair[side]) for pair in self.keys])
        bloom.note_deleted(delta.num_rows - inserted.num_rows)

    def _probe(self, ctx: _Context, rows: AnnotatedDelta, side: int) -> AnnotatedDelta:
        """``rows`` (of the other side) less those whose key ``side``'s output certainly lacks."""
        source = self.bloom_sources[side]
        if not (ctx.blooms and self.bloomable) or source is None:
            return rows
        bloom = self.blooms[side]
        if bloom is None or bloom.stale:  # built from the source's rows at the new snapshot
            node, names = source
            now = _unannotated(node, ctx)
            bloom = KeyBloom(max(2 * now.num_rows, 1))
            bloom.add([now.table.column(n) for n in names])
            self.blooms[side] = bloom
        mask = bloom.might_contain(self._key_columns(rows, 1 - side))
        kept = AnnotatedDelta(rows.table.filter(mask), rows.annotations)
        self.probed += rows.num_rows
        self.passed += kept.num_rows
        return kept

    def _filtered(self, rows: AnnotatedDelta) -> AnnotatedDelta:
        return rows if self.residual is None else stateless.select(rows, self.residual)

    def _key_values(self, rows: AnnotatedDelta, side: int) -> KeyValues:
        return _key_values(self.keys, rows, side, self.null_safe)

    def _joined(self, left: AnnotatedDelta, right: AnnotatedDelta) -> AnnotatedDelta:
        return join_rows(left, right, self.keys, self.null_safe)

    def process(self, ctx: _Context) -> AnnotatedDelta:
        return self.joined(ctx, self.left.process(ctx), self.right.process(ctx))

    def joined(
        self, ctx: _Context, left_delta: AnnotatedDelta, right_delta: AnnotatedDelta
    ) -> AnnotatedDelta:
        """The join's delta, given its children's (a left join shares them with its anti part)."""
        self._track(0, left_delta)
        self._track(1, right_delta)
        parts = []
        # ΔR ⋈ S' (only ΔR's rows that may have a partner in S' go to the read of S')
        if (probe := self._probe(ctx, left_delta, 1) if left_delta.num_rows else left_delta).num_rows:
            right_now = self.right.current(ctx, self._key_values(probe, 1) or None)
            parts.append(self._joined(probe, right_now))
        # R' ⋈ ΔS
        if (probe := self._probe(ctx, right_delta, 0) if right_delta.num_rows else right_delta).num_rows:
            left_now = self.left.current(ctx, self._key_values(probe, 0) or None)
            parts.append(self._joined(left_now, probe))
        if left_delta.num_rows and right_delta.num_rows:  # - ΔR ⋈ ΔS, counted twice above
            parts.append(negated(self._joined(left_delta, right_delta)))
        if not parts:
            return AnnotatedDelta.empty(self.schema, self.annotations)
        return self._filtered(concat(parts))

    def current(self, ctx: _Context, keys: KeyValues | None) -> AnnotatedDelta:
        left_keys = {n: v for n, v in (keys or {}).items() if n in self.left.schema.names}
        right_keys = {n: v for n, v in (keys or {}).items() if n in self.right.schema.names}
        if right_keys and not left_keys:  # start from the side the keys restrict, not a full read
            right_now = self.right.current(ctx, right_keys)
            left_now = self.left.current(ctx, self._key_values(right_now, 0) or None)
        else:
            left_now = self.left.current(ctx, left_keys or None)
            right_now = self.right.current(ctx, (right_keys or {}) | self._key_values(left_now, 1) or None)
        return _keep_keys(self._filtered(self._joined(left_now, right_now)), keys)


def _key_values(
    keys: Sequence[tuple[str, str]], rows: AnnotatedDelta, side: int, null_safe: Sequence[bool] = ()
) -> KeyValues:
    """The key values of ``rows`` (of the other side), named as ``side`` (0: left) names them:
    the read of that side's rows they may match. NULL matches nothing, so it is not read,
    unless the key is ``null_safe`` (an INTERSECT's or EXCEPT's)."""
    safe = list(null_safe) or [False] * len(keys)
    return {
        pair[side]: values if is_safe else values.drop_null()
        for pair, is_safe in zip(keys, safe, strict=True)
        for values in [pc.unique(rows.table.column(pair[1 - side]))]
    }


def _signed(rows: AnnotatedDelta, signs: np.ndarray) -> AnnotatedDelta:
    """``rows`` with their multiplicities times ``signs`` (rows whose sign is 0 left out)."""
    keep = signs != 0
    kept = rows.table.filter(pa.array(keep))
    index = kept.schema.get_field_index(MULTIPLICITY)
    times = pa.array(kept.column(MULTIPLICITY).to_numpy() * signs[keep], pa.int64())
    return AnnotatedDelta(kept.set_column(index, MULTIPLICITY, times), rows.annotations)


class _AntiJoin(_Node):
    """L ▷ R on equalities and a residual (NOT EXISTS), or null-aware on one equality (NOT IN):
    the rows of L without a match in R, which is read whole (never sketched). Stateless: a side
    is read by key at the new snapshot, and its old rows are the new ones less its delta. With
    [·] for "has no match"::

        Δ(L ▷ R) = ΔL·[R_old] + L_new[K]·([R_new] - [R_old])

    over the keys K that ΔR touches. NOT IN also drops every row once R holds a NULL, and a
    NULL probe passes only while R is empty: when either changes, every row's outcome may, so
    L is read whole and the result computed before and after."""

    def __init__(
        self, node: Join, left: _Node, right: _Node, remote: RemoteEvaluator | None = None, ansi: bool = True
    ):
        self.left, self.right, self.null_aware = left, right, node.null_aware
        self.schema, self.annotations = left.schema, left.annotations
        self.keys, self.null_safe, self.residual = _match_condition(node, left, right, remote, ansi)

    def _matches(self, rows: AnnotatedDelta, other: AnnotatedDelta) -> np.ndarray:
        """Per row of ``rows``, the signed count of ``other``'s rows it matches."""
        return match_counts(
            rows.num_rows, *matched_pairs(rows, other, self.keys, self.residual, self.null_safe), other
        )

    def _null_probes(self, rows: AnnotatedDelta) -> np.ndarray:
        """Which of L's ``rows`` probe NOT IN with a NULL."""
        return np.asarray(rows.table.column(self.keys[0][0]).is_null().to_numpy(zero_copy_only=False), bool)

    def process(self, ctx: _Context) -> AnnotatedDelta:
        return self.unmatched(ctx, self.left.process(ctx), self.right.process(ctx))

    def _r_state(self, rows: AnnotatedDelta) -> tuple[bool, bool]:
        """(holds a NULL key, is empty) of a whole signed bag of R's rows."""
        counts = rows.table.column(MULTIPLICITY).to_numpy()
        nulls = rows.table.column(self.keys[0][1]).is_null().to_numpy(zero_copy_only=False)
        return bool(counts[nulls].sum() > 0), bool(counts.sum() == 0)

    def _passing(
        self, left: AnnotatedDelta, right: AnnotatedDelta, state: tuple[bool, bool]
    ) -> AnnotatedDelta:
        """The rows of ``left`` the anti join lets through against the whole ``right``."""
        has_null, empty = state
        if self.null_aware and empty:
            return left
        if self.null_aware and has_null:
            return AnnotatedDelta.empty(self.schema, self.annotations)
        signs = (self._matches(left, right) == 0).astype(np.int64)
        if self.null_aware:  # a NULL probe against a non-empty R: unknown, so dropped
            signs[self._null_probes(left)] = 0
        return _signed(left, signs)

    def unmatched(self, ctx: _Context, ld: AnnotatedDelta, rd: AnnotatedDelta) -> AnnotatedDelta:
        """The anti join's delta, given its children's."""
        if ld.num_rows == 0 and rd.num_rows == 0:  # nothing changed: nothing to read
            return AnnotatedDelta.empty(self.schema, self.annotations)
        if self.null_aware:
            right_now = self.right.current(ctx, None)
            new = self._r_state(right_now)
            old = self._r_state(concat([right_now, negated(rd)])) if rd.num_rows else new
            if new != old:  # every row's outcome may change: before and after, whole
                left_now = self.left.current(ctx, None)
                before = self._passing(concat([left_now, negated(ld)]), concat([right_now, negated(rd)]), old)
                return concat([self._passing(left_now, right_now, new), negated(before)])
            if new[0] or new[1]:  # all rows out, or all in, before and after
                return AnnotatedDelta.empty(self.schema, self.annotations) if new[0] else ld
        parts = [AnnotatedDelta.empty(self.schema, self.annotations)]
        if ld.num_rows:  # ΔL, where R had no match before
            right_now = self.right.current(ctx, _key_values(self.keys, ld, 1, self.null_safe))
            before = self._matches(ld, right_now) - self._matches(ld, rd)
            signs = (before == 0).astype(np.int64)
            if self.null_aware:
                signs[self._null_probes(ld)] = 0
            parts.append(_signed(ld, signs))
        if rd.num_rows:  # L_new rows whose key gained its first match or lost its last
            left_now = self.left.current(ctx, _key_values(self.keys, rd, 0, self.null_safe))
            if left_now.num_rows:
                right_now = self.right.current(ctx, _key_values(self.keys, left_now, 1, self.null_safe))
                now = self._matches(left_now, right_now)
                before = now - self._matches(left_now, rd)
                signs = (now == 0).astype(np.int64) - (before == 0).astype(np.int64)
                parts.append(_signed(left_now, signs))
        return concat(parts)

    def current(self, ctx: _Context, keys: KeyValues | None) -> AnnotatedDelta:
        left_now = self.left.current(
            ctx, {n: v for n, v in (keys or {}).items() if n in self.schema.names} or None
        )
        if self.null_aware:
            right_now = self.right.current(ctx, None)
            return _keep_keys(self._passing(left_now, right_now, self._r_state(right_now)), keys)
        if left_now.num_rows == 0:
            return left_now
        right_now = self.right.current(ctx, _key_values(self.keys, left_now, 1, self.null_safe))
        return _keep_keys(self._passing(left_now, right_now, (False, False)), keys)


def _match_condition(
    node: Join, left: _Node, right: _Node, remote: RemoteEvaluator | None, ansi: bool
) -> tuple[list[tuple[str, str]], list[bool], Translated | None]:
    """A semi or anti join's equalities, which of them are null-safe (``<=>``, as INTERSECT and
    EXCEPT compare rows), and the rest of its condition (its residual), which NOT IN's NULL
    semantics do not allow. Without an equality, every row would match every other: refused."""
    keys, null_safe, residual = _join_keys(node.condition, left.schema.names, right.schema.names)
    if not keys:
        what = f"a {node.kind} join without an equality"
    elif residual and node.null_aware:
        what = "NOT IN over more than one column"
    else:
        return keys, null_safe, stateless.selection(exp.and_(*residual), remote, ansi) if residual else None
    raise UnsupportedQueryError(
        f"{what} in incremental maintenance (not yet)",
        node.condition.sql(dialect=SPARK) if node.condition is not None else "",
        hint="maintain this sketch with strategy='full'",
    )


def _join_keys(
    condition: exp.Expr | None, left: Sequence[str], right: Sequence[str]
) -> tuple[list[tuple[str, str]], list[bool], list[exp.Expr]]:
    """A join condition's column equalities (``=``, then ``<=>``) as (left, right) keys, which
    of them are null-safe, and the other conjuncts."""
    keys, rest = equi_keys(condition, left, right)
    null_safe = [False] * len(keys)
    residual = []
    for conjunct in rest:
        pair = _null_safe_pair(conjunct, left, right)
        if pair is None:
            residual.append(conjunct)
        else:
            keys.append(pair)
            null_safe.append(True)
    return keys, null_safe, residual


def _null_safe_pair(conjunct: exp.Expr, left: Sequence[str], right: Sequence[str]) -> tuple[str, str] | None:
    """(left column, right column) of a ``<=>`` between a column of each side, else None."""
    if not (
        isinstance(conjunct, exp.NullSafeEQ)
        and isinstance(conjunct.this, exp.Column)
        and isinstance(conjunct.expression, exp.Column)
    ):
        return None
    a, b = conjunct.this.name, conjunct.expression.name
    if a in left and b in right:
        return a, b
    return (b, a) if b in left and a in right else None


class _SemiJoin(_Node):
    """L ⋉ R on equalities and a residual the engine cannot group R by (TPC-H Q21's EXISTS
    with ``l2.l_suppkey <> l1.l_suppkey``; plain equalities become an inner join with R
    grouped by key, see :mod:`.semi_joins`). A row of L comes out once if it matches, with its
    own fragments and those of all its matches (:mod:`.matches`). Stateless, as the anti join:
    with out(L, R) the rows of L that match in R, and their fragments::

        Δ(L ⋉ R) = out(ΔL, R_old) + out(L_new[K], R_new) - out(L_new[K], R_old)

    over the keys K that ΔR touches; a row of L_new[K] whose outcome and fragments are the
    same before and after is left out of the last two terms."""

    def __init__(
        self, node: Join, left: _Node, right: _Node, remote: RemoteEvaluator | None = None, ansi: bool = True
    ):
        self.left, self.right = left, right
        self.schema, self.annotations = left.schema, left.annotations + right.annotations
        self.keys, self.null_safe, self.residual = _match_condition(node, left, right, remote, ansi)

    def _outcome(self, rows: AnnotatedDelta, other: AnnotatedDelta) -> tuple[np.ndarray, list[pa.Array]]:
        """Which ``rows`` match in ``other``, and per right annotation the matches' fragments."""
        li, ri = matched_pairs(rows, other, self.keys, self.residual, self.null_safe)
        fragments = [matched_fragments(rows.num_rows, li, ri, other, a) for a in self.right.annotations]
        return match_counts(rows.num_rows, li, ri, other) > 0, fragments

    def _emitted(self, rows: AnnotatedDelta, fragments: list[pa.Array], signs: np.ndarray) -> AnnotatedDelta:
        """``rows`` with the matches' ``fragments``, their multiplicities times ``signs``."""
        annotations = {a: rows.table.column(a).combine_chunks() for a in rows.annotations}
        annotations |= dict(zip(self.right.annotations, fragments, strict=True))
        multiplicity = rows.table.column(MULTIPLICITY).to_numpy()
        built = AnnotatedDelta.build(rows.data(), multiplicity, annotations)
        return _signed(built, signs)

    def _matching(self, rows: AnnotatedDelta, other: AnnotatedDelta) -> AnnotatedDelta:
        passes, fragments = self._outcome(rows, other)
        return self._emitted(rows, fragments, passes.astype(np.int64))

    def process(self, ctx: _Context) -> AnnotatedDelta:
        ld, rd = self.left.process(ctx), self.right.process(ctx)
        parts = [AnnotatedDelta.empty(self.schema, self.annotations)]
        if ld.num_rows:  # ΔL against R_old
            right_now = self.right.current(ctx, _key_values(self.keys, ld, 1, self.null_safe))
            parts.append(self._matching(ld, concat([right_now, negated(rd)]) if rd.num_rows else right_now))
        if (
            rd.num_rows
            and (left_now := self.left.current(ctx, _key_values(self.keys, rd, 0, self.null_safe))).num_rows
        ):
            right_now = self.right.current(ctx, _key_values(self.keys, left_now, 1, self.null_safe))
            passed, before = self._outcome(left_now, concat([right_now, negated(rd)]))
            passes, after = self._outcome(left_now, right_now)
            # A row that matches before and after, with other fragments, goes out and in again.
            moved = np.zeros(left_now.num_rows, bool)
            for b, a in zip(before, after, strict=True):
                moved |= np.array([x != y for x, y in zip(b.to_pylist(), a.to_pylist(), strict=True)], bool)
            changed = (passed != passes) | moved
            parts.append(self._emitted(left_now, before, -(passed & changed).astype(np.int64)))
            parts.append(self._emitted(left_now, after, (passes & changed).astype(np.int64)))
        return concat(parts)

    def current(self, ctx: _Context, keys: KeyValues | None) -> AnnotatedDelta:
        left_now = self.left.current(
            ctx, {n: v for n, v in (keys or {}).items() if n in self.schema.names} or None
        )
        if left_now.num_rows == 0:
            return AnnotatedDelta.empty(self.schema, self.annotations)
        right_now = self.right.current(ctx, _key_values(self.keys, left_now, 1, self.null_safe))
        return _keep_keys(self._matching(left_now, right_now), keys)


def _refuse_opaque(node: Aggregate) -> None:
    """An aggregate function the engine does not compute (``STDDEV``, ...) that decides rows
    (shown ones are pruned before): not per row on Spark either, as other expressions are."""
    for _, call in node.aggregates:
        if call.func == "opaque":
            raise UnsupportedQueryError(
                f"{call.label} in incremental maintenance",
                call.label,
                hint="maintain this sketch with strategy='full' (auto does)",
            )


def _numeric(kind: pa.DataType) -> bool:
    return bool(pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind))


def _window_refusal(call: WindowCall, schema: pa.Schema) -> str | None:
    """What of ``call`` the engine does not evaluate (see :mod:`.window`), or None."""
    what = call.label.upper()
    if call.func not in WINDOW_IN_PROCESS:
        return what
    if call.arg is None:
        return None
    assert isinstance(call.arg, exp.Column)  # (expressions are computed below, see _window)
    kind = schema.field(call.arg.name).type
    if call.func in ("sum", "avg") and not _numeric(kind):
        return f"{what} of a {kind} column"
    return None


def _frame_of(node: Window, schema: pa.Schema) -> Frame | str:
    """The window's frame (:mod:`.window`), or what of it the engine does not evaluate."""
    try:
        frame = frame_of(node.frame, bool(node.order))
    except FrameNotEvaluated as refused:
        return str(refused)
    if frame.by_value and (len(node.order) != 1 or not _numeric(schema.field(node.order[0].column).type)):
        return f"the frame {node.frame} over other than one numeric ORDER BY key"
    return frame


# Every row a window gives carries its partition's fragments (all of them; under a top-N filter
# those of its first N rows): rows times fragments ids over many rows in few partitions. A
# share-of-total over 37,000 groups in 5 partitions of an SF0.05 table gave 5,000 fragments to
# each row: 160 s for a 50-row delta, where a recapture took 3 s. Above this many ids for one
# delta, and this many per row on average, the run is refused (IncrementalTooCostlyError), and
# ``auto`` recaptures. (A top-N per group, or a window over small partitions, carries a few per
# row: its first state over a big table may hold millions, once; its deltas hold few.)
WINDOW_FRAGMENT_IDS = 2_000_000
WINDOW_FRAGMENTS_PER_ROW = 100


class _Window(_Node):
    """A window (:mod:`.window`) over whole partitions. Stateless: the partitions a delta
    touches are read whole at the new snapshot, their old rows are those less the delta, and
    the window over each is subtracted from the window over the other::

        Δ W(L) = W(L_new[P]) - W(L_old[P])

    over the partition keys P of ΔL (without PARTITION BY, the whole input is one partition).
    Rows that come out the same before and after cancel."""

    def __init__(self, node: Window, child: _Node, top: int | None = None):
        names = child.schema.names
        refused = [r for _, c in node.calls if (r := _window_refusal(c, child.schema))]
        frame = _frame_of(node, child.schema)
        refused += [frame] if isinstance(frame, str) else []
        if refused:
            raise UnsupportedQueryError(
                f"a window function ({', '.join(refused)}) in incremental maintenance (not yet)",
                ", ".join(refused),
                hint="maintain this sketch with strategy='full'",
            )
        assert isinstance(frame, Frame)
        self.node, self.child, self.top, self.frame = node, child, top, frame
        # The selection right above, when there is one (set when it is built): the rows it
        # drops get no fragments here. Each row carries its partition's (all of them, for an
        # aggregate over the partition): a share-of-total over 40,000 groups filtered to a few
        # rows per partition built 40,000 lists of thousands of fragments for each delta.
        self.kept: Translated | None = None
        ranks = {"row_number": pa.int32(), "rank": pa.int32(), "dense_rank": pa.int32()}
        kinds = [
            ranks.get(c.func)
            or result_type(
                AggCall(c.func, c.arg),  # type: ignore[arg-type]  # (not a ranking function)
                None if c.arg is None else child.schema.field(c.arg.name).type,
            )
            for _, c in node.calls
        ]
        self.scales = [
            k.scale if c.func == "avg" and pa.types.is_decimal(k) else None
            for (_, c), k in zip(node.calls, kinds, strict=True)
        ]
        values = [pa.field(n, k) for (n, _), k in zip(node.calls, kinds, strict=True)]
        self.schema = pa.schema([*child.schema, *values])
        self.annotations = child.annotations
        self.order = [(names.index(k.column), k) for k in node.order]
        self.calls = [(c, None if c.arg is None else names.index(c.arg.name)) for _, c in node.calls]
        self.partition = [names.index(p) for p in node.partition]

    def _evaluate(self, rows: AnnotatedDelta) -> AnnotatedDelta:
        """The window over ``rows`` (whole partitions, as a signed bag of rows). Each row
        carries the fragments of its partition's rows, or under a top-N filter of those
        ranked at most N (see :mod:`sketch_core.algebra.top_rows`)."""
        width = len(self.child.schema)
        partitions: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}  # rows, their fragments last
        for (row, fragments), count in consolidated(rows).items():
            key = tiebreak(tuple(row[p] for p in self.partition))
            partitions.setdefault(key, []).extend([(*row, fragments)] * count)
        out: list[tuple[Any, ...]] = []
        lists: list[list[list[int]]] = [[] for _ in self.annotations]
        for members in partitions.values():
            evaluated = evaluate_partition(members, self.order, self.calls, self.scales, self.frame)
            deciding = [m for m, values in evaluated if self.top is None or values[0] <= self.top]
            unions = [
                sorted(set().union(*(m[width][i] for m in deciding))) for i in range(len(self.annotations))
            ]
            for member, values in evaluated:
                out.append(member[:width] + values)
                for listed, ids in zip(lists, unions, strict=True):
                    listed.append(ids)
        data = pa.table(
            [pa.array([r[i] for r in out], f.type) for i, f in enumerate(self.schema)], schema=self.schema
        )
        if self.kept is not None and data.num_rows:
            positions = stateless.kept_positions(data, self.kept)
            if len(positions) < data.num_rows:
                data = data.take(positions)
                lists = [[listed[p] for p in positions] for listed in lists]
        carried = sum(len(row_ids) for listed in lists for row_ids in listed)  # (shared per partition)
        if carried > WINDOW_FRAGMENT_IDS and carried > WINDOW_FRAGMENTS_PER_ROW * data.num_rows:
            raise IncrementalTooCostlyError(
                f"a window whose rows each carry their partition's fragments ({carried:,} fragment ids "
                f"for {data.num_rows:,} rows of this delta, more than {WINDOW_FRAGMENT_IDS:,} and "
                f"{WINDOW_FRAGMENTS_PER_ROW} per row)",
                self._shown(),
            )
        annotations = {a: pa.array(ids, FRAGMENTS) for a, ids in zip(self.annotations, lists, strict=True)}
        return AnnotatedDelta.build(data, np.ones(data.num_rows, np.int64), annotations)

    def _shown(self) -> str:
        calls = ", ".join(f"{c.func.upper()}(...)" for _, c in self.node.calls)
        partition = (
            f"PARTITION BY {', '.join(self.node.partition)}" if self.node.partition else "the whole input"
        )
        return f"{calls} OVER ({partition})"

    def _partitions(self, ctx: _Context, keys: KeyValues) -> AnnotatedDelta:
        """The child's rows at the new snapshot in the partitions of ``keys`` (all rows without
        PARTITION BY), read by those keys (NULL among them reads the NULL partition)."""
        wanted = {n: v for n, v in keys.items() if n in self.node.partition}
        return _keep_keys(self.child.current(ctx, wanted or None), wanted)

    def process(self, ctx: _Context) -> AnnotatedDelta:
        delta = self.child.process(ctx)
        if delta.num_rows == 0:
            return AnnotatedDelta.empty(self.schema, self.annotations)
        keys = {n: pc.unique(delta.table.column(n)) for n in self.node.partition}
        now = self._partitions(ctx, keys)
        old = concat([now, negated(delta)])
        return cancelled(concat([self._evaluate(now), negated(self._evaluate(old))]))

    def current(self, ctx: _Context, keys: KeyValues | None) -> AnnotatedDelta:
        return _keep_keys(self._evaluate(self._partitions(ctx, keys or {})), keys)


class _LeftJoin(_Node):
    """L ⟕ R on equalities: the inner join's rows, and L's unmatched rows padded with NULLs
    (an anti join's), from one delta of each child."""

    def __init__(self, inner: _Join, unmatched: _AntiJoin):
        self.inner, self.unmatched = inner, unmatched
        self.left, self.right = inner.left, inner.right
        self.schema, self.annotations = inner.schema, inner.annotations

    def _padded(self, rows: AnnotatedDelta) -> AnnotatedDelta:
        data = rows.data()
        for f in self.right.schema:
            data = data.append_column(f, pa.nulls(rows.num_rows, f.type))
        annotations = {a: rows.table.column(a).combine_chunks() for a in rows.annotations}
        return AnnotatedDelta.build(data, rows.table.column(MULTIPLICITY).to_numpy(), annotations)

    def process(self, ctx: _Context) -> AnnotatedDelta:
        ld, rd = self.left.process(ctx), self.right.process(ctx)
        return concat([self.inner.joined(ctx, ld, rd), self._padded(self.unmatched.unmatched(ctx, ld, rd))])

    def current(self, ctx: _Context, keys: KeyValues | None) -> AnnotatedDelta:
        left_keys = {n: v for n, v in (keys or {}).items() if n in self.left.schema.names} or None
        matched = self.inner.current(ctx, left_keys)
        padded = self._padded(self.unmatched.current(ctx, left_keys))
        return _keep_keys(concat([matched, padded]), keys)


def _join_free(node: _Node) -> bool:
    return isinstance(node, _Scan) or (isinstance(node, (_Select, _Project)) and _join_free(node.child))


def _unannotated(node: _Node, ctx: _Context) -> AnnotatedDelta:
    """A join-free node's rows at the new snapshot without their fragments: what a Bloom filter
    is built from (annotating them was 1.3 s of a 2 s read of TPC-H SF10's orders, for keys)."""
    if isinstance(node, _Scan):
        return node.unannotated(ctx)
    if isinstance(node, _Select):
        return stateless.select(_unannotated(node.child, ctx), node.condition)
    if isinstance(node, _Project):
        return stateless.project(_unannotated(node.child, ctx), node.outputs)
    raise AssertionError(f"a Bloom filter's source is join-free, not a {type(node).__name__}")


def _bloom_source(node: _Node, names: list[str]) -> tuple[_Node, list[str]] | None:
    """A join-free node under ``node`` (one table's scan, with the selections and projections
    right above it) whose rows hold every key value ``node``'s output can hold, and the key
    columns' names there. A filter built from its rows has no false negatives for ``node``:
    the joins and selections in between only drop rows. Reading it costs one table's rows, not
    a join's. None when the keys come from several tables, a computed column or an aggregate.

    Once built, the filter is kept up to date with ``node``'s own delta: a key that later
    enters ``node``'s output comes through that delta, whichever table's change brought it.
    """
    if not names:
        return None
    if _join_free(node):
        return node, names
    if isinstance(node, _Select):
        return _bloom_source(node.child, names)
    if isinstance(node, _Project) and all(n in node.passed for n in names):
        return _bloom_source(node.child, [node.passed[n] for n in names])
    if isinstance(node, _Join):
        for child in (node.left, node.right):
            if all(n in child.schema.names for n in names):
                return _bloom_source(child, names)
    return None


def _children(node: _Node) -> list[_Node]:
    if isinstance(node, _Join | _AntiJoin | _SemiJoin | _LeftJoin):
        return [node.left, node.right]
    if isinstance(node, _Union):
        return list(node.inputs)
    child = getattr(node, "child", None)
    return [child] if child is not None else []


def _stateless(node: _Node) -> bool:
    return isinstance(node, (_Scan, _Select, _Project, _Join, _Union)) and all(
        _stateless(c) for c in _children(node)
    )


def _nodes_under(node: _Node) -> list[_Node]:
    return [node, *(n for child in _children(node) for n in _nodes_under(child))]


def _scans_under(node: _Node) -> list[_Scan]:
    if isinstance(node, _Scan):
        return [node]
    return [s for c in _children(node) for s in _scans_under(c)]


@dataclass(frozen=True)
class Frontier:
    """An aggregation over a stateless subtree, whose state can be loaded from partial
    aggregates computed over a whole snapshot elsewhere (Spark): ``node.child`` is that subtree
    in the IR, and ``annotations`` names the fragment-id column of each sketched scan in it."""

    index: int  # among the stateful operators
    node: Aggregate
    annotations: dict[int, str]  # id(IR scan) -> annotation
    specs: tuple[ArgumentSpec, ...]
    group_types: tuple[pa.DataType, ...]
    argument_types: dict[int, pa.DataType]  # aggregate index -> its argument's type
    tables: tuple[str, ...] = ()  # the table of each scan in the subtree (repeats: self joins)
    joins: bool = False  # the subtree joins
    arrays: bool = False  # the aggregation keeps its state in arrays (count, sum, avg)


def _source_condition(scan: _Scan, condition: exp.Expr, ansi: bool) -> tuple[pc.Expression | None, bool]:
    """The conjuncts of ``condition`` over the scan's source columns, as an Arrow filter, and
    whether that is all of them (then the filter is the condition itself)."""
    translate = ExpressionTranslator(scan.table_schema, ansi)
    parts = []
    every = True
    for conjunct in conjuncts(condition):
        renamed = conjunct.transform(
            lambda n: column(scan.source_of[n.name]) if isinstance(n, exp.Column) else n
        )
        try:
            parts.append(translate(renamed))
        except UnsupportedQueryError:
            every = False  # a weaker filter is still exact: the selection runs again on the rows read
    if not parts:
        return None, False
    combined = parts[0]
    for part in parts[1:]:
        combined = combined & part
    return pc.Expression._call("coalesce", [combined, pc.scalar(False)]), every


class IncrementalSketch:
    """The incremental maintenance procedure I(Q, S, ΔD) for one sketch (IMP Def. 4.5)."""

    def __init__(
        self,
        plan: Relation,
        partitions: Mapping[str, RangePartition],
        schemas: Mapping[str, pa.Schema],
        keep_top: int | None = None,
        columnar: bool = True,
        remote: RemoteEvaluator | None = None,
        ansi: bool = True,
    ) -> None:
        """``keep_top``: min/max and top-k keep only their top m values (IMP 9.4.3); None or 0
        keeps everything. ``columnar``: aggregations of count, sum and avg keep their state in
        arrays (:mod:`.columnar_aggregate`); False keeps every aggregation's as objects.
        ``remote``: evaluates the expressions the engine has no exact rule for (see
        :mod:`.remote`); without it, such an expression makes the plan unsupported. ``ansi``:
        whether Spark runs in ANSI mode (see :class:`.ExpressionTranslator`)."""
        self.remote = remote
        self.ansi = ansi
        self._lifted = 0  # expressions lifted out of aggregations so far (their names)
        self._top: dict[int, int] = {}  # id(window) -> the N of a top-N filter above it
        self.remote_expressions: list[str] = []  # the ones it evaluates (for the logs and tests)
        plan = push_selections(plan)  # comma joins: no cross products in memory
        self.keep_top = keep_top or None
        self.columnar = columnar
        self.blooms_dropped = False  # since the state was last stored (see load)
        self.partitions = {t.lower(): p for t, p in partitions.items()}
        self.schemas = {t.lower(): s for t, s in schemas.items()}
        self._sketched = {id(s) for s in positive_scans(plan) if s.table in self.partitions}
        self._tables: dict[str, str] = {}  # annotation -> table
        self._stateful: list[_Aggregate | _TopK] = []  # in build order: the state files' order
        self._joins: list[_Join] = []  # in build order: their filters' state files
        self._scans: list[_Scan] = []
        self._scan_selections: dict[int, _Select] = {}  # id(scan node) -> the selection right above
        # Shown-only outputs of the result (a ROUND of an aggregate) decide no row: not computed.
        self.root = self._build(prune_outputs(plan))
        self.merge = MergeState(dict(self._tables))
        # The empty database's result (a global aggregate's row over nothing) starts the counters.
        # A scalar subquery's row over nothing re-reads the other side: empty too.
        self.merge.apply(self.root.process(_Context({}, self._read_nothing)))

    def _read_nothing(
        self, table: str, columns: Sequence[str], keys: Mapping[str, pa.Array] | None
    ) -> pa.Table:
        return self.schemas[table].empty_table().select(list(columns))

    def _build(self, node: Relation) -> _Node:
        if isinstance(node, Scan):
            annotation = None
            if id(node) in self._sketched:
                annotation = f"__ps_{len(self._tables) + 1}"
                self._tables[annotation] = node.table
            partition = self.partitions[node.table] if annotation else None
            scan = _Scan(node, self.schemas[node.table], annotation, partition)
            self._scans.append(scan)
            return scan
        if isinstance(node, Select):
            if (shape := top_rows(node)) is not None:  # (the window below is built next)
                self._top[id(shape.window)] = shape.limit
            child = self._build(node.child)
            selection = _Select(node, child, self.remote, self.ansi)
            if isinstance(child, _Scan):
                self._scan_selections[id(child)] = selection
            self._filter_window_rows(node.condition, child)
            return self._noted(selection, selection.condition, child.schema)
        if isinstance(node, Project):
            below = self._build(node.child)
            built = _Project(node, below, self.remote, self.ansi)
            return self._noted(built, built.outputs, below.schema)
        if isinstance(node, Aggregate):
            _refuse_opaque(node)
        if isinstance(node, Aggregate) and (rewritten := distinct_rows_first(node)) is not node:
            return self._build(rewritten)
        if isinstance(node, Aggregate):
            child = self._build(node.child)
            node, child = self._lift_refused(node, child)
            return self._keep(_Aggregate(node, child, self.keep_top, self.columnar))
        if isinstance(node, Distinct):
            groups = tuple((c, column(c)) for c in node.child.columns)
            distinct = Aggregate(node.child, groups, ())
            return self._keep(_Aggregate(distinct, self._build(node.child), columnar=self.columnar))
        if isinstance(node, TopK):
            return self._keep(_TopK(node, self._build(node.child), self.keep_top))
        if isinstance(node, Sort):
            return self._build(node.child)  # order does not change which rows are in the result
        if isinstance(node, Union):
            return _Union(node, [self._build(i) for i in node.inputs])
        if isinstance(node, Join) and node.kind == "semi":
            return self._semi(node)
        if isinstance(node, Join) and node.kind in ("anti", "left"):
            return self._outer(node)
        if isinstance(node, Join):
            join = _Join(node, self._build(node.left), self._build(node.right), self.remote, self.ansi)
            if join.residual is not None:
                self._noted(join, join.residual, join.schema)
            self._joins.append(join)
            return join
        if isinstance(node, Window):
            return self._window(node, self._top.get(id(node)))
        raise UnsupportedQueryError(
            f"{type(node).__name__} in incremental maintenance",
            type(node).__name__,
            hint="maintain this sketch with strategy='full'",
        )

    def _window(self, node: Window, top: int | None = None) -> _Node:
        """A window whose arguments are columns; one over expressions (``SUM(v * 2) OVER``) as
        the window over a projection that computes them, with those columns projected away.
        ``top``: the N of a top-N filter right above (a ranking function: no argument)."""
        opaque = [c.label.upper() for _, c in node.calls if c.func == "opaque"]
        if opaque:  # (its argument is the whole function: not an expression to lift below)
            raise UnsupportedQueryError(
                f"a window function ({', '.join(opaque)}) in incremental maintenance (not yet)",
                ", ".join(opaque),
                hint="maintain this sketch with strategy='full' (auto does)",
            )
        lifted: list[tuple[str, exp.Expr]] = []
        calls = []
        for name, call in node.calls:
            if call.arg is not None and not isinstance(call.arg, exp.Column):
                self._lifted += 1
                lifted.append((f"__lifted{self._lifted}", call.arg))
                call = replace(call, arg=column(lifted[-1][0]))
            calls.append((name, call))
        if not lifted:
            return _Window(node, self._build(node.child), top)
        below = Project(node.child, (*((c, column(c)) for c in node.child.columns), *lifted))
        window = Window(below, node.partition, node.order, tuple(calls), node.frame)
        return self._build(Project(window, tuple((c, column(c)) for c in node.columns)))

    def _semi(self, node: Join) -> _Node:
        """A semi join on equalities as an inner join with the right side grouped by key; one
        whose condition also relates the sides otherwise, row by row (:class:`_SemiJoin`)."""
        if not null_safe_semi_join(node):  # (an INTERSECT's keys match NULL to NULL: by row)
            _, _, _, mixed = split_semi_condition(
                node, "incremental maintenance", "maintain this sketch with strategy='full'", mixed_ok=True
            )
            if not mixed:
                return self._build(semi_join_as_inner_join(node))
        semi = _SemiJoin(node, self._build(node.left), self._build(node.right), self.remote, self.ansi)
        if semi.residual is not None:
            self._noted(semi, semi.residual, pa.schema([*semi.left.schema, *semi.right.schema]))
        return semi

    def _outer(self, node: Join) -> _Node:
        """An anti join, or a left join as its inner join and its anti join's padded rows. The
        condition's conjuncts on the right side alone filter the right side first (the rows
        they reject match nothing)."""
        keys, residual = equi_keys(node.condition, node.left.columns, node.right.columns)
        right_only = [c for c in residual if referenced(c) <= set(node.right.columns)]
        right = Select(node.right, exp.and_(*right_only)) if right_only else node.right
        kept = [c for c in residual if not referenced(c) <= set(node.right.columns)]
        condition = exp.and_(*(exp.EQ(this=column(a), expression=column(b)) for a, b in keys), *kept)
        left_node, right_node = self._build(node.left), self._build(right)
        anti = _AntiJoin(
            Join(node.left, right, "anti", condition, node.null_aware),
            left_node,
            right_node,
            self.remote,
            self.ansi,
        )
        if node.kind == "anti":
            return anti
        inner = _Join(
            Join(node.left, right, "inner", condition), left_node, right_node, self.remote, self.ansi
        )
        return _LeftJoin(inner, anti)

    def _lift_refused(self, node: Aggregate, child: _Node) -> tuple[Aggregate, _Node]:
        """``node`` with each group and argument expression the engine refuses computed by a
        projection below it (evaluated remotely there), and that projection's engine node."""
        translate = ExpressionTranslator(child.schema, self.ansi)
        lifted: list[tuple[str, exp.Expr]] = []

        def lifted_column(expression: exp.Expr) -> exp.Expr:
            try:
                translate(expression)
                return expression
            except UnsupportedQueryError:
                if self.remote is None:
                    raise
                self._lifted += 1
                name = f"__lifted{self._lifted}"
                lifted.append((name, expression))
                return column(name)

        groups = tuple((n, lifted_column(e)) for n, e in node.groups)
        calls = tuple(
            (n, c if c.arg is None else replace(c, arg=lifted_column(c.arg))) for n, c in node.aggregates
        )
        if not lifted:
            return node, child
        below = Project(node.child, (*((c, column(c)) for c in node.child.columns), *lifted))
        project = _Project(below, child, self.remote, self.ansi)
        self._noted(project, project.outputs, child.schema)
        return replace(node, child=below, groups=groups, aggregates=calls), project

    def _filter_window_rows(self, condition: exp.Expr, below: _Node) -> None:
        """Give a window right under a selection (through projections that pass the columns
        the condition reads, as a derived table's select list does) the condition, so that
        the rows it drops get no fragments there (the selection still applies it). Only a
        condition evaluated in-process: a remote one would be evaluated twice."""
        names = {c: c for c in below.schema.names}  # condition's column -> below's column
        while isinstance(below, _Project):
            passed = below.passed
            names = {mine: passed[theirs] for mine, theirs in names.items() if theirs in passed}
            below = below.child
        if not isinstance(below, _Window) or not {c.name for c in condition.find_all(exp.Column)} <= set(
            names
        ):
            return
        renamed = condition.transform(lambda n: column(names[n.name]) if isinstance(n, exp.Column) else n)
        kept = stateless.selection(renamed, self.remote, self.ansi)
        try:
            if not kept.remote_names(below.schema):
                below.kept = kept
        except UnsupportedQueryError:  # (the selection itself says so, by name)
            return

    def _noted(self, built: _N, translated: Translated, schema: pa.Schema) -> _N:
        """``built``, with those of ``translated``'s expressions (over ``schema``) that are
        evaluated remotely noted (their translation is cached there for the runs)."""
        if self.remote is not None:
            names = translated.remote_names(schema)
            self.remote_expressions += [translated.expressions[n].sql(dialect=SPARK) for n in names]
        return built

    def _keep(self, node: _Aggregate | _TopK) -> _Node:
        self._stateful.append(node)
        return node

    def state_tables(self, changes_only: bool = False) -> dict[str, pa.Table]:
        """The state as Arrow tables: ``op<i>`` per stateful operator, and ``merge``. With
        ``changes_only``, the operators' tables hold only what changed since the state was last
        stored or restored (:meth:`mark_stored`); the merge table is always whole (it is small)."""
        tables = {f"op{i}": n.state_table(changes_only) for i, n in enumerate(self._stateful)}
        tables["merge"] = merge_state(self.merge)
        for j, join in enumerate(self._joins):
            for side, bloom in enumerate(join.blooms):
                # An empty table: no filter (whole state), or the filter unchanged (changes).
                changed = bloom is not None and (bloom.dirty or not changes_only)
                tables[f"bloom{j}_{side}"] = (
                    bloom.to_table() if bloom is not None and changed else EMPTY_BLOOM
                )
        return tables

    def changed_entries(self) -> int:
        """Groups and top-k entries changed since the state was last stored or restored."""
        return sum(n.changed_entries() for n in self._stateful)

    def state_entries(self) -> int:
        """Groups and top-k entries in the state."""
        return sum(n.entries() for n in self._stateful)

    def ordered_values(self) -> int:
        """Values kept in min/max state, over every group, plus top-k entries: what top-m
        (IMP 9.4.3) bounds."""
        return sum(n.ordered_values() for n in self._stateful)

    def mark_stored(self) -> None:
        """The state as it is now has been stored: later changes are counted from here."""
        self.blooms_dropped = False
        for node in self._stateful:
            node.mark_stored()
        for join in self._joins:
            for bloom in join.blooms:
                if bloom is not None:
                    bloom.dirty = False

    def bloom_counts(self) -> tuple[int, int]:
        """Join delta rows probed against Bloom filters so far, and how many passed."""
        return sum(j.probed for j in self._joins), sum(j.passed for j in self._joins)

    def restore(self, layers: Sequence[Mapping[str, pa.Table]]) -> None:
        """Load state saved by :meth:`state_tables` for the same plan and partitions: a whole
        state, then any number of changes to it, oldest first."""
        expected = {f"op{i}" for i in range(len(self._stateful))} | {"merge"}
        blooms = {f"bloom{j}_{side}" for j in range(len(self._joins)) for side in (0, 1)}
        for tables in layers:
            if not expected <= set(tables) <= expected | blooms:  # filters are optional
                raise ValueError(f"state holds {sorted(tables)}, the plan needs {sorted(expected)}")
        for i, node in enumerate(self._stateful):
            node.restore([tables[f"op{i}"] for tables in layers])
        for depth, tables in enumerate(layers):
            for j, join in enumerate(self._joins):
                for side in (0, 1):
                    stored = tables.get(f"bloom{j}_{side}")
                    bloom = KeyBloom.from_table(stored) if stored is not None else None
                    if bloom is not None or depth == 0:  # in a layer of changes, empty = unchanged
                        join.blooms[side] = bloom
            restore_merge(self.merge, tables["merge"])

    def frontier(self) -> list[Frontier]:
        """The topmost aggregations over stateless subtrees (each loadable as a whole)."""
        found: list[Frontier] = []

        def visit(node: _Node) -> None:
            if isinstance(node, _Aggregate) and _stateless(node.child):
                operator = node.operator
                annotations = {id(s.node): s.annotation for s in _scans_under(node.child) if s.annotation}
                argument_types = {
                    spec.index: t
                    for spec in operator.argument_specs()
                    if (t := operator.argument_types[spec.index]) is not None
                }
                found.append(
                    Frontier(
                        self._stateful.index(node),
                        operator.node,
                        annotations,
                        tuple(operator.argument_specs()),
                        tuple(operator.group_types),
                        argument_types,
                        tuple(s.node.table for s in _scans_under(node.child)),
                        any(isinstance(n, _Join) for n in _nodes_under(node.child)),
                        isinstance(operator, ColumnarAggregate),
                    )
                )
                return
            for child in _children(node):
                visit(child)

        visit(self.root)
        return found

    def tables_outside(self, frontier: Sequence[Frontier]) -> set[str]:
        """Tables some scan reads outside these aggregations' subtrees."""
        covered = {id(s) for f in frontier for s in _scans_under(self._stateful[f.index])}
        return {s.node.table for s in self._scans if id(s) not in covered}

    def load(
        self,
        partials: Mapping[int, Partials],
        deltas: Mapping[str, RowDelta],
        reader: Reader | None = None,
        filtered: Collection[str] = (),
    ) -> SketchDelta:
        """Initialize from the empty database to a snapshot: the frontier aggregations (by
        index) from their partial aggregates over the snapshot, every other scan from
        ``deltas`` (the whole tables of :meth:`tables_outside`; ``filtered``: see :meth:`apply`).

        Equally, advance by one batch whose frontier deltas were summarized elsewhere: then
        ``partials`` are over the subtrees' deltas (a signed sum, :func:`.partials.combined`) and
        ``deltas`` hold the changes of the tables read outside the frontier. The joins inside
        those subtrees did not see their deltas, so their Bloom filters are dropped (rebuilt
        from the new snapshot when next probed) and :attr:`blooms_dropped` says the next stored
        state must be whole (in a layer of changes, a missing filter means "unchanged")."""
        for index, summary in partials.items():
            node = self._stateful[index]
            assert isinstance(node, _Aggregate), f"stateful operator {index} is not an aggregation"
            node.loaded = node.operator.load(summary)
            under = _nodes_under(node.child)
            for join in self._joins:
                if any(join is inner for inner in under) and join.blooms != [None, None]:
                    join.blooms = [None, None]
                    self.blooms_dropped = True
        return self.apply(deltas, reader, filtered=filtered)

    def apply(
        self,
        deltas: Mapping[str, RowDelta],
        reader: Reader | None = None,
        *,
        blooms: bool = True,
        filtered: Collection[str] = (),
    ) -> SketchDelta:
        """Process one batch of table deltas (keys: table names); returns the sketch delta.

        ``reader`` reads a table at the snapshot the deltas lead to; joins need it.
        ``blooms=False`` sends every join delta row to that read (for measuring IMP 9.4.1).
        ``filtered``: the tables whose deltas hold only rows that pass :meth:`delta_filters`'
        filter (a selection that filter is the whole of is not evaluated again)."""
        deltas = {t.lower(): d for t, d in deltas.items()}
        passed = frozenset(id(s) for t, s in self._whole_filters.items() if t in filtered and t in deltas)
        ctx = _Context(deltas, reader or _no_reader, blooms, passed)
        return self.merge.apply(self.root.process(ctx))

    def sketch(self) -> dict[str, set[int]]:
        return self.merge.sketch()

    def delta_filters(self) -> dict[str, pc.Expression]:
        """:attr:`_delta_filters`, translated once per engine (they depend on the plan only)."""
        return dict(self._delta_filters)

    @functools.cached_property
    def _delta_filters(self) -> dict[str, pc.Expression]:
        """Per table, a condition every delta row that can matter passes (IMP 9.4.2).

        A scan with a selection right above it is stateless up to there: a delta row failing
        the selection changes nothing, so it need not be read. The filter is the selection's
        conjuncts that Arrow can evaluate on the table's own columns; a table read by several
        scans gets the OR of theirs, and none if any of its scans is unfiltered."""
        return {t: f for t, (f, _) in self._scan_conditions.items() if f is not None}

    @functools.cached_property
    def _scan_conditions(self) -> dict[str, tuple[pc.Expression | None, _Select | None]]:
        """Per table, its delta filter (None: none) and, when that filter is the whole
        condition of the selection right above the table's only scan, that selection."""
        filters: dict[str, tuple[pc.Expression | None, _Select | None]] = {}
        for scan in self._scans:
            table = scan.node.table
            selection = self._scan_selections.get(id(scan))
            own, every = (
                _source_condition(scan, selection.node.condition, self.ansi)
                if selection is not None
                else (None, False)
            )
            whole = selection if every else None
            if table in filters and (filters[table][0] is None or own is None):
                filters[table] = (None, None)
            elif table in filters:
                filters[table] = (filters[table][0] | own, None)  # type: ignore[operator]
            else:
                filters[table] = (own, whole)
        return filters

    @functools.cached_property
    def _whole_filters(self) -> dict[str, _Select]:
        """The tables whose delta filter is the whole selection above their only scan."""
        return {t: s for t, (_, s) in self._scan_conditions.items() if s is not None}

    def columns_read(self) -> dict[str, set[str]]:
        """Per table, the columns the plan reads (its partition attribute included): a delta
        restricted to them maintains the sketch exactly."""
        needed: dict[str, set[str]] = {}
        for scan in self._scans:
            columns = needed.setdefault(scan.node.table, set())
            columns.update(scan.node.source_columns)
            if scan.partition is not None:
                columns.add(scan.partition.attribute)
        return needed
