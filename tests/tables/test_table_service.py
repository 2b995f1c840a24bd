"""svc.tables against real PostgreSQL and real Iceberg files."""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import Transaction

from sketch_core.datasets import synthetic_table
from sketch_core.errors import (
    CommitConflictError,
    InvalidDataError,
    InvalidPredicateError,
    SchemaMismatchError,
    SnapshotNotFoundError,
    TableExistsError,
    TableNotFoundError,
)
from sketch_core.service import SketchService
from tests.tables.full_plans import counting_full_plans


def rows(n: int, start: int = 0) -> pa.Table:
    return synthetic_table(n, groups=10, seed=start, key_start=start)


def test_create_records_the_commit_and_sorts_into_files(
    small_files: None, svc: SketchService, ns: str
) -> None:
    data = rows(20_000)
    shuffled = data.take(pa.array(list(reversed(range(data.num_rows)))))
    seq = svc.tables.create(f"{ns}.r", shuffled, sort_by=["key"])
    commit = svc.tables.commits(f"{ns}.r")[-1]
    assert (commit.seq, commit.operation, commit.added_rows, commit.total_rows) == (
        seq,
        "create",
        20_000,
        20_000,
    )
    pinned = svc.tables.pin(f"{ns}.r")
    assert len(pinned.files) >= 3, "small target size must give several files"
    assert commit.added_files == len(pinned.files)
    # Sorted and cut into consecutive runs: file key ranges do not overlap.
    ranges = sorted(
        (pc.min(t.column("key")).as_py(), pc.max(t.column("key")).as_py())
        for t in (pq.read_table(f.path.removeprefix("file://")) for f in pinned.files)
    )
    assert all(prev[1] < nxt[0] for prev, nxt in itertools.pairwise(ranges))


def test_each_write_gets_a_new_increasing_sequence(svc: SketchService, ns: str) -> None:
    name = f"{ns}.r"
    seqs = [svc.tables.create(name, rows(1000), sort_by=["key"])]
    seqs.append(svc.tables.append(name, rows(500, start=1000)))
    seqs.append(svc.tables.delete(name, "key < 100"))
    seqs.append(svc.tables.overwrite(name, rows(10, start=5000), where="key >= 1000"))
    assert seqs == sorted(seqs) and len(set(seqs)) == 4
    commits = svc.tables.commits(name)
    assert [c.operation for c in commits] == ["create", "append", "delete", "overwrite"]
    assert [(c.added_rows, c.deleted_rows) for c in commits] == [(1000, 0), (500, 0), (0, 100), (10, 500)]
    assert commits[-1].total_rows == 910 == svc.tables.read_arrow(name).num_rows
    assert svc.latest_sequence() >= seqs[-1]


def test_a_delete_matching_nothing_makes_no_commit(svc: SketchService, ns: str) -> None:
    seq = svc.tables.create(f"{ns}.r", rows(100), sort_by=["key"])
    assert svc.tables.delete(f"{ns}.r", "key < 0") == seq
    assert len(svc.tables.commits(f"{ns}.r")) == 1


def test_concurrent_writers_to_different_tables_lose_no_commit(svc: SketchService, ns: str) -> None:
    names = [f"{ns}.t{i}" for i in range(4)]
    for name in names:
        svc.tables.create(name, rows(10), sort_by=["key"])
    results: dict[str, list[int]] = {name: [] for name in names}

    def writer(name: str) -> None:
        for i in range(5):
            results[name].append(svc.tables.append(name, rows(10, start=100 * (i + 1))))

    run_threads([lambda n=n: writer(n) for n in names])
    all_seqs = [s for seqs in results.values() for s in seqs]
    assert len(set(all_seqs)) == 20
    for name in names:
        commits = svc.tables.commits(name)
        assert [c.seq for c in commits][1:] == sorted(results[name])
        assert commits[-1].total_rows == 60 == svc.tables.read_arrow(name).num_rows


