"""Repository for registered tables and their commits (the global commit sequence)."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    Row,
    Select,
    bindparam,
    exists,
    func,
    insert,
    select,
    text,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import distinct_on

from sketch_core.errors import TableError
from sketch_core.lru import LruMap
from sketch_core.metastore import schema
from sketch_core.metastore.engine import reading

# Taken (transaction-scoped) by the catalog's trigger (sql/0014) before it draws a sequence
# number for any engine's commit, so sequence order equals visibility order: nobody can see N+1
# while N is still uncommitted.
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
    # The data files the commit added and removed (sketch_core.tables.file_changes), when recorded.
    files: dict[str, Any] | None = None
    # The registration the commit belongs to: a name dropped and created again has several.
    table_id: int = 0
    # The metadata file the commit's catalog pointer change set (None: not known), which a load
    # of the table at this commit reads without asking the catalog for its pointer.
    metadata_location: str | None = None


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
    files: dict[str, Any] | None = None


def _table_record(row: object) -> TableRecord:
    m = row._mapping  # type: ignore[attr-defined]
    return TableRecord(m["table_id"], m["name"], tuple(m["sort_by"]), m["created_seq"], m["created_at"])


# A window holding more commits than this is dropped and started afresh at the newest ones.
_WINDOW_MAX_COMMITS = 100_000
# The window keeps the file changes (``CommitRecord.files``) of each table's newest commits only.
# A pin derives a commit's files from them when its parent is already planned, which is the
# newest commits' case; older ones are derived from their manifests instead. A copy-on-write
# delete's changes list every file it rewrote with its bounds (~265 KB parsed for 74 files in the
# workload benchmark), and a long-lived service kept them for every commit it had seen.
_FILES_KEPT_PER_TABLE = 32
# Answers about commits older than the window kept (see CommitLog._older), the most recently
# used. Few: a run asks about a handful, and a record may carry its commit's file changes.
_OLDER_ANSWERS_KEPT = 64
_UNKNOWN: Any = object()  # not asked yet (None is an answer: no commit)


class _CommitWindow:
    """Every table's newest commit as of ``start``, and every commit after it up to ``through``."""

    def __init__(self, newest: list[CommitRecord]) -> None:
        self.start = max((r.seq for r in newest), default=0)
        self.through = self.start
        self.commits: list[CommitRecord] = []  # after ``start``, in sequence order
        self.by_table: dict[str, list[CommitRecord]] = {}
        # Per name, where the commits of the table that bears it now start in by_table: after
        # its last drop (a name dropped and created again has had several tables).
        self.life_start: dict[str, int] = {}
        for record in newest:  # in sequence order: a name's newest registration comes last
            self.by_table[record.table] = []
            self.life_start[record.table] = 0
            self._add(record)

    def extend(self, records: list[CommitRecord]) -> None:
        for record in records:
            self.commits.append(record)
            self._add(record)
            self.through = max(self.through, record.seq)

    def _add(self, record: CommitRecord) -> None:
        records = self.by_table.setdefault(record.table, [])
        records.append(record)
        if record.operation == "drop":
            self.life_start[record.table] = len(records)
        older = len(records) - 1 - _FILES_KEPT_PER_TABLE
        if older >= 0 and records[older].files is not None:
            self._forget_files(records, older)

    def _forget_files(self, records: list[CommitRecord], index: int) -> None:
        """Replace ``records[index]`` (in ``commits`` too) by a copy without its file changes."""
        old = records[index]
        records[index] = replace(old, files=None)
        at = bisect.bisect_left(self.commits, old.seq, key=lambda r: r.seq)
        if at < len(self.commits) and self.commits[at] is old:
            self.commits[at] = records[index]

    def life(self, table: str) -> tuple[list[CommitRecord], int]:
        """The name's commits, and the index where those of the table bearing it now start
        (``len`` of the list: the name is free)."""
        return self.by_table.get(table, []), self.life_start.get(table, 0)

    def covers(self, table: str | None, seq: int) -> bool:
        """Whether the window knows every commit (of ``table``, or of all) after ``seq``: from
        ``start`` on, and for a table from its newest commit as of ``start`` on."""
        if seq >= self.start:
            return True
        records = self.by_table.get(table) if table is not None else None
        return bool(records) and seq >= records[0].seq  # type: ignore[index]

    def newest(self, table: str, seq: int | None) -> CommitRecord | None:
        """The newest commit of ``table`` at or before ``seq`` (which the window covers)."""
        records, start = self.life(table)
        if seq is None:
            return records[-1] if len(records) > start else None
        index = bisect.bisect_right(records, seq, lo=start, key=lambda r: r.seq)
        return records[index - 1] if index > start else None

    def between(self, table: str | None, after_seq: int, until_seq: int | None) -> list[CommitRecord]:
        """Commits with ``after_seq < seq <= until_seq``, where the window covers ``after_seq``."""
        records, start = (self.commits, 0) if table is None else self.life(table)
        first = bisect.bisect_right(records, after_seq, lo=start, key=lambda r: r.seq)
        return [r for r in records[first:] if until_seq is None or r.seq <= until_seq]


