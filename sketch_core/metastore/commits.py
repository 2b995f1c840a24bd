"""Repository for registered tables and their commits (the global commit sequence)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, Select, func, insert, select, text

from sketch_core.metastore import schema

# Taken (transaction-scoped) by every commit before it draws a sequence number, so sequence
# order equals visibility order: nobody can see N+1 while N is still uncommitted.
COMMIT_LOCK_KEY = 0x5EC7C0DE_0002


@dataclass(frozen=True)
class TableRecord:
    table_id: int
    name: str
    sort_by: tuple[str, ...]
    created_seq: int
    created_at: datetime


@dataclass(frozen=True)
class CommitRecord:
    seq: int
    table: str
    snapshot_id: int | None
    parent_snapshot_id: int | None
    operation: str
    added_rows: int
    deleted_rows: int
    added_files: int
    removed_files: int
    total_rows: int
    committed_at: datetime


@dataclass(frozen=True)
class NewCommit:
    """What a writer knows about its commit before it has a sequence number."""

    operation: str
    snapshot_id: int | None
    parent_snapshot_id: int | None
    added_rows: int = 0
    deleted_rows: int = 0
    added_files: int = 0
    removed_files: int = 0
    total_rows: int = 0


def _table_record(row: object) -> TableRecord:
    m = row._mapping  # type: ignore[attr-defined]
    return TableRecord(m["table_id"], m["name"], tuple(m["sort_by"]), m["created_seq"], m["created_at"])


class CommitLog:
    """Reads and writes ``sketch.tables`` and ``sketch.table_commits``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- writing (inside the caller's transaction) -----------------------------------------
    @staticmethod
    def next_sequence(conn: Connection) -> int:
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": COMMIT_LOCK_KEY})
        return int(conn.execute(text("SELECT nextval('sketch.commit_seq')")).scalar_one())

    @staticmethod
    def register_table(conn: Connection, name: str, sort_by: Sequence[str], created_seq: int) -> int:
        stmt = (
            insert(schema.tables)
            .values(name=name, sort_by=list(sort_by), created_seq=created_seq, created_at=func.now())
            .returning(schema.tables.c.table_id)
        )
        return int(conn.execute(stmt).scalar_one())

    @staticmethod
    def table_id(conn: Connection, name: str) -> int | None:
        value = conn.execute(select(schema.tables.c.table_id).where(schema.tables.c.name == name)).scalar()
        return None if value is None else int(value)

    @staticmethod
    def record(conn: Connection, table_id: int, seq: int, commit: NewCommit) -> None:
        conn.execute(
            insert(schema.table_commits).values(
                seq=seq,
                table_id=table_id,
                snapshot_id=commit.snapshot_id,
                parent_snapshot_id=commit.parent_snapshot_id,
                operation=commit.operation,
                added_rows=commit.added_rows,
                deleted_rows=commit.deleted_rows,
                added_files=commit.added_files,
                removed_files=commit.removed_files,
                total_rows=commit.total_rows,
                committed_at=func.clock_timestamp(),
            )
        )

    # -- reading ----------------------------------------------------------------------------
    def get_table(self, name: str) -> TableRecord | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(schema.tables).where(schema.tables.c.name == name)).first()
        return None if row is None else _table_record(row)

    def list_tables(self) -> list[TableRecord]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(schema.tables).order_by(schema.tables.c.name)).all()
        return [_table_record(row) for row in rows]

    def _commit_query(self) -> Select[Any]:
        c, t = schema.table_commits.c, schema.tables.c
        return select(
            c.seq,
            t.name.label("table"),
            c.snapshot_id,
            c.parent_snapshot_id,
            c.operation,
            c.added_rows,
            c.deleted_rows,
            c.added_files,
            c.removed_files,
            c.total_rows,
            c.committed_at,
        ).join(schema.tables, schema.tables.c.table_id == c.table_id)

    def commits(self, name: str | None = None, *, after_seq: int = 0) -> list[CommitRecord]:
        query = self._commit_query().where(schema.table_commits.c.seq > after_seq)
        if name is not None:
            query = query.where(schema.tables.c.name == name)
        with self.engine.connect() as conn:
            rows = conn.execute(query.order_by(schema.table_commits.c.seq)).all()
        return [CommitRecord(**row._mapping) for row in rows]

    def commit_at(self, name: str, seq: int | None) -> CommitRecord | None:
        """The table's newest commit at or before ``seq`` (None: the newest of all)."""
        query = self._commit_query().where(schema.tables.c.name == name)
        if seq is not None:
            query = query.where(schema.table_commits.c.seq <= seq)
        query = query.order_by(schema.table_commits.c.seq.desc()).limit(1)
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return None if row is None else CommitRecord(**row._mapping)

    def latest_sequence(self) -> int:
        """The newest global commit sequence number (0 before the first commit)."""
        with self.engine.connect() as conn:
            value = conn.execute(select(func.max(schema.table_commits.c.seq))).scalar()
        return int(value or 0)
