"""What the cost models are fitted from: the recorded timings of a sketch's runs and queries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Engine,
    Select,
    Text,
    and_,
    case,
    func,
    insert,
    literal,
    select,
    union_all,
)

from sketch_core.costs.choose import Choice
from sketch_core.costs.model import QUERY_OPERATIONS, Observation
from sketch_core.errors import SketchNotFoundError
from sketch_core.metastore import schema as t
from sketch_core.metastore.engine import reading
from sketch_core.metastore.sketches import newest_per_sketch, sketch_id_of

# The newest runs of each kind a model is fitted from: recent behaviour, a bounded read.
RECENT_RUNS = 200
# The commits the query rate is measured over.
QUERY_WINDOW_COMMITS = 20


@dataclass(frozen=True)
class RecordedRuns:
    """What a sketch's cost models are fitted from."""

    template: str | None  # the key its plain runs are recorded under
    observations: dict[str, list[Observation]]


@dataclass(frozen=True)
class CostDecision:
    context: str  # "maintain", "query" or "refresh"
    action: str  # "incremental", "full", "skip", or (a query applying a valid sketch) "use"
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
        """One query run, with the sketch version it used (None: it ran without one);
        ``seconds``: the query's own (without the maintenance done on its way)."""
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
        captures, and recaptures (captures included), by table rows; incremental runs by delta
        rows (those that first built their state on Spark left out); its template's queries
        with this sketch (``use``) and without any (``plain``) by table rows."""
        return self.recorded_runs(name, recent).observations

    def recorded_runs(self, name: str, recent: int = RECENT_RUNS) -> RecordedRuns:
        """What a fit reads (:meth:`observations`, and the sketch's template), in one statement:
        models are refitted on the query path, where every round trip to the metastore is paid
        (the nine this took were ~10 ms of a report on a busy machine)."""
        runs, queries, sketches = t.maintenance_runs, t.query_runs, t.sketches
        target = select(sketches.c.sketch_id, sketches.c.template_key).where(sketches.c.name == name).cte()
        size = case((runs.c.strategy == "incremental", runs.c.delta_rows), else_=runs.c.table_rows)
        ranked = (
            select(
                runs.c.strategy.label("operation"),
                func.coalesce(size, 0).label("size"),
                runs.c.seconds,
                func.row_number()
                .over(partition_by=runs.c.strategy, order_by=runs.c.run_id.desc())
                .label("nth"),
            )
            .join_from(runs, target, runs.c.sketch_id == target.c.sketch_id)
            .where(
                runs.c.strategy.in_(("capture", "full", "incremental")),
                runs.c.status == "succeeded",
                runs.c.seconds.is_not(None),
                runs.c.table_rows.is_not(None),
                # Runs that first built their state on Spark time mostly that one-off build,
                # not the incremental work that the runs after them do.
                runs.c.built_state.is_(False),
            )
            .subquery()
        )
        no_template = literal(None, Text).label("template")
        no_run = literal(0).label("run_id")  # maintenance runs are not aged
        maintained = select(ranked.c.operation, ranked.c.size, ranked.c.seconds, no_template, no_run).where(
            ranked.c.nth <= recent
        )

        def recent_queries(operation: str, where: ColumnElement[bool]) -> Select[Any]:
            newest = (
                select(queries.c.table_rows, queries.c.seconds, queries.c.run_id)
                .join_from(queries, target, where)
                .order_by(queries.c.run_id.desc())
                .limit(recent)
                .subquery()
            )
            return select(
                literal(operation).label("operation"),
                newest.c.table_rows,
                newest.c.seconds,
                no_template,
                newest.c.run_id,
            )

        used = recent_queries("use", queries.c.sketch_id == target.c.sketch_id)
        # Runs without a sketch. A dropped sketch's runs lose their sketch (ON DELETE SET NULL)
        # but keep its version: they read the sketch's files, and are no plain runs.
        plain = recent_queries(
            "plain",
            and_(
                queries.c.template_key == target.c.template_key,
                queries.c.sketch_id.is_(None),
                queries.c.sketch_version.is_(None),
            ),
        )
        # One row names the template, and says that the sketch exists.
        known = select(
            literal("").label("operation"), literal(0), literal(0.0), target.c.template_key, literal(0)
        )
        with reading(self.engine) as conn:
            rows = conn.execute(union_all(known, maintained, used, plain)).all()
        found: dict[str, list[Observation]] = {
            op: [] for op in ("capture", "full", "incremental", "use", "plain")
        }
        template: str | None = None
        exists = False
        # A query run's age: how many of the fetched runs of the sketch's query (either way) are
        # newer (see sketch_core.costs.model.QUERY_HALF_LIFE).
        query_runs = sorted((row[4] for row in rows if row[0] in QUERY_OPERATIONS), reverse=True)
        age = {run_id: float(rank) for rank, run_id in enumerate(query_runs)}
        for operation, row_size, seconds, row_template, run_id in rows:
            if operation == "":
                exists, template = True, row_template
            else:
                found[operation].append(Observation(float(row_size), float(seconds), age.get(run_id, 0.0)))
        if not exists:
            raise SketchNotFoundError(name)
        # A recapture is a capture at the new snapshot: the captures count as its runs too.
        found["full"] += found["capture"]
        return RecordedRuns(template, found)

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
        with reading(self.engine) as conn:
            query = select(d.context, d.action, d.reason, d.decided_at).where(
                d.sketch_id == sketch_id_of(conn, name)
            )
            if context is not None:
                query = query.where(d.context == context)
            rows = conn.execute(query.order_by(d.decision_id.desc()).limit(limit)).all()
        return [CostDecision(r.context, r.action, r.reason, r.decided_at) for r in rows]

    def last_decisions(self, names: Sequence[str]) -> dict[str, CostDecision]:
        """The newest recorded decision of each sketch of ``names`` that has one, in one read."""
        d = t.cost_decisions.c
        with reading(self.engine) as conn:
            rows = conn.execute(newest_per_sketch(t.cost_decisions, d.decision_id, names)).all()
        return {r.name: CostDecision(r.context, r.action, r.reason, r.decided_at) for r in rows}

    def last_uses(self, names: Sequence[str]) -> dict[str, tuple[int, int]]:
        """``last_use`` of each sketch of ``names`` that a query used, in one read."""
        q = t.query_runs.c
        with reading(self.engine) as conn:
            rows = conn.execute(newest_per_sketch(t.query_runs, q.run_id, names)).all()
        return {r.name: (int(r.files_read), int(r.files_total)) for r in rows}

    def last_use(self, name: str) -> tuple[int, int] | None:
        """The data files the newest query that used sketch ``name`` read, of the files in
        total (None: no query used it yet)."""
        q = t.query_runs.c
        with reading(self.engine) as conn:
            sketch_id = sketch_id_of(conn, name)
            row = conn.execute(
                select(q.files_read, q.files_total)
                .where(q.sketch_id == sketch_id)
                .order_by(q.run_id.desc())
                .limit(1)
            ).first()
        return (int(row.files_read), int(row.files_total)) if row is not None else None

    def runs_by_template(self, since: datetime) -> dict[str, int]:
        """How many times each query template ran since ``since`` (with a sketch or without)."""
        q = t.query_runs.c
        statement = select(q.template_key, func.count()).where(q.ran_at >= since).group_by(q.template_key)
        with reading(self.engine) as conn:
            return {key: int(count) for key, count in conn.execute(statement)}

    def expected_queries(self, name: str, window: int = QUERY_WINDOW_COMMITS) -> float:
        """Runs of the sketch's query expected before its tables change again: the runs of its
        template since the ``window``-th newest commit to its tables, per commit since (1.0
        before there is any history: one report per load). One statement, as it is read on
        the query path."""
        c, tb, q = t.table_commits.c, t.tables.c, t.query_runs.c
        sketches, versions = t.sketches, t.sketch_versions
        newest = (
            select(sketches.c.template_key, versions.c.table_snapshots)
            .join_from(sketches, versions, versions.c.sketch_id == sketches.c.sketch_id)
            .where(sketches.c.name == name)
            .order_by(versions.c.version.desc())
            .limit(1)
            .cte()
        )
        tables = select(func.jsonb_object_keys(newest.c.table_snapshots))
        recent = (
            select(c.seq, c.committed_at)
            .join_from(t.table_commits, t.tables, tb.table_id == c.table_id)
            .where(tb.name.in_(tables))
            .order_by(c.seq.desc())
            .limit(window)
            .cte()
        )
        since = select(recent.c.committed_at).order_by(recent.c.seq).limit(1).scalar_subquery()
        template = select(newest.c.template_key).scalar_subquery()
        runs = select(func.count()).where(q.template_key == template, q.ran_at > since).scalar_subquery()
        commits = select(func.count()).select_from(recent).scalar_subquery()
        with reading(self.engine) as conn:
            found, count = conn.execute(select(commits, runs)).one()
        if found < 2:
            return 1.0
        return int(count) / (int(found) - 1)
