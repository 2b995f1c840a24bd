"""Lifecycle: expiring old sketch versions, their state files and the table snapshots nothing
reads any more; dropping sketches and tables."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

from sketch_core.errors import TableInUseError
from sketch_core.metastore.table_drop import forget_table
from sketch_core.service.core import ServiceCore
from sketch_core.service.results import GarbageReport
from sketch_core.spark.delta_partials import SCRATCH_DIRECTORY, collect_scratch
from sketch_core.spark.views import referenced_tables
from sketch_core.tables.orphans import RemovedFiles

log = logging.getLogger(__name__)


class Lifecycle(ServiceCore):
    """Garbage collection and drops."""

    def collect_garbage(self, names: Sequence[str] | None = None) -> GarbageReport:
        """Expire old sketch versions and delete the state files nothing reads any more.

        Each sketch (of ``names``, default all) keeps its newest ``settings.retain_versions``
        versions and every version younger than ``settings.retain_seconds``: a query pinned to
        an older snapshot may still be using one. State directories are deleted when no kept
        version reads them (directly or as the base of its layers) and they are older than that
        too, which also clears what runs that died before publishing left behind. With
        ``settings.expire_table_snapshots``, the tables' snapshots that nothing kept reads are
        expired, and then their files that no snapshot left reaches (and those of writes that
        died) are deleted, past the same retention time.
        """
        self._collected_at = time.monotonic()  # the next automatic collection waits from here
        every_table = names is None
        names = list(names) if names is not None else [d.name for d in self.sketches.definitions()]
        expired = {
            n: self.sketches.expire_versions(n, self.settings.retain_versions, self.settings.retain_seconds)
            for n in names
        }
        live = [ref for refs in self.sketches.state_refs().values() for ref in refs]
        older_than = time.time() - self.settings.retain_seconds
        removed = self.state_store.collect(live, older_than=older_than)
        removed += collect_scratch(self.settings.warehouse / SCRATCH_DIRECTORY, older_than)
        snapshots: dict[str, int] = {}
        files: dict[str, RemovedFiles] = {}
        if self.settings.expire_table_snapshots:
            tables = self._tables_of(None if every_table else names)
            snapshots = self._expire_table_snapshots(tables)
            # Then the files only the expired snapshots read, or that died with their writes.
            for table in tables:
                gone = self.tables.remove_unreferenced_files(table, older_than)
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
        if names is None:
            return sorted(record.name for record in self.tables.list())
        wanted = set(names)
        definitions = self.sketches.definitions()
        return sorted({t for d in definitions if d.name in wanted for t in referenced_tables(d.query_sql)})

    def _expire_table_snapshots(self, tables: Sequence[str]) -> dict[str, int]:
        """Expire the snapshots of ``tables`` that no kept sketch version, of any sketch, and no
        query pinned within the retention time can still read: each table keeps its state as
        of the newest commit older than ``retain_seconds`` and as of its sketches' oldest kept
        versions, and all after them."""
        recent = self.commit_log.sequence_older_than(self.settings.retain_seconds)
        if recent == 0:
            return {}
        keep_from = dict.fromkeys(tables, recent)
        for sql, oldest in self.sketches.oldest_sequences():
            for table in referenced_tables(sql):
                if table not in keep_from:
                    continue
                if self._left_far_behind(table, oldest):
                    log.info(
                        "%s: a sketch version at sequence %d is over %d loads behind; its history "
                        "is not kept (the sketch is recaptured when brought up)",
                        table,
                        oldest,
                        self.settings.stale_history_loads,
                    )
                    continue
                keep_from[table] = min(keep_from[table], oldest)
        expired = {
            table: self.tables.expire_snapshots(table, seq) for table, seq in sorted(keep_from.items())
        }
        return {table: count for table, count in expired.items() if count}

    def _left_far_behind(self, table: str, sequence: int) -> bool:
        """Whether a sketch version at ``sequence`` is more than ``stale_history_loads`` loads of
        ``table`` behind, and so no longer holds its history (see the setting)."""
        limit = self.settings.stale_history_loads
        return limit > 0 and len(self.commit_log.commits(table, after_seq=sequence)) > limit

    def drop_table(self, name: str, cascade: bool = False) -> int:
        """Drop table ``name`` with its history, partitions, samples and validation results,
        and delete its files; returns the sequence number of the drop. Refused with
        :class:`TableInUseError` while sketches read it, unless ``cascade`` (then they are
        dropped first). The name can be used again at once, for a table of its own."""
        table = self.tables.record(name).name
        readers = [d.name for d in self.sketches.definitions() if table in referenced_tables(d.query_sql)]
        if readers and not cascade:
            raise TableInUseError(table, readers)
        for reader in readers:
            self.drop_sketch(reader)
            log.info("dropped sketch %s, which read %s", reader, table)
        samples: list[str] = []
        sequence = self.tables.drop(
            table, lambda conn, table_id: samples.extend(forget_table(conn, table, table_id))
        )
        for path in samples:
            Path(path).unlink(missing_ok=True)
        return sequence

    def drop_sketch(self, name: str) -> None:
        """Delete a sketch and all its versions; queries stop using it at once."""
        self.sketches.drop(name)
        # What this process remembers of it would pass for a sketch captured again under its name.
        self._engines.pop(name, None)
        self.advisor.forget(name)
