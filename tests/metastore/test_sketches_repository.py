from __future__ import annotations

import time

import pytest
from pyroaring import BitMap
from sqlalchemy import text

from sketch_core.datasets import synthetic_table
from sketch_core.errors import SketchNotFoundError, TableNotFoundError
from sketch_core.metastore.sketches import FinishedRun, PartitionRecord, SketchRepository
from sketch_core.service import SketchService
from tests.tables.test_table_service import run_threads


@pytest.fixture
def repo(svc: SketchService) -> SketchRepository:
    return SketchRepository(svc.engine)


def test_partitions_are_stored_once_and_reused(svc: SketchService, repo: SketchRepository, ns: str) -> None:
    seq = svc.tables.create(f"{ns}.r", synthetic_table(10, groups=2), sort_by=["key"])
    assert repo.find_partition(f"{ns}.r", "a", 2) is None
    first = repo.ensure_partition(f"{ns}.r", "a", 2, {"kind": "int", "cuts": [1]}, seq)
    assert repo.find_partition(f"{ns}.r", "a", 2) == first
    again = repo.ensure_partition(f"{ns}.r", "a", 2, {"kind": "int", "cuts": [9]}, seq + 5)
    assert again == first and again.boundaries == {"kind": "int", "cuts": [1]}
    assert (
        repo.ensure_partition(f"{ns}.r", "a", 3, {"kind": "int", "cuts": [0, 1]}, seq).partition_id
        != first.partition_id
    )
    with pytest.raises(TableNotFoundError):
        repo.ensure_partition(f"{ns}.missing", "a", 2, {"kind": "int", "cuts": []}, seq)


def _sketch_over_a_table(
    svc: SketchService, repo: SketchRepository, ns: str, name: str, params: dict[str, int] | None = None
) -> tuple[int, PartitionRecord]:
    """A table ``ns.r``, a partition of it on ``a``, and a sketch ``name`` over it."""
    seq = svc.tables.create(f"{ns}.r", synthetic_table(10, groups=2), sort_by=["key"])
    part = repo.ensure_partition(f"{ns}.r", "a", 2, {"kind": "int", "cuts": [1]}, seq)
    repo.ensure_sketch(name, f"SELECT a FROM {ns}.r", params)
    return seq, part


def test_versions_publish_atomically_and_once_per_sequence(
    svc: SketchService, repo: SketchRepository, ns: str
) -> None:
    name = f"{ns}_top"
    seq, part = _sketch_over_a_table(svc, repo, ns, name, {"k": 1})
    v1 = repo.publish_version(name, seq, {f"{ns}.r": 11}, {part.partition_id: BitMap([1]).serialize()})
    assert (v1.version, v1.sequence) == (1, seq)
    assert BitMap.deserialize(v1.bitmaps[part.partition_id]) == BitMap([1])

    published = []
    run_threads(
        [
            lambda: published.append(
                repo.publish_version(
                    name, seq + 1, {f"{ns}.r": 12}, {part.partition_id: BitMap([2]).serialize()}
                )
            )
            for _ in range(4)
        ]
    )
    assert {v.version for v in published} == {2}
    assert repo.versions(name) == [1, 2]
    assert repo.version(name).version == 2  # type: ignore[union-attr]
    assert repo.version(name, sequence=seq).bitmaps == v1.bitmaps  # type: ignore[union-attr]


def test_maintenance_runs_are_recorded(svc: SketchService, repo: SketchRepository, ns: str) -> None:
    repo.ensure_sketch(f"{ns}_s", "SELECT 1")
    run = repo.start_run(f"{ns}_s", "incremental", from_version=1)
    repo.finish_run(run, status="succeeded", to_version=2, delta_rows=10, seconds=0.5)
    (row,) = repo.runs(f"{ns}_s")
    assert (row["status"], row["to_version"], row["delta_rows"]) == ("succeeded", 2, 10)
    with pytest.raises(SketchNotFoundError):
        repo.runs(f"{ns}_missing")
    repo.record_run(f"{ns}_s", FinishedRun("incremental", 2, "failed", 3, 0.25, "boom"), None)
    assert [(r["status"], r["error"], r["seconds"]) for r in repo.runs(f"{ns}_s")][-1] == (
        "failed",
        "boom",
        0.25,
    )