def _life_key(window: _CommitWindow | None, name: str | None) -> tuple[int | None, int | None]:
    """What an answer about ``name``'s older commits depends on in the window: its start, and
    where the commits of the table bearing the name now begin (a drop moves it)."""
    if window is None:
        return None, None
    return window.start, window.life_start.get(name) if name is not None else None


def _commit_query() -> Select[Any]:
    c, t = schema.table_commits.c, schema.tables.c
    return (
        select(
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
            c.files,
            c.table_id,
            schema.catalog_commits.c.metadata_location,
        )
        .join(schema.tables, schema.tables.c.table_id == c.table_id)
        .outerjoin(schema.catalog_commits, schema.catalog_commits.c.seq == c.seq)
    )


# The first catalog commit not yet in table_commits (another engine's, read from its metadata
# by the table service's ingester). No reader is shown a commit after it: in the same statement
# as the read, so a commit recorded meanwhile cannot slip past one that is not.
_FIRST_UNRECORDED = (
    select(func.min(schema.catalog_commits.c.seq))
    .where(schema.catalog_commits.c.recorded.is_(False))
    .scalar_subquery()
)
_MAX_BIGINT = 2**63 - 1
_BEFORE_UNRECORDED = schema.table_commits.c.seq < func.coalesce(_FIRST_UNRECORDED, _MAX_BIGINT)
_ANY_UNRECORDED = (
    select(schema.catalog_commits.c.seq).where(schema.catalog_commits.c.recorded.is_(False)).limit(1)
)
_CATALOG = schema.catalog_commits.c
# Catalog commits after "through" that recorded no table commit: schema and property changes
# (they change no rows), after which a table loaded before is stale. (A table commit makes
# readers reload the table already; one more load per commit would cost every write's next read.)
_METADATA_COMMITS_AFTER = select(_CATALOG.seq, _CATALOG.table_namespace, _CATALOG.table_name).where(
    _CATALOG.seq > bindparam("through"),
    ~exists().where(schema.table_commits.c.seq == _CATALOG.seq),
)
# What a refresh asks first, in one statement: an unrecorded commit, the newest catalog commit,
# and whether there are metadata-only ones to read.
_REFRESH_QUESTIONS = select(
    _ANY_UNRECORDED.scalar_subquery().label("unrecorded"),
    select(func.max(_CATALOG.seq)).scalar_subquery().label("newest_catalog"),
    exists(_METADATA_COMMITS_AFTER).label("metadata_only"),
)

