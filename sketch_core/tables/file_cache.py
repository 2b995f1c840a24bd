"""Decoded columns of data files, kept in memory for repeated reads.

Iceberg never changes a data file after writing it, so a column read from a file once serves
every later read of any snapshot that still holds the file. Incremental maintenance reads the
same join partners' files run after run (IMP Sec. 5.5: ΔR ⋈ S reads S by key); from memory,
such a read is a filter instead of a Parquet decode. Least recently used columns are dropped
past the byte budget.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa

from sketch_core.arrow.membership import is_in


class FileCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._columns: OrderedDict[tuple[str, str], pa.ChunkedArray] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._sorted: dict[tuple[str, str], np.ndarray | None] = {}  # None: not sorted

    def read(self, path: str, columns: Sequence[str], load: Callable[[str, list[str]], pa.Table]) -> pa.Table:
        """``columns`` of the file at ``path``; ``load(path, missing)`` reads those not kept."""
        with self._lock:
            kept = {c: self._columns.get((path, c)) for c in columns}
            for c, array in kept.items():
                if array is not None:
                    self._columns.move_to_end((path, c))
        missing = [c for c, array in kept.items() if array is None]
        if missing:
            loaded = load(path, missing)
            for c in missing:
                kept[c] = loaded.column(c)
            self._remember(path, loaded)
        return pa.table({c: kept[c] for c in columns})

    def _remember(self, path: str, table: pa.Table) -> None:
        if table.nbytes > self.max_bytes:
            return
        with self._lock:
            for name in table.column_names:
                key = (path, name)
                if key not in self._columns:
                    self._columns[key] = table.column(name)
                    self._bytes += table.column(name).nbytes
            while self._bytes > self.max_bytes and self._columns:
                dropped_key, dropped = self._columns.popitem(last=False)
                self._bytes -= dropped.nbytes
                self._sorted.pop(dropped_key, None)

    def matching(self, path: str, column: pa.ChunkedArray, name: str, values: pa.Array) -> pa.Array:
        """Mask of ``column`` (file ``path``'s column ``name``, from :meth:`read`) holding one of
        ``values``. Data files are sorted by their table's sort key, so the join keys of a read
        are often sorted in the file: then two binary searches per value find the rows, instead
        of hashing every row of the file."""
        key = (path, name)
        with self._lock:
            known = key in self._sorted
            ordered = self._sorted.get(key)
        if not known:
            ordered = None
            if column.null_count == 0 and pa.types.is_integer(column.type):
                candidate = column.to_numpy()
                if bool(np.all(candidate[:-1] <= candidate[1:])):
                    ordered = candidate
            with self._lock:
                self._sorted[key] = ordered
        if ordered is None:
            return is_in(column, values)
        wanted = np.asarray(values.drop_null().to_numpy(zero_copy_only=False), dtype=ordered.dtype)
        starts = np.searchsorted(ordered, wanted, side="left")
        ends = np.searchsorted(ordered, wanted, side="right")
        mask = np.zeros(len(ordered), dtype=bool)
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            mask[start:end] = True
        return pa.array(mask)

    @property
    def bytes(self) -> int:
        return self._bytes