def test_a_run_published_with_its_version_is_recorded_once_even_when_the_version_exists(
    svc: SketchService, repo: SketchRepository, ns: str
) -> None:
    name = f"{ns}_runs"
    seq, part = _sketch_over_a_table(svc, repo, ns, name)
    run = FinishedRun("incremental", None, "succeeded", 7, 0.1)
    first = repo.publish_version(
        name, seq, {f"{ns}.r": 1}, {part.partition_id: BitMap([1]).serialize()}, run=run
    )
    # A second publisher for the same sequence gets the stored version (its bitmaps, not its own).
    second = repo.publish_version(
        name, seq, {f"{ns}.r": 1}, {part.partition_id: BitMap([0]).serialize()}, run=run
    )
    assert second == first == repo.version(name)
    assert [(r["to_version"], r["delta_rows"]) for r in repo.runs(name)] == [(1, 7), (1, 7)]
    with pytest.raises(SketchNotFoundError):
        repo.publish_version(f"{ns}_missing", seq, {}, {})


def test_dropping_a_sketch_removes_its_versions_and_runs_but_not_partitions(
    svc: SketchService, repo: SketchRepository, ns: str
) -> None:
    seq = svc.tables.create(f"{ns}.r", synthetic_table(10, groups=2), sort_by=["key"])
    part = repo.ensure_partition(f"{ns}.r", "a", 2, {"kind": "int", "cuts": [1]}, seq)
    repo.ensure_sketch(f"{ns}_gone", f"SELECT a FROM {ns}.r")
    repo.ensure_sketch(f"{ns}_kept", f"SELECT a FROM {ns}.r")
    for name in (f"{ns}_gone", f"{ns}_kept"):
        repo.publish_version(name, seq, {f"{ns}.r": 1}, {part.partition_id: BitMap([0]).serialize()})
    repo.start_run(f"{ns}_gone", "capture", None)

    repo.drop(f"{ns}_gone")

    with pytest.raises(SketchNotFoundError):
        repo.version(f"{ns}_gone")
    with pytest.raises(SketchNotFoundError):
        repo.runs(f"{ns}_gone")
    with pytest.raises(SketchNotFoundError):
        repo.drop(f"{ns}_gone")
    assert repo.versions(f"{ns}_kept") == [1]
    assert repo.find_partition(f"{ns}.r", "a", 2) == part


def test_the_work_lock_reads_the_sketch_as_the_previous_holder_left_it(
    svc: SketchService, repo: SketchRepository, ns: str
) -> None:
    """A run takes the sketch's work lock and reads its definition and newest version in one
    round trip; the read follows the lock, so a run that waited sees the version the holder
    published just before letting go (not the one before it)."""
    import threading

    from sketch_core.metastore.work_locks import WorkLocks

    name = f"{ns}_locked"
    seq, part = _sketch_over_a_table(svc, repo, ns, name, {"k": 3})
    repo.publish_version(name, seq, {f"{ns}.r": 11}, {part.partition_id: BitMap([1]).serialize()})
    holder, waiter = WorkLocks(svc.engine, poll_seconds=0.05), WorkLocks(svc.engine, poll_seconds=0.05)
    seen: list[tuple[bool, int | None]] = []

    def wait_and_read() -> None:
        with waiter.holding_and_reading(name, "a test run", 30.0) as (waited, row):
            assert row is not None
            definition, record = repo.locked_definition_and_version(row)
            assert definition == repo.definition(name)
            seen.append((waited, record.version if record is not None else None))

    with holder.holding(name, "the holder", 5.0):
        other = threading.Thread(target=wait_and_read)
        other.start()
        time.sleep(0.3)
        assert seen == [], "the lock is held: the other run waits"
        repo.publish_version(name, seq + 1, {f"{ns}.r": 12}, {part.partition_id: BitMap([2]).serialize()})
    other.join(timeout=60)
    assert seen == [(True, 2)]

    with holder.holding_and_reading(name, "again", 5.0) as (waited, row):
        assert row is not None and not waited
        _, record = repo.locked_definition_and_version(row)
        assert record is not None and BitMap.deserialize(record.bitmaps[part.partition_id]) == BitMap([2])
        assert record == repo.definition_and_version(name)[1]
        with holder.holding_and_reading(name, "re-entered", 5.0) as (_, again):
            assert again is None, "held by this thread already: nothing read"

    with holder.holding_and_reading(f"{ns}_nope", "a run", 5.0) as (_, missing):
        assert missing is not None and not missing.found
    with pytest.raises(SketchNotFoundError):
        repo.locked_definition_and_version(missing)
    repo.ensure_sketch(f"{ns}_unpublished", f"SELECT a FROM {ns}.r")
    with holder.holding_and_reading(f"{ns}_unpublished", "a run", 5.0) as (_, row):
        assert repo.locked_definition_and_version(row)[1] is None


