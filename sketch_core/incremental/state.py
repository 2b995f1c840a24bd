"""Operator state as Arrow tables, and back (pure: the caller writes and reads the files).

One table per stateful operator, in the engine's build order, plus one for the merge μ:

- aggregation: a row per group, its key columns, the row count, per aggregate the running
  total (as exact text: ints, decimals and doubles round-trip), the non-NULL and NaN/infinity
  counts and, for min/max, the ordered value counts; per annotation the fragment counters;
  for min/max-only aggregations the counters per extreme value;
- top-k: a row per distinct (row, annotation) of its input, with its multiplicity;
- merge: (table, fragment, result rows depending on it).

A state is stored whole, or as the changes to an earlier one: the operators' rows for only the
groups and entries changed since (a vanished group or entry as a row with zero rows or count),
so that a run's write costs what the run touched, not the size of the state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
from sortedcontainers import SortedDict

from sketch_core.gc_pause import collection_paused
from sketch_core.incremental.aggregate import AggregateOperator, GroupState, ordered_values
from sketch_core.incremental.merge import MergeState
from sketch_core.incremental.ordering import group_key, key_value
from sketch_core.incremental.stored_groups import StoredGroups
from sketch_core.incremental.stored_topk import (
    COUNT,
    StoredEntries,
    annotation_column,
    is_searchable,
    stored_entries,
)
from sketch_core.incremental.topk import TopKOperator

# 3: aggregations keep only the aggregates that decide rows (see rewrites.prune_outputs); a
# state of an earlier format is laid out for other operators, and is not read.
STATE_FORMAT = 3
_PARTIAL = "partial"
_ENTRIES = "entries"


def _counts_column(counters: list[Counter[int]]) -> pa.Array:
    """One list of (fragment, rows) per counter, built from flat arrays (no per-entry dicts:
    a state has a counter per group and annotation)."""
    offsets, fragments, rows = [0], [], []
    for counter in counters:
        for f, n in sorted(counter.items()):
            if n:
                fragments.append(f)
                rows.append(n)
        offsets.append(len(fragments))
    entries = pa.StructArray.from_arrays(
        [pa.array(fragments, pa.int32()), pa.array(rows, pa.int64())], names=["f", "n"]
    )
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), entries)


def _counter(entries: list[dict[str, int]] | None) -> Counter[int]:
    return Counter({e["f"]: e["n"] for e in entries or ()})


def _text(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _number(text: str, kind: pa.DataType | None) -> Any:
    if kind is not None and pa.types.is_decimal(kind):
        return Decimal(text)
    if kind is not None and pa.types.is_floating(kind):
        return float(text)
    try:
        return int(text)
    except ValueError:
        return Decimal(text) if "." in text and "e" not in text.lower() else float(text)


# -- aggregation ---------------------------------------------------------------------------------
def aggregate_state(op: AggregateOperator, changes_only: bool = False) -> pa.Table:
    """The groups (with ``changes_only``: those changed since ``op.dirty`` was last cleared)."""
    argument_types = op.argument_types
    columns: dict[str, pa.Array] = {}
    stored = op.groups if isinstance(op.groups, StoredGroups) and not changes_only else None
    if changes_only:
        groups = [(k, op.groups.get(k) or op.new_group()) for k in op.dirty]
    elif stored is not None:  # the groups never read are written back as they were stored
        groups = list(stored.loaded.items())
    else:
        groups = list(op.groups.items())
    for i, (name, kind) in enumerate(zip(op.group_names, op.group_types, strict=True)):
        columns[f"key_{name}"] = pa.array([key_value(k[i]) for k, _ in groups], kind)
    columns["rows"] = pa.array([g.rows for _, g in groups], pa.int64())
    for j, kind in enumerate(argument_types):
        accumulators = [g.accumulators[j] for _, g in groups]
        unused = op.is_extreme(j)  # min/max keep value counts, no running total
        columns[f"acc{j}_total"] = pa.array(
            ["0" if unused else _text(a.total) for a in accumulators], pa.string()
        )
        columns[f"acc{j}_non_null"] = pa.array([a.non_null for a in accumulators], pa.int64())
        for special in ("nan", "+inf", "-inf"):
            columns[f"acc{j}_{special}"] = pa.array([a.special[special] for a in accumulators], pa.int64())
        if op.is_extreme(j):
            values_type = pa.list_(pa.struct([("v", kind), ("n", pa.int64())]))
            columns[f"acc{j}_values"] = pa.array(
                [[{"v": key_value(v), "n": n} for v, n in (a.values or {}).items()] for a in accumulators],
                values_type,
            )
            columns[f"acc{j}_partial"] = pa.array([a.partial for a in accumulators], pa.bool_())
    for a in op.annotations:
        columns[f"cnt_{a}"] = _counts_column([g.counters[a] for _, g in groups])
    if op.extremes_only:
        for j, kind in enumerate(argument_types):
            at_type = pa.list_(
                pa.struct([("v", kind), ("a", pa.string()), ("f", pa.int32()), ("n", pa.int64())])
            )
            columns[f"at{j}"] = pa.array(
                [
                    [
                        {"v": key_value(v), "a": a, "f": f, "n": n}
                        for v, by_annotation in g.at_value[j].items()
                        for a, counter in by_annotation.items()
                        for f, n in counter.items()
                        if n
                    ]
                    for _, g in groups
                ],
                at_type,
            )
    table = pa.table(columns) if columns else pa.table({"rows": pa.array([], pa.int64())})
    if stored is not None:
        table = pa.concat_tables([stored.untouched_rows(), table], promote_options="default")
    return table


def _stored_keys(op: AggregateOperator, table: pa.Table) -> list[tuple[Any, ...]]:
    if not op.group_names:
        return [()] * table.num_rows
    columns = [table.column(f"key_{name}").to_pylist() for name in op.group_names]
    return [tuple(group_key(v) for v in raw) for raw in zip(*columns, strict=True)]


def _group_from_record(op: AggregateOperator, record: dict[str, Any]) -> GroupState:
    group: GroupState = op.new_group()
    group.rows = record["rows"]
    for j, kind in enumerate(op.argument_types):
        accumulator = group.accumulators[j]
        accumulator.total = _number(record[f"acc{j}_total"], kind)
        accumulator.non_null = record[f"acc{j}_non_null"]
        accumulator.special = Counter({s: record[f"acc{j}_{s}"] for s in ("nan", "+inf", "-inf")})
        if accumulator.values is not None:
            accumulator.values = ordered_values()
            for entry in record.get(f"acc{j}_values") or ():
                accumulator.values[group_key(entry["v"])] = entry["n"]
            accumulator.partial = bool(record.get(f"acc{j}_partial"))
    for a in op.annotations:
        group.counters[a] = _counter(record[f"cnt_{a}"])
    if op.extremes_only:
        for j in range(len(op.argument_types)):
            for entry in record.get(f"at{j}") or ():
                at = group.at_value[j].setdefault(group_key(entry["v"]), {})
                at.setdefault(entry["a"], Counter())[entry["f"]] += entry["n"]
    return group


def restore_aggregate(op: AggregateOperator, layers: Sequence[pa.Table]) -> None:
    """Load a whole state and its layers of changes, oldest first; each group is read into
    Python only when the operator first uses it (:class:`StoredGroups`)."""
    op._announced = True
    op.dirty.clear()
    op.groups = StoredGroups(
        layers,
        lambda table: _stored_keys(op, table),
        lambda record: _group_from_record(op, record),
        grouped=bool(op.node.groups),
    )


# -- top-k ---------------------------------------------------------------------------------------
def topk_state(op: TopKOperator, changes_only: bool = False) -> pa.Table:
    if changes_only:
        entries = [(key, op.rows.get(key, (row, 0))) for key, row in op.dirty.items()]
    else:
        if isinstance(op.rows, StoredEntries):  # a whole state needs every entry, in order
            with collection_paused():
                op.rows = op.rows.materialized()
        entries = list(op.rows.items())
    columns = {
        name: pa.array([row[i] for _, (row, _) in entries], op.schema.field(name).type)
        for i, name in enumerate(op.schema.names)
    }
    columns[COUNT] = pa.array([count for _, (_, count) in entries], pa.int64())
    for k, a in enumerate(op.annotations):
        columns[annotation_column(a)] = pa.array(
            [list(key[2][k]) for key, _ in entries], pa.list_(pa.int32())
        )
    # Every layer says anew whether entries past the last one were dropped (top-m), and how
    # many entries the state holds with it (a restore that builds no key per entry cannot count).
    metadata = {_PARTIAL: "1" if op.partial else "0", _ENTRIES: str(len(op.rows))}
    return pa.table(columns).replace_schema_metadata(metadata)


def restore_topk(op: TopKOperator, layers: Sequence[pa.Table]) -> None:
    """Load a whole state and its layers of changes, oldest first: the whole state is searched
    where it is stored (:class:`StoredEntries`) when the state keeps every entry and says how
    many; else (top-m, or a state stored without the count) every entry is read."""
    # Millions of new tuples and none of them in a cycle: the collector would walk the growing
    # heap again and again while they are made (a third of a restore, measured at TPC-H SF1).
    with collection_paused():
        newest = layers[-1].schema.metadata or {}
        op.dirty.clear()
        op.partial = newest.get(_PARTIAL.encode()) == b"1"
        entries = newest.get(_ENTRIES.encode())
        if op.keep is None and not op.partial and entries is not None and is_searchable(layers[0]):
            names, positions, annotations = op.schema.names, op.positions, op.annotations
            overlay: dict[tuple[Any, ...], tuple[tuple[Any, ...], int]] = {}
            for table in layers[1:]:
                keys, rows, counts = stored_entries(table, names, positions, annotations)
                overlay.update(zip(keys, zip(rows, counts, strict=True), strict=True))
            op.rows = StoredEntries(layers[0], names, positions, annotations, overlay, int(entries))
        else:
            _restore_every_entry(op, layers)


def _restore_every_entry(op: TopKOperator, layers: Sequence[pa.Table]) -> None:
    entries: dict[tuple[Any, ...], tuple[tuple[Any, ...], int]] = {}
    for table in layers:
        keys, rows, counts = stored_entries(table, op.schema.names, op.positions, op.annotations)
        if not entries and 0 not in counts:  # a whole state: every entry new, none removed
            entries = dict(zip(keys, zip(rows, counts, strict=True), strict=True))
            continue
        for key, row, count in zip(keys, rows, counts, strict=True):
            if count:
                entries[key] = (row, count)
            else:
                entries.pop(key, None)
    op.rows = SortedDict()
    op.rows.update(entries)  # one sort, not an insertion per entry


# -- merge ---------------------------------------------------------------------------------------
def merge_state(merge: MergeState) -> pa.Table:
    """The merge counters, sorted by table and fragment (a whole sketch's worth per version)."""
    tables, fragments, rows = [], [], []
    for table, counter in sorted(merge.counters.items()):
        ids = np.fromiter(counter.keys(), np.int64, len(counter))
        counts = np.fromiter(counter.values(), np.int64, len(counter))
        order = np.argsort(ids)
        kept = order[counts[order] != 0]
        tables.append(np.full(len(kept), table, dtype=object))
        fragments.append(ids[kept])
        rows.append(counts[kept])
    return pa.table(
        {
            "table": pa.array(np.concatenate(tables) if tables else [], pa.string()),
            "fragment": pa.array(np.concatenate(fragments) if fragments else [], pa.int64()).cast(pa.int32()),
            "rows": pa.array(np.concatenate(rows) if rows else [], pa.int64()),
        }
    )


def restore_merge(merge: MergeState, table: pa.Table) -> None:
    merge.counters = {}
    for record in table.to_pylist():
        merge.counters.setdefault(record["table"], Counter())[record["fragment"]] = record["rows"]
