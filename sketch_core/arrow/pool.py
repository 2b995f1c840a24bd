"""Which allocator Arrow uses in a process that runs the service.

PyArrow's wheels allocate with mimalloc by default. After a garbage collection frees many Arrow
buffers, mimalloc purges the freed pages during the next allocations, and the first reads after
it pay for that: reading a 48 KB delta file took 20-45 ms instead of 1.5 ms, so a warm
incremental run of TPC-H Q1 (SF1, 1,000-row delta) took 50-65 ms instead of 16-17 ms, and
50,000-row deltas 80-110 ms against 38-40 ms with the C library's allocator (jemalloc: 55 ms).
So the service switches the process's default pool to the system allocator, unless told
otherwise (``SKETCH_ARROW_MEMORY_POOL``). Buffers already allocated keep the pool they came from.
"""

from __future__ import annotations

import logging

import pyarrow as pa

from sketch_core.config import ARROW_MEMORY_POOLS
from sketch_core.errors import ConfigurationError

log = logging.getLogger(__name__)


def use_arrow_memory_pool(name: str) -> None:
    """Make ``name`` Arrow's default pool in this process (``default``: leave it as it is)."""
    if name == "default":
        return
    factories = {
        "system": pa.system_memory_pool,
        "jemalloc": pa.jemalloc_memory_pool,
        "mimalloc": pa.mimalloc_memory_pool,
    }
    if name not in factories:
        raise ConfigurationError(
            f"unknown Arrow memory pool {name!r}", hint=f"choose one of {', '.join(ARROW_MEMORY_POOLS)}"
        )
    try:
        pool = factories[name]()
    except NotImplementedError as exc:  # this pyarrow build lacks the allocator
        raise ConfigurationError(
            f"this pyarrow build has no {name} allocator",
            hint="set SKETCH_ARROW_MEMORY_POOL=system or default",
        ) from exc
    if pa.default_memory_pool().backend_name != pool.backend_name:
        pa.set_memory_pool(pool)
        log.debug("Arrow allocates with %s", name)
