"""Incremental aggregation with its state in arrays (IMP Sec. 8's set-oriented evaluation, in
process), for aggregations of count, sum and avg over non-float keys.

:class:`AggregateOperator` keeps a Python object per group: ~30 microseconds for each group a
batch touches, which makes deltas of 100,000 rows over many groups cost seconds. Here a group
is a number (:class:`KeyIndex`) and its state sits at that number in arrays: the row count, per
aggregate the non-NULL count and the sum (exact ints for integers and decimals, doubles with
NaN/infinity counted apart for floats), and per annotation the counters fragment -> rows, kept
as one sorted array of (group, fragment) codes. A batch's partial aggregates (computed by
Arrow, or by Spark at state init) are added with array arithmetic at their groups' numbers;
the output rows of the touched groups before and after are computed as columns, and a group
whose row and annotation did not change emits nothing (IMP Sec. 9.3).

The state is stored in the same table format as :class:`AggregateOperator`'s, so either can
restore the other's files.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sketch_core.algebra.ir import Aggregate
from sketch_core.incremental.aggregate import AggregateShape
from sketch_core.incremental.annotated import FRAGMENTS, AnnotatedDelta
from sketch_core.incremental.key_index import KeyIndex
from sketch_core.incremental.partials import COUNT, FRAGMENT, ROWS, ArgumentSpec, Partials, group_column
from sketch_core.incremental.unscaled import from_unscaled, to_unscaled

_SHIFT = 32  # a counter's code: group number << 32 | (fragment + 2**31)
_OFFSET = 1 << 31
_LOW32 = (1 << 32) - 1
_COUNTS = pa.list_(pa.struct([("f", pa.int32()), ("n", pa.int64())]))
_SPECIALS = ("nan", "+inf", "-inf")


def _keyable(kind: pa.DataType) -> bool:
    """Key types Arrow hashes as GROUP BY compares them (floats are not: NaN and -0.0)."""
    return bool(
        pa.types.is_integer(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_date(kind)
        or pa.types.is_timestamp(kind)
        or pa.types.is_decimal(kind)
        or pa.types.is_boolean(kind)
    )


def columnar_supports(shape: AggregateShape) -> bool:
    """Whether :class:`ColumnarAggregate` computes this aggregation (else the object state)."""
    return all(c.func in ("count", "sum", "avg") for _, c in shape.node.aggregates) and all(
        _keyable(t) for t in shape.group_types
    )


class _Sums:
    """One aggregate's running sums by group number."""

    def __init__(self, spec: ArgumentSpec, argument: pa.DataType) -> None:
        self.spec = spec
        self.argument = argument
        self.is_float = pa.types.is_floating(argument)
        self.scale = argument.scale if pa.types.is_decimal(argument) else None
        self.non_null = np.zeros(0, np.int64)
        self.total = np.zeros(0, np.float64 if self.is_float else object)
        self.special = {s: np.zeros(0, np.int64) for s in _SPECIALS} if self.is_float else {}

    def grow(self, capacity: int) -> None:
        extra = capacity - len(self.non_null)
        self.non_null = np.concatenate([self.non_null, np.zeros(extra, np.int64)])
        filler = np.zeros(extra, np.float64) if self.is_float else np.full(extra, 0, object)
        self.total = np.concatenate([self.total, filler])
        for name, counts in self.special.items():
            self.special[name] = np.concatenate([counts, np.zeros(extra, np.int64)])

    def add(self, ids: np.ndarray, groups: pa.Table) -> None:
        j = self.spec.index
        self.non_null[ids] += groups.column(f"nn{j}").to_numpy()
        if not self.spec.summed:
            return
        added = groups.column(f"sum{j}")
        if self.is_float:
            self.total[ids] += pc.fill_null(added, 0.0).to_numpy()
            for name, column in zip(_SPECIALS, ("nan", "pinf", "ninf"), strict=True):
                self.special[name][ids] += groups.column(f"{column}{j}").to_numpy()
        elif self.scale is not None:
            self.total[ids] = self.total[ids] + to_unscaled(added, self.scale)
        else:
            self.total[ids] = self.total[ids] + pc.fill_null(added, 0).to_numpy().astype(object)

    def clear(self, ids: np.ndarray) -> None:
        self.total[ids] = 0.0 if self.is_float else 0
        self.non_null[ids] = 0
        for counts in self.special.values():
            counts[ids] = 0

    def float_total(self, ids: np.ndarray) -> np.ndarray:
        """As Spark sums doubles: NaN with any NaN or with both infinities, else an infinity."""
        total = self.total[ids]
        if not self.special:
            floats: np.ndarray = total.astype(np.float64)
            return floats
        nan, plus, minus = (self.special[s][ids] > 0 for s in _SPECIALS)
        total = np.where(plus, np.inf, total)
        total = np.where(minus, -np.inf, total)
        result: np.ndarray = np.where(nan | (plus & minus), np.nan, total)
        return result

    # -- stored as text, as AggregateOperator stores it -----------------------------------------
    def total_text(self, ids: np.ndarray) -> pa.Array:
        if not self.spec.summed:
            return pa.array(["0"] * len(ids), pa.string())
        if self.is_float:
            return pc.cast(pa.array(self.total[ids], pa.float64()), pa.string())
        if self.scale is not None:
            return pc.cast(from_unscaled(self.total[ids], pa.decimal128(38, self.scale)), pa.string())
        try:
            return pc.cast(pa.array(self.total[ids].astype(np.int64)), pa.string())
        except OverflowError:
            return pa.array([str(v) for v in self.total[ids]], pa.string())

    def restore_total(self, ids: np.ndarray, text: pa.Array) -> None:
        if not self.spec.summed:
            return
        if self.is_float:
            self.total[ids] = pc.cast(text, pa.float64()).to_numpy()
            return
        try:
            if self.scale is not None:
                self.total[ids] = to_unscaled(pc.cast(text, pa.decimal128(38, self.scale)), self.scale)
            else:
                self.total[ids] = pc.cast(text, pa.int64()).to_numpy().astype(object)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # beyond 64 bits: Python parses
            from decimal import Decimal

            scale = self.scale or 0
            self.total[ids] = np.array([int(Decimal(t).scaleb(scale)) for t in text.to_pylist()], object)


