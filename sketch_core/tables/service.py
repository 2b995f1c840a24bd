"""``svc.tables``: create, append, delete and overwrite Iceberg tables; pinned snapshots.

Every write is one Iceberg commit that also records a global commit sequence number in the
metastore (see :mod:`sketch_core.tables.catalog`). Data is sorted by the table's sort key and
written in target-sized files, so each file covers a narrow key range that later skipping can
exploit. Concurrent writers to one table race optimistically: the loser reloads and retries.
"""

from __future__ import annotations

import builtins
import logging
import random
import time
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.exceptions import (
    CommitFailedException,
    NoSuchTableError,
    TableAlreadyExistsError,
    ValidationException,
)
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.manifest import DataFileContent
from pyiceberg.schema import assign_fresh_schema_ids
from pyiceberg.table import Table, Transaction
from pyiceberg.table.snapshots import (
    TOTAL_DATA_FILES,
    TOTAL_DELETE_FILES,
    Snapshot,
)
from pyiceberg.table.sorting import SortField, SortOrder
from pyiceberg.transforms import IdentityTransform
from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError

from sketch_core.config import Settings
from sketch_core.errors import (
    CommitConflictError,
    ConfigurationError,
    DeltaRangeError,
    InvalidDataError,
    SnapshotExpiredError,
    SnapshotNotFoundError,
    TableError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedTableFeatureError,
    WarehouseMismatchError,
)
from sketch_core.layout.simulation import Layout
from sketch_core.metastore.commits import CommitLog, CommitRecord, TableRecord
from sketch_core.tables import snapshot_files
from sketch_core.tables.catalog import PendingCommit, RecordingSqlCatalog, recording
from sketch_core.tables.data import conform, is_type_widening, portable, sort_rows, to_arrow
from sketch_core.tables.deltas import (
    RecordedRows,
    TableDelta,
    bag_difference,
    read_files,
    restrict,
    snapshot_delta,
)
from sketch_core.tables.file_cache import FileCache
from sketch_core.tables.file_changes import (
    RowLevelDeletes,
    apply_recorded,
    apply_snapshot_files,
    read_snapshot_files,
    recorded_added_paths,
    summary_count,
)
from sketch_core.tables.file_columns import NAMES_CHANGED, names_changed_in
from sketch_core.tables.ingest import CommitIngester
from sketch_core.tables.locations import location_taken, new_table_location, purge_location
from sketch_core.tables.names import normalize_table_name, split_table_name
from sketch_core.tables.orphans import RemovedFiles, remove_unreferenced_files
from sketch_core.tables.pinned import (
    DataFileInfo,
    DataFiles,
    PinnedSnapshot,
)
from sketch_core.tables.predicates import to_iceberg_expression
from sketch_core.tables.recent_deltas import RecentDeltas
from sketch_core.tables.rewrites import rewrite_in_layout
from sketch_core.tables.row_level_changes import (
    apply_row_level_changes,
    never_partitioned,
    read_row_level_changes,
)
from sketch_core.tables.schema_history import names_changed, names_in
from sketch_core.tables.spark_writes import (
    conform_frame,
    frame_schema,
    is_spark_dataframe,
    write_frame,
    written_snapshot,
)
from sketch_core.tables.statistics import describe_file
from sketch_core.tables.transactions import transaction

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# Our files are cut at this fraction of the target size. PyIceberg's copy-on-write rewrite
# splits a file whose rows exceed the target into two, so files written right at the target
# would double in number on the first scattered delete; the headroom keeps a rewrite in one file.
_FILL_FRACTION = 0.85
_TARGET_PROPERTY = "write.target-file-size-bytes"
# How far back a pin looks for an already-planned ancestor to derive its files from; each
# step reads that snapshot's new manifests, so past this a full plan is as cheap.
_DERIVE_MAX_SNAPSHOTS = 16
# An append of at most this many rows also records them as written (as a delete or an overwrite
# records the rows it changes): maintenance reads a small append's rows from that Arrow file, not
# by decoding its Parquet files (~2 ms of a ~15 ms warm run at 1,000 rows). Bigger appends are
# read from their files, which stores them once.
RECORDED_APPEND_ROWS = 100_000


def _pause_before_retry(attempt: int) -> None:
    """Exponential back-off with jitter, so racing writers spread out."""
    time.sleep(min(2.0, 0.02 * 2**attempt) * (0.5 + random.random()))


def _ancestors(table: Table, snapshot_id: int) -> list[int]:
    """The ids of the snapshots before ``snapshot_id`` in its lineage that the metadata still
    has (none when the snapshot itself is gone)."""
    found: list[int] = []
    snapshot = table.metadata.snapshot_by_id(snapshot_id)
    while snapshot is not None and snapshot.parent_snapshot_id is not None:
        snapshot = table.metadata.snapshot_by_id(snapshot.parent_snapshot_id)
        if snapshot is not None:
            found.append(snapshot.snapshot_id)
    return found


# The newest table format PyIceberg (0.12, its newest release) writes metadata for; it reads v3
# tables (Spark writes deletion vectors to those), but cannot commit to them.
_PYICEBERG_WRITES_FORMAT = 2


def _not_writable_by_pyiceberg(name: str, table: Table) -> UnsupportedTableFeatureError:
    return UnsupportedTableFeatureError(
        f"{name} is an Iceberg format v{table.metadata.format_version} table, and PyIceberg, which "
        "the service's Arrow loads, deletes and schema changes commit with, cannot write its metadata",
        hint="load it with a Spark DataFrame (svc.tables.append and overwrite write those with Spark) "
        f"or with Spark SQL on <catalog>.{name} (INSERT, DELETE, UPDATE, MERGE, ALTER TABLE)",
    )


def _require_pyiceberg_writable(name: str, table: Table) -> None:
    if table.metadata.format_version > _PYICEBERG_WRITES_FORMAT:
        raise _not_writable_by_pyiceberg(name, table)


# Data files in Iceberg's other formats (``write.format.default`` = ``orc`` or ``avro``), as every
# Iceberg writer names them. Pins hand their files to Parquet readers (Spark's and Arrow's).


