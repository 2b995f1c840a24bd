"""Repository for how each sketch's attributes were chosen (sql/0009_samples.sql): the strategy,
the estimates it ranked the candidates by, and how the captured sketch compares with them."""

from __future__ import annotations

from collections.abc import Sequence
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

    def get_many(self, names: Sequence[str]) -> dict[str, ChoiceRecord]:
        """The choice records of the sketches of ``names`` that have one, in one read."""
        c, s = t.attribute_choices.c, t.sketches.c
        query = (
            select(s.name, c.strategy, c.estimates, c.outcome)
            .join(t.sketches, s.sketch_id == c.sketch_id)
            .where(s.name.in_(list(names)))
        )
        with reading(self.engine) as conn:
            rows = conn.execute(query).all()
        return {r.name: _choice_record(r) for r in rows}

    def get(self, name: str) -> ChoiceRecord | None:
        c = t.attribute_choices.c
        with reading(self.engine) as conn:
            sketch_id = sketch_id_of(conn, name)
            row = conn.execute(
                select(c.strategy, c.estimates, c.outcome).where(c.sketch_id == sketch_id)
            ).first()
        return None if row is None else _choice_record(row)


def _choice_record(row: Any) -> ChoiceRecord:
    return ChoiceRecord(row.strategy, dict(row.estimates), dict(row.outcome) if row.outcome else None)
