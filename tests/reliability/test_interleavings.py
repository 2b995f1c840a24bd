"""Concurrency, as a table of interleavings made with hooks at named points (not left to
timing): two maintainers of one sketch, loads committing during a maintenance and during a
report, maintainers to different snapshots, garbage collection during a maintenance, and many
reports at once while loads commit. Promise: no version lost or duplicated, every version equal
to a fresh capture at its snapshot, and every report equal to the plain query at its pinned
snapshot (docs/reliability.md lists these cases)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from sketch_core import faults
from sketch_core.datasets import synthetic_table
from sketch_core.service import QueryResult, SketchService
from tests.reliability.conftest import sketch_with_state_then_load
from tests.service.test_maintain import fresh_fragments, sibling
from tests.tables.test_expire_snapshots import bag


@pytest.fixture
def loaded(spark_svc: SketchService, ns: str) -> tuple[SketchService, str, str, str]:
    return sketch_with_state_then_load(spark_svc, ns, "raced", seed=91, load_rows=30)


def load(svc: SketchService, table: str, seed: int) -> int:
    """One more load (appending 20 rows, deleting a few): its commit sequence."""
    svc.tables.append(table, synthetic_table(20, 40, seed=seed, key_start=10_000 + 100 * seed))
    return svc.tables.delete(table, f"key = {seed}")


def version_matches_capture(svc: SketchService, name: str, sql: str, version: int) -> bool:
    """Version ``version`` holds the fragments a fresh capture finds at its snapshot."""
    from pyroaring import BitMap

    record = svc.sketches.version(name, version=version)
    assert record is not None
    tables = {pid: svc.sketches.partition_by_id(pid).table for pid in record.bitmaps}
    stored = {tables[pid]: set(BitMap.deserialize(b)) for pid, b in record.bitmaps.items()}
    return stored == fresh_fragments(svc, sql, name, record.sequence)


class _LostLocks:
    """The runs' work locks as if each holder's lock session had been cut (PostgreSQL then
    releases the lock while the run goes on): runs of one sketch no longer exclude each other,
    and publishing alone must keep one version per snapshot."""

    @contextlib.contextmanager
    def holding(self, name: str, what: str, wait_seconds: float) -> Iterator[bool]:
        yield False

    @contextlib.contextmanager
    def holding_and_reading(self, name: str, what: str, wait_seconds: float) -> Iterator[tuple[bool, None]]:
        yield False, None  # nothing read with the lock: the run reads the sketch on its own

    def held(self, name: str) -> None:
        return None  # no lock session to publish on: publishing goes through a pooled one


def uncoordinated(svc: SketchService, **settings: Any) -> SketchService:
    other = sibling(svc, **settings)
    other.work_locks = _LostLocks()  # type: ignore[assignment]
    return other


def same_as_plain(svc: SketchService, result: QueryResult, sql: str) -> bool:
    plain = svc.query(sql, snapshot=result.sequence, use_sketches=False)
    return bag(result.table) == bag(plain.table)


def in_threads(*work: Callable[[], Any]) -> list[Any]:
    with ThreadPoolExecutor(len(work)) as pool:
        return [f.result(timeout=600) for f in [pool.submit(w) for w in work]]


def test_two_maintainers_that_both_computed_publish_one_version(
    loaded: tuple[SketchService, str, str, str],
) -> None:
    """M1 and M2 both write their state, then both publish: one version; the later publisher
    gets the earlier's. (Started together, the work lock makes M2 wait and do nothing:
    tests/service/test_coordination.py; here the locks are lost, as after a cut connection.)"""
    svc, _, name, sql = loaded
    both_computed = threading.Barrier(2, timeout=120)
    with faults.hook("state-written", both_computed.wait):
        maintainers = [uncoordinated(svc) for _ in range(2)]
        runs = in_threads(*(lambda m=m: m.maintain(name, "incremental") for m in maintainers))
    assert sorted(r.to_version for (r,) in runs) == [2, 2]
    assert svc.sketches.versions(name) == [1, 2]
    assert version_matches_capture(svc, name, sql, 2)


def test_a_load_during_a_maintenance_is_left_for_the_next(
    loaded: tuple[SketchService, str, str, str],
) -> None:
    """M plans to T1; L commits T2 while M runs; M publishes for T1, the next run goes to T2."""
    svc, table, name, sql = loaded
    planned = svc.latest_sequence()
    committed: list[int] = []
    with faults.hook("maintenance-planned", lambda: committed.append(load(svc, table, 1))):
        (run,) = sibling(svc).maintain(name, "incremental")
    assert run.to_version == 2
    assert svc.sketches.version(name, version=2).sequence == planned < committed[0]  # type: ignore[union-attr]
    assert version_matches_capture(svc, name, sql, 2)
    (after,) = svc.maintain(name, "incremental")
    assert after.to_version == 3 and svc.sketch(name).sequence == committed[0]
    assert version_matches_capture(svc, name, sql, 3)


def test_a_load_during_a_report_does_not_change_its_answer(
    loaded: tuple[SketchService, str, str, str],
) -> None:
    """R pins T1; L commits T2 (a delete of rows R reads) before R reads: R answers for T1."""
    svc, table, name, sql = loaded
    svc.maintain(name, "incremental")
    pinned = svc.latest_sequence()
    with faults.hook("query-pinned", lambda: svc.tables.delete(table, "a >= 30")):
        result = sibling(svc).query(sql, use_sketches="always")
    assert result.sequence == pinned < svc.latest_sequence()
    assert result.sketch == (name, 2)
    assert same_as_plain(svc, result, sql)
    assert bag(result.table) != bag(svc.query(sql, use_sketches=False).table), "the load did change it"


def test_maintainers_to_two_snapshots_publish_one_version_each(
    loaded: tuple[SketchService, str, str, str],
) -> None:
    """M1 is pinned to T1 by a report at T1 (maintenance on query); M2 goes to T2; both have
    computed before either publishes: two versions, one per snapshot, each right. (With the
    work locks, one of them would hold the sketch and the report would read without it;
    here the locks are lost.)"""
    svc, table, name, sql = loaded
    first = svc.latest_sequence()
    second = load(svc, table, 2)
    both_computed = threading.Barrier(2, timeout=120)
    on_query = uncoordinated(svc, maintain_on_query="incremental")
    with faults.hook("state-written", both_computed.wait):
        report, _ = in_threads(
            lambda: on_query.query(sql, snapshot=first),
            lambda: uncoordinated(svc).maintain(name, "incremental"),
        )
    by_sequence = {svc.sketches.version(name, version=v).sequence: v for v in svc.sketches.versions(name)}  # type: ignore[union-attr]
    assert sorted(by_sequence) == sorted({svc.sketches.version(name, version=1).sequence, first, second})  # type: ignore[union-attr]
    assert len(svc.sketches.versions(name)) == 3, "one version per snapshot, none twice"
    assert report.sketch is not None and same_as_plain(svc, report, sql)
    for version in (by_sequence[first], by_sequence[second]):
        assert version_matches_capture(svc, name, sql, version)


def test_garbage_collection_during_a_maintenance_keeps_its_young_state(
    loaded: tuple[SketchService, str, str, str],
) -> None:
    """GC runs between M's state write and its publish: the state is younger than the
    retention time, so it stays, and the next run maintains from it."""
    svc, table, name, sql = loaded
    collector = sibling(svc, retain_seconds=60, retain_versions=1)
    with faults.hook("state-written", lambda: collector.collect_garbage([name])):
        (run,) = sibling(svc).maintain(name, "incremental")
    assert run.to_version == 2
    load(svc, table, 3)
    fresh = sibling(svc)  # no engine kept in memory: reads the stored state
    (after,) = fresh.maintain(name, "incremental")
    assert after.strategy == "incremental" and after.to_version == 3
    assert version_matches_capture(svc, name, sql, 3)


def test_many_reports_at_once_while_loads_commit(loaded: tuple[SketchService, str, str, str]) -> None:
    """Eight reports in four threads at mixed snapshots (some with the sketch maintained on
    the way), while a fifth thread commits loads: each equals the plain query at its snapshot."""
    svc, table, name, sql = loaded
    svc.maintain(name, "incremental")
    snapshots = [None, svc.latest_sequence()]
    stop = threading.Event()

    def loads() -> int:
        count = 0
        while not stop.is_set() and count < 6:
            load(svc, table, 10 + count)
            count += 1
        return count

    readers = [sibling(svc, maintain_on_query="incremental") for _ in range(4)]

    def reports(reader: SketchService) -> list[QueryResult]:
        return [reader.query(sql, snapshot=snapshots[i % 2]) for i in range(2)]

    with ThreadPoolExecutor(5) as pool:
        loading = pool.submit(loads)
        results = [
            r for f in [pool.submit(reports, reader) for reader in readers] for r in f.result(timeout=600)
        ]
        stop.set()
        assert loading.result(timeout=600) >= 1
    assert len(results) == 8 and all(same_as_plain(svc, r, sql) for r in results)
    versions = svc.sketches.versions(name)
    sequences = [svc.sketches.version(name, version=v).sequence for v in versions]  # type: ignore[union-attr]
    assert len(sequences) == len(set(sequences)), "no snapshot got two versions"