def _snapshot_names(table: Table, snapshot_id: int | None) -> dict[str, str | None]:
    """The current columns' names in the snapshot's own schema (its files' and Spark's read of it)."""
    snapshot = table.metadata.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
    schema_id = snapshot.schema_id if snapshot is not None else None
    schema = table.metadata.schema_by_id(schema_id) if schema_id is not None else None
    return names_in(schema or table.schema(), table.schema())


def _refuse_other_formats(name: str, files: DataFiles) -> None:
    other = files.other_format
    if other is not None:
        kind = other.rsplit(".", 1)[1].upper()
        raise UnsupportedTableFeatureError(
            f"{name} has {kind} data files (such as {other}): the project reads Parquet data files "
            "only, so it neither reads the table nor sketches it",
            hint=f"write it as Parquet: ALTER TABLE <catalog>.{name} SET TBLPROPERTIES "
            "('write.format.default' = 'parquet'), then rewrite the files already written: "
            f"CALL <catalog>.system.rewrite_data_files(table => '{name}', options => "
            "map('rewrite-all', 'true'))",
        )


def _refuse_equality_deletes(name: str, table: Table, snapshot_id: int) -> None:
    """Raise when the snapshot has live equality deletes (PyIceberg's planning cannot read them
    either: it raises a ValueError)."""
    if summary_count(table.metadata.snapshot_by_id(snapshot_id), "total-equality-deletes"):
        raise _equality_deletes(name, snapshot_id)


def _equality_deletes(name: str, snapshot_id: int) -> UnsupportedTableFeatureError:
    return UnsupportedTableFeatureError(
        f"{name} has equality delete files at snapshot {snapshot_id}: the project cannot read "
        "which rows they remove, so it neither reads the table nor maintains its sketches",
        hint="compact them away with Spark, e.g. CALL <catalog>.system.rewrite_data_files(table => "
        f"'{name}', options => map('delete-file-threshold', '1')), or write the table with "
        "position deletes (Spark's merge-on-read writes those)",
    )


