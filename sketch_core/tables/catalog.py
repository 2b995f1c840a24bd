"""PyIceberg's SQL catalog, extended so the table service's commits are recorded as they are made.

Every commit to the catalog, from any engine, is a compare-and-swap of the table's metadata
pointer in ``iceberg_tables``, and the catalog's trigger numbers it in the same transaction
(``sql/0014_catalog_commits.sql``). The table service's commits also write their
``sketch.table_commits`` row in that transaction, from what the writer knows; other engines'
commits are recorded afterwards from their metadata (:mod:`sketch_core.tables.ingest`), before
any reader is shown a later sequence number.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError, TableAlreadyExistsError
from pyiceberg.io import load_file_io
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.table.update import TableRequirement, TableUpdate
from pyiceberg.typedef import Identifier
from sqlalchemy import Connection, Select, bindparam, delete, func, insert, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from sketch_core.errors import TableError
from sketch_core.lru import LruMap
from sketch_core.metastore.commits import CommitLog, NewCommit
from sketch_core.metastore.engine import ping_idle_connections, reading
from sketch_core.metastore.migrations import MIGRATION_LOCK_KEY
from sketch_core.tables.file_changes import live_rows, record_commit_files, rows_deleted
from sketch_core.tables.metadata_parse import MetadataParser


@dataclass
class PendingCommit:
    """What the table service is committing; the catalog fills in ``seq`` once it is durable."""

    table: str
    operation: str
    added_rows: int = 0
    sort_by: tuple[str, ...] = ()
    seq: int | None = None
    # A change of metadata alone (expiring snapshots): the table's rows stay as they are, so it
    # gets no sequence number and no commit row, and readers' pins are unaffected.
    metadata_only: bool = False


_pending: ContextVar[PendingCommit | None] = ContextVar("sketch_pending_commit", default=None)


@contextlib.contextmanager
def recording(pending: PendingCommit) -> Iterator[PendingCommit]:
    """Commits made by this thread inside the block are recorded as ``pending``."""
    token = _pending.set(pending)
    try:
        yield pending
    finally:
        _pending.reset(token)


def _summary_int(metadata: TableMetadata | None, snapshot_id: int | None, key: str) -> int:
    if metadata is None or snapshot_id is None:
        return 0
    snapshot = metadata.snapshot_by_id(snapshot_id)
    if snapshot is None or snapshot.summary is None:
        return 0
    return int(snapshot.summary.get(key, "0") or 0)


def new_snapshots(before: TableMetadata | None, after: TableMetadata) -> list[Snapshot]:
    """The snapshots a commit added, oldest first (an overwrite adds a delete and an append)."""
    known = {s.snapshot_id for s in before.snapshots} if before is not None else set()
    return [s for s in after.snapshots if s.snapshot_id not in known]


def describe_commit(
    before: TableMetadata | None,
    after: TableMetadata,
    pending: PendingCommit,
    files: dict[str, Any] | None = None,
) -> NewCommit:
    """Row counts of a commit in logical terms.

    A copy-on-write delete reports the rewritten files' rows as deleted and re-added; users care
    about the rows that really left, so deleted rows are derived from the totals instead. The
    totals are live rows, less those the table's delete files delete (other engines' merge-on-read
    deletes), as for the commits of other engines (:func:`~sketch_core.tables.file_changes.live_rows`):
    the validation of each commit compares their changes. A rewrite deletes no row.
    """
    parent = before.current_snapshot_id if before is not None else None
    current = after.current_snapshot_id
    new_ids = [s.snapshot_id for s in new_snapshots(before, after)]
    total_before = live_rows(before)
    total_after = live_rows(after)
    return NewCommit(
        operation=pending.operation,
        snapshot_id=current,
        parent_snapshot_id=parent,
        added_rows=pending.added_rows,
        deleted_rows=rows_deleted(pending.operation, total_before, pending.added_rows, total_after),
        added_files=sum(_summary_int(after, sid, "added-data-files") for sid in new_ids),
        removed_files=sum(_summary_int(after, sid, "deleted-data-files") for sid in new_ids),
        total_rows=total_after,
        files=files,
    )


# Parsed metadata files kept per catalog. A metadata file is written once and never changed, so
# its parsed form can be reused by every later load that finds the same pointer; parsing costs
# milliseconds per load and grows with the number of snapshots.
_METADATA_CACHE_ENTRIES = 64
# Compressed metadata files end in ".gz.metadata.json"; those go through PyIceberg's reader.
_COMPRESSED_METADATA_SUFFIX = ".gz.metadata.json"


class RecordingSqlCatalog(SqlCatalog):  # type: ignore[misc]
    """SqlCatalog whose ``commit_table`` records each commit in ``sketch.table_commits``, and
    whose loads reuse already-parsed metadata files."""

    def __init__(self, name: str, **properties: Any) -> None:
        super().__init__(name, **properties)
        self._parsed: LruMap[str, TableMetadata] = LruMap(_METADATA_CACHE_ENTRIES)
        self._parser = MetadataParser()
        self._pointer_query: Select[Any] | None = None

    def load_table(self, identifier: str | Identifier) -> Table:
        """PyIceberg's ``load_table``, reading the metadata pointer with one prebuilt Core query
        instead of an ORM session (which costs about 1 ms; every pin after a commit loads).

        This project names tables in lower case (Spark's own catalog folds names so), while an
        Iceberg catalog keeps a name as another engine spelled it (``Sales.DailyOrders``): a
        name not found as given is looked up ignoring case, and the table found keeps its
        catalog spelling (``Table.name()``), which Spark needs to find it. Two tables whose
        names differ only in case cannot be told apart so: TableError."""
        try:
            return self._load_exact(identifier)
        except NoSuchTableError:
            spelled = self._spelled(identifier)
            if spelled is None:
                raise
            return self._load_exact(spelled)

    def spellings(self, conn: Connection, namespace: str, table_name: str) -> list[tuple[str, str]]:
        """The (namespace, name) of every table of this catalog named so but for case."""
        columns = IcebergTables.table_namespace, IcebergTables.table_name
        query = select(*columns).where(
            IcebergTables.catalog_name == self.name,
            func.lower(IcebergTables.table_namespace) == namespace.lower(),
            func.lower(IcebergTables.table_name) == table_name.lower(),
        )
        return [(str(row[0]), str(row[1])) for row in conn.execute(query)]

    def _spelled(self, identifier: str | Identifier) -> tuple[str, str] | None:
        """The one (namespace, name) of this catalog equal to ``identifier`` but for case."""
        namespace = Catalog.namespace_to_string(Catalog.namespace_from(identifier))
        table_name = Catalog.table_name_from(identifier)
        with reading(self.engine) as conn:
            found = self.spellings(conn, namespace, table_name)
        if len(found) > 1:
            shown = ", ".join(".".join(f) for f in sorted(found))
            raise TableError(
                f"{namespace}.{table_name}: the catalog has tables whose names differ only in case "
                f"({shown}), and this project names tables in lower case",
                hint="rename all but one of them with Spark (ALTER TABLE ... RENAME TO ...)",
            )
        return found[0] if found else None

    def _load_exact(self, identifier: str | Identifier) -> Table:
        namespace = Catalog.namespace_to_string(Catalog.namespace_from(identifier))
        table_name = Catalog.table_name_from(identifier)
        if self._pointer_query is None:
            query = select(IcebergTables.metadata_location).where(
                IcebergTables.catalog_name == self.name,
                IcebergTables.table_namespace == bindparam("namespace"),
                IcebergTables.table_name == bindparam("table_name"),
            )
            if (type_filter := self._iceberg_type_filter()) is not None:
                query = query.where(type_filter)
            self._pointer_query = query
        with reading(self.engine) as conn:
            location = conn.execute(
                self._pointer_query, {"namespace": namespace, "table_name": table_name}
            ).scalar()
        if not location:
            raise NoSuchTableError(f"Table does not exist: {namespace}.{table_name}")
        return self.table_at((*Catalog.identifier_to_tuple(namespace), table_name), location)

    def _convert_orm_to_iceberg(self, orm_table: IcebergTables) -> Table:
        location = orm_table.metadata_location
        if not location or not orm_table.table_namespace or not orm_table.table_name:
            return super()._convert_orm_to_iceberg(orm_table)  # raises its own NoSuchTableError
        identifier = (*Catalog.identifier_to_tuple(orm_table.table_namespace), orm_table.table_name)
        return self.table_at(identifier, location)

    def table_at(self, identifier: tuple[str, ...], location: str) -> Table:
        """The table as of the metadata file at ``location``, parsed once per file."""
        metadata = self._parsed.get(location)
        if metadata is None:
            source = load_file_io(self.properties, location).new_input(location)
            if not location.endswith(_COMPRESSED_METADATA_SUFFIX):
                with source.open() as stream:
                    metadata = self._parser.parse(stream.read())
            else:  # compressed metadata: PyIceberg's own reader
                metadata = FromInputFile.table_metadata(source)
            self._parsed.put(location, metadata)
        return Table(
            identifier=identifier,
            metadata=metadata,
            metadata_location=location,
            io=self._load_file_io(metadata.properties, location),
            catalog=self,
        )

    def metadata_at(self, location: str) -> TableMetadata:
        """The table metadata in the file at ``location`` (parsed once per file)."""
        return self.table_at(("_",), location).metadata

    def commit_table(
        self, table: Table, requirements: tuple[TableRequirement, ...], updates: tuple[TableUpdate, ...]
    ) -> CommitTableResponse:
        pending = _pending.get()
        if pending is None:
            # A plain PyIceberg write (not the table service's): the trigger numbers it like
            # any other engine's, and the ingester records it from its metadata.
            return super().commit_table(table, requirements, updates)
        identifier = table.name()
        namespace = Catalog.namespace_to_string(Catalog.namespace_from(identifier))
        table_name = Catalog.table_name_from(identifier)
        current: Table | None
        try:
            current = self._load_exact(identifier)  # a create of another spelling is a create
        except Exception:  # NoSuchTableError: this is a create
            current = None

        # Private PyIceberg helpers, pinned by pyproject (<0.13): they validate the requirements
        # against the current metadata and stage the new metadata file.
        staged = self._update_and_stage_table(current, identifier, requirements, updates)
        if current is not None and staged.metadata == current.metadata:
            return CommitTableResponse(metadata=current.metadata, metadata_location=current.metadata_location)
        self._write_metadata(metadata=staged.metadata, io=staged.io, metadata_path=staged.metadata_location)

        if pending.metadata_only:
            if current is None:
                raise TableError(f"a metadata-only commit cannot create {namespace}.{table_name}")
            with Session(self.engine) as session:
                conn = session.connection()
                self._swap_pointer(
                    conn, namespace, table_name, current.metadata_location, staged.metadata_location
                )
                CommitLog.claim_sequence(conn)  # numbered, but no rows changed: nothing to record
                session.commit()
            self._parsed.put(staged.metadata_location, staged.metadata)
            return CommitTableResponse(metadata=staged.metadata, metadata_location=staged.metadata_location)
        # Read before the commit lock is taken: the manifests are written already.
        files = record_commit_files(
            staged.io, new_snapshots(current.metadata if current else None, staged.metadata)
        )
        with Session(self.engine) as session:
            conn = session.connection()
            # The pointer change first: the catalog's trigger draws its number and takes the
            # commit lock (in this order for every engine, so no two commits wait on each other).
            if current is not None:
                self._swap_pointer(
                    conn, namespace, table_name, current.metadata_location, staged.metadata_location
                )
                seq = CommitLog.claim_sequence(conn)
                table_id = CommitLog.table_id(conn, pending.table)
                if table_id is None:
                    raise TableError(f"table {pending.table!r} is in the Iceberg catalog but not registered")
            else:
                try:
                    row = self._create_table_row(namespace, table_name, staged.metadata_location)
                    conn.execute(insert(IcebergTables).values(**row))
                    seq = CommitLog.claim_sequence(conn)
                    table_id = CommitLog.register_table(conn, pending.table, pending.sort_by, seq)
                except IntegrityError as exc:
                    raise TableAlreadyExistsError(f"{namespace}.{table_name} already exists") from exc
            commit = describe_commit(current.metadata if current else None, staged.metadata, pending, files)
            CommitLog.record(conn, table_id, seq, commit)
            session.commit()
        pending.seq = seq
        # This process's next load finds the file it just wrote without parsing it.
        self._parsed.put(staged.metadata_location, staged.metadata)
        return CommitTableResponse(metadata=staged.metadata, metadata_location=staged.metadata_location)

    def _entry(self, namespace: str, table_name: str) -> tuple[Any, ...]:
        """The conditions selecting the table's row in PyIceberg's catalog table."""
        return (
            IcebergTables.catalog_name == self.name,
            IcebergTables.table_namespace == namespace,
            IcebergTables.table_name == table_name,
        )

    def _swap_pointer(
        self, conn: Connection, namespace: str, table_name: str, expected: str, new: str
    ) -> None:
        """Point the table at ``new`` if it still points at ``expected``, else a lost race."""
        result = conn.execute(
            update(IcebergTables)
            .where(*self._entry(namespace, table_name), IcebergTables.metadata_location == expected)
            .values(metadata_location=new, previous_metadata_location=expected)
        )
        if result.rowcount < 1:
            raise CommitFailedException(f"{namespace}.{table_name} was changed by another commit")

    def remove_entry(self, conn: Connection, namespace: str, table_name: str) -> bool:
        """Remove the table from the catalog inside the caller's transaction (a drop, which
        records its commit in the same one); its files stay for the caller to delete. False:
        it had no entry."""
        result = conn.execute(delete(IcebergTables).where(*self._entry(namespace, table_name)))
        return bool(result.rowcount)


def open_catalog(uri: str, warehouse: str, name: str = "sketch", **properties: Any) -> RecordingSqlCatalog:
    """Open the catalog; its own tables are created under the migration lock (no create race)."""
    from sqlalchemy import create_engine

    engine = create_engine(uri)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": MIGRATION_LOCK_KEY})
            try:
                # Pinged when idle instead of on every checkout (see ping_idle_connections).
                catalog = RecordingSqlCatalog(
                    name, uri=uri, warehouse=warehouse, **{"pool_pre_ping": "false", **properties}
                )
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_LOCK_KEY})
    finally:
        engine.dispose()
    ping_idle_connections(catalog.engine)
    return catalog
