"""Repository for partitions, sketches, sketch versions and maintenance runs.

Publishing a version is one transaction: the version row and its fragment bitmaps appear
together or not at all (design invariant 3). A version is unique per (sketch, commit sequence),
so when two maintainers publish for the same target sequence, one inserts and the other gets
the existing version back.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from sqlalchemy import (
    ARRAY,
    BigInteger,
    ColumnElement,
    Connection,
    Engine,
    LargeBinary,
    Select,
    Table,
    bindparam,
    delete,
    func,
    insert,
    select,
    text,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB, aggregate_order_by
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from sketch_core import faults
from sketch_core.errors import SketchExistsError, SketchNotFoundError, TableNotFoundError
from sketch_core.metastore import schema
from sketch_core.metastore.commits import CommitLog
from sketch_core.metastore.engine import reading
from sketch_core.metastore.run_liveness import RunLocks
from sketch_core.metastore.work_locks import HeldLock

t = schema
log = logging.getLogger(__name__)


def sketch_id_of(conn: Connection, name: str) -> int:
    """The id of the sketch called ``name``; SketchNotFoundError when there is none."""
    value = conn.execute(select(t.sketches.c.sketch_id).where(t.sketches.c.name == name)).scalar()
    if value is None:
        raise SketchNotFoundError(name)
    return int(value)


@dataclass(frozen=True)
class PartitionRecord:
    partition_id: int
    table: str
    attribute: str
    fragment_count: int
    boundaries: Any  # JSON, as written by RangePartition.to_json
    computed_at_seq: int


@dataclass(frozen=True)
class VersionRecord:
    name: str
    version: int
    sequence: int
    table_snapshots: dict[str, int | None]
    bitmaps: dict[int, bytes]  # partition id -> serialized roaring bitmap
    state_ref: str | None


# SQLSTATE of the publish function's "sketch does not exist".
_NO_DATA_FOUND = "P0002"
# Made once: building the clause and its cache key on every publication cost ~0.1 ms of a warm
# maintenance run's ~17.
_PUBLISH = text(
    "SELECT published_version, existed FROM sketch.publish_version("
    ":name, :seq, :snapshots, :state_ref, :pids, :bitmaps, :run)"
).bindparams(
    bindparam("snapshots", type_=JSONB),
    bindparam("pids", type_=ARRAY(BigInteger)),
    bindparam("bitmaps", type_=ARRAY(LargeBinary)),
    bindparam("run", type_=JSONB(none_as_null=True)),
)
# The same, as the driver takes it (HeldLock.execute_then_release runs it on the work lock's
# session, outside SQLAlchemy).
_RAW_PUBLISH = (
    "SELECT published_version, existed FROM sketch.publish_version("
    "%s, %s, %s::jsonb, %s, %s::bigint[], %s::bytea[], %s::jsonb)"
)


@dataclass(frozen=True)
class FinishedRun:
    """A maintenance run, recorded once it is over."""

    strategy: str
    from_version: int | None
    status: str
    delta_rows: int
    seconds: float
    error: str | None = None
    table_rows: int | None = None  # rows of the sketch's tables at the snapshot it produced
    built_state: bool = False  # an incremental run that first computed its state on Spark


@dataclass(frozen=True)
class SketchDefinition:
    name: str
    query_sql: str  # the template: the query with its :name placeholders
    params: dict[str, Any]
    template_key: str | None
    partition_ids: dict[str, int]  # table -> partition id

    def identity(self) -> str:
        """What the sketch computes: its query, parameters and partitions. A sketch dropped
        and captured again under its name (here or by another process) counts versions from 1
        again, so what was kept or published for the old one must not pass for the new one's."""
        return json.dumps(
            [self.query_sql, self.params, sorted(self.partition_ids.items())], sort_keys=True, default=str
        )


def _version_conditions(sequence: int | None, version: int | None) -> list[ColumnElement[bool]]:
    """Conditions picking a version by the sequence it is valid at, or by its number."""
    v = t.sketch_versions.c
    conditions = []
    if sequence is not None:
        conditions.append(v.seq == sequence)
    if version is not None:
        conditions.append(v.version == version)
    return conditions