class TableService:
    def __init__(
        self,
        catalog: RecordingSqlCatalog,
        commits: CommitLog,
        settings: Settings,
        spark: Callable[[], SparkSession] | None = None,
    ) -> None:
        """``spark``: the session to use where PyIceberg cannot write (format v3 tables)."""
        self.catalog = catalog
        self.spark = spark
        self.commit_log = commits
        # Other engines' commits (Spark, PyIceberg used directly) are recorded when found.
        commits.ingest = CommitIngester(catalog, commits.engine)
        self.settings = settings
        self.recorded_rows = RecordedRows(settings.warehouse / "_sketch_deltas")
        self._records: dict[str, TableRecord] = {}
        self.file_cache = FileCache(settings.file_cache_bytes) if settings.file_cache_bytes else None
        self._pinned_files = snapshot_files.SHARED  # planned file lists, shared in the process
        self._recent_deltas = RecentDeltas()
        # name -> (newest commit seen, newest catalog commit seen, table, its table id) when it
        # was loaded
        self._loaded: dict[str, tuple[int, int, Table, int]] = {}
        self._arrow_schemas: dict[tuple[str, int], pa.Schema] = {}
        # How a write opens its transaction (a benchmark compares PyIceberg's own).
        self.new_transaction: Callable[[Table], Transaction] = transaction

    # -- writes ------------------------------------------------------------------------------
    def create(self, name: str, data: Any, sort_by: list[str] | tuple[str, ...] | None = None) -> int:
        """Create table ``name`` (``ns.table``) from ``data`` (a pyarrow Table, a Spark or
        pandas DataFrame, or a Parquet path), its rows sorted by ``sort_by`` and cut into files
        of narrow key ranges; returns the commit's global sequence number. Raises
        InvalidTableNameError, TableExistsError, InvalidDataError (unreadable data, a sort key
        the data lacks) or CommitConflictError (transient)."""
        name = normalize_table_name(name)
        spark_frame = data if is_spark_dataframe(data) else None
        # A Spark DataFrame is written by Spark after an empty create: nothing is collected.
        arrow = portable(
            frame_schema(spark_frame).empty_table() if spark_frame is not None else to_arrow(data)
        )
        keys = tuple(sort_by or ())
        unknown = [k for k in keys if k not in arrow.column_names]
        if unknown:
            raise InvalidDataError(
                f"sort key columns {', '.join(unknown)} are not in the data",
                hint=f"choose sort_by from: {', '.join(arrow.column_names)}",
            )
        if self.commit_log.get_table(name) is not None:
            raise TableExistsError(name)
        arrow = sort_rows(arrow, keys)
        namespace, table_name = split_table_name(name)
        self.catalog.create_namespace_if_not_exists(namespace)
        # Private PyIceberg helper (pinned <0.13): the catalog's default location for the table.
        location = new_table_location(
            self.catalog._get_default_warehouse_location(namespace, table_name), location_taken
        )
        # Fresh field ids first: the converted schema has -1 for every field, so a sort order
        # built on it would name the last field for each key (Spark's writers follow it).
        schema = assign_fresh_schema_ids(self.catalog._convert_schema_if_needed(arrow.schema))
        sort_order = SortOrder(
            *[SortField(source_id=schema.find_field(k).field_id, transform=IdentityTransform()) for k in keys]
        )
        pending = PendingCommit(name, "create", added_rows=arrow.num_rows, sort_by=keys)
        try:
            with recording(pending):
                txn = self.catalog.create_table_transaction(
                    name,
                    schema=schema,
                    location=location,
                    sort_order=sort_order,
                    properties=self._table_properties(),
                )
                self._append_in_files(txn, arrow)
                txn.commit_transaction()
        except (TableAlreadyExistsError, IntegrityError) as exc:
            raise TableExistsError(name) from exc
        assert pending.seq is not None
        if spark_frame is not None:
            _, _, table = self._open(name, fresh=True)
            return self._spark_write(name, table, spark_frame, replace=False)
        log.info("created %s with %d rows at sequence %d", name, arrow.num_rows, pending.seq)
        return pending.seq

    def drop(self, name: str, forget: Callable[[Connection, int], None] | None = None) -> int:
        """Drop ``name``: remove it from the catalog and end its history with a 'drop' commit,
        in one metastore transaction (``forget(conn, table_id)`` removes, in it, what other
        stores keep about the table); then delete its files. Returns the drop's sequence number.

        Writers wait for the drop (it takes the commit lock) and then find no table. A reader
        that pinned the table before reads files that are gone, as after a snapshot expiry. The
        name is free at once; a table created under it later starts a history of its own.
        """
        name = self._require(name).name
        namespace, table_name = split_table_name(name)
        try:
            loaded = self.catalog.load_table(name)
            location: str | None = loaded.location()
            namespace, table_name = iceberg_name(loaded).split(".")  # the catalog's entry, as spelled
        except NoSuchTableError:  # not in the catalog (its entry removed by hand): drop the rest
            location = None
        except FileNotFoundError as exc:  # its metadata is gone (a moved warehouse): same
            log.warning("dropping %s without deleting its files: %s", name, exc)
            location = None
        with self.commit_log.engine.begin() as conn:  # the catalog's tables live beside ours
            table_id = CommitLog.table_id(conn, name)
            if table_id is None:
                raise TableNotFoundError(name)
            if self.catalog.remove_entry(conn, namespace, table_name):
                # Numbered by the catalog's trigger, which holds the commit lock from here on.
                seq = CommitLog.claim_sequence(conn)
            else:  # no catalog entry (removed by hand): a number of its own
                seq = CommitLog.draw_sequence(conn)
            if forget is not None:
                forget(conn, table_id)
            CommitLog.record_drop(conn, table_id, seq)
        self._records.pop(name, None)
        self._loaded.pop(name, None)
        log.info("dropped %s at sequence %d", name, seq)
        self.recorded_rows.remove_through(name, seq)
        if location is not None:
            try:
                removed = purge_location(location)
                log.info("deleted %d files (%d bytes) of %s", removed.files, removed.bytes, name)
            except OSError as exc:  # the drop stands; what is left is only disk space
                log.warning("could not delete the files of %s under %s: %s", name, location, exc)
        return seq

    def append(self, name: str, data: Any) -> int:
        """Add ``data``'s rows (as :meth:`create` takes them, conformed to the table's schema)
        to ``name`` in one commit; returns its sequence number (the latest, when there are no
        rows). Raises TableNotFoundError, SchemaMismatchError, InvalidDataError or
        CommitConflictError (transient)."""
        name, record, table = self._open(name, fresh=True)
        if is_spark_dataframe(data):
            return self._spark_write(name, table, data, replace=False)
        arrow = sort_rows(conform(to_arrow(data), table.schema().as_arrow(), name), record.sort_by)
        if arrow.num_rows == 0:
            return self._latest_seq(name)
        recorded = (lambda _: {"inserted": arrow}) if arrow.num_rows <= RECORDED_APPEND_ROWS else None
        return self._commit(
            name, "append", arrow.num_rows, lambda txn: self._append_in_files(txn, arrow), recorded
        )

    def delete(self, name: str, predicate: str) -> int:
        """Delete the rows of ``name`` matching ``predicate`` (a Spark SQL boolean expression
        over its columns) in one copy-on-write commit; returns its sequence number. Raises
        TableNotFoundError, InvalidPredicateError or CommitConflictError (transient)."""
        name, _, table = self._open(name, fresh=True)
        expression = to_iceberg_expression(predicate, table.schema(), name)
        return self._commit(
            name,
            "delete",
            0,
            lambda txn: txn.delete(expression),
            lambda table: {"deleted": self._matching(table, expression)},
        )

    def overwrite(self, name: str, data: Any, where: str | None = None) -> int:
        """Delete the rows of ``name`` matching ``where`` (all rows if None) and add ``data``,
        in one commit; returns its sequence number. Raises as :meth:`delete` and
        :meth:`append` do."""
        name, record, table = self._open(name, fresh=True)
        expression: BooleanExpression = (
            to_iceberg_expression(where, table.schema(), name) if where is not None else AlwaysTrue()
        )
        if is_spark_dataframe(data):  # the predicate checked above, as for any overwrite
            return self._spark_write(name, table, data, replace=True, where=where)
        arrow = sort_rows(conform(to_arrow(data), table.schema().as_arrow(), name), record.sort_by)

        def build(txn: Transaction) -> None:
            # Same snapshots as PyIceberg's overwrite (a delete, then an append), with our files.
            txn.delete(expression)
            self._append_in_files(txn, arrow)

        return self._commit(
            name,
            "overwrite",
            arrow.num_rows,
            build,
            lambda table: {"deleted": self._matching(table, expression), "inserted": arrow},
        )

    def _spark_write(
        self, name: str, table: Table, frame: Any, *, replace: bool, where: str | None = None
    ) -> int:
        """Write a Spark DataFrame with Spark's Iceberg writer (distributed; see
        :mod:`sketch_core.tables.spark_writes`); returns the commit's sequence number."""
        since = table.metadata.current_snapshot_id
        conformed = conform_frame(frame, table.schema().as_arrow(), name)

        target = f"{self.settings.catalog_name}.{iceberg_name(table)}"
        from sketch_core.spark.jobs import spark_job  # pyspark: only when given a Spark frame

        with spark_job(f"the write to {name}"):  # a failed Spark job: SparkJobError, transient
            marker = write_frame(conformed, target, replace=replace, where=where)
        self.commit_log.latest_sequence()  # records the write (and whatever else committed)
        fresh = self.catalog.load_table(name)
        app_id = frame.sparkSession.sparkContext.applicationId
        snapshot_id = written_snapshot(fresh.metadata, since, marker, app_id)
        if snapshot_id is None:  # nothing written (no rows, or a condition matching nothing)
            return self._latest_seq(name)
        for commit in reversed(self.commit_log.commits(name)):
            if commit.snapshot_id == snapshot_id:
                log.info("Spark wrote %s at sequence %d", name, commit.seq)
                return commit.seq
        raise TableError(
            f"the write to {name} committed snapshot {snapshot_id}, which has no sequence number"
        )

    def evolve_schema(
        self,
        name: str,
        *,
        add: Mapping[str, pa.DataType] | None = None,
        widen: Mapping[str, pa.DataType] | None = None,
    ) -> int:
        """Add nullable columns and widen column types (int32 to int64, float32 to float64, a
        decimal's precision at the same scale), atomically. Like expiring snapshots it changes
        metadata only: the rows stay, so it takes no commit sequence number (returned: the
        latest, from which on reads see the new schema; pins always read with the table's
        current schema). Files written before keep their columns: readers give NULL for a
        column a file lacks and cast a widened one.

        Renaming and dropping columns are Spark's (``ALTER TABLE ... RENAME COLUMN``): the
        table's files are then read by field id, and the sketches whose query reads the old
        name stop (``ColumnsDroppedError``). Sketches on the table adapt: an added column
        changes nothing they read; a sketch whose table had a column widened is recaptured once
        (its operator state holds the old type).
        """
        name, _, table = self._open(name, fresh=True)
        _require_pyiceberg_writable(name, table)
        current = table.schema().as_arrow()
        problems = [f"{c} exists already" for c in add or {} if c in current.names]
        problems += [f"{c} is not a column" for c in widen or {} if c not in current.names]
        for column, kind in (widen or {}).items():
            if column in current.names and not is_type_widening(str(current.field(column).type), str(kind)):
                problems.append(f"{column} cannot go from {current.field(column).type} to {kind}")
        if problems or not (add or widen):
            raise InvalidDataError(
                f"cannot evolve the schema of {name}: {'; '.join(problems) or 'no change asked'}",
                hint="add new nullable columns, or widen int32 to int64, float to double or a decimal's "
                "precision; to rename or drop a column, use ALTER TABLE in Spark (sketches reading it stop)",
            )
        changed = {**(add or {}), **(widen or {})}
        converted = self.catalog._convert_schema_if_needed(
            pa.schema([pa.field(c, k) for c, k in changed.items()])
        )
        # By position: the converted fields carry no ids yet (all -1), so a lookup by name could
        # return another column's type (an added column got a widened one's).
        iceberg_types = {column: f.field_type for column, f in zip(changed, converted.fields, strict=True)}

        with recording(PendingCommit(name, "schema", metadata_only=True)), table.update_schema() as update:
            for column in add or {}:
                update.add_column(column, iceberg_types[column])
            for column in widen or {}:
                update.update_column(column, iceberg_types[column])
        self._loaded.pop(name, None)  # no commit marks it: the next open reloads
        log.info("evolved the schema of %s: added %s, widened %s", name, list(add or {}), list(widen or {}))
        return self._latest_seq(name)

    def widened_since(self, name: str, snapshot_id: int | None) -> list[str]:
        """The columns of ``name`` whose type was widened after snapshot ``snapshot_id``."""
        if snapshot_id is None:
            return []
        _, _, table = self._open(name)  # as new as the newest commit seen: a schema change is one
        snapshot = table.metadata.snapshot_by_id(snapshot_id)
        if snapshot is None or snapshot.schema_id is None:
            return []
        if snapshot.schema_id == table.metadata.current_schema_id:
            return []
        before = {f.field_id: f for f in table.metadata.schema_by_id(snapshot.schema_id).fields}
        return [
            f.name
            for f in table.schema().fields
            if f.field_id in before and before[f.field_id].field_type != f.field_type
        ]

    def expire_snapshots(self, name: str, keep_from: int) -> int:
        """Drop from the table's metadata every snapshot before its state at global sequence
        ``keep_from`` (its newest commit at or before it, which stays, with all after it);
        returns how many were dropped.

        A table's metadata file lists every snapshot it still has and grows with each commit;
        every pin after a commit loads it, so without this each maintenance run and query gets
        slower as loads accumulate. Only metadata changes: data files stay (a reader that
        loaded the table before still reads what it pinned), no commit sequence number is
        taken, and pins at ``keep_from`` or later are unaffected. Pinning an earlier sequence
        raises :class:`SnapshotExpiredError`. The rows recorded for the dropped commits' deltas
        are removed too: no delta that starts at ``keep_from`` or later reads them.
        """
        name = self._require(name).name
        boundary = self.commit_log.commit_at(name, keep_from)
        if boundary is None or boundary.snapshot_id is None:
            return 0
        attempts = self.settings.commit_attempts
        expired = 0
        for attempt in range(1, attempts + 1):
            table = self.catalog.load_table(name)
            older = _ancestors(table, boundary.snapshot_id)
            if older and table.metadata.format_version > _PYICEBERG_WRITES_FORMAT:
                self._expire_with_spark(name, table, older)
                expired = len(older)
            elif older:
                try:
                    with recording(PendingCommit(name, "expire", metadata_only=True)):
                        table.maintenance.expire_snapshots().by_ids(older).commit()
                except (CommitFailedException, ValueError) as exc:  # ValueError: one went meanwhile
                    if attempt == attempts:
                        raise CommitConflictError(name, attempts) from exc
                    _pause_before_retry(attempt)
                    continue
                log.info("expired %d snapshots of %s before sequence %d", len(older), name, boundary.seq)
                expired = len(older)
            break
        self.recorded_rows.remove_through(name, boundary.seq)
        return expired

    def _expire_with_spark(self, name: str, table: Table, snapshot_ids: list[int]) -> None:
        """Expire the snapshots of a table PyIceberg cannot commit to with Iceberg's Spark
        procedure (a metadata-only commit like PyIceberg's; Spark also deletes the files only
        those snapshots read, as :meth:`remove_unreferenced_files` would later)."""
        if self.spark is None:
            raise _not_writable_by_pyiceberg(name, table)
        ids = ", ".join(f"{i}L" for i in snapshot_ids)
        # older_than at the epoch: expire exactly these, not also what is older than Iceberg's
        # default five days (a kept sketch version may still read those).
        call = (
            f"CALL {self.settings.catalog_name}.system.expire_snapshots(table => '{iceberg_name(table)}', "
            f"older_than => TIMESTAMP '1970-01-01 00:00:00', retain_last => 1, snapshot_ids => array({ids}))"
        )

        from sketch_core.spark.jobs import spark_job  # pyspark: only for tables that need it

        with spark_job(f"expiring {len(snapshot_ids)} snapshots of {name}"):
            self.spark().sql(call).collect()
        self._loaded.pop(name, None)
        log.info("expired %d snapshots of %s with Spark", len(snapshot_ids), name)

    def recluster(self, name: str, layout: Layout | None, page_rows: int | None = None) -> int:
        """Rewrite every data file of ``name`` in ``layout`` (a sort or a Z-order) with
        Iceberg's ``rewrite_data_files`` on Spark: one ``replace`` commit, the same rows, so
        sketches stay valid and their maintenance has nothing to do (see
        :mod:`sketch_core.tables.rewrites`). ``page_rows``: Parquet pages of at most that many
        rows, in this rewrite and the table's later Spark writes; with ``layout`` None only the
        pages change (each file rewritten with its rows in their order). Returns the latest
        commit sequence of the table after it. Raises TableNotFoundError, ConfigurationError (a
        column the table lacks, a page size below one row, neither a layout nor pages, or no
        Spark) or SparkJobError."""
        if page_rows is not None and (
            isinstance(page_rows, bool) or not isinstance(page_rows, int) or page_rows < 1
        ):
            raise ConfigurationError(
                f"page_rows must be a positive number of rows, got {page_rows!r}",
                hint="e.g. the rows of one sketch fragment (table rows / fragments), or leave it unset",
            )
        if layout is None and page_rows is None:
            raise ConfigurationError(
                f"nothing to rewrite {name} in: neither a layout nor a page size was given",
                hint="give a layout, e.g. Layout('sort', ('column',)), or page_rows, or both",
            )
        name = self._require(name).name
        loaded = self.catalog.load_table(name)
        columns = loaded.schema().column_names
        missing = [c for c in (layout.columns if layout is not None else ()) if c not in columns]
        if missing:
            raise ConfigurationError(
                f"{name} has no column {', '.join(missing)} to lay its files out by",
                hint=f"its columns: {', '.join(columns)}",
            )
        if self.spark is None:
            raise ConfigurationError(
                f"rewriting {name} in a layout runs on Spark, and this table service has none",
                hint="use the service's tables (svc.tables), which have its Spark session",
            )
        from sketch_core.spark.jobs import spark_job

        described = str(layout) if layout is not None else f"pages of {page_rows} rows"
        with spark_job(f"the rewrite of {name} in {described}"):
            outcome = rewrite_in_layout(
                self.spark(), self.settings.catalog_name, iceberg_name(loaded), layout, page_rows
            )
        self._loaded.pop(name, None)
        log.info("rewrote %s in %s: %s", name, described, outcome)
        self.commit_log.latest_sequence()  # records the rewrite's commit
        return self._latest_seq(name)

    def remove_unreferenced_files(self, name: str, older_than: float) -> RemovedFiles:
        """Delete the table's files that none of its snapshots still reaches (those only expired
        snapshots read, and those of writes that died before their commit), written before
        ``older_than`` (seconds since the epoch): files written since may belong to a commit
        still under way. A reader that pinned a snapshot since expired loses its files, which
        is why snapshots are only expired past the retention time."""
        name = self._require(name).name
        removed = remove_unreferenced_files(self.catalog.load_table(name), older_than)
        if removed.files:
            log.info("removed %d unreferenced files (%d bytes) of %s", removed.files, removed.bytes, name)
        return removed

    # -- reads -------------------------------------------------------------------------------
    def record(self, name: str) -> TableRecord:
        """The table's registration (its normalized name, sort key, creating commit). Raises
        TableNotFoundError."""
        return self._require(name)

    def exists(self, name: str) -> bool:
        """Whether table ``name`` exists (not dropped)."""
        return self._registered(normalize_table_name(name)) is not None

    def list(self) -> list[TableRecord]:
        """Every table's registration (other engines' new tables included)."""
        self.commit_log.latest_sequence()
        return self.commit_log.list_tables()

    def commits(self, name: str | None = None) -> builtins.list[CommitRecord]:
        """The commits of ``name`` (None: of every table) in sequence order, with their
        operation and rows added and deleted. Raises TableNotFoundError."""
        if name is not None:
            name = self._require(name).name
        return self.commit_log.commits(name)

    def dropped_columns(self, name: str) -> set[str]:
        """The top-level columns an earlier schema of ``name`` had and its current one lacks
        (lower-case): dropped by another engine, or renamed. Raises TableNotFoundError."""
        _, _, table = self._open(name, fresh=True)
        current = {field.name.lower() for field in table.schema().fields}
        earlier = {field.name.lower() for schema in table.metadata.schemas for field in schema.fields}
        return earlier - current

    def properties(self, name: str) -> dict[str, str]:
        """The table's Iceberg properties (its write settings among them), as committed last.
        Raises TableNotFoundError."""
        return dict(self._open(name, fresh=True)[2].properties)

    def schema(self, name: str) -> pa.Schema:
        """The table's current schema, as Arrow. Raises TableNotFoundError."""
        return self._open(name)[2].schema().as_arrow()

    def pin(self, name: str, sequence: int | None = None) -> PinnedSnapshot:
        """The data files of ``name`` as of global commit sequence ``sequence`` (None: latest).
        Raises TableNotFoundError, SnapshotNotFoundError (the table had no commit by then),
        SnapshotExpiredError (its state at ``sequence`` was expired by garbage collection) or
        UnsupportedTableFeatureError (ORC or Avro data files, equality deletes)."""
        name = self._require(name).name
        commit = self._commit_at(name, sequence)
        _, _, table = self._open(name)
        if commit.snapshot_id is not None and table.metadata.snapshot_by_id(commit.snapshot_id) is None:
            _, _, table = self._open(name, fresh=True)  # loaded before the commit was seen
            if table.metadata.snapshot_by_id(commit.snapshot_id) is None:
                raise SnapshotExpiredError(name, sequence if sequence is not None else commit.seq)
        files = DataFiles() if commit.snapshot_id is None else self._snapshot_files(name, table, commit)
        _refuse_other_formats(name, files)
        schema = self._arrow_schema(name, table)
        return PinnedSnapshot(
            name,
            commit.seq,
            commit.snapshot_id,
            files,
            schema,
            catalog=self.settings.catalog_name,
            catalog_table=spelled if (spelled := iceberg_name(table)) != name else None,
            snapshot_names=_snapshot_names(table, commit.snapshot_id) if names_changed_in(schema) else None,
        )

    def retains(self, name: str, sequence: int) -> bool:
        """Whether the table's state at ``sequence`` can still be pinned (not expired); read
        from the table's metadata, without planning its files."""
        name = self._require(name).name
        commit = self._commit_at(name, sequence)
        if commit.snapshot_id is None:
            return True
        if self._open(name)[2].metadata.snapshot_by_id(commit.snapshot_id) is not None:
            return True
        return self._open(name, fresh=True)[2].metadata.snapshot_by_id(commit.snapshot_id) is not None

    def _arrow_schema(self, name: str, table: Table) -> pa.Schema:
        """The table's current schema in Arrow, converted once per schema (every pin needs it)."""
        # By the table's uuid, not its name: a table created again under a name has its own.
        key = (str(table.metadata.table_uuid), table.metadata.current_schema_id)
        schema = self._arrow_schemas.get(key)
        if schema is None:
            schema = table.schema().as_arrow()
            if names_changed(table.schema(), table.metadata.schemas):
                schema = schema.with_metadata({**(schema.metadata or {}), NAMES_CHANGED: b"1"})
            self._arrow_schemas[key] = schema
        return schema

    def _snapshot_files(self, name: str, table: Table, commit: CommitRecord) -> DataFiles:
        """The snapshot's data files with their statistics; planned once per snapshot and schema
        (planning and decoding the bounds costs ~20 ms per 100 files, on every query).

        A snapshot whose parent is already planned is derived from it: the parent's files, less
        the files this snapshot removed, plus those it added, both read from the manifests this
        snapshot wrote. A commit's pin then costs one manifest read, not a plan of the table; and
        none when the commit row carries its file changes (see :mod:`file_changes`).
        """
        assert commit.snapshot_id is not None
        snapshot_id = commit.snapshot_id
        schema_id = table.metadata.current_schema_id  # the bounds are decoded with this schema
        uuid = str(table.metadata.table_uuid)
        key = (uuid, snapshot_id, schema_id)
        cached = self._pinned_files.get(key)
        if cached is not None:
            return cached
        parent: DataFiles | None = DataFiles()  # the first snapshot's parent: no files
        if commit.parent_snapshot_id is not None:
            parent = self._pinned_files.get((uuid, commit.parent_snapshot_id, schema_id))
        if commit.files is not None and parent is not None and not parent.has_deletes:
            recorded = apply_recorded(parent, commit.files, table.schema())
            if recorded is not None:
                self._pinned_files.put(key, recorded)
                return recorded
        # The nearest planned ancestor, and the snapshots after it down to this one.
        chain: list[Snapshot] = []
        base: DataFiles | None = None
        snapshot = table.metadata.snapshot_by_id(snapshot_id)
        while snapshot is not None and len(chain) < _DERIVE_MAX_SNAPSHOTS:
            chain.append(snapshot)
            if snapshot.parent_snapshot_id is None:
                break
            base = self._pinned_files.get((uuid, snapshot.parent_snapshot_id, schema_id))
            if base is not None:
                break
            snapshot = table.metadata.snapshot_by_id(snapshot.parent_snapshot_id)
        planned = None
        if base is not None:
            for step in reversed(chain):
                planned = self._derived_files(name, table, step, base)
                if planned is None:
                    break
                self._pinned_files.put((uuid, step.snapshot_id, schema_id), planned)
                base = planned
        if planned is None:
            planned = self._planned_files(name, table, snapshot_id)
        self._pinned_files.put(key, planned)
        return planned

    @staticmethod
    def _planned_files(name: str, table: Table, snapshot_id: int) -> DataFiles:
        _refuse_equality_deletes(name, table, snapshot_id)
        files: list[DataFileInfo] = []
        for task in table.scan(snapshot_id=snapshot_id).plan_files():
            if any(d.content == DataFileContent.EQUALITY_DELETES for d in task.delete_files):
                raise _equality_deletes(name, snapshot_id)
            deletes = tuple(sorted({d.file_path for d in task.delete_files}))
            files.append(describe_file(task.file, table.schema(), deletes))
        return DataFiles.sorted(files)

    @staticmethod
    def _derived_files(name: str, table: Table, snapshot: Snapshot, parent: DataFiles) -> DataFiles | None:
        """``snapshot``'s files from its ``parent``'s; None when the result does not add up to the
        snapshot's own file count (then the caller plans the snapshot in full)."""
        summary = snapshot.summary
        if summary is None or TOTAL_DATA_FILES not in summary:
            return None  # nothing to check the result against
        files: DataFiles | None
        if parent.has_deletes or summary_count(snapshot, TOTAL_DELETE_FILES):
            # Merge-on-read: the delete files that apply to each data file come along (see
            # row_level_changes: derived where that is exact, else planned in full).
            if not never_partitioned(table):
                return None
            changes = read_row_level_changes(table.io, snapshot)
            files = apply_row_level_changes(parent, changes, table.schema())
        else:
            try:
                files = apply_snapshot_files(parent, read_snapshot_files(table.io, snapshot), table.schema())
            except RowLevelDeletes:  # added delete files the summary did not count
                return None
        if files is None:
            return None
        return files if summary_count(snapshot, TOTAL_DATA_FILES) == len(files) else None

    def delta(
        self,
        name: str,
        from_sequence: int | None,
        to_sequence: int | None = None,
        columns: tuple[str, ...] | None = None,
        row_filter: pc.Expression | None = None,
        pinned: PinnedSnapshot | None = None,
    ) -> TableDelta:
        """Rows inserted into and deleted from ``name`` after global commit sequence
        ``from_sequence`` (None, or a sequence before the table existed: from the empty table)
        up to ``to_sequence`` (None: latest). See :mod:`sketch_core.tables.deltas`.
        ``pinned``: the table already pinned at ``to_sequence`` (saves pinning it again)."""
        if from_sequence is not None and to_sequence is not None and from_sequence > to_sequence:
            raise DeltaRangeError(name, from_sequence, to_sequence)
        if pinned is None or (to_sequence is not None and pinned.sequence > to_sequence):
            pinned = self.pin(name, to_sequence)
        after = pinned
        start = self.commit_log.commit_at(after.table, from_sequence) if from_sequence is not None else None
        if start is not None and start.seq == after.sequence:  # no commit in between: nothing to read
            empty = read_files([], after.schema, columns)
            return TableDelta(after.table, from_sequence, after.sequence, empty, empty, 0)
        before = self.pin(after.table, from_sequence) if start is not None else None
        whole = columns is None and row_filter is None
        kept = None if whole else self._recent_deltas.restricted(before, after, columns, row_filter)
        if kept is not None:  # validation read it whole just before
            return kept
        composed = self._recorded_delta(before, after, columns, row_filter)
        found = composed if composed is not None else snapshot_delta(before, after, columns, row_filter)
        if whole:
            self._recent_deltas.keep(before, after, found)
        return found

    def _recorded_delta(
        self,
        before: PinnedSnapshot | None,
        after: PinnedSnapshot,
        columns: tuple[str, ...] | None,
        row_filter: pc.Expression | None,
    ) -> TableDelta | None:
        """The delta composed commit by commit: appended files are inserts, deletes and
        overwrites contribute the rows their writer recorded, and rewrites (``replace``:
        compactions, sorts) none. None when some commit in the
        range has no record, or files no reader here takes (then the caller compares files)."""
        start = before.sequence if before is not None else 0
        commits = self.commit_log.commits(after.table, after_seq=start, until_seq=after.sequence)
        inserted: list[pa.Table] = []
        deleted: list[pa.Table] = []
        previous = before
        files_read = 0
        for commit in commits:
            try:
                current = self.pin(after.table, commit.seq)
            except UnsupportedTableFeatureError:  # files since rewritten (the ends were pinned)
                return None
            if commit.operation == "replace":  # rewritten files, the same rows: nothing changed
                previous = current
                continue
            written = (
                self.recorded_rows.read(after.table, commit.seq, "inserted")
                if commit.operation == "append"
                else None
            )
            if written is not None:  # a small append's rows, as recorded
                inserted.append(restrict(written, after.schema, columns, row_filter))
            elif commit.operation in ("create", "append"):
                added = recorded_added_paths(commit.files)
                appeared = current.files.with_paths(added) if added is not None else []
                if added is None or len(appeared) != len(added):
                    # Not recorded (too many files, another writer's commit): the files new to it.
                    known = previous.files.paths if previous is not None else frozenset()
                    appeared = [f for f in current.files if f.path not in known]
                inserted.append(read_files(appeared, after.schema, columns, row_filter))
                files_read += len(appeared)
            else:
                removed = self.recorded_rows.read(after.table, commit.seq, "deleted")
                if removed is None:
                    return None
                deleted.append(restrict(removed, after.schema, columns, row_filter))
                if commit.operation == "overwrite":
                    added = self.recorded_rows.read(after.table, commit.seq, "inserted")
                    if added is None:
                        return None
                    inserted.append(restrict(added, after.schema, columns, row_filter))
            previous = current
        empty = read_files([], after.schema, columns)
        net_inserted, net_deleted = bag_difference(
            pa.concat_tables([empty, *inserted]), pa.concat_tables([empty, *deleted])
        )
        return TableDelta(
            after.table,
            before.sequence if before is not None else None,
            after.sequence,
            net_inserted,
            net_deleted,
            files_read,
        )

    def read_arrow(
        self,
        name: str,
        sequence: int | None = None,
        columns: tuple[str, ...] | None = None,
        where: str | None = None,
    ) -> pa.Table:
        """Read (part of) a pinned snapshot with PyIceberg, without Spark."""
        name = self._require(name).name
        commit = self._commit_at(name, sequence)
        _, _, table = self._open(name, fresh=True)
        schema = table.schema().as_arrow()
        if commit.snapshot_id is None:
            empty = schema.empty_table()
            return empty.select(list(columns)) if columns else empty
        _refuse_equality_deletes(name, table, commit.snapshot_id)
        row_filter = to_iceberg_expression(where, table.schema(), name) if where else AlwaysTrue()
        scan = table.scan(
            row_filter=row_filter, snapshot_id=commit.snapshot_id, selected_fields=columns or ("*",)
        )
        return scan.to_arrow()

    # -- internals ---------------------------------------------------------------------------
    def _table_properties(self) -> dict[str, str]:
        return {
            # What PyIceberg writes, and what Iceberg's Java API sets on tables it creates:
            # without it, Spark's writer falls back to gzip (2.7x the write time of zstd for
            # the demo's table, and its report 1.4x slower to read).
            "write.parquet.compression-codec": "zstd",
            "write.target-file-size-bytes": str(self.settings.target_file_bytes),
            "write.parquet.row-group-limit": str(self.settings.row_group_rows),
        }

    def _append_in_files(self, txn: Transaction, arrow: pa.Table) -> None:
        """Append sorted rows as consecutive runs of one file each.

        A RecordBatchReader is packed first-in first-out (a pa.Table is bin-packed with lookback,
        which may put distant key ranges in one file). With the target lowered to one byte for
        this append only, every batch becomes exactly one file, so we choose the file size; the
        target is restored in the same transaction, so the commit leaves it unchanged.
        """
        if arrow.num_rows == 0:
            return
        row_bytes = max(1, arrow.nbytes // arrow.num_rows)
        rows_per_file = max(1, int(self.settings.target_file_bytes * _FILL_FRACTION) // row_bytes)
        batches = arrow.combine_chunks().to_batches(max_chunksize=rows_per_file)
        txn.set_properties({_TARGET_PROPERTY: "1"})
        txn.append(pa.RecordBatchReader.from_batches(arrow.schema, batches))
        txn.set_properties({_TARGET_PROPERTY: str(self.settings.target_file_bytes)})

    @staticmethod
    def _matching(table: Table, expression: BooleanExpression) -> pa.Table:
        """The rows of the table's current snapshot that ``expression`` selects."""
        if table.current_snapshot() is None:
            return table.schema().as_arrow().empty_table()
        return table.scan(row_filter=expression).to_arrow()

    def _require(self, name: str) -> TableRecord:
        name = normalize_table_name(name)
        record = self._records.get(name)
        if record is not None and self.commit_log.superseded(name, record.table_id):
            # Dropped (and perhaps created again) since: by another process, or this one.
            del self._records[name]
            self._loaded.pop(name, None)
            record = None
        if record is None:
            record = self._registered(name)
            if record is None:
                raise TableNotFoundError(name, [t.name for t in self.commit_log.list_tables()])
            self._records[name] = record
        return record

    def _registered(self, name: str) -> TableRecord | None:
        """The table's registration; a name not registered yet may be a table another engine
        (Spark) created since the commit log last looked: it looks again, once."""
        record = self.commit_log.get_table(name)
        if record is None:
            self.commit_log.latest_sequence()  # records other engines' new commits
            record = self.commit_log.get_table(name)
        return record

    def _open(self, name: str, *, fresh: bool = False) -> tuple[str, TableRecord, Table]:
        """The table's metadata, at least as new as its newest commit the commit log has seen.

        A loaded table is reused until the commit log sees a newer commit of it, which saves
        the catalog query of every load. ``fresh`` (a write) loads it from the catalog, after
        the commit log has seen every commit (a registration replaced by a drop and a create
        elsewhere is then known: the write sorts by the new table's key).
        """
        if fresh:
            self.commit_log.latest_sequence()
        record = self._require(name)
        newest = self.commit_log.newest_seen(record.name)
        seen = newest.seq if newest is not None else None
        # A schema change (another engine's rename) is a catalog commit that records no commit.
        catalog_seen = self.commit_log.catalog_seen(record.name)
        loaded = self._loaded.get(record.name)
        if not fresh and loaded is not None and seen is not None and loaded[:2] == (seen, catalog_seen):
            return record.name, record, loaded[2]
        try:
            if (
                not fresh
                and loaded is not None
                and newest is not None
                and newest.metadata_location
                and newest.table_id == record.table_id == loaded[3]
                and catalog_seen < newest.seq
            ):
                # The newest commit seen set the catalog's pointer last (no schema change
                # after it): its metadata file, under the name the catalog spells (as loaded
                # before), without the catalog's query for the pointer (a maintenance run
                # after each load opens the table once so).
                table = self.catalog.table_at(loaded[2].name(), newest.metadata_location)
            else:
                table = self.catalog.load_table(record.name)
        except NoSuchTableError as exc:
            raise TableNotFoundError(record.name) from exc
        except FileNotFoundError as exc:
            raise WarehouseMismatchError(record.name, str(exc)) from exc
        if seen is not None:
            self._loaded[record.name] = (seen, catalog_seen, table, record.table_id)
        return record.name, record, table

    def _commit_at(self, name: str, sequence: int | None) -> CommitRecord:
        commit = self.commit_log.commit_at(name, sequence)
        if commit is None:
            self._require(name)  # dropped since it was looked up: TableNotFoundError
            raise SnapshotNotFoundError(name, sequence if sequence is not None else 0)
        return commit

    def _latest_seq(self, name: str) -> int:
        commit = self.commit_log.commit_at(name, None)
        assert commit is not None, "a registered table always has its create commit"
        return commit.seq

    def _commit(
        self,
        name: str,
        operation: str,
        added_rows: int,
        build: Callable[[Transaction], None],
        changed_rows: Callable[[Table], dict[str, pa.Table]] | None = None,
    ) -> int:
        """Run ``build`` in a transaction and commit it, retrying lost races on fresh metadata.

        PyIceberg already retries a lost race a few times by re-applying the same files to the
        new metadata; this loop handles what outlasts that, or a concurrent change that
        invalidates the plan (ValidationException), by rebuilding from the start.
        """
        attempts = self.settings.commit_attempts
        for attempt in range(1, attempts + 1):
            try:
                table = self.catalog.load_table(name)
            except NoSuchTableError as exc:  # dropped meanwhile
                raise TableNotFoundError(name) from exc
            _require_pyiceberg_writable(name, table)
            pending = PendingCommit(name, operation, added_rows=added_rows)
            # The rows this commit removes, found on the metadata the transaction starts from.
            recorded = changed_rows(table) if changed_rows is not None else None
            try:
                with recording(pending), warnings.catch_warnings():
                    # PyIceberg warns when a delete matches nothing; that is not an error here.
                    warnings.filterwarnings("ignore", message="Delete operation did not match any records")
                    # The service's own deletes are copy-on-write, whatever the table's delete
                    # mode (Spark's merge-on-read commits to the same table are read as such).
                    warnings.filterwarnings("ignore", message="Merge on read is not yet supported")
                    txn = self.new_transaction(table)
                    build(txn)
                    txn.commit_transaction()
            except (CommitFailedException, ValidationException):
                if attempt == attempts:
                    break
                log.info("commit to %s lost a race (attempt %d); retrying", name, attempt)
                _pause_before_retry(attempt)
                continue
            if pending.seq is None:  # nothing changed (e.g. a delete that matched no rows)
                log.info("%s on %s changed nothing; no commit made", operation, name)
                return self._latest_seq(name)
            if recorded is not None:
                try:
                    self.recorded_rows.write(name, pending.seq, recorded)
                except OSError as exc:  # the commit stands; its delta falls back to comparing files
                    log.warning("could not record the rows of %s commit %d: %s", name, pending.seq, exc)
            return pending.seq
        raise CommitConflictError(name, attempts)


def iceberg_name(table: Table) -> str:
    """``namespace.table`` as the Iceberg catalog spells it, which Spark's Iceberg catalog needs
    (this project's own name for it is lower-case: see ``RecordingSqlCatalog.load_table``)."""
    return ".".join(table.name())