def test_concurrent_writers_to_one_table_all_land(svc: SketchService, ns: str) -> None:
    name = f"{ns}.r"
    svc.tables.create(name, rows(10), sort_by=["key"])
    seqs: list[int] = []
    run_threads(
        [lambda i=i: seqs.append(svc.tables.append(name, rows(7, start=1000 * (i + 1)))) for i in range(6)]
    )
    assert len(set(seqs)) == 6
    assert svc.tables.read_arrow(name).num_rows == 10 + 6 * 7
    assert pc.count_distinct(svc.tables.read_arrow(name).column("key")).as_py() == 52


def conflicting_build(svc: SketchService, name: str) -> Callable[[Transaction], None]:
    """A transaction body during which another writer commits first (a lost race)."""
    state = {"raced": 0}

    def build(txn: Transaction) -> None:
        if state["raced"] == 0:
            state["raced"] += 1
            run_threads([lambda: svc.tables.append(name, rows(1, start=999_999))])
        txn.append(rows(3, start=5000))

    return build


def test_a_lost_race_is_retried(svc: SketchService, ns: str) -> None:
    name = f"{ns}.r"
    svc.tables.create(name, rows(10), sort_by=["key"])
    seq = svc.tables._commit(name, "append", 3, conflicting_build(svc, name))
    assert svc.tables.commits(name)[-1].seq == seq
    assert svc.tables.read_arrow(name).num_rows == 10 + 1 + 3


