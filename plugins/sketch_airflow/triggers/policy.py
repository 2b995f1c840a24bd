"""``SketchPolicyTrigger``: waits in the triggerer until a sketch's maintenance policy fires.

Checking a policy is a few metastore queries (no Spark), run in a thread every
``poke_interval`` seconds; the task that deferred holds no worker slot meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from asgiref.sync import sync_to_async

from sketch_airflow.hooks.sketch import DEFAULT_CONN_ID, SketchMetastoreHook


def due_sketches(hook: SketchMetastoreHook, names: Sequence[str] | None) -> dict[str, str]:
    """The sketches (of ``names``, default all) whose policy fires now, with the reasons."""
    return {c.name: c.decision.reason for c in hook.get_conn().check_policies(names) if c.fire}


class SketchPolicyTrigger(BaseTrigger):
    """Fires once the policy of one of ``names`` (default: any sketch) fires.

    The event's payload: ``{"status": "fired", "sketches": {name: reason}}``, or
    ``{"status": "error", "message": ...}`` when checking failed ``max_failures`` times in a
    row (a metastore that stays unreachable).
    """

    def __init__(
        self,
        names: Sequence[str] | None = None,
        sketch_conn_id: str = DEFAULT_CONN_ID,
        poke_interval: float = 30.0,
        max_failures: int = 10,
    ) -> None:
        super().__init__()
        self.names = list(names) if names is not None else None
        self.sketch_conn_id = sketch_conn_id
        self.poke_interval = poke_interval
        self.max_failures = max_failures

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "names": self.names,
                "sketch_conn_id": self.sketch_conn_id,
                "poke_interval": self.poke_interval,
                "max_failures": self.max_failures,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        hook = SketchMetastoreHook(sketch_conn_id=self.sketch_conn_id)
        failures = 0
        try:
            while True:
                try:
                    due = await sync_to_async(due_sketches)(hook, self.names)
                    failures = 0
                except Exception as exc:  # transient until it keeps failing
                    failures += 1
                    self.log.warning("checking sketch policies failed (%d): %s", failures, exc)
                    if failures >= self.max_failures:
                        yield TriggerEvent({"status": "error", "message": str(exc)})
                        return
                    due = {}
                if due:
                    yield TriggerEvent({"status": "fired", "sketches": due})
                    return
                await asyncio.sleep(self.poke_interval)
        finally:
            await sync_to_async(hook.close)()
