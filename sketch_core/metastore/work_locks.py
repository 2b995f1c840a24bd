"""One sketch's captures, recaptures and maintenance runs, one at a time, decided before the
Spark work.

Two runs of one sketch can start together from anywhere: two Airflow tasks, two DAGs, the
sketches page, a CLI beside a scheduler. Publishing is keyed by the commit sequence, so they
never publish twice, but without coordination both do the Spark work and the second throws
its result away. So a run holds a PostgreSQL advisory lock keyed by the sketch's name while it
plans, computes and publishes; a second run waits for it, and then finds the work done (the
sketch is at the commit it was to reach) and does none, saying why.

The lock is session-level, on a connection of its own: PostgreSQL releases it when the
holder's session ends, however its process ended, so a killed run never blocks the sketch. It
is re-entrant in this process (a maintenance run that falls back to a recapture takes it once).
Keys use the two-key form with a class of their own, apart from the run-liveness locks.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, Row, text

from sketch_core.errors import SketchBusyError
from sketch_core.metastore.run_liveness import release_session_lock

log = logging.getLogger(__name__)

WORK_LOCK_CLASS = 0x5357  # "SW"
_TRY = text("SELECT pg_try_advisory_lock(:lock_class, hashtext(:name))")
_UNLOCK = text("SELECT pg_advisory_unlock(:lock_class, hashtext(:name))")
# The lock and, once held, the sketch's definition and newest version (sql/0018): one round trip.
_TRY_AND_READ = text("SELECT * FROM sketch.lock_and_read_sketch(:lock_class, :name)")
# The unlock as the driver takes it, for the pipeline of HeldLock.execute_then_release.
_RAW_UNLOCK = "SELECT pg_advisory_unlock(%s, hashtext(%s))"
# What the holder is doing, for the message of a run that waits (its "running" row, if any).
_HOLDER = text(
    """
    SELECT r.strategy, r.started_at FROM sketch.maintenance_runs r
      JOIN sketch.sketches s ON s.sketch_id = r.sketch_id
     WHERE s.name = :name AND r.status = 'running'
     ORDER BY r.run_id DESC LIMIT 1
    """
)


@dataclass
class HeldLock:
    """A thread's hold on a sketch's work lock: the lock's session (its connection, in
    autocommit), how deeply the thread re-entered it, and whether it was let go of early."""

    name: str
    connection: Connection
    thread: int
    depth: int = 1
    released: bool = False

    def execute_then_release(self, statement: str, params: Sequence[Any]) -> Any:
        """Run ``statement`` (driver placeholders) in a transaction of its own on the lock's
        session and return its first row; the outermost hold then lets go of the lock, all in
        one round trip: ``BEGIN; statement; COMMIT; unlock`` pipelined. The unlock follows the
        commit, so a run that waited for the lock sees what the statement wrote. A publisher
        saves the round trips of a pooled connection's transaction and of the unlock.

        On an error nothing after the statement ran: its transaction is rolled back and the
        lock is still held (released as usual), unless the session itself is gone or cannot roll
        back (then it is ended, and the lock with it). The driver's exception propagates."""
        raw = self.connection.connection.dbapi_connection
        assert raw is not None, "the lock's connection is open while it is held"
        release = self.depth == 1
        try:
            with raw.pipeline():
                raw.execute("BEGIN")
                cursor = raw.execute(statement, params)
                raw.execute("COMMIT")
                if release:
                    raw.execute(_RAW_UNLOCK, (WORK_LOCK_CLASS, self.name))
            row = cursor.fetchone()
        except Exception:
            if not (raw.closed or raw.broken) and _rolled_back(raw, self.name):
                raise  # the lock is still held: released as usual when the block ends
            self.released = True  # the session ended (or ends here), and its lock with it
            self.connection.invalidate()
            raise
        self.released = release
        return row


def _rolled_back(raw: Any, name: str) -> bool:
    """Whether the failed transaction on the lock's session ``raw`` could be rolled back."""
    try:
        raw.execute("ROLLBACK")
    except Exception as exc:
        log.warning("the work lock's session of %s could not roll back (%s): ending it", name, exc)
        return False
    return True


