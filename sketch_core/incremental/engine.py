"""An IR plan as a tree of incremental annotated operators, ending in the merge μ.

``IncrementalSketch(plan, partitions, schemas)`` starts from the empty database; applying the
whole table contents as one insert delta initializes it to a snapshot, and each later table
delta yields the sketch delta and moves the state along. Sketched scans are annotated exactly
as the capture rewrite annotates them (every positive scan of a sketched table; anti joins'
right sides never), so a maintained sketch can be compared with a fresh capture fragment for
fragment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from sketch_core.algebra.ir import (
    Aggregate,
    Distinct,
    Project,
    Relation,
    Scan,
    Select,
    Sort,
    Union,
    column,
    positive_scans,
)
from sketch_core.errors import UnsupportedQueryError
from sketch_core.incremental import stateless
from sketch_core.incremental.aggregate import AggregateOperator
from sketch_core.incremental.annotated import AnnotatedDelta, annotate_rows
from sketch_core.incremental.merge import MergeState, SketchDelta
from sketch_core.partitions import RangePartition


@dataclass(frozen=True)
class RowDelta:
    """One table's rows inserted and deleted (the columns the plan reads, at least)."""

    inserted: pa.Table
    deleted: pa.Table


class _Node:
    schema: pa.Schema
    annotations: tuple[str, ...]

    def process(self, deltas: Mapping[str, RowDelta]) -> AnnotatedDelta:
        raise NotImplementedError


class _Scan(_Node):
    def __init__(
        self, node: Scan, table_schema: pa.Schema, annotation: str | None, partition: RangePartition | None
    ):
        self.node, self.annotation, self.partition = node, annotation, partition
        self.table_schema = table_schema
        self.schema = pa.schema(
            [table_schema.field(c).with_name(n) for c, n in zip(node.source_columns, node.names, strict=True)]
        )
        self.annotations = (annotation,) if annotation else ()

    def process(self, deltas: Mapping[str, RowDelta]) -> AnnotatedDelta:
        delta = deltas.get(self.node.table)
        if delta is None:
            return AnnotatedDelta.empty(self.schema, self.annotations)
        attribute = self.partition.attribute if self.partition is not None else None
        rows = annotate_rows(delta.inserted, delta.deleted, self.annotation, self.partition, attribute)
        return stateless.scan(self.node, rows)


class _Select(_Node):
    def __init__(self, node: Select, child: _Node):
        self.node, self.child = node, child
        self.schema, self.annotations = child.schema, child.annotations

    def process(self, deltas: Mapping[str, RowDelta]) -> AnnotatedDelta:
        return stateless.select(self.child.process(deltas), self.node.condition)


class _Project(_Node):
    def __init__(self, node: Project, child: _Node):
        self.node, self.child = node, child
        probe = AnnotatedDelta.empty(child.schema, ())
        self.schema = stateless.project(probe, node.outputs).data().schema
        self.annotations = child.annotations

    def process(self, deltas: Mapping[str, RowDelta]) -> AnnotatedDelta:
        return stateless.project(self.child.process(deltas), self.node.outputs)


class _Aggregate(_Node):
    def __init__(self, node: Aggregate, child: _Node):
        self.child = child
        self.operator = AggregateOperator(node, child.schema, child.annotations)
        names = [n for n, _ in node.groups] + [n for n, _ in node.aggregates]
        types = self.operator.group_types + self.operator.output_types
        self.schema = pa.schema([pa.field(n, t) for n, t in zip(names, types, strict=True)])
        self.annotations = child.annotations

    def process(self, deltas: Mapping[str, RowDelta]) -> AnnotatedDelta:
        return self.operator.apply(self.child.process(deltas))


class _Union(_Node):
    def __init__(self, node: Union, inputs: list[_Node]):
        self.node, self.inputs = node, inputs
        self.schema = pa.schema([f.with_name(n) for f, n in zip(inputs[0].schema, node.names, strict=True)])
        self.annotations = tuple(dict.fromkeys(a for i in inputs for a in i.annotations))

    def process(self, deltas: Mapping[str, RowDelta]) -> AnnotatedDelta:
        return stateless.union([i.process(deltas) for i in self.inputs], self.node.names)


class IncrementalSketch:
    """The incremental maintenance procedure I(Q, S, ΔD) for one sketch (IMP Def. 4.5)."""

    def __init__(
        self, plan: Relation, partitions: Mapping[str, RangePartition], schemas: Mapping[str, pa.Schema]
    ) -> None:
        self.partitions = {t.lower(): p for t, p in partitions.items()}
        self.schemas = {t.lower(): s for t, s in schemas.items()}
        self._sketched = {id(s) for s in positive_scans(plan) if s.table in self.partitions}
        self._tables: dict[str, str] = {}  # annotation -> table
        self.root = self._build(plan)
        self.merge = MergeState(dict(self._tables))
        # The empty database's result (a global aggregate's row over nothing) starts the counters.
        self.merge.apply(self.root.process({}))

    def _build(self, node: Relation) -> _Node:
        if isinstance(node, Scan):
            annotation = None
            if id(node) in self._sketched:
                annotation = f"__ps_{len(self._tables) + 1}"
                self._tables[annotation] = node.table
            return _Scan(
                node,
                self.schemas[node.table],
                annotation,
                self.partitions.get(node.table) if annotation else None,
            )
        if isinstance(node, Select):
            return _Select(node, self._build(node.child))
        if isinstance(node, Project):
            return _Project(node, self._build(node.child))
        if isinstance(node, Aggregate):
            return _Aggregate(node, self._build(node.child))
        if isinstance(node, Distinct):
            groups = tuple((c, column(c)) for c in node.child.columns)
            return _Aggregate(Aggregate(node.child, groups, ()), self._build(node.child))
        if isinstance(node, Sort):
            return self._build(node.child)  # order does not change which rows are in the result
        if isinstance(node, Union):
            return _Union(node, [self._build(i) for i in node.inputs])
        raise UnsupportedQueryError(
            f"{type(node).__name__} in incremental maintenance (not yet)",
            type(node).__name__,
            hint="maintain this sketch with strategy='full'",
        )

    def apply(self, deltas: Mapping[str, RowDelta]) -> SketchDelta:
        """Process one batch of table deltas (keys: table names); returns the sketch delta."""
        return self.merge.apply(self.root.process({t.lower(): d for t, d in deltas.items()}))

    def sketch(self) -> dict[str, set[int]]:
        return self.merge.sketch()
