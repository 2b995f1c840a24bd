"""Repository for the state memory budget's choices: one current mode per sketch, with why."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, delete, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from sketch_core.metastore import schema as t
from sketch_core.metastore.engine import reading
from sketch_core.metastore.sketches import sketch_id_of

STATE_MODES = ("full", "top_m", "none")


@dataclass(frozen=True)
class StateMode:
    mode: str  # "full", "top_m" or "none"
    keep_top: int | None  # the m of "top_m"
    full_bytes: int  # the state's size in full, as last measured
    top_m_bytes: int | None  # cut to the top m (None: nothing to cut)
    reason: str
    decided_at: datetime


class StateModeRepository:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def set(
        self,
        name: str,
        mode: str,
        keep_top: int | None,
        full_bytes: int,
        top_m_bytes: int | None,
        reason: str,
    ) -> None:
        if mode not in STATE_MODES:
            raise ValueError(f"state mode {mode!r} is not one of {', '.join(STATE_MODES)}")
        values = {
            "mode": mode,
            "keep_top": keep_top if mode == "top_m" else None,
            "full_bytes": full_bytes,
            "top_m_bytes": top_m_bytes,
            "reason": reason,
            "decided_at": func.clock_timestamp(),
        }
        with self.engine.begin() as conn:
            statement = pg_insert(t.state_modes).values(sketch_id=sketch_id_of(conn, name), **values)
            conn.execute(statement.on_conflict_do_update(index_elements=["sketch_id"], set_=values))

    def clear(self, name: str) -> None:
        """The sketch has no mode any more (as one never allocated)."""
        with self.engine.begin() as conn:
            sketch = select(t.sketches.c.sketch_id).where(t.sketches.c.name == name).scalar_subquery()
            conn.execute(delete(t.state_modes).where(t.state_modes.c.sketch_id == sketch))

    def get(self, name: str) -> StateMode | None:
        return self.all([name]).get(name)

    def all(self, names: list[str] | None = None) -> dict[str, StateMode]:
        """The current mode of each sketch that has one (of ``names``, when given)."""
        m, s = t.state_modes.c, t.sketches.c
        query = select(s.name, m.mode, m.keep_top, m.full_bytes, m.top_m_bytes, m.reason, m.decided_at).join(
            t.sketches, s.sketch_id == m.sketch_id
        )
        if names is not None:
            query = query.where(s.name.in_(names))
        with reading(self.engine) as conn:
            rows = conn.execute(query).all()
        return {
            r.name: StateMode(r.mode, r.keep_top, int(r.full_bytes), r.top_m_bytes, r.reason, r.decided_at)
            for r in rows
        }


def describe_state_mode(mode: StateMode) -> str:
    """One line for the status page and the CLI: the mode, its size, and why."""
    kept = f"top {mode.keep_top}" if mode.mode == "top_m" else mode.mode
    size = mode.top_m_bytes if mode.mode == "top_m" else (0 if mode.mode == "none" else mode.full_bytes)
    return f"{kept} ({size or 0:,} bytes, decided {mode.decided_at:%Y-%m-%d %H:%M:%S}): {mode.reason}"
