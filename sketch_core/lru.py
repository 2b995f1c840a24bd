"""A bounded map that forgets its least recently used entries.

The package keeps many things in memory between calls (planned files per snapshot, parsed
table metadata, samples, engines, proof answers, parsed queries, Spark views...), each bounded
so that a long-lived service does not grow; this is their one shape.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar, overload

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
D = TypeVar("D")


class LruMap(Generic[K, V]):
    """At most ``capacity`` entries (a callable is read at each ``put``: a setting that may
    change; 0 keeps nothing). ``get`` and ``put`` make an entry the most recently used; the
    least recently used go first. Safe across threads: each call holds the map's lock."""

    def __init__(self, capacity: int | Callable[[], int]) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def capacity(self) -> int:
        return self._capacity() if callable(self._capacity) else self._capacity

    @overload
    def get(self, key: K) -> V | None: ...

    @overload
    def get(self, key: K, default: D) -> V | D: ...

    def get(self, key: K, default: object = None) -> object:
        """The entry for ``key`` (``default`` when there is none), now the most recently used."""
        with self._lock:
            if key not in self._entries:
                return default
            self._entries.move_to_end(key)
            return self._entries[key]

    def put(self, key: K, value: V) -> list[tuple[K, V]]:
        """Keep ``value`` for ``key`` as the most recently used; returns what was dropped to
        stay within the capacity (the caller may have to release it)."""
        capacity = self.capacity
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            return [self._entries.popitem(last=False) for _ in range(len(self._entries) - capacity)]

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        """The entry for ``key``, made by ``make`` under the lock when there is none (for
        values that must not be made twice, such as connection pools)."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
            value = self._entries[key] = make()
            for _ in range(len(self._entries) - self.capacity):
                self._entries.popitem(last=False)
            return value

    def pop(self, key: K) -> V | None:
        with self._lock:
            return self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def keys(self) -> list[K]:
        """The keys, least recently used first."""
        with self._lock:
            return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def forget_after_fork(self) -> list[V]:
        """In a forked child: empty the map and return what it held, without the lock (the
        thread that held it at the fork does not exist in the child)."""
        self._lock = threading.Lock()
        values = list(self._entries.values())
        self._entries.clear()
        return values