def _fragment_arrays(sketch_id: Any, version: Any) -> tuple[Any, Any]:
    """A version's partition ids and bitmaps as two arrays in the same order (columns
    ``partition_ids_of`` and ``bitmaps_of``), read with the version row itself."""
    f = t.sketch_fragments.c
    of_version = (f.sketch_id == sketch_id, f.version == version)

    def aggregated(column: Any, label: str) -> Any:
        ordered = func.array_agg(aggregate_order_by(column, f.partition_id))
        return select(ordered).where(*of_version).scalar_subquery().label(label)

    return aggregated(f.partition_id, "partition_ids_of"), aggregated(f.bitmap, "bitmaps_of")


def _version_record(name: str, row: Any) -> VersionRecord:
    m = row._mapping
    ids, bitmaps = m["partition_ids_of"] or [], m["bitmaps_of"] or []
    return VersionRecord(
        name,
        m["version"],
        m["seq"],
        dict(m["table_snapshots"]),
        {int(pid): bytes(bitmap) for pid, bitmap in zip(ids, bitmaps, strict=True)},
        m["state_ref"],
    )


def _definitions_and_versions_query() -> Select[Any]:
    """Every sketch with its newest version (NULL columns when it has none) and that
    version's fragments."""
    v = t.sketch_versions.c
    newest = (
        select(v.version, v.seq, v.table_snapshots, v.state_ref)
        .where(v.sketch_id == t.sketches.c.sketch_id)
        .order_by(v.version.desc())
        .limit(1)
        .lateral("newest")
    )
    return select(
        t.sketches, *newest.c, *_fragment_arrays(t.sketches.c.sketch_id, newest.c.version)
    ).select_from(t.sketches.outerjoin(newest, true()))


# Built once: constructing it costs about as much as running it (0.5 ms), on every maintenance run.
_DEFINITION_AND_VERSION = _definitions_and_versions_query().where(t.sketches.c.name == bindparam("name"))


def newest_per_sketch(table: Table, order: ColumnElement[Any], names: Sequence[str]) -> Select[Any]:
    """The newest row (greatest ``order``, a unique column of ``table``) of each sketch of
    ``names`` that has one, with the sketch's ``name``: one read for many sketches."""
    s = t.sketches.c
    sketch_id = table.c.sketch_id
    newest = (
        select(func.max(order))
        .where(sketch_id.in_(select(s.sketch_id).where(s.name.in_(list(names)))))
        .group_by(sketch_id)
    )
    return select(s.name, table).join(t.sketches, s.sketch_id == sketch_id).where(order.in_(newest))


def _partition_record(m: Any, table: str) -> PartitionRecord:
    return PartitionRecord(
        m["partition_id"], table, m["attribute"], m["fragment_count"], m["boundaries"], m["computed_at_seq"]
    )


