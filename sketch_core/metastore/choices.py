"""Repository for how each sketch's attributes were chosen (sql/0009_samples.sql): the strategy,
the estimates it ranked the candidates by, and how the captured sketch compares with them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from sketch_core.metastore import schema as t
from sketch_core.metastore.engine import reading
from sketch_core.metastore.sketches import sketch_id_of


@dataclass(frozen=True)
class ChoiceRecord:
    strategy: str
    estimates: dict[str, Any]  # table -> attribute -> {"selectivity", "low", "high"}
    outcome: dict[str, Any] | None  # table -> {"attribute", "estimated", "actual", "rse"}


class AttributeChoiceRepository:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def record(
        self, name: str, strategy: str, estimates: dict[str, Any], outcome: dict[str, Any] | None
    ) -> None:
        """Replace the sketch's choice record (one per sketch: its latest capture's)."""
        values = {"strategy": strategy, "estimates": estimates, "outcome": outcome}
        with self.engine.begin() as conn:
            sketch_id = sketch_id_of(conn, name)
            statement = pg_insert(t.attribute_choices).values(sketch_id=sketch_id, **values)
            conn.execute(
                statement.on_conflict_do_update(
                    index_elements=[t.attribute_choices.c.sketch_id],
                    set_={**values, "decided_at": func.clock_timestamp()},
                )
            )

    def get(self, name: str) -> ChoiceRecord | None:
        c = t.attribute_choices.c
        with reading(self.engine) as conn:
            sketch_id = sketch_id_of(conn, name)
            row = conn.execute(
                select(c.strategy, c.estimates, c.outcome).where(c.sketch_id == sketch_id)
            ).first()
        if row is None:
            return None
        return ChoiceRecord(row.strategy, dict(row.estimates), dict(row.outcome) if row.outcome else None)
