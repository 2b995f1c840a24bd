"""Recording other engines' commits: Spark's Iceberg runtime, PyIceberg used directly, any
client of the same catalog.

The catalog's trigger numbers every pointer change (``sql/0014_catalog_commits.sql``) but
cannot read what a commit did: that is in the metadata file the pointer names. The commit log
calls :class:`CommitIngester` when it finds a numbered commit not yet recorded; the ingester
reads the metadata before and after each such commit and writes its ``sketch.table_commits``
row (registering a table another engine created), in sequence order, under a lock of its own so
that concurrent readers record each commit once. Until then no reader is shown a later sequence.

What a commit did, from its snapshots (those from the table's previous current snapshot to the
new one):

- operation: ``append``, ``delete`` or ``replace`` (a compaction) when every snapshot is one,
  else ``overwrite``; ``create`` when the commit created the table;
- rows added: the rows the commit's data files added (none for ``replace``: by Iceberg's
  spec a replace rewrites files without changing the table's rows); rows deleted: the net rows that left
  (rows before plus rows added minus rows after, where a table's rows are its data files' rows
  less its delete files' rows). For another engine's copy-on-write change, both include the
  rows it rewrote unchanged (its metadata does not tell them apart); their difference is exact;
- its data files, as the table service records them (none for row-level deletes).

A commit that changes no snapshot (properties, schema, expiring snapshots) changes no rows: it
is marked recorded without a row.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pyiceberg.io import load_file_io
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot
from sqlalchemy import Connection, Engine, select, text, update
from sqlalchemy.exc import DataError, IntegrityError

from sketch_core.errors import TableError
from sketch_core.metastore import schema
from sketch_core.metastore.commits import CommitLog, NewCommit
from sketch_core.tables.catalog import RecordingSqlCatalog
from sketch_core.tables.file_changes import live_rows, record_commit_files, rows_deleted, summary_count

log = logging.getLogger(__name__)

# Serializes ingesters (readers in several processes may find the same commits at once).
INGEST_LOCK_KEY = 0x5EC7C0DE_0014
# Names the project can address (sketch.tables' check, once lower-cased: another engine's
# `Sales.DailyOrders` is this project's `sales.dailyorders`): other tables' commits are numbered
# but not recorded.
_PROJECT_NAME = re.compile(r"^[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*$")


@dataclass(frozen=True)
class CatalogCommit:
    seq: int
    catalog_name: str
    table_namespace: str
    table_name: str
    kind: str
    metadata_location: str | None
    previous_metadata_location: str | None
    previous_namespace: str | None
    previous_name: str | None
    committed_at: datetime

    @property
    def name(self) -> str:
        return f"{self.table_namespace}.{self.table_name}"


def commit_snapshots(before: TableMetadata | None, after: TableMetadata) -> list[Snapshot] | None:
    """The snapshots from ``before``'s current one (exclusive) to ``after``'s, oldest first;
    None when ``after``'s is not a descendant of ``before``'s (a rollback)."""
    stop = before.current_snapshot_id if before is not None else None
    chain: list[Snapshot] = []
    snapshot_id = after.current_snapshot_id
    while snapshot_id is not None and snapshot_id != stop:
        snapshot = after.snapshot_by_id(snapshot_id)
        if snapshot is None:
            return None  # the lineage was expired past before's snapshot
        chain.append(snapshot)
        snapshot_id = snapshot.parent_snapshot_id
    if snapshot_id != stop:
        return None
    return chain[::-1]


def operation_of(snapshots: list[Snapshot]) -> str:
    operations = {s.summary.operation.value if s.summary is not None else "overwrite" for s in snapshots}
    for single in ("append", "delete", "replace"):
        if operations == {single}:
            return single
    return "overwrite"


def describe_external(
    before: TableMetadata | None, after: TableMetadata, files: dict[str, Any] | None, *, create: bool
) -> NewCommit:
    """A commit as its metadata tells it (see the module's docstring)."""
    snapshots = commit_snapshots(before, after)
    operation = "create" if create else operation_of(snapshots or [])
    added = sum(summary_count(s, "added-records") for s in snapshots or [])
    if snapshots is None:  # a rollback: only the totals are known
        added = max(0, live_rows(after) - live_rows(before))
    elif operation == "replace":
        added = 0  # a compaction or a sort rewrites the rows it reads: none changes (spec)
    return NewCommit(
        operation=operation,
        snapshot_id=after.current_snapshot_id,
        parent_snapshot_id=before.current_snapshot_id if before is not None else None,
        added_rows=added,
        deleted_rows=rows_deleted(operation, live_rows(before), added, live_rows(after)),
        added_files=sum(summary_count(s, "added-data-files") for s in snapshots or []),
        removed_files=sum(summary_count(s, "deleted-data-files") for s in snapshots or []),
        total_rows=live_rows(after),
        files=files if snapshots is not None else None,
    )


class CommitIngester:
    """Records the numbered catalog commits that no ``sketch.table_commits`` row holds yet."""

    def __init__(self, catalog: RecordingSqlCatalog, engine: Engine) -> None:
        self.catalog = catalog
        self.engine = engine

    def __call__(self) -> int:
        """Record every commit not recorded yet; returns how many got a row. Raises TableError
        when a commit's metadata cannot be read, or its row not written (nothing is recorded
        then: the next read retries)."""
        c = schema.catalog_commits.c
        with self.engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": INGEST_LOCK_KEY})
            rows = conn.execute(
                select(schema.catalog_commits).where(c.recorded.is_(False)).order_by(c.seq)
            ).all()
            recorded = 0
            for row in rows:
                commit = CatalogCommit(**{k: v for k, v in row._mapping.items() if k != "recorded"})
                try:
                    recorded += self._record(conn, commit)
                except (IntegrityError, DataError) as exc:  # a commit this code did not foresee
                    raise TableError(
                        f"commit {commit.seq} of {commit.name} ({commit.kind}) could not be recorded: "
                        f"{exc.orig}",
                        hint="nothing was recorded, and every read retries it; report this with the "
                        f"table's metadata file {commit.metadata_location}",
                    ) from exc
                conn.execute(update(schema.catalog_commits).where(c.seq == commit.seq).values(recorded=True))
        if recorded:
            log.info("recorded %d commits made by other engines", recorded)
        return recorded

    def _record(self, conn: Connection, commit: CatalogCommit) -> int:
        if commit.catalog_name != self.catalog.name:
            return 0  # another catalog's table: not this project's
        if commit.kind in ("drop", "rename"):
            old = (
                f"{commit.previous_namespace}.{commit.previous_name}"
                if commit.kind == "rename"
                else commit.name
            )
            table_id = CommitLog.table_id(conn, old.lower())
            if table_id is None:
                return 0
            # A renamed table's history ends under its old name; the new name is registered
            # by the 'create' numbered right after it (sql/0017; a rename numbered before
            # that migration, by the new name's next commit).
            CommitLog.record_drop(conn, table_id, commit.seq, commit.committed_at)
            return 1
        name = commit.name.lower()
        if not _PROJECT_NAME.match(name) or commit.metadata_location is None:
            log.warning("%s: a name this project cannot address; its commits are not recorded", commit.name)
            return 0
        # Itself included, unless dropped since.
        if len(self.catalog.spellings(conn, commit.table_namespace, commit.table_name)) > 1:
            log.warning(
                "%s: the catalog has other tables whose names differ from it only in case; its commits "
                "are not recorded (rename all but one of them)",
                commit.name,
            )
            return 0
        after = self._metadata(commit, commit.metadata_location)
        before = (
            self._metadata(commit, commit.previous_metadata_location)
            if commit.previous_metadata_location
            else None
        )
        table_id = CommitLog.table_id(conn, name)
        if before is not None and before.current_snapshot_id == after.current_snapshot_id:
            # Metadata only: no rows changed. A new sort order is what the table is sorted by
            # from now on (`ALTER TABLE ... WRITE ORDERED BY`).
            if table_id is not None:
                CommitLog.set_sort_by(conn, table_id, _sort_columns(after))
            return 0
        create = table_id is None
        if table_id is None:
            table_id = CommitLog.register_table(conn, name, _sort_columns(after), commit.seq)
        snapshots = commit_snapshots(before, after) or []
        io = load_file_io({**self.catalog.properties, **after.properties}, commit.metadata_location)
        files = record_commit_files(io, snapshots)
        CommitLog.record(
            conn,
            table_id,
            commit.seq,
            describe_external(before, after, files, create=create),
            commit.committed_at,
        )
        return 1

    def _metadata(self, commit: CatalogCommit, location: str) -> TableMetadata:
        try:
            return self.catalog.metadata_at(location)
        except (OSError, ValueError) as exc:
            raise TableError(
                f"commit {commit.seq} to {commit.name} cannot be read: its metadata {location} is "
                f"unreadable ({exc})",
                hint="restore the metadata file; no later commit is shown to readers until it is read",
            ) from exc


def _sort_columns(metadata: TableMetadata) -> tuple[str, ...]:
    """The leading identity-sorted columns of the table's sort order (what sort_by means)."""
    schema_ = metadata.schema()
    order = metadata.sort_order_by_id(metadata.default_sort_order_id)
    columns: list[str] = []
    for field in order.fields if order is not None else []:
        if str(field.transform) != "identity":
            break
        columns.append(schema_.find_column_name(field.source_id) or "")
    return tuple(c for c in columns if c)