def test_a_conflict_that_outlasts_retries_is_reported_and_commits_nothing(
    svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"{ns}.r"
    svc.tables.create(name, rows(10), sort_by=["key"])
    settings = dataclasses.replace(svc.settings, commit_attempts=2)
    monkeypatch.setattr(svc.tables, "settings", settings)
    real_commit = svc.catalog.commit_table
    racers: list[int] = []
    racing = threading.local()

    def commit_after_a_rival(table: Any, requirements: Any, updates: Any) -> Any:
        # Before each of our commit attempts, a rival writer (another thread, real commit) wins.
        if table.name() == tuple(name.split(".")) and not getattr(racing, "active", False):

            def rival() -> None:
                racing.active = True
                racers.append(svc.tables.append(name, rows(1, start=100_000 + len(racers))))

            run_threads([rival])
        return real_commit(table, requirements, updates)

    monkeypatch.setattr(svc.catalog, "commit_table", commit_after_a_rival)
    with pytest.raises(CommitConflictError) as info:
        svc.tables.append(name, rows(3, start=5000))
    assert info.value.transient and info.value.attempts == 2
    assert len(racers) >= 2
    data = svc.tables.read_arrow(name)
    assert data.num_rows == 10 + len(racers), "only the rivals' rows were committed"
    assert pc.min(data.column("key")).as_py() == 0 and 5000 not in data.column("key").to_pylist()


class TestBadInput:
    def test_unknown_table(self, svc: SketchService, ns: str) -> None:
        for call in (
            lambda: svc.tables.append(f"{ns}.missing", rows(1)),
            lambda: svc.tables.delete(f"{ns}.missing", "key = 1"),
            lambda: svc.tables.pin(f"{ns}.missing"),
        ):
            with pytest.raises(TableNotFoundError) as info:
                call()
            assert info.value.name == f"{ns}.missing"

    def test_create_twice(self, svc: SketchService, ns: str) -> None:
        svc.tables.create(f"{ns}.r", rows(5), sort_by=["key"])
        with pytest.raises(TableExistsError):
            svc.tables.create(f"{ns}.r", rows(5), sort_by=["key"])

    def test_unknown_sort_key(self, svc: SketchService, ns: str) -> None:
        with pytest.raises(InvalidDataError, match="nope"):
            svc.tables.create(f"{ns}.r", rows(5), sort_by=["nope"])
        assert svc.tables.commit_log.get_table(f"{ns}.r") is None

    def assert_unchanged(self, svc: SketchService, name: str, before: pa.Table, commits: int) -> None:
        assert len(svc.tables.commits(name)) == commits
        assert svc.tables.read_arrow(name).sort_by("key").equals(before.sort_by("key"))

    def test_schema_mismatch_on_append(self, svc: SketchService, ns: str) -> None:
        name = f"{ns}.r"
        svc.tables.create(name, rows(50), sort_by=["key"])
        before = svc.tables.read_arrow(name)
        bad = rows(5, start=100).drop_columns(["j"]).append_column("zz", pa.array(["x"] * 5))
        with pytest.raises(SchemaMismatchError) as info:
            svc.tables.append(name, bad)
        assert info.value.table == name
        assert any("missing columns j" in p for p in info.value.problems)
        assert any("unexpected columns zz" in p for p in info.value.problems)
        self.assert_unchanged(svc, name, before, 1)

    def test_invalid_delete_predicate(self, svc: SketchService, ns: str) -> None:
        name = f"{ns}.r"
        svc.tables.create(name, rows(50), sort_by=["key"])
        before = svc.tables.read_arrow(name)
        for predicate in ("no_such_column = 3", "key = ", "key = 1 OR DROP"):
            with pytest.raises(InvalidPredicateError):
                svc.tables.delete(name, predicate)
        self.assert_unchanged(svc, name, before, 1)

    def test_pin_before_the_table_existed(self, svc: SketchService, ns: str) -> None:
        earlier = svc.latest_sequence()
        svc.tables.create(f"{ns}.r", rows(5), sort_by=["key"])
        with pytest.raises(SnapshotNotFoundError):
            svc.tables.pin(f"{ns}.r", earlier)


def test_pinned_files_are_planned_once_per_snapshot(
    small_files: None, svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sketch_core.tables import file_changes, statistics

    name = f"{ns}.r"
    first = svc.tables.create(name, rows(20_000), sort_by=["key"])
    described: list[str] = []
    real_describe = statistics.describe_bounds

    def counting_describe(path: str, *args: Any, **kwargs: Any) -> Any:
        described.append(path)
        return real_describe(path, *args, **kwargs)

    # Every file's statistics are decoded here, from a manifest or from a commit's record.
    monkeypatch.setattr(statistics, "describe_bounds", counting_describe)
    monkeypatch.setattr(file_changes, "describe_bounds", counting_describe)
    pinned = svc.tables.pin(name)
    planned = len(described)
    assert planned == len(pinned.files) >= 3
    assert svc.tables.pin(name) == pinned and len(described) == planned, "same snapshot: no planning"
    other = SketchService.from_settings(svc.settings)  # as each Airflow task in one process opens
    try:
        assert other.tables.pin(name) == pinned and len(described) == planned, "planned once per process"
    finally:
        other.close()

    svc.tables.append(name, rows(100, start=50_000))
    assert len(svc.tables.pin(name).files) == len(pinned.files) + 1, "a new snapshot is planned"
    assert len(described) == planned + 1, "derived from its parent: only the new file is read"
    assert svc.tables.pin(name, first) == pinned


def test_snapshots_derived_from_their_parents_equal_a_full_plan(
    svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:

    name = f"{ns}.r"
    sequences = [svc.tables.create(name, rows(20_000), sort_by=["key"])]
    svc.tables.pin(name)
    sequences.append(svc.tables.append(name, rows(300, start=40_000)))
    sequences.append(svc.tables.delete(name, "a = 3"))  # rewrites every file
    sequences.append(svc.tables.overwrite(name, rows(50, start=5_000), "key BETWEEN 5000 AND 5100"))
    sequences.append(svc.tables.delete(name, "key < 100"))
    table = svc.tables.catalog.load_table(name)
    with counting_full_plans(monkeypatch) as full_plans:
        svc.tables.pin(name, sequences[0])
        svc.tables.pin(name, sequences[-1])  # derived through every snapshot in between
    assert full_plans == []
    for sequence in sequences:
        pinned = svc.tables.pin(name, sequence)
        assert pinned.snapshot_id is not None
        full = svc.tables._planned_files(name, table, pinned.snapshot_id)
        assert pinned.files == full, f"sequence {sequence}"


@pytest.mark.parametrize(
    "recorded", ["yes", "no", "forgotten"], ids=["files-recorded", "manifests", "forgotten"]
)
def test_pins_commit_by_commit_equal_a_full_plan(
    svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch, recorded: str
) -> None:
    """Pinning each commit in turn (what delta validation does) derives the files from the
    parent's: from the file changes the commit row carries, without reading a manifest; or, for
    commits without them (made before they were recorded), or whose changes the commit log has
    let go of (all but each table's newest commits'), from the manifests."""
    from sketch_core.metastore import commits
    from sketch_core.tables import catalog, service

    name = f"{ns}.r"
    if recorded == "no":
        monkeypatch.setattr(catalog, "record_commit_files", lambda io, snapshots: None)
    if recorded == "forgotten":
        monkeypatch.setattr(commits, "_FILES_KEPT_PER_TABLE", 1)
    sequences = [svc.tables.create(name, rows(20_000), sort_by=["key"])]
    sequences.append(svc.tables.append(name, rows(300, start=40_000)))
    sequences.append(svc.tables.delete(name, "a = 3"))  # rewrites every file
    sequences.append(svc.tables.overwrite(name, rows(50, start=5_000), "key BETWEEN 5000 AND 5100"))
    sequences.append(svc.tables.delete(name, "key < 100"))
    sequences.append(svc.tables.append(name, rows(10, start=90_000)))
    log = svc.tables.commit_log
    log.latest_sequence()  # the window has seen every commit: the file changes it still keeps
    kept = [log.commit_at(name, seq).files is not None for seq in sequences]  # type: ignore[union-attr]
    assert kept == {"yes": [True] * 6, "no": [False] * 6, "forgotten": [False] * 5 + [True]}[recorded]
    table = svc.tables.catalog.load_table(name)
    manifests_read: list[int] = []
    real_read = service.read_snapshot_files

    def counting_read(io: Any, snapshot: Any) -> Any:
        manifests_read.append(snapshot.snapshot_id)
        return real_read(io, snapshot)

    monkeypatch.setattr(service, "read_snapshot_files", counting_read)
    svc.tables._pinned_files.clear()
    for sequence in sequences:
        pinned = svc.tables.pin(name, sequence)
        assert pinned.snapshot_id is not None
        assert pinned.files == svc.tables._planned_files(name, table, pinned.snapshot_id), sequence
    # The first pin is planned in full; each later one is derived from the one before.
    assert (manifests_read == []) == (recorded == "yes")
    # Without recorded changes, every later pin reads its manifests; with them forgotten, all
    # but the newest commit's (whose changes the window keeps) do.
    assert recorded == "yes" or len(manifests_read) >= len(sequences) - (1 if recorded == "no" else 2)


def test_commits_by_another_service_are_seen_by_the_next_read(svc: SketchService, ns: str) -> None:
    """Loaded tables and the commit log window are reused between reads, but never hide a
    commit made elsewhere: the next read of the latest snapshot sees it."""
    name = f"{ns}.r"
    svc.tables.create(name, rows(2_000), sort_by=["key"])
    mine = svc.tables.pin(name)
    elsewhere = SketchService(svc.settings, svc.engine, svc.catalog, svc.spark)  # its own caches
    sequence = elsewhere.tables.append(name, rows(10, start=90_000))
    now = svc.tables.pin(name)
    assert now.sequence == sequence == svc.latest_sequence() and now.snapshot_id != mine.snapshot_id
    assert len(now.files) == len(mine.files) + 1
    assert svc.tables.read_arrow(name).num_rows == 2_010
    delta = svc.tables.delete(name, "key >= 90005")  # and the other way round
    assert elsewhere.tables.pin(name).sequence == delta
    assert elsewhere.tables.delta(name, sequence, delta).deleted.num_rows == 5


def test_a_table_is_opened_at_a_new_commit_from_its_metadata_file_without_the_catalog(
    svc: SketchService, ns: str
) -> None:
    """The commit log knows the metadata file each commit's pointer change set: a table loaded
    before is opened at a newer commit (this service's or another's) from that file, with no
    catalog query for the pointer; a schema change after it (a catalog commit that records no
    table commit) is read through the catalog."""
    name = f"{ns}.r"
    svc.tables.create(name, rows(500), sort_by=["key"])
    svc.tables.pin(name)
    elsewhere = SketchService(svc.settings, svc.engine, svc.catalog, svc.spark)  # its own caches
    loads: list[str] = []
    catalog = svc.tables.catalog
    load_table = catalog.load_table

    def counted(identifier: Any) -> Any:
        loads.append(str(identifier))
        return load_table(identifier)

    catalog.load_table = counted  # type: ignore[method-assign]
    try:
        for write in (
            lambda: elsewhere.tables.append(name, rows(10, start=90_000)),
            lambda: svc.tables.delete(name, "key < 5"),
        ):
            sequence = write()
            loads.clear()  # the writer's own loads (the catalog is shared): a write loads afresh
            pinned = svc.tables.pin(name)
            assert pinned.sequence == sequence and loads == [], "opened from the commit's metadata file"
            opened = svc.tables._open(name)[2]
            assert opened.metadata_location == load_table(name).metadata_location
            assert opened.name() == load_table(name).name()
        assert svc.tables.read_arrow(name).num_rows == 505
        elsewhere.tables.evolve_schema(name, add={"extra": pa.int64()})
        loads.clear()
        svc.tables.pin(name)
        assert "extra" in svc.tables.schema(name).names and loads == [name]
    finally:
        del catalog.load_table


def run_threads(bodies: list[Callable[[], object]]) -> None:
    errors: list[BaseException] = []

    def guard(body: Callable[[], object]) -> None:
        try:
            body()
        except BaseException as exc:  # re-raised in the test thread
            errors.append(exc)

    threads = [threading.Thread(target=guard, args=(body,)) for body in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def test_missing_warehouse_files_give_a_typed_error(svc: SketchService, ns: str) -> None:
    from pathlib import Path

    from sketch_core.errors import WarehouseMismatchError

    name = f"{ns}.r"
    svc.tables.create(name, rows(5), sort_by=["key"])
    location = Path(svc.catalog.load_table(name).metadata_location.removeprefix("file://"))
    location.rename(location.with_suffix(".moved"))
    # A service that has not read the metadata yet (this one keeps what it parsed).
    other = SketchService.from_settings(svc.settings)
    try:
        with pytest.raises(WarehouseMismatchError) as info:
            other.tables.pin(name)
        assert info.value.table == name
    finally:
        location.with_suffix(".moved").rename(location)
        other.close()
    assert svc.tables.pin(name).record_count == 5


def test_commits_touching_many_files_are_not_recorded(
    small_files: None, svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit above the cap carries no file changes (readers read its manifests), and the
    commits after it are recorded again."""
    from sketch_core.tables import file_changes

    monkeypatch.setattr(file_changes, "RECORDED_FILES_MAX", 2)
    name = f"{ns}.r"
    svc.tables.create(name, rows(20_000), sort_by=["key"])
    svc.tables.append(name, rows(10, start=50_000))
    big, small = (c for c in svc.tables.commits(name) if c.snapshot_id is not None)
    assert big.added_files > 2 and big.files is None
    assert small.files is not None and [f["path"] for f in small.files["added"]] != []
    assert small.files["removed"] == [] and small.files["total"] == big.added_files + 1
    assert len(svc.tables.pin(name).files) == big.added_files + 1


def test_appended_rows_are_read_from_the_recorded_files_and_without_a_record(
    small_files: None, svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append's new files are found by the paths its commit recorded, and, where the commit
    carries no record (too many files), by comparing its files with the previous snapshot's:
    both give exactly the appended rows."""
    from sketch_core.tables import file_changes

    monkeypatch.setattr(file_changes, "RECORDED_FILES_MAX", 2)
    name = f"{ns}.r"
    svc.tables.create(name, rows(100), sort_by=["key"])
    start = svc.tables.commits(name)[-1].seq
    many, few = rows(20_000, start=50_000), rows(10, start=90_000)
    svc.tables.append(name, many)
    svc.tables.append(name, few)
    big, small = svc.tables.commits(name)[-2:]
    assert big.files is None and small.files is not None  # one of each way
    for since, until, expected in (
        (start, big.seq, many),
        (big.seq, small.seq, few),
        (start, small.seq, None),
    ):
        delta = svc.tables.delta(name, since, until)
        want = expected if expected is not None else pa.concat_tables([many, few])
        assert delta.deleted.num_rows == 0
        assert sorted(delta.inserted.column("key").to_pylist()) == sorted(want.column("key").to_pylist())