def _free(locks: object, name: str) -> bool:
    """Whether another session can take the work lock of ``name`` right now."""
    from sketch_core.errors import SketchBusyError
    from sketch_core.metastore.work_locks import WorkLocks

    assert isinstance(locks, WorkLocks)
    try:
        with WorkLocks(locks.engine).holding(name, "a probe", 0.0):
            return True
    except SketchBusyError:
        return False


def test_publishing_on_the_work_lock_lets_go_of_it_after_the_commit(
    svc: SketchService, repo: SketchRepository, ns: str
) -> None:
    """The end of a maintenance run: the version is published on the lock's own session, which
    lets go of the lock in the same round trip. Another run can take the lock at once and finds
    the version published; a version published for the sequence already is returned, not
    published twice; a nested hold keeps the lock."""
    from sketch_core.metastore.work_locks import WorkLocks

    name = f"{ns}_on_lock"
    seq, part = _sketch_over_a_table(svc, repo, ns, name, {"k": 4})
    locks = WorkLocks(svc.engine)
    run = FinishedRun("incremental", None, "succeeded", 3, 0.01)
    with locks.holding(name, "a run", 5.0):
        hold = locks.held(name)
        assert hold is not None and not _free(locks, name)
        published = repo.publish_version(
            name, seq, {f"{ns}.r": 11}, {part.partition_id: BitMap([1, 3]).serialize()}, run=run, lock=hold
        )
        assert _free(locks, name), "let go of with the publication"
        assert hold.released and locks.held(name) is None
        assert repo.version(name) == published and published.version == 1
    assert _free(locks, name)
    assert [r["status"] for r in repo.runs(name)] == ["succeeded"], "the run recorded with it"

    repo.publish_version(name, seq + 1, {f"{ns}.r": 12}, {part.partition_id: BitMap([2]).serialize()})
    with locks.holding(name, "a late run", 5.0):
        again = repo.publish_version(
            name,
            seq + 1,
            {f"{ns}.r": 99},
            {part.partition_id: BitMap([7]).serialize()},
            lock=locks.held(name),
        )
        assert _free(locks, name)
    assert again == repo.version(name) and again.version == 2
    assert BitMap.deserialize(again.bitmaps[part.partition_id]) == BitMap([2]), "the earlier one's"

    with locks.holding(name, "an outer run", 5.0), locks.holding(name, "a nested run", 5.0):
        repo.publish_version(
            name,
            seq + 2,
            {f"{ns}.r": 13},
            {part.partition_id: BitMap([3]).serialize()},
            lock=locks.held(name),
        )
        assert not _free(locks, name), "a nested hold publishes and keeps the lock"
    assert _free(locks, name) and repo.versions(name) == [1, 2, 3]


def test_a_publication_on_the_work_lock_that_fails_keeps_the_lock_until_the_run_ends(
    svc: SketchService, repo: SketchRepository, ns: str
) -> None:
    """A failed publication (the sketch dropped meanwhile) is the typed error, rolled back on the
    lock's session: the lock is held until the run's block ends, then released as usual."""
    from sketch_core.metastore.work_locks import WorkLocks

    name = f"{ns}_dropped_meanwhile"
    seq, part = _sketch_over_a_table(svc, repo, ns, name, {"k": 5})
    locks = WorkLocks(svc.engine)
    with locks.holding(name, "a run", 5.0):
        repo.drop(name)
        with pytest.raises(SketchNotFoundError):
            repo.publish_version(
                name,
                seq,
                {f"{ns}.r": 11},
                {part.partition_id: BitMap([1]).serialize()},
                lock=locks.held(name),
            )
        hold = locks.held(name)
        assert not _free(locks, name) and hold is not None
        assert hold.connection.execute(text("SELECT 1")).scalar_one() == 1, "rolled back, usable"
    assert _free(locks, name)
    with locks.holding(name, "the next run", 5.0):  # the pooled session was left clean
        assert locks.held(name) is not None
