"""Expiring table snapshots: the metadata stops growing with every commit, and nothing a reader
at or after the kept sequence sees changes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sketch_core.datasets import synthetic_table
from sketch_core.errors import SnapshotExpiredError, SnapshotNotFoundError
from sketch_core.service import SketchService


def rows(n: int, start: int) -> pa.Table:
    return synthetic_table(n, groups=10, seed=start, key_start=start)


def bag(table: pa.Table) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(row.values()) for row in table.to_pylist())


def metadata_path(svc: SketchService, name: str) -> Path:
    return Path(svc.catalog.load_table(name).metadata_location.removeprefix("file://"))


def history(svc: SketchService, name: str) -> list[int]:
    """The table's commit sequences: create, append, delete, overwrite, append, delete."""
    sequences = [svc.tables.create(name, rows(3_000, 0), sort_by=["key"])]
    sequences.append(svc.tables.append(name, rows(40, 50_000)))
    sequences.append(svc.tables.delete(name, "key < 200"))
    sequences.append(svc.tables.overwrite(name, rows(30, 60_000), where="key >= 2900 AND key < 3000"))
    sequences.append(svc.tables.append(name, rows(20, 70_000)))
    sequences.append(svc.tables.delete(name, "key >= 50010 AND key < 50020"))
    return sequences


def assert_reads_unchanged(svc: SketchService, name: str) -> Callable[[], None]:
    """Records what the table's history (from its third commit on) reads now: rows and pinned
    files per sequence. The returned check asserts another process (its own caches) reads the
    same at each of those sequences."""
    sequences = [c.seq for c in svc.tables.commits(name)][2:]
    reads = {s: bag(svc.tables.read_arrow(name, s)) for s in sequences}
    files = {s: svc.tables.pin(name, s).files for s in sequences}

    def check() -> None:
        other = SketchService(svc.settings, svc.engine, svc.catalog, svc.spark)
        for sequence in sequences:
            assert other.tables.pin(name, sequence).files == files[sequence]
            assert bag(other.tables.read_arrow(name, sequence)) == reads[sequence]

    return check


def test_snapshots_before_the_kept_sequence_go_and_later_reads_are_unchanged(
    svc: SketchService, ns: str
) -> None:
    name = f"{ns}.r"
    seqs = history(svc, name)
    keep = seqs[2]
    reads_unchanged = assert_reads_unchanged(svc, name)
    delta = svc.tables.delta(name, keep, seqs[-1])
    snapshots_before = len(svc.catalog.load_table(name).metadata.snapshots)
    size_before = metadata_path(svc, name).stat().st_size
    recorded = svc.tables.recorded_rows

    expired = svc.tables.expire_snapshots(name, keep)

    table = svc.catalog.load_table(name)
    assert expired == 2 and len(table.metadata.snapshots) == snapshots_before - 2
    assert metadata_path(svc, name).stat().st_size < size_before
    gone = [c.snapshot_id for c in svc.tables.commits(name) if c.seq < keep]
    assert all(table.metadata.snapshot_by_id(s) is None for s in gone if s is not None)
    assert svc.latest_sequence() == seqs[-1], "expiring takes no commit sequence number"
    assert recorded.read(name, keep, "deleted") is None, "no delta starting at `keep` reads it"
    assert recorded.read(name, seqs[3], "deleted") is not None

    reads_unchanged()
    other = SketchService(svc.settings, svc.engine, svc.catalog, svc.spark)
    again = other.tables.delta(name, keep, seqs[-1])
    assert (bag(again.inserted), bag(again.deleted)) == (bag(delta.inserted), bag(delta.deleted))

    with pytest.raises(SnapshotExpiredError) as info:
        other.tables.pin(name, seqs[1])
    assert isinstance(info.value, SnapshotNotFoundError)
    assert (info.value.table, info.value.sequence) == (name, seqs[1])
    assert "SKETCH_RETAIN_SECONDS" in str(info.value)

    assert svc.tables.expire_snapshots(name, keep) == 0, "nothing more to expire"
    after = svc.tables.append(name, rows(5, 80_000))  # and the table takes commits as before
    assert after > seqs[-1]
    assert (
        other.tables.read_arrow(name, after).num_rows == other.tables.read_arrow(name, seqs[-1]).num_rows + 5
    )


def test_the_current_snapshot_always_stays(svc: SketchService, ns: str) -> None:
    name = f"{ns}.r"
    seqs = history(svc, name)
    assert svc.tables.expire_snapshots(name, svc.latest_sequence() + 100) > 0
    table = svc.catalog.load_table(name)
    assert [s.snapshot_id for s in table.metadata.snapshots] == [table.metadata.current_snapshot_id]
    assert bag(svc.tables.read_arrow(name)) == bag(svc.tables.read_arrow(name, seqs[-1]))
    assert svc.tables.expire_snapshots(name, 0) == 0, "before the table existed: nothing to keep from"
