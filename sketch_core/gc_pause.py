"""Pausing Python's cyclic garbage collector while a large, acyclic structure is built."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """No automatic collection inside (reference counting still frees what is dropped).

    Building hundreds of thousands of tuples triggers a collection every few hundred
    allocations, each walking the young objects, and the full ones the whole heap: work that
    finds nothing to free when nothing built is in a cycle. Re-entrant; the collector is on
    again on leaving the outermost, if it was on when it was entered.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
