"""Lifecycle: expiring old sketch versions, their state files and the table snapshots nothing
reads any more; dropping sketches and tables."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

from sketch_core.algebra.query_text import referenced_tables
from sketch_core.errors import TableInUseError
from sketch_core.metastore.table_drop import forget_table
from sketch_core.service.context import ServiceContext
from sketch_core.service.engines import EngineCache
from sketch_core.service.results import GarbageReport
from sketch_core.spark.delta_partials import SCRATCH_DIRECTORY, collect_scratch
from sketch_core.tables.orphans import RemovedFiles

log = logging.getLogger(__name__)


class Lifecycle:
    """Garbage collection and drops."""

    def __init__(self, context: ServiceContext, cache: EngineCache) -> None:
        self.context = context
        self.cache = cache
        self.collected_at = float("-inf")  # monotonic time of the last collection

    def collect_after_maintenance(self, names: Sequence[str]) -> None:
        """Collect garbage after maintenance runs that published versions, at most once per
        tenth of the retention time (expired versions linger at most that much longer; a
        collection lists every state directory). The runs stand if it fails."""
        if time.monotonic() - self.collected_at < self.context.settings.retain_seconds / 10:
            return
        try:
            self.collect_garbage(names)
        except Exception as exc:  # garbage waits for the next collection
            log.warning("garbage collection after maintenance failed: %s", exc)

    def collect_garbage(self, names: Sequence[str] | None = None) -> GarbageReport:
        """See :meth:`SketchService.collect_garbage`."""
        ctx = self.context
        self.collected_at = time.monotonic()  # the next automatic collection waits from here
        every_table = names is None
        names = list(names) if names is not None else [d.name for d in ctx.sketches.definitions()]
        expired = {
            n: ctx.sketches.expire_versions(
                n, self.context.settings.retain_versions, self.context.settings.retain_seconds
            )
            for n in names
        }
        live = [ref for refs in ctx.sketches.state_refs().values() for ref in refs]
        older_than = time.time() - self.context.settings.retain_seconds
        removed = ctx.state_store.collect(live, older_than=older_than)
        removed += collect_scratch(self.context.settings.warehouse / SCRATCH_DIRECTORY, older_than)
        snapshots: dict[str, int] = {}
        files: dict[str, RemovedFiles] = {}
        if self.context.settings.expire_table_snapshots:
            tables = self._tables_of(None if every_table else names)
            snapshots = self._expire_table_snapshots(tables)
            # Then the files only the expired snapshots read, or that died with their writes.
            for table in tables:
                gone = ctx.tables.remove_unreferenced_files(table, older_than)
                if gone.files:
                    files[table] = gone
        report = GarbageReport({n: v for n, v in expired.items() if v}, removed, snapshots, files)
        if report.versions or removed or snapshots or files:
            log.info(
                "collected %d versions, %d state directories, %d table snapshots and %d table files",
                report.version_count,
                removed,
                sum(snapshots.values()),
                sum(f.files for f in files.values()),
            )
        return report

    def _tables_of(self, names: Sequence[str] | None) -> list[str]:
        """The tables the sketches ``names`` read (None: every table)."""
        ctx = self.context
        existing = {record.name for record in ctx.tables.list()}
        if names is None:
            return sorted(existing)
        wanted = set(names)
        definitions = ctx.sketches.definitions()
        read = {t for d in definitions if d.name in wanted for t in referenced_tables(d.query_sql)}
        return sorted(read & existing)  # not a table another engine dropped under a sketch

    def _expire_table_snapshots(self, tables: Sequence[str]) -> dict[str, int]:
        """Expire the snapshots of ``tables`` that no kept sketch version, of any sketch, and no
        query pinned within the retention time can still read: each table keeps its state as
        of the newest commit older than ``retain_seconds`` and as of its sketches' oldest kept
        versions, and all after them."""
        ctx = self.context
        recent = ctx.commit_log.sequence_older_than(self.context.settings.retain_seconds)
        if recent == 0:
            return {}
        keep_from = dict.fromkeys(tables, recent)
        for sql, oldest in ctx.sketches.oldest_sequences():
            for table in referenced_tables(sql):
                if table not in keep_from:
                    continue
                if self._left_far_behind(table, oldest):
                    log.info(
                        "%s: a sketch version at sequence %d is over %d loads behind; its history "
                        "is not kept (the sketch is recaptured when brought up)",
                        table,
                        oldest,
                        self.context.settings.stale_history_loads,
                    )
                    continue
                keep_from[table] = min(keep_from[table], oldest)
        expired = {table: ctx.tables.expire_snapshots(table, seq) for table, seq in sorted(keep_from.items())}
        return {table: count for table, count in expired.items() if count}

    def _left_far_behind(self, table: str, sequence: int) -> bool:
        """Whether a sketch version at ``sequence`` is more than ``stale_history_loads`` loads of
        ``table`` behind, and so no longer holds its history (see the setting)."""
        ctx = self.context
        limit = self.context.settings.stale_history_loads
        return limit > 0 and len(ctx.commit_log.commits(table, after_seq=sequence)) > limit

    def drop_table(self, name: str, cascade: bool = False) -> int:
        """See :meth:`SketchService.drop_table`."""
        ctx = self.context
        table = ctx.tables.record(name).name
        readers = [d.name for d in ctx.sketches.definitions() if table in referenced_tables(d.query_sql)]
        if readers and not cascade:
            raise TableInUseError(table, readers)
        for reader in readers:
            self.drop_sketch(reader)
            log.info("dropped sketch %s, which read %s", reader, table)
        samples: list[str] = []
        sequence = ctx.tables.drop(
            table, lambda conn, table_id: samples.extend(forget_table(conn, table, table_id))
        )
        for path in samples:
            Path(path).unlink(missing_ok=True)
        return sequence

    def drop_sketch(self, name: str) -> None:
        """See :meth:`SketchService.drop_sketch`."""
        self.context.sketches.drop(name)
        # What this process remembers of it would pass for a sketch captured again under its name.
        self.cache.forget(name)
        self.context.advisor.forget(name)
