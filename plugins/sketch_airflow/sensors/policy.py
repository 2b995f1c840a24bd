"""``SketchPolicySensor``: waits until a sketch's maintenance policy fires.

Deferrable by default: between checks the wait lives in the triggerer
(:class:`~sketch_airflow.triggers.policy.SketchPolicyTrigger`), not in a worker slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator

from sketch_airflow.hooks.sketch import DEFAULT_CONN_ID, SketchMetastoreHook
from sketch_airflow.triggers.policy import SketchPolicyTrigger, due_sketches
from sketch_core.errors import InfrastructureError

if TYPE_CHECKING:
    from airflow.sdk import Context


class SketchPolicySensor(BaseSensorOperator):
    """Succeeds when the policy of one of ``names`` (default: any sketch) fires; returns the
    sketches due, with the reasons (pushed to XCom)."""

    template_fields: Sequence[str] = ("names",)

    def __init__(
        self,
        *,
        names: Sequence[str] | None = None,
        sketch_conn_id: str = DEFAULT_CONN_ID,
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.names = names
        self.sketch_conn_id = sketch_conn_id
        self.deferrable = deferrable
        self._due: dict[str, str] = {}

    def _check(self) -> dict[str, str]:
        hook = SketchMetastoreHook(sketch_conn_id=self.sketch_conn_id)
        try:
            return due_sketches(hook, list(self.names) if self.names is not None else None)
        finally:
            hook.close()

    def poke(self, context: Context) -> bool:
        self._due = self._check()
        return bool(self._due)

    def execute(self, context: Context) -> dict[str, str] | None:
        if not self.deferrable:
            super().execute(context)
            return self._due
        due = self._check()
        if due:
            return due
        self.defer(
            trigger=SketchPolicyTrigger(
                names=list(self.names) if self.names is not None else None,
                sketch_conn_id=self.sketch_conn_id,
                poke_interval=float(self.poke_interval),
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=float(self.timeout)) if self.timeout else None,
        )
        return None

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, str]:
        if event.get("status") != "fired":
            # Checks kept failing (the metastore unreachable): transient, so Airflow retries.
            raise InfrastructureError(f"waiting for sketch policies failed: {event.get('message')}")
        due: dict[str, str] = event["sketches"]
        self.log.info("policies fired: %s", due)
        return due