class WorkLocks:
    """The per-sketch work locks of one service."""

    def __init__(self, engine: Engine, poll_seconds: float = 0.5) -> None:
        self.engine = engine
        self.poll_seconds = poll_seconds
        self._held: dict[str, HeldLock] = {}
        self._lock = threading.Lock()

    def held(self, name: str) -> HeldLock | None:
        """This thread's hold on the lock of sketch ``name``, if it has one."""
        with self._lock:
            hold = self._held.get(name)
        return (
            hold if hold is not None and hold.thread == threading.get_ident() and not hold.released else None
        )

    @contextlib.contextmanager
    def holding(self, name: str, what: str, wait_seconds: float) -> Iterator[bool]:
        """Hold the lock of sketch ``name`` for ``what`` (a capture, a maintenance run); yields
        whether this run had to wait for another one first. Raises :class:`SketchBusyError`
        after ``wait_seconds`` of waiting."""
        with self.holding_and_reading(name, what, wait_seconds, read=False) as (waited, _):
            yield waited

    @contextlib.contextmanager
    def holding_and_reading(
        self, name: str, what: str, wait_seconds: float, *, read: bool = True
    ) -> Iterator[tuple[bool, Row[Any] | None]]:
        """:meth:`holding`, which also yields the sketch's row as ``sketch.lock_and_read_sketch``
        returns it, read once the lock is held, in the same round trip (with ``read``; None when
        this thread held the lock already: then nothing was read)."""
        me = threading.get_ident()
        with self._lock:
            hold = self._held.get(name)
            reentered = hold is not None and hold.thread == me
            if hold is not None and reentered:
                # A hold let go of early ends with its block: nothing of it runs after the release.
                assert not hold.released, f"the lock of {name} was released before its block ended"
                hold.depth += 1
        if hold is not None and reentered:
            try:
                yield False, None
            finally:
                with self._lock:
                    hold.depth -= 1
            return
        conn, waited, row = self._acquire(name, what, wait_seconds, read)
        hold = HeldLock(name, conn, me)
        with self._lock:
            self._held[name] = hold
        try:
            yield waited, row
        finally:
            with self._lock:
                del self._held[name]
            if hold.released or conn.invalidated:  # let go of already (or its session ended)
                conn.close()
            else:
                values = {"lock_class": WORK_LOCK_CLASS, "name": name}
                release_session_lock(conn, _UNLOCK, values, f"the work on {name}")

    def _acquire(
        self, name: str, what: str, wait_seconds: float, read: bool
    ) -> tuple[Connection, bool, Row[Any] | None]:
        values = {"lock_class": WORK_LOCK_CLASS, "name": name}

        def attempt() -> tuple[bool, Row[Any] | None]:
            if not read:
                return bool(conn.execute(_TRY, values).scalar_one()), None
            row = conn.execute(_TRY_AND_READ, values).one()
            return bool(row.locked), row

        # In autocommit: a session-level lock needs no transaction, and taking and releasing
        # it is then two round trips, not six (each in a BEGIN ... COMMIT of its own).
        conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            started = time.monotonic()
            waited = False
            while not (tried := attempt())[0]:
                conn.commit()  # the session lock does not need the transaction; no idle one kept
                if not waited:
                    waited = True
                    log.info("%s of %s waits: %s", what, name, self._holder(conn, name))
                if time.monotonic() - started > wait_seconds:
                    raise SketchBusyError(name, what, self._holder(conn, name), wait_seconds)
                time.sleep(self.poll_seconds)
            conn.commit()  # the session-level lock outlives the transaction
        except BaseException:
            conn.invalidate()  # never back to the pool holding a lock
            conn.close()
            raise
        if waited:
            log.info("%s of %s goes on after %.1f s", what, name, time.monotonic() - started)
        return conn, waited, tried[1]

    @staticmethod
    def _holder(conn: Connection, name: str) -> str:
        row = conn.execute(_HOLDER, {"name": name}).first()
        conn.commit()
        if row is None:
            return "another run of it is under way"
        return f"a {row.strategy} run of it started at {row.started_at:%Y-%m-%d %H:%M:%S} is under way"
