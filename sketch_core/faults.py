"""Named points where the reliability tests inject faults into a real process.

``SKETCH_FAULT=<point>[:<action>]`` arms one point; when the process reaches it:

- ``kill`` (the default): SIGKILL, the process dies on the spot (no cleanup, no ``finally``);
- ``drop-connection``: the metastore connection ``reached`` is given is terminated by the
  server and the process finds it gone, as after a network cut (at ``publish`` and
  ``publish-ack`` only);
- ``fail-job``: a Spark job that fails in Spark (``raise_error``), at points given a session;
- ``raise``: :class:`InjectedFaultError`, a transient error (a retry may help).

The points, in the order a capture or maintenance reaches them:

- ``state-written``: the operator state files are written, nothing is published yet;
- ``publish``: inside the metastore transaction that publishes the version, before its commit;
- ``publish-ack``: the transaction committed; its outcome not yet back with the publisher;
- ``published``: the version is committed, the caller has not been told;
- ``spark-job``: a capture's or recapture's Spark job is about to run;
- ``state-job``: the Spark job computing a sketch's first operator state is about to run;
- ``maintenance-planned``: a maintenance run has fixed its target sequence, nothing is read;
- ``query-pinned``: a query has pinned its snapshots, nothing is read.

In-process tests can also ``hook`` a callback onto a point (a barrier, a load committed
there): interleavings are then made, not left to timing.

Each armed fault fires once per process. Unset (always, outside the tests), ``reached`` is two
dictionary lookups.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sketch_core.errors import SketchError

log = logging.getLogger(__name__)

POINTS = (
    "state-written",
    "publish",
    "publish-ack",
    "published",
    "spark-job",
    "state-job",
    "maintenance-planned",
    "query-pinned",
)
ACTIONS = ("kill", "drop-connection", "fail-job", "raise")
_fired: set[tuple[str, str]] = set()
_hooks: dict[str, Callable[[], None]] = {}


@contextmanager
def hook(point: str, callback: Callable[[], None]) -> Iterator[None]:
    """Call ``callback`` whenever a thread of this process reaches ``point``, while inside."""
    if point not in POINTS:
        raise ValueError(f"unknown fault point {point!r}; points: {', '.join(POINTS)}")
    _hooks[point] = callback
    try:
        yield
    finally:
        _hooks.pop(point, None)


class InjectedFaultError(SketchError):
    """A fault injected at a named point (``SKETCH_FAULT``), as a transient failure would be."""

    transient = True

    def __init__(self, point: str) -> None:
        self.point = point
        super().__init__(f"fault injected at {point}", hint="unset SKETCH_FAULT; a retry succeeds")


def armed() -> tuple[str, str] | None:
    """The armed (point, action), or None."""
    spec = os.environ.get("SKETCH_FAULT")
    if not spec:
        return None
    point, _, action = spec.partition(":")
    return point, action or "kill"


def reached(point: str, connection: Any = None, spark: Any = None) -> None:
    """Fire the fault armed at ``point``, if any (``connection``: the SQLAlchemy connection of
    the transaction the point is in, for ``drop-connection``; ``spark``: the session whose job
    is about to run, for ``fail-job``)."""
    callback = _hooks.get(point)
    if callback is not None:
        callback()
    fault = armed()
    if fault is None or fault[0] != point or fault in _fired:
        return
    _fired.add(fault)  # a fault, not a standing failure: the retry in this process goes through
    action = fault[1]
    log.warning("fault injected at %s: %s", point, action)
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "drop-connection" and connection is not None:
        _terminate(connection)
    elif action == "fail-job" and spark is not None:
        spark.range(1).selectExpr(f"raise_error('fault injected at {point}')").collect()
    elif action == "raise":
        raise InjectedFaultError(point)


def _terminate(connection: Any) -> None:
    """Have the server end ``connection``'s session from another one, then use it: the
    driver finds it gone (``OperationalError``), as after a network cut."""
    from sqlalchemy import text

    pid = connection.connection.dbapi_connection.info.backend_pid
    with connection.engine.connect() as other:
        other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        other.commit()
    connection.execute(text("SELECT 1"))


def reset() -> None:
    """Re-arm the faults that fired in this process (for tests that arm one again)."""
    _fired.clear()
