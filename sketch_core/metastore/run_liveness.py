"""Telling a maintenance run that is still running from one whose process died.

A long run (a capture, a recapture) is recorded as ``running`` when it starts and finished when
it ends; a process killed in between (SIGKILL, an OOM kill, a lost host) never finishes its row,
which would then say ``running`` for ever. So the process holds a session-level advisory lock
keyed by the run while it runs, on a connection of its own: PostgreSQL releases it when that
session ends, however the process ended. A reader settles a ``running`` row whose lock it can
take as failed: nothing holds it any more. This works across hosts (no pid to check) and costs a
connection per run under way.

Locks use PostgreSQL's two-key form (class, run), a key space apart from the one-key locks of
migrations and commit numbering.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from sqlalchemy import Connection, Engine, Executable, text

log = logging.getLogger(__name__)

RUN_LOCK_CLASS = 0x534B  # "SK"
ABANDONED = (
    "abandoned: the process running it ended before recording its end (killed, or its host or "
    "connection lost); a version it published stands, and the next run starts afresh"
)
# Settles the sketch's running rows that no session holds the lock of. The lock taken to test
# is transaction-scoped, released at once with the update's commit.
SETTLE = text(
    """
    UPDATE sketch.maintenance_runs
       SET status = 'failed', error = :error, finished_at = now()
     WHERE run_id IN (
               SELECT run_id FROM sketch.maintenance_runs
                WHERE sketch_id = ANY(:sketch_ids) AND status = 'running'
           )
       AND pg_try_advisory_xact_lock(:lock_class, (run_id % 2147483647)::integer)
    RETURNING run_id
    """
)


def release_session_lock(conn: Connection, unlock: Executable, values: dict[str, Any], what: str) -> None:
    """Release a session-level lock held on ``conn`` (its own connection), and close it; a
    release that fails ends the session instead, which releases the lock too."""
    try:
        conn.execute(unlock, values)
        conn.commit()
    except Exception as exc:
        log.warning("could not release the lock of %s: %s", what, exc)
        conn.invalidate()
    finally:
        conn.close()


def _key(run_id: int) -> dict[str, int]:
    return {"lock_class": RUN_LOCK_CLASS, "run": run_id % 2147483647}


class RunLocks:
    """The advisory locks this process holds for its runs under way."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._held: dict[int, Connection] = {}
        self._lock = threading.Lock()

    def start(self, insert_run: Executable) -> int:
        """Insert the run's row (``insert_run`` returns its run id) and hold its lock until
        :meth:`release` (or until this process ends). Both in one transaction: no reader sees
        the row before the lock is held."""
        conn = self.engine.connect()
        try:
            run_id = int(conn.execute(insert_run).scalar_one())
            conn.execute(text("SELECT pg_advisory_lock(:lock_class, :run)"), _key(run_id))
            conn.commit()  # the session-level lock outlives the transaction
        except Exception:
            conn.invalidate()  # never back to the pool holding a lock
            conn.close()
            raise
        with self._lock:
            self._held[run_id] = conn
        return run_id

    def release(self, run_id: int) -> None:
        with self._lock:
            conn = self._held.pop(run_id, None)
        if conn is not None:
            release_session_lock(
                conn, text("SELECT pg_advisory_unlock(:lock_class, :run)"), _key(run_id), f"run {run_id}"
            )

    @staticmethod
    def settle(conn: Connection, *sketch_ids: int) -> list[int]:
        """Mark the sketches' running rows whose process is gone as failed; their run ids."""
        values = {"sketch_ids": list(sketch_ids), "error": ABANDONED, "lock_class": RUN_LOCK_CLASS}
        return [int(r.run_id) for r in conn.execute(SETTLE, values)]
