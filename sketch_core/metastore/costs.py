"""What the cost models are fitted from: the recorded timings of a sketch's runs and queries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, Engine, and_, func, insert, select

from sketch_core.costs.choose import Choice
from sketch_core.costs.model import Observation
from sketch_core.metastore import schema as t
from sketch_core.metastore.sketches import sketch_id_of

# The newest runs of each kind a model is fitted from: recent behaviour, a bounded read.
RECENT_RUNS = 200
# The commits the query rate is measured over.
QUERY_WINDOW_COMMITS = 20


@dataclass(frozen=True)
class CostDecision:
    context: str  # "maintain", "query" or "refresh"
    action: str  # "incremental", "full" or "skip"
    reason: str
    decided_at: datetime


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

    def template_of(self, name: str) -> str:
        """The template key of the sketch's query (its plain runs are recorded under it)."""
        with self.engine.connect() as conn:
            sketch_id = sketch_id_of(conn, name)
            return str(
                conn.execute(
                    select(t.sketches.c.template_key).where(t.sketches.c.sketch_id == sketch_id)
                ).scalar_one()
            )

    def observations(self, name: str, recent: int = RECENT_RUNS) -> dict[str, list[Observation]]:
        """The sketch's recorded runs by operation (see :mod:`sketch_core.costs.model`): its
        captures, and recaptures (captures included), by table rows; incremental runs by delta
        rows (those that first built their state on Spark left out); its template's queries
        with this sketch (``use``) and without any (``plain``) by table rows."""
        runs = t.maintenance_runs
        queries = t.query_runs
        with self.engine.connect() as conn:
            sketch_id = sketch_id_of(conn, name)
            template = conn.execute(
                select(t.sketches.c.template_key).where(t.sketches.c.sketch_id == sketch_id)
            ).scalar_one()
            found: dict[str, list[Observation]] = {}
            found["capture"] = self._runs(conn, sketch_id, "capture", runs.c.table_rows, recent)
            # A recapture is a capture at the new snapshot: the captures count as its runs too.
            found["full"] = self._runs(conn, sketch_id, "full", runs.c.table_rows, recent) + found["capture"]
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
                # Runs that first built their state on Spark time mostly that one-off build,
                # not the incremental work that the runs after them do.
                runs.c.built_state.is_(False),
            )
            .order_by(runs.c.run_id.desc())
            .limit(recent)
        ).all()
        return [Observation(float(r.size), float(r.seconds)) for r in rows]

    # -- decisions -------------------------------------------------------------------------------
    def record_decision(self, name: str, context: str, choice: Choice) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                insert(t.cost_decisions).values(
                    sketch_id=sketch_id_of(conn, name),
                    context=context,
                    action=choice.action,
                    reason=choice.reason,
                    estimates=dict(choice.estimates),
                )
            )

    def last_decision(self, name: str) -> CostDecision | None:
        found = self.decisions(name, limit=1)
        return found[0] if found else None

    def decisions(
        self, name: str, context: str | None = None, limit: int | None = None
    ) -> list[CostDecision]:
        """The sketch's recorded decisions (in ``context`` only, when given), newest first."""
        d = t.cost_decisions.c
        with self.engine.connect() as conn:
            query = select(d.context, d.action, d.reason, d.decided_at).where(
                d.sketch_id == sketch_id_of(conn, name)
            )
            if context is not None:
                query = query.where(d.context == context)
            rows = conn.execute(query.order_by(d.decision_id.desc()).limit(limit)).all()
        return [CostDecision(r.context, r.action, r.reason, r.decided_at) for r in rows]

    def expected_queries(self, name: str, window: int = QUERY_WINDOW_COMMITS) -> float:
        """Runs of the sketch's query expected before its tables change again: the runs of its
        template since the ``window``-th newest commit to its tables, per commit since (1.0
        before there is any history: one report per load)."""
        c, tb, q = t.table_commits.c, t.tables.c, t.query_runs.c
        with self.engine.connect() as conn:
            sketch_id = sketch_id_of(conn, name)
            template, snapshots = conn.execute(
                select(t.sketches.c.template_key, t.sketch_versions.c.table_snapshots)
                .select_from(
                    t.sketches.join(
                        t.sketch_versions, t.sketch_versions.c.sketch_id == t.sketches.c.sketch_id
                    )
                )
                .where(t.sketches.c.sketch_id == sketch_id)
                .order_by(t.sketch_versions.c.version.desc())
                .limit(1)
            ).one()
            times = (
                conn.execute(
                    select(c.committed_at)
                    .select_from(t.table_commits.join(t.tables, tb.table_id == c.table_id))
                    .where(tb.name.in_(list(snapshots)))
                    .order_by(c.seq.desc())
                    .limit(window)
                )
                .scalars()
                .all()
            )
            if len(times) < 2:
                return 1.0
            since = times[-1]
            runs = conn.execute(
                select(func.count()).where(q.template_key == template, q.ran_at > since)
            ).scalar_one()
        return int(runs) / (len(times) - 1)
