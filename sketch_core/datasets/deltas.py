"""Delta generators: inserts, deletes, mixed batches and updates of a chosen size.

Inserts are fresh rows from the table's own distribution (sampled rows with new keys); deletes
remove existing rows, named exactly by key in a Spark SQL predicate; an update deletes rows and
re-inserts them with other values under the same keys, in one commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sketch_core.errors import DatasetError
from sketch_core.tables.deltas import read_files
from sketch_core.tables.pinned import DataFileInfo, PinnedSnapshot
from sketch_core.tables.service import TableService

DeltaKind = Literal["insert", "delete", "mixed", "update"]


@dataclass(frozen=True)
class Delta:
    table: str
    kind: DeltaKind
    inserts: pa.Table | None
    delete_where: str | None
    deleted_rows: int

    @property
    def inserted_rows(self) -> int:
        return 0 if self.inserts is None else self.inserts.num_rows

    def apply(self, tables: TableService) -> int:
        """Commit the delta; returns its commit sequence number."""
        if self.kind == "insert":
            assert self.inserts is not None
            return tables.append(self.table, self.inserts)
        if self.kind == "delete":
            assert self.delete_where is not None
            return tables.delete(self.table, self.delete_where)
        assert self.inserts is not None and self.delete_where is not None
        return tables.overwrite(self.table, self.inserts, where=self.delete_where)


def _literal(value: object) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def _in_list(column: str, values: Sequence[object]) -> str:
    return f"{column} IN ({', '.join(_literal(v) for v in values)})"


def _values_predicate(column: str, values: list[Any]) -> str:
    """``column IN (...)``, with runs of consecutive integers as BETWEEN (a clustered delete of
    many rows stays a short predicate)."""
    ordered = sorted(set(values))
    if not ordered or not all(isinstance(v, int) and not isinstance(v, bool) for v in ordered):
        return _in_list(column, ordered)
    runs: list[tuple[int, int]] = []
    for value in ordered:
        if runs and value == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], value)
        else:
            runs.append((value, value))
    singles = [lo for lo, hi in runs if hi - lo < 2] + [hi for lo, hi in runs if hi - lo == 1]
    ranges = [f"{column} BETWEEN {lo} AND {hi}" for lo, hi in runs if hi - lo >= 2]
    return _balanced_or(ranges + ([_in_list(column, sorted(singles))] if singles else []))


def _balanced_or(clauses: list[str]) -> str:
    """``clauses`` OR'ed as a balanced tree: a left-deep chain of thousands of ORs would nest
    thousands deep in the parser."""
    while len(clauses) > 1:
        clauses = [
            f"({clauses[i]} OR {clauses[i + 1]})" if i + 1 < len(clauses) else clauses[i]
            for i in range(0, len(clauses), 2)
        ]
    return clauses[0]


def rows_predicate(keys: pa.Table, key_columns: tuple[str, ...]) -> str:
    """A predicate matching exactly the rows with these keys (one or two key columns).

    Two-column keys are grouped by the first column, giving ``(k1 = x AND k2 IN (...)) OR ...``
    clauses; a clause's group keeps the nesting shallow even for thousands of rows.
    """
    if keys.num_rows == 0:
        raise DatasetError("no rows to name in a predicate")
    if len(key_columns) == 1:
        return _values_predicate(key_columns[0], keys.column(key_columns[0]).to_pylist())
    if len(key_columns) != 2:
        raise DatasetError(f"keys of {len(key_columns)} columns are not supported; use one or two")
    first, second = key_columns
    groups: dict[Any, list[Any]] = {}
    for a, b in zip(keys.column(first).to_pylist(), keys.column(second).to_pylist(), strict=True):
        groups.setdefault(a, []).append(b)
    return _balanced_or(
        [f"({first} = {_literal(a)} AND {_in_list(second, sorted(bs))})" for a, bs in sorted(groups.items())]
    )


def grouped_rows_predicate(
    victims: pa.Table, pool: pa.Table, key_columns: tuple[str, str], complete: tuple[Any, Any]
) -> str:
    """:func:`rows_predicate` for two-column keys, short for runs of whole groups.

    ``pool`` holds every row of the table whose first key lies strictly between the bounds of
    ``complete`` (None: unbounded), and ``victims`` are some of its rows. A group (first-key
    value) inside those bounds whose rows are all victims is named by its first key alone, and
    a run of such groups, consecutive among the pool's first keys, as one BETWEEN: no other
    group of the table lies between them. So a clustered delete of thousands of rows is a range
    and two partial groups, not thousands of clauses (PyIceberg plans a delete's predicate
    with a visitor per node: 10,000 lineitem rows as ``(l_orderkey = x AND l_linenumber IN
    (...)) OR ...`` took a minute and a half per delete at TPC-H SF10).
    """
    first = key_columns[0]
    low, high = complete
    in_pool = _group_sizes(pool.column(first))
    doomed = _group_sizes(victims.column(first))
    whole = {
        group
        for group, count in doomed.items()
        if in_pool.get(group) == count and (low is None or group > low) and (high is None or group < high)
    }
    clauses: list[str] = []
    run: list[Any] = []
    for group in sorted(in_pool):  # runs of whole groups, consecutive among the pool's groups
        if group in whole:
            run.append(group)
            continue
        clauses.extend(_group_run(first, run))
        run = []
    clauses.extend(_group_run(first, run))
    partial = victims.filter(
        pc.invert(pc.is_in(victims.column(first), pa.array(sorted(whole), victims.schema.field(first).type)))
    )
    if partial.num_rows:
        clauses.append(rows_predicate(partial, key_columns))
    if not clauses:
        raise DatasetError("no rows to name in a predicate")
    return _balanced_or(clauses)


def _group_sizes(column: pa.ChunkedArray) -> dict[Any, int]:
    counts = pc.value_counts(column.combine_chunks())
    return dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True))


def _group_run(column: str, run: list[Any]) -> list[str]:
    if not run:
        return []
    if len(run) == 1:
        return [f"{column} = {_literal(run[0])}"]
    return [f"{column} BETWEEN {_literal(run[0])} AND {_literal(run[-1])}"]


# Above this many rows, a delta is drawn from a random run of the table's files holding about
# this many rows, not from the whole table: TPC-H SF10's lineitem read whole for each delta
# took 14 GB and most of a benchmark cell's minute.
READ_ROWS_LIMIT = 2_000_000
# Files reaching into the key range of the run read for a delta (rows appended to old orders,
# say) are read too, only their rows in that range, up to this many times the limit in rows.
REACHING_ROWS_FACTOR = 10
# Bounds (exclusive; None: unbounded) of a table's first key column within which the rows a
# delta draws from are every row of the table; None when that is not known.
Complete = tuple[Any, Any] | None


class DeltaGenerator:
    """Makes deltas for one table from its current snapshot, reproducibly from ``seed``.

    Deleted rows are drawn at random from the whole table (or, above ``read_rows_limit`` rows,
    from a random run of its files in key order), or with ``clustered`` as one run of
    consecutive rows in the table's sort order (cancelling a batch of orders, say): then a
    copy-on-write delete rewrites one or two data files, not nearly every file of a large table.
    Inserted rows get keys above the table's largest.
    """

    def __init__(
        self,
        tables: TableService,
        table: str,
        key_columns: tuple[str, ...],
        seed: int = 0,
        clustered: bool = False,
        read_rows_limit: int = READ_ROWS_LIMIT,
    ) -> None:
        self.tables = tables
        self.table = table
        self.key_columns = key_columns
        self.clustered = clustered
        self.read_rows_limit = read_rows_limit
        self.rng = np.random.default_rng(seed)
        self._top_key: Any = None

    def _pinned(self) -> PinnedSnapshot:
        """The table's current snapshot; notes its largest key (from the files' bounds)."""
        pin = self.tables.pin(self.table)
        self._top_key = pin.column_bounds().get(self.key_columns[-1], (None, None))[1]
        return pin

    def _current(self) -> pa.Table:
        return self._current_pool()[0]

    def _current_pool(self) -> tuple[pa.Table, Complete]:
        """The rows a delta draws from, and the bounds of the first key within which they are
        every row of the table (see :data:`Complete`)."""
        pin = self._pinned()
        if pin.record_count <= self.read_rows_limit or len(pin.files) < 2:
            rows = self.tables.read_arrow(self.table)
            # A clustered delta is a run in the table's key order, whatever order its files hold.
            return (self._in_key_order(rows) if self.clustered else rows), (None, None)
        first = self.key_columns[0]
        bounded = [f for f in pin.files if f.lower.get(first) is not None]
        ordered = sorted(bounded, key=lambda f: f.lower[first]) + [f for f in pin.files if f not in bounded]
        per_file = max(1, pin.record_count // len(ordered))
        count = min(len(ordered), max(1, -(-self.read_rows_limit // per_file)))
        start = int(self.rng.integers(0, len(ordered) - count + 1))
        run = ordered[start : start + count]
        if any(f.lower.get(first) is None or f.upper.get(first) is None for f in run):
            return read_files(run, pin.schema), None
        # The keys from the run's first file up to the next file's first key, every row of the
        # table among them: the run's, and those of files reaching in (rows appended to old
        # orders later, say, in files spanning much of the key range), read by that range.
        low = run[0].lower[first]
        following = ordered[start + count] if start + count < len(ordered) else None
        high = following.lower.get(first) if following is not None else None
        reaching = [f for f in pin.files if f not in run and _may_reach(f, first, low, high)]
        if sum(f.record_count for f in reaching) > REACHING_ROWS_FACTOR * self.read_rows_limit:
            return read_files(run, pin.schema), None  # a table in no key order: the run's own rows
        inside = pc.field(first) > low if high is None else (pc.field(first) > low) & (pc.field(first) < high)
        return self._in_key_order(read_files([*run, *reaching], pin.schema, row_filter=inside)), (low, high)

    def _in_key_order(self, rows: pa.Table) -> pa.Table:
        return rows.sort_by([(c, "ascending") for c in self.key_columns])

    def _sample(self, current: pa.Table, size: int, replace: bool) -> pa.Table:
        if size < 0:
            raise DatasetError(f"delta size must be non-negative, got {size}")
        if current.num_rows == 0 or (not replace and size > current.num_rows):
            raise DatasetError(
                f"{self.table} has {current.num_rows} rows; cannot take {size}",
                hint="use a smaller delta or load more data",
            )
        if self.clustered and not replace:
            start = int(self.rng.integers(0, current.num_rows - size + 1))
            return current.slice(start, size)  # files are read in key order, each sorted
        picks = self.rng.choice(current.num_rows, size=size, replace=replace)
        return current.take(pa.array(np.sort(picks)))

    def _fresh_rows(self, current: pa.Table, size: int) -> pa.Table:
        rows = self._sample(current, size, replace=True)
        last = self.key_columns[-1]
        top = pc.max(current.column(last)).as_py()
        if self._top_key is not None and (top is None or self._top_key > top):
            top = self._top_key  # the table's largest key, when only some files were read
        fresh = pa.array(np.arange(top + 1, top + 1 + size), type=current.schema.field(last).type)
        return rows.set_column(rows.schema.get_field_index(last), last, fresh)

    def inserts(self, size: int) -> Delta:
        fresh = self._fresh_rows(self._current(), size)
        return Delta(self.table, "insert", fresh, None, 0)

    def _newest(self, count: int) -> pa.Table:
        """The rows whose (integer) key is among the table's ``count`` largest keys: the ones
        loaded last, read from the files that can hold them only."""
        pin = self._pinned()
        last = self.key_columns[-1]
        if not pa.types.is_integer(pin.schema.field(last).type):
            raise DatasetError(f"newest rows need an integer key; {last} of {self.table} is not")
        if self._top_key is None:
            return pin.schema.empty_table()
        floor = self._top_key - count
        files = [f for f in pin.files if f.upper.get(last) is None or f.upper[last] > floor]
        rows = read_files(files, pin.schema)
        return rows.filter(pc.greater(rows.column(last), floor))

    def _pool(self, among_newest: int | None) -> tuple[pa.Table, Complete]:
        """The rows a delta draws from: the table's (see :meth:`_current_pool`), or its newest."""
        if among_newest is None:
            return self._current_pool()
        return self._newest(among_newest), None

    def _victims_predicate(self, victims: pa.Table, pool: pa.Table, complete: Complete) -> str:
        if len(self.key_columns) == 2 and complete is not None:
            first, second = self.key_columns
            return grouped_rows_predicate(victims, pool, (first, second), complete)
        return rows_predicate(victims, self.key_columns)

    def deletes(self, size: int, among_newest: int | None = None) -> Delta:
        """``size`` rows deleted; with ``among_newest``, drawn from the rows with that many
        largest keys (orders cancelled soon after they were loaded), not the whole table."""
        pool, complete = self._pool(among_newest)
        victims = self._sample(pool, size, replace=False)
        return Delta(self.table, "delete", None, self._victims_predicate(victims, pool, complete), size)

    def mixed(self, size: int, among_newest: int | None = None) -> Delta:
        """``size // 2`` rows inserted and the rest deleted (``among_newest``: see :meth:`deletes`)."""
        current, complete = self._pool(among_newest)
        removed = size - size // 2
        victims = self._sample(current, removed, replace=False)
        fresh = self._fresh_rows(current, size // 2)
        return Delta(self.table, "mixed", fresh, self._victims_predicate(victims, current, complete), removed)

    def updates(self, size: int) -> Delta:
        current = self._current()
        victims = self._sample(current, size, replace=False)
        donors = self._sample(current, size, replace=True)
        updated = victims
        for name in current.column_names:
            if name not in self.key_columns:
                index = updated.schema.get_field_index(name)
                updated = updated.set_column(index, name, donors.column(name))
        return Delta(self.table, "update", updated, rows_predicate(victims, self.key_columns), size)


def _may_reach(info: DataFileInfo, column: str, low: Any, high: Any) -> bool:
    """Whether the file may hold ``column`` values strictly between ``low`` and ``high``
    (None: unbounded above); a file without bounds may."""
    lower, upper = info.lower.get(column), info.upper.get(column)
    if lower is None or upper is None:
        return True
    return bool(upper > low and (high is None or lower < high))
