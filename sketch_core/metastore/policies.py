"""Repository for maintenance policies, their decisions, and report announcements.

Reading a sketch's policy facts is three small queries on one connection: its newest version,
the commits to its tables since, and the announcements of the reports its policy names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from sketch_core.costs.arrivals import Commit
from sketch_core.metastore import schema as t
from sketch_core.metastore.engine import reading
from sketch_core.metastore.sketches import newest_per_sketch, sketch_id_of
from sketch_core.policy.evaluate import Announcement, PolicyFacts

# Commits (or report runs) a prediction looks back on: enough for a pattern, a bounded read.
RECENT_HISTORY = 200


@dataclass(frozen=True)
class DecisionRecord:
    fired: bool
    reason: str
    policy: dict[str, Any]
    decided_at: datetime


class PolicyRepository:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- policies --------------------------------------------------------------------------------
    def set_policy(self, name: str, policy: dict[str, Any] | None) -> None:
        """Attach ``policy`` (its JSON form) to the sketch, replacing any; None detaches it."""
        with self.engine.begin() as conn:
            sketch_id = sketch_id_of(conn, name)
            p = t.sketch_policies
            if policy is None:
                conn.execute(p.delete().where(p.c.sketch_id == sketch_id))
                return
            statement = pg_insert(p).values(sketch_id=sketch_id, policy=policy, updated_at=func.now())
            conn.execute(
                statement.on_conflict_do_update(
                    index_elements=[p.c.sketch_id], set_={"policy": policy, "updated_at": func.now()}
                )
            )

    def policy(self, name: str) -> dict[str, Any] | None:
        with reading(self.engine) as conn:
            sketch_id = sketch_id_of(conn, name)
            p = t.sketch_policies
            value = conn.execute(select(p.c.policy).where(p.c.sketch_id == sketch_id)).scalar()
        return dict(value) if value is not None else None

    def policies(self) -> dict[str, dict[str, Any]]:
        """Every stored policy, by sketch name."""
        p, sk = t.sketch_policies.c, t.sketches.c
        with reading(self.engine) as conn:
            rows = conn.execute(
                select(sk.name, p.policy).select_from(
                    t.sketch_policies.join(t.sketches, sk.sketch_id == p.sketch_id)
                )
            ).all()
        return {name: dict(policy) for name, policy in rows}

    # -- facts -----------------------------------------------------------------------------------
    def facts(self, name: str, reports: Sequence[str] = ()) -> PolicyFacts:
        """What the sketch's policy is checked against (see :class:`PolicyFacts`)."""
        v, c, tb = t.sketch_versions.c, t.table_commits.c, t.tables.c
        with reading(self.engine) as conn:
            sketch_id = sketch_id_of(conn, name)
            newest = conn.execute(
                select(v.seq, v.created_at, v.table_snapshots)
                .where(v.sketch_id == sketch_id)
                .order_by(v.version.desc())
                .limit(1)
            ).first()
            if newest is None:
                return PolicyFacts(None, 0, 0)
            sequence, published_at, snapshots = newest
            commits, rows = conn.execute(
                select(func.count(), func.coalesce(func.sum(c.added_rows + c.deleted_rows), 0))
                .select_from(t.table_commits.join(t.tables, tb.table_id == c.table_id))
                .where(c.seq > sequence, tb.name.in_(list(snapshots)))
            ).one()
            announcements: list[Announcement] = []
            if reports:
                a = t.report_announcements.c
                rows_ = conn.execute(
                    select(a.report, a.due_at, a.announced_at, a.ends_at).where(
                        a.report.in_(list(reports)), a.announced_at > published_at
                    )
                ).all()
                announcements = [Announcement(r, due, at, ends) for r, due, at, ends in rows_]
        return PolicyFacts(published_at, int(commits), int(rows), tuple(announcements))

    # -- histories, for predictions -------------------------------------------------------------
    def commit_history(self, tables: Sequence[str], recent: int = RECENT_HISTORY) -> dict[str, list[Commit]]:
        """Each table's newest commits (time and rows inserted plus deleted), oldest first."""
        c, tb = t.table_commits.c, t.tables.c
        found: dict[str, list[Commit]] = {}
        with reading(self.engine) as conn:
            for table in tables:
                rows = conn.execute(
                    select(c.committed_at, c.added_rows + c.deleted_rows)
                    .select_from(t.table_commits.join(t.tables, tb.table_id == c.table_id))
                    .where(tb.name == table, t.LIVE_TABLES)
                    .order_by(c.seq.desc())
                    .limit(recent)
                ).all()
                found[table] = [Commit(at.timestamp(), int(n)) for at, n in reversed(rows)]
        return found

    def table_rows(self, tables: Sequence[str]) -> int:
        """The tables' rows now: the total their newest commits recorded."""
        c, tb = t.table_commits.c, t.tables.c
        newest = (
            select(c.table_id, func.max(c.seq).label("seq"))
            .select_from(t.table_commits.join(t.tables, tb.table_id == c.table_id))
            .where(tb.name.in_(list(tables)))
            .group_by(c.table_id)
            .subquery()
        )
        with reading(self.engine) as conn:
            total = conn.execute(
                select(func.coalesce(func.sum(c.total_rows), 0)).select_from(
                    t.table_commits.join(newest, newest.c.seq == c.seq)
                )
            ).scalar_one()
        return int(total)

    def report_due_times(self, report: str, recent: int = RECENT_HISTORY) -> list[datetime]:
        """When the report's newest announced runs were due, oldest first."""
        a = t.report_announcements.c
        with reading(self.engine) as conn:
            rows = conn.execute(
                select(a.due_at).where(a.report == report).order_by(a.due_at.desc()).limit(recent)
            ).scalars()
            return sorted(rows)

    # -- decisions -------------------------------------------------------------------------------
    def record_decision(
        self, name: str, fired: bool, reason: str, policy: dict[str, Any], at: datetime
    ) -> None:
        """Log a decision. A check that again does not fire updates the previous not-fired row
        instead of adding one, so a sensor polling every few seconds does not grow the log."""
        d = t.policy_decisions
        with self.engine.begin() as conn:
            sketch_id = sketch_id_of(conn, name)
            last = conn.execute(
                select(d.c.decision_id, d.c.fired)
                .where(d.c.sketch_id == sketch_id)
                .order_by(d.c.decision_id.desc())
                .limit(1)
            ).first()
            values = {"fired": fired, "reason": reason, "policy": policy, "decided_at": at}
            if last is not None and not fired and not last.fired:
                conn.execute(update(d).where(d.c.decision_id == last.decision_id).values(**values))
            else:
                conn.execute(insert(d).values(sketch_id=sketch_id, **values))

    def last_decisions(self, names: Sequence[str]) -> dict[str, DecisionRecord]:
        """The newest decision of each sketch of ``names`` that has one, in one read."""
        d = t.policy_decisions
        with reading(self.engine) as conn:
            rows = conn.execute(newest_per_sketch(d, d.c.decision_id, names)).all()
        return {r.name: DecisionRecord(bool(r.fired), r.reason, dict(r.policy), r.decided_at) for r in rows}

    def decisions(self, name: str, limit: int = 20) -> list[DecisionRecord]:
        """The sketch's newest decisions, newest first."""
        d = t.policy_decisions
        with reading(self.engine) as conn:
            sketch_id = sketch_id_of(conn, name)
            rows = conn.execute(
                select(d.c.fired, d.c.reason, d.c.policy, d.c.decided_at)
                .where(d.c.sketch_id == sketch_id)
                .order_by(d.c.decision_id.desc())
                .limit(limit)
            ).all()
        return [DecisionRecord(bool(f), r, dict(p), at) for f, r, p, at in rows]

    # -- report announcements ---------------------------------------------------------------------
    def announce(self, report: str, due_at: datetime | None, window_seconds: float) -> datetime:
        """Record that ``report`` is about to run (due ``due_at``, default now; the announcement
        ends ``window_seconds`` after that unless the report runs first); returns the due time
        as stored."""
        a = t.report_announcements
        with self.engine.begin() as conn:
            due = due_at if due_at is not None else func.clock_timestamp()
            stored: datetime = conn.execute(
                insert(a)
                .values(report=report, due_at=due, ends_at=due + timedelta(seconds=window_seconds))
                .returning(a.c.due_at)
            ).scalar_one()
        return stored

    def finish_report(self, report: str) -> int:
        """End the announcements of ``report`` that were due by now (the run that answers them
        has run); later ones (a run announced for tomorrow) stay. How many ended."""
        a = t.report_announcements.c
        now = func.clock_timestamp()
        with self.engine.begin() as conn:
            ended = conn.execute(
                update(t.report_announcements)
                .where(a.report == report, a.due_at <= now, a.ends_at > now)
                .values(ends_at=now)
            )
        return int(ended.rowcount)