# What refreshing the window asks on every read about recent commits; built once (building it
# costs about as much as running it).
_COMMITS_AFTER = (
    _commit_query()
    .where(schema.table_commits.c.seq > bindparam("through"), _BEFORE_UNRECORDED)
    .order_by(schema.table_commits.c.seq)
)
# The questions and the commits after the window (``window_through``) in one round trip, as a
# refresh of a window asks them: a row per commit, or one row of questions and NULLs when
# there is none. One statement, so both are read at one snapshot.
_QUESTIONS = _REFRESH_QUESTIONS.subquery("questions")
_AFTER_WINDOW = (
    _commit_query()
    .where(schema.table_commits.c.seq > bindparam("window_through"), _BEFORE_UNRECORDED)
    .lateral("after_window")
)
_REFRESH_WITH_COMMITS = (
    select(_QUESTIONS, _AFTER_WINDOW)
    .select_from(_QUESTIONS.outerjoin(_AFTER_WINDOW, true()))
    .order_by(_AFTER_WINDOW.c.seq)
)
_COMMIT_FIELDS = tuple(_commit_query().selected_columns.keys())


class CommitLog:
    """Reads and writes ``sketch.tables`` and ``sketch.table_commits``."""

    def __init__(self, engine: Engine, ingest: Callable[[], object] | None = None) -> None:
        self.engine = engine
        # Records the catalog commits other engines made (the table service sets it): called
        # when a refresh finds one not yet recorded. Without it, reads stop before such one.
        self.ingest = ingest
        # Commits never change once visible: reads about recent sequences are answered from
        # this window, refreshed by one query for what is newer than it has seen.
        self._window: _CommitWindow | None = None
        self._lock = threading.Lock()
        # Answers read from the database about commits older than the window, by question: as
        # final as the window's (a maintenance run asks about its version's commit ~10 times).
        # A question's key holds the window's start and where the name's current table begins
        # in it, so a drop or a new window asks again.
        self._older: LruMap[tuple[Any, ...], Any] = LruMap(_OLDER_ANSWERS_KEPT)
        # Per table (lower-case ns.table), the newest metadata-only catalog commit seen of it,
        # and the newest catalog commit of any table read so far (None: not yet asked).
        self._catalog_seen: dict[str, int] = {}
        self._catalog_through: int | None = None

    # -- writing (inside the caller's transaction) -----------------------------------------
    @staticmethod
    def draw_sequence(conn: Connection) -> int:
        """A sequence number for a commit that changes no catalog row, under the commit lock."""
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": COMMIT_LOCK_KEY})
        return int(conn.execute(text("SELECT nextval('sketch.commit_seq')")).scalar_one())

    @staticmethod
    def claim_sequence(conn: Connection) -> int:
        """The sequence number the catalog's trigger drew for the pointer change this
        transaction just made (sql/0014), marked as recorded by this transaction: the caller
        records the commit in it. The trigger holds the commit lock until the transaction ends."""
        raw = conn.execute(text("SELECT current_setting('sketch.commit_seq', true)")).scalar()
        if not raw:
            raise TableError(
                "no catalog pointer changed in this transaction, so the catalog's trigger numbered nothing",
                hint="is migration 0014 (the catalog trigger) applied? `sketch server start` migrates",
            )
        seq = int(raw)
        conn.execute(
            update(schema.catalog_commits).where(schema.catalog_commits.c.seq == seq).values(recorded=True)
        )
        return seq

    @staticmethod
    def register_table(conn: Connection, name: str, sort_by: Sequence[str], created_seq: int) -> int:
        stmt = (
            insert(schema.tables)
            .values(name=name, sort_by=list(sort_by), created_seq=created_seq, created_at=func.now())
            .returning(schema.tables.c.table_id)
        )
        return int(conn.execute(stmt).scalar_one())

    @staticmethod
    def set_sort_by(conn: Connection, table_id: int, sort_by: Sequence[str]) -> None:
        conn.execute(
            update(schema.tables).where(schema.tables.c.table_id == table_id).values(sort_by=list(sort_by))
        )

    @staticmethod
    def table_id(conn: Connection, name: str) -> int | None:
        """The id of the table that bears ``name`` (None: none; a dropped one does not)."""
        value = conn.execute(
            select(schema.tables.c.table_id).where(schema.tables.c.name == name, schema.LIVE_TABLES)
        ).scalar()
        return None if value is None else int(value)

    @staticmethod
    def record_drop(conn: Connection, table_id: int, seq: int, committed_at: datetime | None = None) -> None:
        """End the table's history at ``seq``: a 'drop' commit, and the name is free again."""
        conn.execute(
            insert(schema.table_commits).values(
                seq=seq,
                table_id=table_id,
                operation="drop",
                committed_at=committed_at or func.clock_timestamp(),
            )
        )
        conn.execute(
            update(schema.tables).where(schema.tables.c.table_id == table_id).values(dropped_seq=seq)
        )

    @staticmethod
    def record(
        conn: Connection, table_id: int, seq: int, commit: NewCommit, committed_at: datetime | None = None
    ) -> None:
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
                committed_at=committed_at or func.clock_timestamp(),
                files=commit.files,
            )
        )

    # -- reading ----------------------------------------------------------------------------
    def get_table(self, name: str) -> TableRecord | None:
        with reading(self.engine) as conn:
            row = conn.execute(
                select(schema.tables).where(schema.tables.c.name == name, schema.LIVE_TABLES)
            ).first()
        return None if row is None else _table_record(row)

    def list_tables(self) -> list[TableRecord]:
        with reading(self.engine) as conn:
            rows = conn.execute(
                select(schema.tables).where(schema.LIVE_TABLES).order_by(schema.tables.c.name)
            ).all()
        return [_table_record(row) for row in rows]

    def commits(
        self, name: str | None = None, *, after_seq: int = 0, until_seq: int | None = None
    ) -> list[CommitRecord]:
        """Commits (of one table, or all) with ``after_seq < seq <= until_seq`` (None: latest).
        A name's commits are those of the table that bears it now (after its last drop)."""
        with self._lock:
            window = self._window
            if until_seq is None or window is None or until_seq > window.through:
                self._refresh()
                window = self._window
            if window is not None and window.covers(name, after_seq):
                return window.between(name, after_seq, until_seq)
            final = window is not None and until_seq is not None and until_seq <= window.through
            key = ("between", name, after_seq, until_seq, *_life_key(window, name))
            if final and (known := self._older.get(key, _UNKNOWN)) is not _UNKNOWN:
                return list(known)
        query = _commit_query().where(schema.table_commits.c.seq > after_seq, _BEFORE_UNRECORDED)
        if until_seq is not None:
            query = query.where(schema.table_commits.c.seq <= until_seq)
        if name is not None:
            query = query.where(schema.tables.c.name == name, schema.LIVE_TABLES)
        with reading(self.engine) as conn:
            rows = conn.execute(query.order_by(schema.table_commits.c.seq)).all()
        found = [CommitRecord(**row._mapping) for row in rows]
        if final:
            self._older.put(key, tuple(found))
        return found

    def commit_at(self, name: str, seq: int | None) -> CommitRecord | None:
        """The table's newest commit at or before ``seq`` (None: the newest of all)."""
        with self._lock:
            window = self._window
            if seq is None or window is None or seq > window.through:
                self._refresh()
                window = self._window
            if window is not None and (seq is None or window.covers(name, seq)):
                return window.newest(name, seq)
            key = ("at", name, seq, *_life_key(window, name))
            if window is not None and (known := self._older.get(key, _UNKNOWN)) is not _UNKNOWN:
                return known  # type: ignore[no-any-return]
        query = _commit_query().where(schema.tables.c.name == name, schema.LIVE_TABLES, _BEFORE_UNRECORDED)
        if seq is not None:
            query = query.where(schema.table_commits.c.seq <= seq)
        query = query.order_by(schema.table_commits.c.seq.desc()).limit(1)
        with reading(self.engine) as conn:
            row = conn.execute(query).first()
        found = None if row is None else CommitRecord(**row._mapping)
        if window is not None:  # seq <= window.through here: the answer is final
            self._older.put(key, found)
        return found

    def newest_seen(self, name: str) -> CommitRecord | None:
        """The table's newest commit this log has seen, without asking the database (None:
        nothing seen yet)."""
        with self._lock:
            window = self._window
            return window.newest(name, None) if window is not None else None

    def catalog_seen(self, name: str) -> int:
        """The newest catalog commit of table ``name`` that changed its metadata only (a schema
        or property change, which records no table commit) this log has seen (0: none), without
        asking the database."""
        with self._lock:
            return self._catalog_seen.get(name.lower(), 0)

    def _see_catalog_commits(self, conn: Connection, newest: int | None, metadata_only: bool) -> None:
        """Note which tables the metadata-only catalog commits since the last refresh changed
        (the first refresh only notes where it starts: tables load after it)."""
        if newest is None or newest == self._catalog_through:
            return
        if self._catalog_through is not None and metadata_only:
            after = {"through": self._catalog_through}
            for seq, namespace, table in conn.execute(_METADATA_COMMITS_AFTER, after):
                name = f"{namespace}.{table}".lower()
                self._catalog_seen[name] = max(self._catalog_seen.get(name, 0), int(seq))
        self._catalog_through = int(newest)

    def superseded(self, name: str, table_id: int) -> bool:
        """Whether the commits this log has seen show registration ``table_id`` no longer bears
        ``name`` (dropped, or dropped and created again), without asking the database."""
        with self._lock:
            window = self._window
            records, start = window.life(name) if window is not None else ([], 0)
            if not records:
                return False
            return len(records) == start or records[-1].table_id != table_id

    def sequence_older_than(self, seconds: float) -> int:
        """The newest global sequence committed at least ``seconds`` ago by the database clock
        (0: none is that old)."""
        c = schema.table_commits.c
        cutoff = func.clock_timestamp() - timedelta(seconds=seconds)
        with reading(self.engine) as conn:
            newest = conn.execute(
                select(func.max(c.seq)).where(c.committed_at <= cutoff, _BEFORE_UNRECORDED)
            ).scalar()
        return int(newest or 0)

    def latest_sequence(self) -> int:
        """The newest global commit sequence number (0 before the first commit)."""
        with self._lock:
            self._refresh()
            assert self._window is not None
            return self._window.through

    def _refresh(self) -> None:
        """Bring the window up to the newest visible commit: one query, for every table.

        Sequence order is visibility order (COMMIT_LOCK_KEY), and no commit after one not yet
        recorded is read, so having seen sequence N means every commit up to N is seen: what
        the window holds is final and needs no re-reading.
        """
        window = self._window
        if window is not None and len(window.commits) > _WINDOW_MAX_COMMITS:
            window = None  # start a new window rather than grow without bound
        c = schema.table_commits.c
        with reading(self.engine) as conn:
            through = self._catalog_through if self._catalog_through is not None else _MAX_BIGINT
            rows: Sequence[Row[Any]] | None = None
            if window is None:
                unrecorded, newest_catalog, metadata_only = conn.execute(
                    _REFRESH_QUESTIONS, {"through": through}
                ).one()
            else:  # the usual refresh: one round trip
                both = conn.execute(
                    _REFRESH_WITH_COMMITS, {"through": through, "window_through": window.through}
                ).all()
                unrecorded, newest_catalog, metadata_only = both[0][:3]
                rows = [row for row in both if row.seq is not None]
            if self.ingest is not None and unrecorded is not None:
                conn.rollback()  # no transaction held open over the ingester's file reads
                self.ingest()
                metadata_only = True  # (the ingester may have recorded some: read them)
                rows = None  # nor were the commits it recorded read
            self._see_catalog_commits(conn, newest_catalog, metadata_only)
            if window is None:
                newest = (
                    _commit_query()
                    .where(_BEFORE_UNRECORDED)
                    .order_by(c.table_id, c.seq.desc())
                    .ext(distinct_on(c.table_id))
                )
                rows = conn.execute(newest).all()
            elif rows is None:
                rows = conn.execute(_COMMITS_AFTER, {"through": window.through}).all()
        records = sorted(
            (CommitRecord(**{f: row._mapping[f] for f in _COMMIT_FIELDS}) for row in rows),
            key=lambda r: r.seq,
        )
        if window is None:
            self._window = _CommitWindow(records)
            self._older.clear()
        else:
            window.extend(records)