class SketchRepository:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.run_locks = RunLocks(engine)

    # -- partitions ----------------------------------------------------------------------------
    def find_partition(self, table: str, attribute: str, fragment_count: int) -> PartitionRecord | None:
        with reading(self.engine) as conn:
            row = conn.execute(
                select(t.partitions)
                .join(t.tables, t.tables.c.table_id == t.partitions.c.table_id)
                .where(
                    t.tables.c.name == table,
                    t.LIVE_TABLES,
                    t.partitions.c.attribute == attribute,
                    t.partitions.c.fragment_count == fragment_count,
                )
            ).first()
        if row is None:
            return None
        return _partition_record(row._mapping, table)

    def partition_ids(self, table: str, fragment_count: int) -> dict[str, int]:
        """The ids of ``table``'s stored partitions of ``fragment_count`` fragments, by attribute
        (without their boundaries: a caller that keeps partitions by id reads those once)."""
        with reading(self.engine) as conn:
            rows = conn.execute(
                select(t.partitions.c.attribute, t.partitions.c.partition_id)
                .join(t.tables, t.tables.c.table_id == t.partitions.c.table_id)
                .where(
                    t.tables.c.name == table, t.LIVE_TABLES, t.partitions.c.fragment_count == fragment_count
                )
            ).all()
        return {attribute: partition_id for attribute, partition_id in rows}

    def ensure_partition(
        self, table: str, attribute: str, fragment_count: int, boundaries: Any, computed_at_seq: int
    ) -> PartitionRecord:
        """The stored partition for (table, attribute, fragment count); stored now if new.

        An existing partition wins over new boundaries, so fragment ids stay comparable across
        the sketches that share it.
        """
        with self.engine.begin() as conn:
            table_id = CommitLog.table_id(conn, table)
            if table_id is None:
                raise TableNotFoundError(table)
            conn.execute(
                pg_insert(t.partitions)
                .values(
                    table_id=table_id,
                    attribute=attribute,
                    fragment_count=fragment_count,
                    boundaries=boundaries,
                    computed_at_seq=computed_at_seq,
                    created_at=func.now(),
                )
                .on_conflict_do_nothing(index_elements=["table_id", "attribute", "fragment_count"])
            )
        # Partitions are never deleted, so the row read back is the one that won.
        found = self.find_partition(table, attribute, fragment_count)
        assert found is not None
        return found

    # -- sketches and versions -------------------------------------------------------------------
    def ensure_sketch(
        self,
        name: str,
        query_sql: str,
        params: Mapping[str, Any] | None = None,
        *,
        template_key: str | None = None,
        partition_ids: Mapping[str, int] | None = None,
    ) -> int:
        """The sketch's id, registering it if new; an existing sketch must be the same definition."""
        wanted = {
            "query_sql": query_sql,
            "params": dict(params or {}),
            "partition_ids": dict(partition_ids or {}),
        }
        with self.engine.begin() as conn:
            conn.execute(
                pg_insert(t.sketches)
                .values(name=name, template_key=template_key, created_at=func.now(), **wanted)
                .on_conflict_do_nothing(index_elements=["name"])
            )
            row = conn.execute(select(t.sketches).where(t.sketches.c.name == name)).one()._mapping
            if any(row[k] != v for k, v in wanted.items()):
                raise SketchExistsError(name)
            return int(row["sketch_id"])

    @staticmethod
    def _definition(row: Any) -> SketchDefinition:
        m = row._mapping
        return SketchDefinition(
            m["name"],
            m["query_sql"],
            dict(m["params"]),
            m["template_key"],
            {k: int(v) for k, v in m["partition_ids"].items()},
        )

    def definition(self, name: str) -> SketchDefinition:
        with reading(self.engine) as conn:
            row = conn.execute(select(t.sketches).where(t.sketches.c.name == name)).first()
        if row is None:
            raise SketchNotFoundError(name)
        return self._definition(row)

    def definition_and_version(self, name: str) -> tuple[SketchDefinition, VersionRecord | None]:
        """The sketch's definition and its newest version (None: none published), in one query:
        every maintenance run starts with both, and a round trip is a good part of its cost."""
        with reading(self.engine) as conn:
            row = conn.execute(_DEFINITION_AND_VERSION, {"name": name}).first()
        if row is None:
            raise SketchNotFoundError(name)
        record = None if row._mapping["version"] is None else _version_record(name, row)
        return self._definition(row), record

    def locked_definition_and_version(self, row: Any) -> tuple[SketchDefinition, VersionRecord | None]:
        """:meth:`definition_and_version` from the row ``sketch.lock_and_read_sketch`` returned
        once it held the sketch's work lock (see :class:`WorkLocks.holding_and_reading`)."""
        if not row.found:
            raise SketchNotFoundError(row.name)
        record = None if row.version is None else _version_record(row.name, row)
        return self._definition(row), record

    def definitions(self, template_key: str | None = None) -> list[SketchDefinition]:
        """Every sketch, or the sketches captured for one query template."""
        query = select(t.sketches).order_by(t.sketches.c.name)
        if template_key is not None:
            query = query.where(t.sketches.c.template_key == template_key)
        with reading(self.engine) as conn:
            return [self._definition(row) for row in conn.execute(query)]

    def definitions_and_versions(
        self, names: Sequence[str] | None = None
    ) -> list[tuple[SketchDefinition, VersionRecord | None]]:
        """Every sketch (or those of ``names`` that exist), by name, with its newest version
        (None: none published), in one query: what ``status`` shows of each."""
        query = _definitions_and_versions_query().order_by(t.sketches.c.name)
        if names is not None:
            query = query.where(t.sketches.c.name.in_(list(names)))
        with reading(self.engine) as conn:
            rows = conn.execute(query).all()
        return [
            (
                self._definition(row),
                None if row._mapping["version"] is None else _version_record(row.name, row),
            )
            for row in rows
        ]

    def version_counts(self, names: Sequence[str]) -> dict[str, int]:
        """How many versions each sketch of ``names`` keeps (those with none are left out)."""
        s, v = t.sketches.c, t.sketch_versions.c
        query = (
            select(s.name, func.count())
            .join(t.sketch_versions, v.sketch_id == s.sketch_id)
            .where(s.name.in_(list(names)))
            .group_by(s.name)
        )
        with reading(self.engine) as conn:
            return {name: int(count) for name, count in conn.execute(query)}

    def partition_by_id(self, partition_id: int) -> PartitionRecord:
        return self.partitions_by_id([partition_id])[partition_id]

    def partitions_by_id(self, partition_ids: Sequence[int]) -> dict[int, PartitionRecord]:
        """The partitions with these ids, in one read (KeyError on a missing one, at use)."""
        with reading(self.engine) as conn:
            rows = conn.execute(
                select(t.partitions, t.tables.c.name)
                .join(t.tables, t.tables.c.table_id == t.partitions.c.table_id)
                .where(t.partitions.c.partition_id.in_(list(partition_ids)))
            ).all()
        return {int(row.partition_id): _partition_record(row._mapping, row.name) for row in rows}

    def version_for_snapshots(
        self, name: str, table_snapshots: Mapping[str, int | None]
    ) -> VersionRecord | None:
        """The newest version recorded for exactly these table snapshots (design invariant 1).
        One read when there is one: every report with a sketch asks."""
        with reading(self.engine) as conn:
            snapshots = t.sketch_versions.c.table_snapshots == dict(table_snapshots)
            return self._read_version(conn, name, snapshots)

    def record_template_use(self, template_key: str, query_sql: str, *, hit: bool) -> int:
        """Count a query of the template with (hit) or without a usable sketch; returns the misses."""
        with self.engine.begin() as conn:
            statement = pg_insert(t.template_stats).values(
                template_key=template_key,
                query_sql=query_sql,
                misses=0 if hit else 1,
                hits=1 if hit else 0,
                updated_at=func.now(),
            )
            counter = t.template_stats.c.hits if hit else t.template_stats.c.misses
            upsert = statement.on_conflict_do_update(
                index_elements=["template_key"],
                set_={counter.name: counter + 1, "updated_at": func.now()},
            ).returning(t.template_stats.c.misses)
            return int(conn.execute(upsert).scalar_one())

    def publish_version(
        self,
        name: str,
        sequence: int,
        table_snapshots: Mapping[str, int | None],
        bitmaps: Mapping[int, bytes],
        state_ref: str | None = None,
        run: FinishedRun | None = None,
        lock: HeldLock | None = None,
    ) -> VersionRecord:
        """Publish the sketch's version for ``sequence``, or return the one already published.

        ``run``: the maintenance run that produced it, recorded in the same transaction (a run
        too short to be worth a "running" row of its own). ``lock``: this thread's hold on the
        sketch's work lock, to publish on its session and let go of it in the same round trip
        (the end of a maintenance run: three round trips fewer than a pooled transaction and
        the unlock after it).

        A connection lost during the transaction leaves its outcome unknown: it is settled by
        reading the version for ``sequence`` back (published, by this call or a concurrent
        one: that version is returned), and only when there is none is the publication tried
        again, once. Publishing is keyed by the sequence, so a version is never published twice.
        """
        publication = _Publication(name, sequence, dict(table_snapshots), dict(bitmaps), state_ref, run)
        try:
            if lock is not None:
                return self._publish_releasing(lock, publication)
            return self._publish(publication)
        except (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError) as exc:
            if not getattr(exc, "connection_invalidated", False) and not _connection_lost(exc):
                raise
            log.warning("connection lost while publishing %s for sequence %d: %s", name, sequence, exc)
        settled = self.version(name, sequence=sequence)
        if settled is not None:
            log.info("settled: %s version %d was published for sequence %d", name, settled.version, sequence)
            return settled
        log.info("settled: nothing was published for %s at sequence %d; publishing again", name, sequence)
        return self._publish(publication)

    def _publish_releasing(self, lock: HeldLock, publication: _Publication) -> VersionRecord:
        """:meth:`_publish` on the work lock's session, which then lets go of the lock."""
        name = publication.name
        # Autocommit: before the statement nothing is published, after it all is.
        faults.reached("publish", lock.connection)
        try:
            version, existed = lock.execute_then_release(_RAW_PUBLISH, publication.raw_arguments())
        except psycopg.errors.NoDataFound as exc:
            raise SketchNotFoundError(name) from exc
        faults.reached("publish-ack", lock.connection)
        if not existed:
            return publication.record(int(version))
        # Another run published for this sequence (it held the lock before): read back, after
        # the publishers' lock. Only a drop of the sketch since removes it.
        found = self.version(name, version=int(version))
        if found is None:
            raise SketchNotFoundError(name)
        return found

    def _publish(self, publication: _Publication) -> VersionRecord:
        # One round trip (sql/0008_publish_function.sql): the row lock on the sketch serializes
        # its publishers, so "next version number" cannot be taken twice.
        name = publication.name
        with self.engine.connect() as conn:
            try:
                version, existed = conn.execute(_PUBLISH, publication.arguments()).one()
            except DBAPIError as exc:
                if getattr(exc.orig, "sqlstate", None) == _NO_DATA_FOUND:
                    raise SketchNotFoundError(name) from exc
                raise
            # Read under the publishers' lock, which deletions take too.
            found = (
                self._read_version(conn, name, *_version_conditions(None, int(version))) if existed else None
            )
            faults.reached("publish", conn)
            conn.commit()
            faults.reached("publish-ack", conn)
        if existed:
            assert found is not None, "read under the publishers' lock"
            return found
        return publication.record(int(version))

    def _version_row(self, conn: Connection, name: str, *conditions: ColumnElement[bool]) -> Any:
        """The newest of the sketch's versions that meet ``conditions``, with its fragments."""
        v = t.sketch_versions.c
        query = (
            select(t.sketch_versions, *_fragment_arrays(v.sketch_id, v.version))
            .join(t.sketches, t.sketches.c.sketch_id == v.sketch_id)
            .where(t.sketches.c.name == name, *conditions)
        )
        return conn.execute(query.order_by(v.version.desc()).limit(1)).first()

    def version(
        self, name: str, *, sequence: int | None = None, version: int | None = None
    ) -> VersionRecord | None:
        """A version by sequence or number; with neither, the newest."""
        with reading(self.engine) as conn:
            return self._read_version(conn, name, *_version_conditions(sequence, version))

    def _read_version(
        self, conn: Connection, name: str, *conditions: ColumnElement[bool]
    ) -> VersionRecord | None:
        row = self._version_row(conn, name, *conditions)
        if row is None:
            sketch_id_of(conn, name)  # raises when the sketch itself is unknown
            return None
        return _version_record(name, row)

    def newest_head(self, name: str) -> tuple[int, int] | None:
        """(version, sequence) of the sketch's newest version, without its fragments (None:
        no version): what a report checks before it decides whether to bring the sketch up."""
        v = t.sketch_versions.c
        with reading(self.engine) as conn:
            row = conn.execute(
                select(v.version, v.seq)
                .join(t.sketches, t.sketches.c.sketch_id == v.sketch_id)
                .where(t.sketches.c.name == name)
                .order_by(v.version.desc())
                .limit(1)
            ).first()
        return None if row is None else (int(row.version), int(row.seq))

    def versions(self, name: str) -> list[int]:
        with reading(self.engine) as conn:
            sketch_id = sketch_id_of(conn, name)
            rows = conn.execute(
                select(t.sketch_versions.c.version)
                .where(t.sketch_versions.c.sketch_id == sketch_id)
                .order_by(t.sketch_versions.c.version)
            )
            return [int(v) for (v,) in rows]

    def expire_versions(self, name: str, keep: int, min_age_seconds: float) -> list[int]:
        """Delete the versions of ``name`` beyond its newest ``keep`` (at least one is always
        kept) that are older than ``min_age_seconds`` by the database clock; returns their
        numbers."""
        with self.engine.begin() as conn:
            sketch_id = sketch_id_of(conn, name)
            # The publishers' lock: a version being published now is never among the doomed.
            conn.execute(
                select(t.sketches.c.sketch_id).where(t.sketches.c.sketch_id == sketch_id).with_for_update()
            )
            cutoff = func.now() - timedelta(seconds=min_age_seconds)
            rows = conn.execute(
                select(t.sketch_versions.c.version, t.sketch_versions.c.created_at < cutoff)
                .where(t.sketch_versions.c.sketch_id == sketch_id)
                .order_by(t.sketch_versions.c.version.desc())
            ).all()
            doomed = [int(v) for v, old_enough in rows[max(1, keep) :] if old_enough]
            if doomed:  # their fragments go with them (ON DELETE CASCADE)
                conn.execute(
                    delete(t.sketch_versions).where(
                        t.sketch_versions.c.sketch_id == sketch_id, t.sketch_versions.c.version.in_(doomed)
                    )
                )
        return sorted(doomed)

    def oldest_sequences(self) -> list[tuple[str, int]]:
        """(query, sequence of its oldest kept version) for every sketch with a version."""
        v = t.sketch_versions.c
        with reading(self.engine) as conn:
            rows = conn.execute(
                select(t.sketches.c.query_sql, func.min(v.seq))
                .join(t.sketch_versions, v.sketch_id == t.sketches.c.sketch_id)
                .group_by(t.sketches.c.sketch_id)
            ).all()
        return [(sql, int(seq)) for sql, seq in rows]

    def state_refs(self) -> dict[str, list[str]]:
        """Per sketch, the state references of its versions."""
        with reading(self.engine) as conn:
            rows = conn.execute(
                select(t.sketches.c.name, t.sketch_versions.c.state_ref).select_from(
                    t.sketches.outerjoin(t.sketch_versions)
                )
            ).all()
        refs: dict[str, list[str]] = {}
        for name, ref in rows:
            refs.setdefault(name, [])
            if ref is not None:
                refs[name].append(ref)
        return refs

    def drop(self, name: str) -> None:
        """Remove a sketch with all its versions and runs (partitions stay: others share them)."""
        with self.engine.begin() as conn:
            sketch_id = sketch_id_of(conn, name)
            conn.execute(delete(t.sketches).where(t.sketches.c.sketch_id == sketch_id))

    # -- materialised views ---------------------------------------------------------------------
    def materialize_into(self, name: str, table: str) -> None:
        """Record that sketch ``name`` writes its view's rows to ``table`` (kept if already so)."""
        with self.engine.begin() as conn:
            sketch_id = sketch_id_of(conn, name)
            conn.execute(
                pg_insert(t.materialized_views)
                .values(sketch_id=sketch_id, table_name=table)
                .on_conflict_do_nothing(index_elements=["sketch_id"])
            )

    def materialized_table(self, name: str) -> str | None:
        """The table sketch ``name`` writes its view's rows to, if it is a materialised view."""
        with reading(self.engine) as conn:
            found = conn.execute(
                select(t.materialized_views.c.table_name)
                .join(t.sketches, t.sketches.c.sketch_id == t.materialized_views.c.sketch_id)
                .where(t.sketches.c.name == name)
            ).scalar()
        return str(found) if found is not None else None

    # -- maintenance runs ----------------------------------------------------------------------
    def start_run(self, name: str, strategy: str, from_version: int | None) -> int:
        """Record a run as running; this process holds its lock until :meth:`finish_run` (see
        :mod:`sketch_core.metastore.run_liveness`: a run whose process died is settled)."""
        with reading(self.engine) as conn:
            sketch_id = sketch_id_of(conn, name)
        return self.run_locks.start(
            insert(t.maintenance_runs)
            .values(
                sketch_id=sketch_id,
                strategy=strategy,
                status="running",
                from_version=from_version,
                delta_rows=0,
                started_at=func.now(),
            )
            .returning(t.maintenance_runs.c.run_id)
        )

    def record_run(self, name: str, run: FinishedRun, to_version: int | None) -> None:
        """Record a run that is already over (one that failed before publishing, say)."""
        with self.engine.begin() as conn:
            self._insert_run(conn, sketch_id_of(conn, name), run, to_version)

    @staticmethod
    def _insert_run(conn: Connection, sketch_id: int, run: FinishedRun, to_version: int | None) -> None:
        conn.execute(
            insert(t.maintenance_runs).values(
                sketch_id=sketch_id,
                strategy=run.strategy,
                status=run.status,
                from_version=run.from_version,
                to_version=to_version,
                delta_rows=run.delta_rows,
                seconds=run.seconds,
                error=run.error,
                table_rows=run.table_rows,
                built_state=run.built_state,
                started_at=func.now() - timedelta(seconds=run.seconds),
                finished_at=func.now(),
            )
        )

    def finish_run(
        self,
        run_id: int,
        *,
        status: str,
        to_version: int | None,
        delta_rows: int,
        seconds: float,
        error: str | None = None,
        table_rows: int | None = None,
    ) -> None:
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    update(t.maintenance_runs)
                    .where(t.maintenance_runs.c.run_id == run_id)
                    .values(
                        status=status,
                        to_version=to_version,
                        delta_rows=delta_rows,
                        seconds=seconds,
                        error=error,
                        table_rows=table_rows,
                        finished_at=func.now(),
                    )
                )
        finally:
            self.run_locks.release(run_id)

    def last_runs(self, names: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The newest maintenance run of each sketch of ``names`` that has one, in one read;
        running rows whose process is gone are settled as failed first (as ``runs`` does)."""
        s, r = t.sketches.c, t.maintenance_runs.c
        with self.engine.begin() as conn:
            ids = dict(conn.execute(select(s.name, s.sketch_id).where(s.name.in_(list(names)))).all())
            settled = RunLocks.settle(conn, *ids.values()) if ids else []
            if settled:
                log.warning("runs %s were abandoned by their processes", settled)
            rows = conn.execute(newest_per_sketch(t.maintenance_runs, r.run_id, names)).all()
        return {row.name: {k: v for k, v in row._mapping.items() if k != "name"} for row in rows}

    def runs(self, name: str) -> list[dict[str, Any]]:
        """The sketch's maintenance runs, oldest first; running rows whose process is gone are
        settled as failed first."""
        with self.engine.begin() as conn:
            sketch_id = sketch_id_of(conn, name)
            settled = RunLocks.settle(conn, sketch_id)
            if settled:
                log.warning("%s: runs %s were abandoned by their processes", name, settled)
            rows = conn.execute(
                select(t.maintenance_runs)
                .where(t.maintenance_runs.c.sketch_id == sketch_id)
                .order_by(t.maintenance_runs.c.run_id)
            ).all()
        return [dict(row._mapping) for row in rows]


@dataclass(frozen=True)
class _Publication:
    """What :meth:`SketchRepository.publish_version` publishes."""

    name: str
    sequence: int
    table_snapshots: dict[str, int | None]
    bitmaps: dict[int, bytes]
    state_ref: str | None
    run: FinishedRun | None

    def _values(self) -> tuple[list[int], list[bytes], dict[str, Any] | None]:
        pids = sorted(self.bitmaps)
        return pids, [self.bitmaps[p] for p in pids], asdict(self.run) if self.run is not None else None

    def arguments(self) -> dict[str, Any]:
        """The publish function's arguments, as ``_PUBLISH`` binds them."""
        pids, bitmaps, run = self._values()
        return {
            "name": self.name,
            "seq": self.sequence,
            "snapshots": self.table_snapshots,
            "state_ref": self.state_ref,
            "pids": pids,
            "bitmaps": bitmaps,
            "run": run,
        }

    def raw_arguments(self) -> tuple[Any, ...]:
        """The same, as the driver binds them to ``_RAW_PUBLISH``."""
        pids, bitmaps, run = self._values()
        wrapped = Jsonb(run) if run is not None else None
        return (self.name, self.sequence, Jsonb(self.table_snapshots), self.state_ref, pids, bitmaps, wrapped)

    def record(self, version: int) -> VersionRecord:
        """The record of the version, published as ``version``."""
        bitmaps = {int(p): bytes(b) for p, b in self.bitmaps.items()}
        return VersionRecord(
            self.name, version, self.sequence, dict(self.table_snapshots), bitmaps, self.state_ref
        )


def _connection_lost(exc: DBAPIError | psycopg.Error) -> bool:
    """Whether ``exc`` says the connection went (server closed it, network cut), rather than
    that a statement failed: the outcome of a commit in flight is then unknown."""
    text_ = str(exc.orig if isinstance(exc, DBAPIError) else exc).lower()
    return any(
        sign in text_
        for sign in ("terminating connection", "server closed the connection", "connection is closed", "eof")
    )
