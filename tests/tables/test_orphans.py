"""Removing a table's unreferenced files: what expired snapshots and dead writes left behind
goes, and every snapshot the table still has reads the same rows from the same files."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sketch_core.service import SketchService
from sketch_core.tables.orphans import (
    ListedFile,
    filesystem_path,
    list_files,
    referenced_files,
    unreferenced,
)
from tests.tables.test_expire_snapshots import assert_reads_unchanged, history, rows


def test_filesystem_paths_match_what_a_listing_gives() -> None:
    assert filesystem_path("file:///w/db/t/data/a.parquet") == "/w/db/t/data/a.parquet"
    assert filesystem_path("/w/db/t/data/a.parquet") == "/w/db/t/data/a.parquet"
    assert filesystem_path("s3://bucket/db/t/data/a.parquet") == "bucket/db/t/data/a.parquet"
    # Spark's Hadoop file system writes local URIs with one slash.
    assert filesystem_path("file:/w/db/t/data/a.parquet") == "/w/db/t/data/a.parquet"


def test_only_old_unreferenced_table_files_are_garbage() -> None:
    listed = [
        ListedFile("/t/data/live.parquet", 10, 100.0),
        ListedFile("/t/data/dead.parquet", 20, 100.0),
        ListedFile("/t/data/in-flight.parquet", 30, 500.0),  # written after the cut-off
        ListedFile("/t/metadata/old.metadata.json", 40, 100.0),
        ListedFile("/t/metadata/snap-1.avro", 50, 100.0),
        ListedFile("/t/notes.txt", 60, 100.0),  # not a file Iceberg writes: not ours
        # Spark's checksum files go with the file they check.
        ListedFile("/t/data/.live.parquet.crc", 1, 100.0),
        ListedFile("/t/data/.dead.parquet.crc", 1, 100.0),
    ]
    garbage = unreferenced(listed, {"/t/data/live.parquet", "/t/metadata/snap-1.avro"}, older_than=200.0)
    assert [f.path for f in garbage] == [
        "/t/data/dead.parquet",
        "/t/metadata/old.metadata.json",
        "/t/data/.dead.parquet.crc",
    ]


def test_files_of_expired_snapshots_and_dead_writes_go_and_kept_reads_are_unchanged(
    svc: SketchService, ns: str
) -> None:
    name = f"{ns}.r"
    seqs = history(svc, name)
    reads_unchanged = assert_reads_unchanged(svc, name)
    location = svc.catalog.load_table(name).location()
    data = Path(filesystem_path(location)) / "data"
    # A write that died before its commit left a data file behind; another is still under way.
    dead, under_way = data / "dead-write.parquet", data / "under-way.parquet"
    for path in (dead, under_way):
        pq.write_table(pa.table({"key": [1]}), path)
    os.utime(dead, (time.time() - 7200, time.time() - 7200))
    cut_off = time.time() - 60  # what the retention time protects: the last minute

    nothing_expired = svc.tables.remove_unreferenced_files(name, cut_off)
    assert nothing_expired.files == 1, "only the dead write's file: every snapshot still reads the rest"
    assert not dead.exists() and under_way.exists()

    svc.tables.expire_snapshots(name, seqs[2])
    _, before = list_files(location)
    removed = svc.tables.remove_unreferenced_files(name, time.time() + 1)
    _, after = list_files(location)
    referenced = referenced_files(svc.catalog.load_table(name))

    assert removed.files == len(before) - len(after) > 0
    assert removed.bytes == sum(f.size for f in before) - sum(f.size for f in after)
    assert {f.path for f in after if f.path.endswith((".parquet", ".avro", ".json"))} == referenced
    assert not under_way.exists(), "once past the cut-off, an uncommitted file is garbage too"
    reads_unchanged()
    assert svc.tables.remove_unreferenced_files(name, time.time() + 1).files == 0
    later = svc.tables.append(name, rows(5, 90_000))  # and the table takes commits as before
    assert svc.tables.read_arrow(name, later).num_rows == svc.tables.read_arrow(name, seqs[-1]).num_rows + 5
