"""An aggregation's groups, read from their stored state only when used (lazy state loading).

Turning every stored group into Python objects costs tens of microseconds a group: seconds for
a state of 100,000 groups, on every cold start, while a run touches only the groups its delta
reaches. Here the stored rows (a whole state and its layers of changes, merged: the newest row
of a group wins, a vanished group's row removes it) stay in Arrow, indexed by group key; a
group becomes an object the first time it is read, and lives in ``loaded`` from then on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from typing import Any, TypeVar

import pyarrow as pa

G = TypeVar("G")
Key = tuple[Any, ...]


class StoredGroups(MutableMapping[Key, G]):
    def __init__(
        self,
        layers: Sequence[pa.Table],
        keys_of: Callable[[pa.Table], list[Key]],
        build: Callable[[dict[str, Any]], G],
        vanished: Callable[[dict[str, Any]], bool] | None = None,
        rows_column: str = "rows",
        grouped: bool = True,
    ) -> None:
        """``keys_of``: the group key of each row of a stored table; ``build``: a group from a
        stored row; a row of a grouped aggregation whose ``rows_column`` is 0 says the group
        vanished."""
        self.table = (
            pa.concat_tables(list(layers), promote_options="default") if len(layers) > 1 else layers[0]
        )
        self._build = build
        self._index: dict[Key, int] = {}
        counts = self.table.column(rows_column).to_pylist()
        for row, key in enumerate(keys_of(self.table)):
            if grouped and counts[row] == 0:
                self._index.pop(key, None)
            else:
                self._index[key] = row
        self.loaded: dict[Key, G] = {}
        self._gone: set[Key] = set()  # stored groups deleted since
        self._untouched = len(self._index)  # stored groups neither loaded nor deleted

    def _is_untouched(self, key: Key) -> bool:
        return key in self._index and key not in self.loaded and key not in self._gone

    def preload(self, keys: Iterable[Key]) -> None:
        """Read these groups (those stored and not yet read) in one go."""
        wanted = [k for k in dict.fromkeys(keys) if self._is_untouched(k)]
        if not wanted:
            return
        rows = self.table.take(pa.array([self._index[k] for k in wanted], pa.int64())).to_pylist()
        for key, record in zip(wanted, rows, strict=True):
            self.loaded[key] = self._build(record)
        self._untouched -= len(wanted)

    def untouched_rows(self) -> pa.Table:
        """The stored rows of the groups not read or deleted since: still exactly as stored."""
        rows = [row for key, row in self._index.items() if key not in self.loaded and key not in self._gone]
        return self.table.take(pa.array(sorted(rows), pa.int64()))

    # -- the mapping ----------------------------------------------------------------------------
    def __getitem__(self, key: Key) -> G:
        group = self.loaded.get(key)
        if group is None:
            if not self._is_untouched(key):
                raise KeyError(key)
            self.preload([key])
            group = self.loaded[key]
        return group

    def __setitem__(self, key: Key, group: G) -> None:
        if self._is_untouched(key):
            self._untouched -= 1
        self.loaded[key] = group
        self._gone.discard(key)

    def __delitem__(self, key: Key) -> None:
        stored = key in self._index and key not in self._gone
        if key in self.loaded:
            del self.loaded[key]
        elif stored:
            self._untouched -= 1
        else:
            raise KeyError(key)
        if stored:
            self._gone.add(key)

    def __contains__(self, key: object) -> bool:
        return key in self.loaded or self._is_untouched(key)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[Key]:
        # The keys as of now: reading groups while iterating must not change what is visited.
        return iter([*self.loaded, *(k for k in self._index if k not in self.loaded and k not in self._gone)])

    def __len__(self) -> int:
        return len(self.loaded) + self._untouched
