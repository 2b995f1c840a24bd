"""An incremental run that fails is recorded as failed before its error goes on: the status
and the cost model see it, and nothing was published."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sketch_core.metastore.sketches import FinishedRun, SketchRepository

log = logging.getLogger(__name__)


@contextmanager
def failure_recorded(
    sketches: SketchRepository, name: str, from_version: int, delta_rows: int, started: float
) -> Iterator[None]:
    """Record the incremental run of ``name`` from ``from_version``, begun at ``started``, as
    failed when the block raises (then raise on)."""
    try:
        yield
    except Exception as exc:
        failed = FinishedRun(
            "incremental", from_version, "failed", delta_rows, time.perf_counter() - started, str(exc)
        )
        try:
            sketches.record_run(name, failed, None)
        except Exception as unrecorded:  # the original error is the one to report
            log.warning("could not record the failed run of %s: %s", name, unrecorded)
        raise
