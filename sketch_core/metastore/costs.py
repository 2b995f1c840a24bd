"""What the cost models are fitted from: the recorded timings of a sketch's runs and queries."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Connection, Engine, and_, func, insert, select

from sketch_core.costs.model import Observation
from sketch_core.metastore import schema as t
from sketch_core.metastore.sketches import sketch_id_of

# The newest runs of each kind a model is fitted from: recent behaviour, a bounded read.
RECENT_RUNS = 200


class CostRecords:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def record_query(
        self,
        template_key: str,
        sketch: tuple[str, int] | None,
        table_rows: int,
        files_read: int,
        files_total: int,
        seconds: float,
    ) -> None:
        """One query run, with the sketch version it used (None: it ran without one)."""
        with self.engine.begin() as conn:
            sketch_id = sketch_id_of(conn, sketch[0]) if sketch is not None else None
            conn.execute(
                insert(t.query_runs).values(
                    template_key=template_key,
                    sketch_id=sketch_id,
                    sketch_version=sketch[1] if sketch is not None else None,
                    table_rows=table_rows,
                    files_read=files_read,
                    files_total=files_total,
                    seconds=seconds,
                )
            )

    def observations(self, name: str, recent: int = RECENT_RUNS) -> dict[str, list[Observation]]:
        """The sketch's recorded runs by operation (see :mod:`sketch_core.costs.model`): its
        captures and recaptures by table rows, incremental runs by delta rows, its template's
        queries with this sketch (``use``) and without any (``plain``) by table rows."""
        runs = t.maintenance_runs
        queries = t.query_runs
        with self.engine.connect() as conn:
            sketch_id = sketch_id_of(conn, name)
            template = conn.execute(
                select(t.sketches.c.template_key).where(t.sketches.c.sketch_id == sketch_id)
            ).scalar_one()
            found: dict[str, list[Observation]] = {}
            for operation, size in (("capture", runs.c.table_rows), ("full", runs.c.table_rows)):
                found[operation] = self._runs(conn, sketch_id, operation, size, recent)
            found["incremental"] = self._runs(conn, sketch_id, "incremental", runs.c.delta_rows, recent)
            used = queries.c.sketch_id == sketch_id
            plain = and_(queries.c.template_key == template, queries.c.sketch_id.is_(None))
            for operation, where in (("use", used), ("plain", plain)):
                rows = conn.execute(
                    select(queries.c.table_rows, queries.c.seconds)
                    .where(where)
                    .order_by(queries.c.run_id.desc())
                    .limit(recent)
                ).all()
                found[operation] = [Observation(float(r.table_rows), float(r.seconds)) for r in rows]
        return found

    @staticmethod
    def _runs(
        conn: Connection, sketch_id: int, strategy: str, size: ColumnElement[Any], recent: int
    ) -> list[Observation]:
        runs = t.maintenance_runs
        rows = conn.execute(
            select(func.coalesce(size, 0).label("size"), runs.c.seconds)
            .where(
                runs.c.sketch_id == sketch_id,
                runs.c.strategy == strategy,
                runs.c.status == "succeeded",
                runs.c.seconds.is_not(None),
                runs.c.table_rows.is_not(None),
            )
            .order_by(runs.c.run_id.desc())
            .limit(recent)
        ).all()
        return [Observation(float(r.size), float(r.seconds)) for r in rows]