class _Counters:
    """Per annotation, fragment -> rows for every group: sorted codes and their counts."""

    def __init__(self) -> None:
        self.codes = np.zeros(0, np.int64)
        self.counts = np.zeros(0, np.int64)

    @staticmethod
    def encode(ids: np.ndarray, fragments: np.ndarray) -> np.ndarray:
        return (ids.astype(np.int64) << _SHIFT) | (fragments.astype(np.int64) + _OFFSET)

    def _slices(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For groups ``ids`` (ascending): list offsets, and the positions of their entries."""
        starts = np.searchsorted(self.codes, ids.astype(np.int64) << _SHIFT)
        ends = np.searchsorted(self.codes, (ids.astype(np.int64) + 1) << _SHIFT)
        lengths = ends - starts
        offsets = np.zeros(len(ids) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return offsets, np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])

    def _fragments(self, positions: np.ndarray) -> pa.Array:
        return pa.array(((self.codes[positions] & _LOW32) - _OFFSET).astype(np.int32))

    def lists(self, ids: np.ndarray) -> pa.Array:
        """The fragments of each group (``ids`` ascending), as ``list<int32>``."""
        offsets, positions = self._slices(ids)
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), self._fragments(positions))

    def stored(self, ids: np.ndarray) -> pa.Array:
        """The counters of each group (``ids`` ascending) as stored: ``list<struct<f, n>>``."""
        offsets, positions = self._slices(ids)
        entries = pa.StructArray.from_arrays(
            [self._fragments(positions), pa.array(self.counts[positions], pa.int64())], names=["f", "n"]
        )
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), entries).cast(_COUNTS)

    def add(self, codes: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Add (distinct, sorted) codes' counts; returns each one's count before and after."""
        at = np.searchsorted(self.codes, codes)
        found = at < len(self.codes)
        found[found] = self.codes[at[found]] == codes[found]
        before = np.zeros(len(codes), np.int64)
        before[found] = self.counts[at[found]]
        after = before + counts
        if (after < 0).any():
            raise AssertionError("a fragment counter went negative: a deletion without its row")
        self.counts[at[found]] = after[found]
        if not found.all():
            self.codes = np.insert(self.codes, at[~found], codes[~found])
            self.counts = np.insert(self.counts, at[~found], counts[~found])
        if (after == 0).any():
            keep = self.counts != 0
            self.codes, self.counts = self.codes[keep], self.counts[keep]
        return before, after


class ColumnarAggregate(AggregateShape):
    def __init__(self, node: Aggregate, input_schema: pa.Schema, annotations: Sequence[str]) -> None:
        super().__init__(node, input_schema, annotations)
        assert columnar_supports(self), "ColumnarAggregate: count, sum and avg over non-float keys"
        self.grouped = bool(node.groups)
        self._reset()
        self._announced = self.grouped  # a global aggregate's row exists before any input

    def _reset(self) -> None:
        self.index = KeyIndex(self.group_types)
        self.rows = np.zeros(0, np.int64)
        self.sums = {
            spec.index: _Sums(spec, argument)
            for spec in self.argument_specs()
            if (argument := self.argument_types[spec.index]) is not None
        }
        self.counters = {a: _Counters() for a in self.annotations}
        self.dirty = np.zeros(0, bool)  # groups changed since the state was last stored
        self._grow(0 if self.grouped else 1)

    # -- bookkeeping -----------------------------------------------------------------------------
    def _count(self) -> int:
        return len(self.index) if self.grouped else 1

    def _grow(self, needed: int) -> None:
        if needed <= len(self.rows):
            return
        capacity = max(needed, 2 * len(self.rows), 16)
        extra = capacity - len(self.rows)
        self.rows = np.concatenate([self.rows, np.zeros(extra, np.int64)])
        self.dirty = np.concatenate([self.dirty, np.zeros(extra, bool)])
        for sums in self.sums.values():
            sums.grow(capacity)

    def size(self) -> int:
        """Groups with rows (a global aggregate has its one)."""
        return int((self.rows[: self._count()] > 0).sum()) if self.grouped else 1

    def changed_count(self) -> int:
        return int(self.dirty.sum())

    def mark_stored(self) -> None:
        self.dirty[:] = False

    def _live(self) -> np.ndarray:
        count = self._count()
        return np.flatnonzero(self.rows[:count] > 0) if self.grouped else np.zeros(1, np.int64)

    # -- output ----------------------------------------------------------------------------------
    def _values(self, ids: np.ndarray) -> list[pa.Array]:
        """The aggregates' results for groups ``ids``, one column each."""
        columns = []
        for j, ((_, call), kind) in enumerate(zip(self.node.aggregates, self.output_types, strict=True)):
            if call.func == "count":
                counts = self.rows[ids] if call.arg is None else self.sums[j].non_null[ids]
                columns.append(pa.array(counts, pa.int64()))
                continue
            sums = self.sums[j]
            valid = sums.non_null[ids] > 0
            if call.func == "sum" and sums.scale is not None:
                columns.append(from_unscaled(sums.total[ids], kind, valid))
            elif call.func == "sum" and not pa.types.is_floating(kind):
                columns.append(pa.array(sums.total[ids].astype(np.int64), kind, mask=~valid))
            elif call.func == "sum":
                columns.append(pa.array(sums.float_total(ids), kind, mask=~valid))
            elif sums.scale is not None:  # avg of decimals, rounded half up to the result scale
                columns.append(from_unscaled(_rounded_mean(sums, ids, kind.scale), kind, valid))
            else:
                divisor = np.where(valid, sums.non_null[ids], 1).astype(np.float64)
                columns.append(pa.array(sums.float_total(ids) / divisor, kind, mask=~valid))
        return columns

    def _rows(self, ids: np.ndarray, values: list[pa.Array]) -> pa.Table:
        keys = self.index.take(ids) if self.grouped else pa.table({})
        columns = {name: keys.column(i) for i, name in enumerate(self.group_names)}
        columns.update({name: v for (name, _), v in zip(self.node.aggregates, values, strict=True)})
        return pa.table(columns) if columns else pa.table({"__none": pa.nulls(len(ids))})

    def _emit(
        self, parts: list[tuple[np.ndarray, list[pa.Array], dict[str, pa.Array], int]]
    ) -> AnnotatedDelta:
        """Rows of groups ``ids`` with their values and annotations, each with ``sign``."""
        if not parts:
            none = np.zeros(0, np.int64)
            parts = [(none, self._values(none), {a: c.lists(none) for a, c in self.counters.items()}, 1)]
        tables: list[pa.Table] = []
        signs: list[np.ndarray] = []
        annotations: dict[str, list[pa.Array]] = {a: [] for a in self.annotations}
        for ids, values, lists, sign in parts:
            tables.append(self._rows(ids, values))
            signs.append(np.full(len(ids), sign, np.int64))
            for a in self.annotations:
                annotations[a].append(lists[a])
        data = pa.concat_tables(tables)
        return AnnotatedDelta.build(
            data,
            np.concatenate(signs),
            {a: pa.concat_arrays(chunks).cast(FRAGMENTS) for a, chunks in annotations.items()},
        )

    def current(self) -> AnnotatedDelta:
        """Every output row now, each as one inserted row."""
        ids = self._live()
        return self._emit([(ids, self._values(ids), {a: c.lists(ids) for a, c in self.counters.items()}, 1)])

    # -- processing -------------------------------------------------------------------------------
    def apply(self, rows: AnnotatedDelta) -> AnnotatedDelta:
        partials = self.partials(rows) if rows.num_rows else None
        return self.merge(partials)

    def load(self, partials: Partials) -> AnnotatedDelta:
        """Add partial aggregates computed elsewhere (by Spark, over a snapshot)."""
        return self.merge(partials)

    def _numbers(self, keys: pa.Table) -> np.ndarray:
        if not self.grouped:
            return np.zeros(keys.num_rows, np.int64)
        return self.index.numbers(keys)

    def merge(self, partials: Partials | None) -> AnnotatedDelta:
        key_names = [group_column(i) for i in range(len(self.group_names))]
        groups = partials.groups if partials is not None else None
        announced_before = self._announced
        self._announced = True
        if groups is None or groups.num_rows == 0:
            if announced_before:
                return self._emit([])
            groups = None
        if groups is not None:
            numbers = self._numbers(groups.select(key_names))
            order = np.argsort(numbers, kind="stable")
            groups, ids = groups.take(pa.array(order)), numbers[order]
        else:
            ids = np.zeros(1, np.int64)  # the global aggregate's first row, over nothing
        self._grow(self._count())

        old_rows = self.rows[ids].copy()
        old_exists = old_rows > 0 if self.grouped else np.full(len(ids), announced_before)
        old_values = self._values(ids)
        old_lists = {a: c.lists(ids) for a, c in self.counters.items()}

        moved = np.zeros(len(ids), bool)  # an annotation changed: a counter crossed zero
        if groups is not None:
            assert partials is not None
            self.rows[ids] += groups.column(ROWS).to_numpy()
            if (self.rows[ids] < 0).any():
                raise AssertionError("a group has fewer than 0 rows: a deletion without its row")
            for sums in self.sums.values():
                sums.add(ids, groups)
            if self.grouped:  # a vanished group starts over if it comes back: no float residue
                for sums in self.sums.values():
                    sums.clear(ids[self.rows[ids] == 0])
            local = KeyIndex(self.group_types) if self.grouped else None
            if local is not None:
                local.numbers(groups.select(key_names))  # position in ``groups`` = local number
            for annotation, table in partials.counters.items():
                if table.num_rows == 0:
                    continue
                at = (
                    local.lookup(table.select(key_names))
                    if local is not None
                    else np.zeros(table.num_rows, np.int64)
                )
                codes = _Counters.encode(ids[at], table.column(FRAGMENT).to_numpy())
                counts = table.column(COUNT).to_numpy()
                sort = np.argsort(codes, kind="stable")
                before, after = self.counters[annotation].add(codes[sort], counts[sort])
                crossed = (before > 0) != (after > 0)
                moved[at[sort][crossed]] = True
        self.dirty[ids] = True

        new_exists = self.rows[ids] > 0 if self.grouped else np.ones(len(ids), bool)
        new_values = self._values(ids)
        changed = moved | (old_exists != new_exists)
        for old, new in zip(old_values, new_values, strict=True):
            equal = pc.fill_null(pc.equal(old, new), False).to_numpy(zero_copy_only=False)
            both_null = old.is_null().to_numpy(zero_copy_only=False) & new.is_null().to_numpy(
                zero_copy_only=False
            )
            changed |= ~(equal | both_null)
        gone, came = changed & old_exists, changed & new_exists
        return self._emit(
            [
                (
                    ids[gone],
                    _picked(old_values, gone),
                    {a: v.filter(pa.array(gone)) for a, v in old_lists.items()},
                    -1,
                ),
                (
                    ids[came],
                    _picked(new_values, came),
                    {a: c.lists(ids[came]) for a, c in self.counters.items()},
                    1,
                ),
            ]
        )

    # -- stored state ------------------------------------------------------------------------------
    def state_table(self, changes_only: bool = False) -> pa.Table:
        """In :func:`sketch_core.incremental.state.aggregate_state`'s format: every group with
        rows, or with ``changes_only`` the groups changed since :meth:`mark_stored` (a vanished
        group as a row with 0 rows)."""
        ids = np.flatnonzero(self.dirty[: self._count()]) if changes_only else self._live()
        columns: dict[str, pa.Array] = {}
        if self.grouped:
            keys = self.index.take(ids)
            for i, (name, kind) in enumerate(zip(self.group_names, self.group_types, strict=True)):
                columns[f"key_{name}"] = keys.column(i).cast(kind)
        columns["rows"] = pa.array(self.rows[ids], pa.int64())
        zeros = pa.array(np.zeros(len(ids), np.int64))
        for j in range(len(self.argument_types)):
            sums = self.sums.get(j)
            columns[f"acc{j}_total"] = (
                sums.total_text(ids) if sums else pa.array(["0"] * len(ids), pa.string())
            )
            columns[f"acc{j}_non_null"] = pa.array(sums.non_null[ids]) if sums else zeros
            for special in _SPECIALS:
                stored = sums.special.get(special) if sums else None
                columns[f"acc{j}_{special}"] = pa.array(stored[ids]) if stored is not None else zeros
        for a, counters in self.counters.items():
            columns[f"cnt_{a}"] = counters.stored(ids)
        return pa.table(columns)

    def restore(self, layers: Sequence[pa.Table]) -> None:
        """Load a whole state and its layers of changes, oldest first (either operator's)."""
        key_columns = [f"key_{name}" for name in self.group_names]
        self._reset()
        self._announced = True
        if self.grouped:
            table, ids = self._newest_rows(layers, key_columns)
        else:
            # Its one row, as the newest layer that changed it stored it.
            table = next((layer for layer in reversed(layers) if layer.num_rows), layers[0])
            table = table.slice(max(0, table.num_rows - 1))
            ids = np.zeros(table.num_rows, np.int64)
        self._grow(self._count())
        self.rows[ids] = table.column("rows").to_numpy()
        for j, sums in self.sums.items():
            sums.non_null[ids] = table.column(f"acc{j}_non_null").to_numpy()
            sums.restore_total(ids, table.column(f"acc{j}_total").combine_chunks())
            for special, counts in sums.special.items():
                counts[ids] = table.column(f"acc{j}_{special}").to_numpy()
        for a, counters in self.counters.items():
            lists = table.column(f"cnt_{a}").combine_chunks()
            owners = ids[pc.list_parent_indices(lists).to_numpy()]
            entries = pc.list_flatten(lists)
            codes = _Counters.encode(owners, entries.field("f").to_numpy())
            order = np.argsort(codes, kind="stable")
            counters.codes, counters.counts = codes[order], entries.field("n").to_numpy()[order]
        self.dirty[:] = False

    def _newest_rows(self, layers: Sequence[pa.Table], key_columns: list[str]) -> tuple[pa.Table, np.ndarray]:
        """The stored row of every group with rows (the newest layer that has the group wins),
        and each one's number. The whole state (the first layer) holds each group once, so it
        is numbered as it is; only the layers of changes (a run's groups each) are grouped, to
        keep each group's newest row, and looked up among the whole state's groups: grouping
        every stored row by its key columns was most of a cold start (seven columns, 380,000
        groups for TPC-H Q10 at SF10). A group that vanished keeps its number, with no rows."""
        whole = layers[0]
        ids = self._numbers(whole.select(key_columns))
        if len(layers) > 1:
            changes = pa.concat_tables(list(layers[1:]), promote_options="default")
            numbered = changes.append_column("__pos", pa.array(np.arange(changes.num_rows, dtype=np.int64)))
            newest = numbered.group_by(key_columns, use_threads=False).aggregate([("__pos", "max")])
            changes = changes.take(np.sort(newest.column("__pos_max").to_numpy()))
            changed = self._numbers(changes.select(key_columns))
            unchanged = ~np.isin(ids, changed)
            whole = pa.concat_tables([whole.filter(pa.array(unchanged)), changes], promote_options="default")
            ids = np.concatenate([ids[unchanged], changed])
        live = whole.column("rows").to_numpy() > 0
        return whole.filter(pa.array(live)), ids[live]


def _picked(values: list[pa.Array], mask: np.ndarray) -> list[pa.Array]:
    chosen = pa.array(mask)
    return [v.filter(chosen) for v in values]


def _rounded_mean(sums: _Sums, ids: np.ndarray, scale: int) -> np.ndarray:
    """avg of decimals at ``scale``, rounded half up (away from zero), as unscaled ints."""
    assert sums.scale is not None
    total = sums.total[ids] * 10 ** (scale - sums.scale)
    count = np.maximum(sums.non_null[ids], 1).astype(object)
    magnitude = (2 * np.abs(total) + count) // (2 * count)
    result: np.ndarray = np.where(total < 0, -magnitude, magnitude)
    return result
