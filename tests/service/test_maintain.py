"""svc.maintain end to end: real Iceberg deltas, state files, metastore versions, Spark captures.

The oracle: after every maintenance the sketch equals a fresh capture at the same snapshots,
and the query with the sketch returns what it returns without one.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sketch_core.datasets import synthetic_table
from sketch_core.datasets.deltas import DeltaGenerator
from sketch_core.errors import SnapshotExpiredError, UnsupportedQueryError
from sketch_core.incremental.engine import IncrementalSketch
from sketch_core.maintenance.driver import build_engine
from sketch_core.service import MaintenanceRun, SketchService
from sketch_core.spark.delta_partials import SCRATCH_DIRECTORY
from tests.oracles.results import sorted_rows

HAVING = "SELECT a, SUM(b) AS s, COUNT(*) AS n FROM {t} WHERE c > -40 GROUP BY a HAVING SUM(b) > 300"
TOPK = "SELECT a, MIN(d) AS lo, MAX(e) AS hi FROM {t} GROUP BY a ORDER BY hi DESC, a LIMIT 3"


@pytest.fixture
def table(spark_svc: SketchService, ns: str) -> str:
    name = f"{ns}.facts"
    spark_svc.tables.create(name, synthetic_table(6000, 60, seed=5), sort_by=["a"])
    return name


def fresh_fragments(
    svc: SketchService, sql: str, name: str, sequence: int, params: dict[str, Any] | None = None
) -> dict[str, set[int]]:
    """A capture of the same query on the same partitions, under another name."""
    version = svc.sketch(name)
    attributes = {t: a for t, (a, _) in version.partitions.items()}
    counts = {t: c for t, (_, c) in version.partitions.items()}
    check = svc.capture(
        sql,
        name=f"{name}_check_{sequence}",
        params=params,
        attributes=attributes,
        fragments=counts,
        snapshot=sequence,
    )
    svc.drop_sketch(check.name)
    return {t: set(ids) for t, ids in check.fragments.items()}


def maintained(svc: SketchService, name: str) -> dict[str, set[int]]:
    return {t: set(ids) for t, ids in svc.sketch(name).fragments.items()}


def captured(
    svc: SketchService, table: str, suffix: str, template: str = HAVING, **options: Any
) -> tuple[str, str]:
    """A sketch of ``template`` over ``table`` on ``a`` (40 fragments): its name and SQL."""
    name, sql = f"{table.split('.')[0]}_{suffix}", template.format(t=table)
    svc.capture(sql, name=name, attributes={table: "a"}, fragments=40, **options)
    return name, sql


def sibling(svc: SketchService, **settings: Any) -> SketchService:
    """Another service on the same metastore, warehouse and Spark (another process, in effect),
    with ``settings`` changed."""
    return SketchService(dataclasses.replace(svc.settings, **settings), svc.engine, svc.catalog, svc.spark)


@pytest.mark.parametrize("template", [HAVING, TOPK], ids=["having", "topk"])
def test_incremental_maintenance_equals_a_fresh_capture_after_each_round(
    spark_svc: SketchService, table: str, template: str
) -> None:
    svc = spark_svc
    sketch_name = f"{table.split('.')[0]}_sketch"
    sql = template.format(t=table)
    first = svc.capture(sql, name=sketch_name, attributes={table: "a"}, fragments=40)
    generator = DeltaGenerator(svc.tables, table, ("key",), seed=6)
    for round_number, make in enumerate(
        (generator.inserts, generator.deletes, generator.updates, generator.mixed)
    ):
        sequence = make(80).apply(svc.tables)
        (run,) = svc.maintain(sketch_name, strategy="incremental")
        assert (run.strategy, run.from_version, run.to_version) == (
            "incremental",
            round_number + 1,
            round_number + 2,
        )
        assert run.delta_rows > 0
        version = svc.sketch(sketch_name)
        assert version.sequence == sequence
        assert maintained(svc, sketch_name) == fresh_fragments(svc, sql, sketch_name, sequence)
        with_sketch = svc.query(sql, use_sketches="always")
        assert with_sketch.sketch == (sketch_name, version.version)
        assert sorted_rows(with_sketch.table) == sorted_rows(svc.query(sql, use_sketches=False).table)
    # The first version stays, for queries pinned to its snapshot.
    pinned = svc.query(sql, snapshot=first.sequence, use_sketches="always")
    assert pinned.sketch == (sketch_name, 1)
    plain = svc.query(sql, snapshot=first.sequence, use_sketches=False)
    assert sorted_rows(pinned.table) == sorted_rows(plain.table)


def test_state_is_written_with_each_version_and_reused(spark_svc: SketchService, table: str) -> None:
    svc = spark_svc
    sketch_name = f"{table.split('.')[0]}_sketch"
    sql = HAVING.format(t=table)
    svc.capture(sql, name=sketch_name, attributes={table: "a"}, fragments=40)
    assert svc.sketches.version(sketch_name).state_ref is None  # a capture writes no state (yet)
    generator = DeltaGenerator(svc.tables, table, ("key",), seed=7)
    generator.inserts(30).apply(svc.tables)
    svc.maintain(sketch_name, strategy="incremental")
    ref = svc.sketches.version(sketch_name).state_ref
    assert ref is not None and (Path(ref) / "manifest.json").exists()
    generator.deletes(30).apply(svc.tables)
    # The second run must start from the stored state, not from the table.
    from sketch_core.maintenance import driver

    real = driver.read_matching
    calls: list[int] = []

    def counting(pin, columns, keys=None):  # type: ignore[no-untyped-def]
        calls.append(len(pin.files))
        return real(pin, columns, keys)

    driver.read_matching = counting  # type: ignore[assignment]
    try:
        svc.maintain(sketch_name, strategy="incremental")
    finally:
        driver.read_matching = real  # type: ignore[assignment]
    assert calls == [], "a single-table aggregate needs no table reads once state exists"
    assert maintained(svc, sketch_name) == fresh_fragments(svc, sql, sketch_name, svc.latest_sequence())


def test_up_to_date_sketches_are_left_alone(spark_svc: SketchService, table: str) -> None:
    svc = spark_svc
    sketch_name = f"{table.split('.')[0]}_sketch"
    svc.capture(HAVING.format(t=table), name=sketch_name, attributes={table: "a"}, fragments=40)
    plan = svc.plan_maintenance(sketch_name, "full")
    assert (plan.strategy, plan.delta_rows, plan.needs_spark) == ("none", 0, False)
    (run,) = svc.maintain(sketch_name)
    assert (run.strategy, run.from_version, run.to_version, run.delta_rows) == ("none", 1, 1, 0)
    assert svc.sketch(sketch_name).version == 1


def test_auto_recaptures_above_the_delta_threshold_and_for_unsupported_queries(
    spark_svc: SketchService, table: str, ns: str
) -> None:
    svc = spark_svc
    sketch_name = f"{table.split('.')[0]}_sketch"
    sql = f"SELECT key, b FROM {table} WHERE c > 0 ORDER BY b DESC, key LIMIT 5"  # no aggregation
    svc.capture(sql, name=sketch_name, attributes={table: "a"}, fragments=40)
    DeltaGenerator(svc.tables, table, ("key",), seed=8).inserts(50).apply(svc.tables)
    original = svc.settings
    svc.settings = dataclasses.replace(original, incremental_max_delta_rows=10)
    try:
        (run,) = svc.maintain(sketch_name)
    finally:
        svc.settings = original
    assert run.strategy == "full" and run.to_version == 2
    assert [r["strategy"] for r in svc.sketches.runs(sketch_name)] == ["capture", "full"]

    # A window over a frame of days: not maintained incrementally yet.
    anti_name = f"{ns}_framed_window"
    anti = (
        f"SELECT a, b FROM (SELECT a, b, COUNT(*) OVER (PARTITION BY a ORDER BY "
        f"DATE_ADD(DATE '2020-01-01', CAST(b AS INT)) RANGE BETWEEN INTERVAL 3 DAYS PRECEDING AND "
        f"CURRENT ROW) AS n FROM {table}) WHERE n > 1 AND b > 90"
    )
    svc.capture(anti, name=anti_name, attributes={table: "a"}, fragments=40)
    DeltaGenerator(svc.tables, table, ("key",), seed=10).deletes(20).apply(svc.tables)
    with pytest.raises(UnsupportedQueryError, match="the frame offset INTERVAL"):
        svc.maintain(anti_name, strategy="incremental")
    (run,) = svc.maintain(anti_name, strategy="auto")
    assert run.strategy == "full"
    assert maintained(svc, anti_name) == fresh_fragments(svc, anti, anti_name, svc.latest_sequence())


def test_a_run_that_dies_before_publishing_leaves_the_last_version_intact(
    spark_svc: SketchService, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = spark_svc
    sketch_name = f"{table.split('.')[0]}_sketch"
    sql = HAVING.format(t=table)
    svc.capture(sql, name=sketch_name, attributes={table: "a"}, fragments=40)
    before = maintained(svc, sketch_name)
    DeltaGenerator(svc.tables, table, ("key",), seed=11).mixed(60).apply(svc.tables)

    def crash(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("killed during the metastore commit")

    with monkeypatch.context() as patch:
        patch.setattr(svc.sketches, "publish_version", crash)
        with pytest.raises(RuntimeError, match="killed"):
            svc.maintain(sketch_name, strategy="incremental")
    assert svc.sketch(sketch_name).version == 1 and maintained(svc, sketch_name) == before
    assert svc.sketches.runs(sketch_name)[-1]["status"] == "failed"
    (run,) = svc.maintain(sketch_name, strategy="incremental")
    assert run.to_version == 2
    assert maintained(svc, sketch_name) == fresh_fragments(svc, sql, sketch_name, svc.latest_sequence())


def test_a_kept_engine_is_reused_and_a_stale_one_is_not(
    spark_svc: SketchService, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sketch_core.maintenance import state_store

    svc = spark_svc
    # Layers of changes, however much of this small state they change (the rule is checked last).
    monkeypatch.setattr(state_store, "MAX_LAYERED_FRACTION", 100.0)
    sketch_name, sql = captured(svc, table, "kept")
    deltas = DeltaGenerator(svc.tables, table, ("key",), seed=12)
    reads: list[str] = []
    real_read = svc.state_store.read
    monkeypatch.setattr(svc.state_store, "read", lambda ref: reads.append(ref) or real_read(ref))

    deltas.mixed(40).apply(svc.tables)
    svc.maintain(sketch_name, strategy="incremental")  # builds from the snapshot, keeps the engine
    deltas.mixed(40).apply(svc.tables)
    svc.maintain(sketch_name, strategy="incremental")
    assert reads == [], "the kept engine was used, not the stored state"
    record = svc.sketches.version(sketch_name)
    assert record is not None and record.state_ref is not None
    assert svc.state_store.depth(record.state_ref) == 1, "stored as the changes to the first state"
    assert maintained(svc, sketch_name) == fresh_fragments(svc, sql, sketch_name, svc.latest_sequence())

    # Another process publishes the next version: the engine kept here is now stale.
    deltas.mixed(40).apply(svc.tables)
    sibling(svc).maintain(sketch_name, strategy="incremental")
    deltas.mixed(40).apply(svc.tables)
    (run,) = svc.maintain(sketch_name, strategy="incremental")
    assert run.to_version == 5 and len(reads) == 1, "restored from the other process's state"
    record = svc.sketches.version(sketch_name)
    assert record is not None and record.state_ref is not None
    depth, layered = svc.state_store.layers(record.state_ref)
    assert depth == 3 and layered > 0
    assert maintained(svc, sketch_name) == fresh_fragments(svc, sql, sketch_name, svc.latest_sequence())

    # Once the layers hold more than the set fraction of the state, the whole state is written.
    monkeypatch.setattr(
        state_store,
        "MAX_LAYERED_FRACTION",
        layered / svc.kept_state_entries(sketch_name),
    )
    deltas.mixed(40).apply(svc.tables)
    svc.maintain(sketch_name, strategy="incremental")
    record = svc.sketches.version(sketch_name)
    assert record is not None and record.state_ref is not None
    assert svc.state_store.layers(record.state_ref) == (0, 0)
    assert maintained(svc, sketch_name) == fresh_fragments(svc, sql, sketch_name, svc.latest_sequence())


def test_old_versions_and_the_state_only_they_read_are_collected(
    spark_svc: SketchService, table: str
) -> None:
    svc = sibling(spark_svc, retain_versions=2, retain_seconds=0)
    sketch_name, sql = captured(svc, table, "gc")
    deltas = DeltaGenerator(svc.tables, table, ("key",), seed=13)
    orphan = svc.state_store.root / sketch_name / "left-by-a-run-that-died"
    orphan.mkdir(parents=True)
    for _ in range(4):
        deltas.mixed(20).apply(svc.tables)
        svc.maintain(sketch_name, strategy="incremental")  # collects after each run

    assert svc.sketches.versions(sketch_name) == [4, 5], "the newest two are kept"
    kept = [svc.sketches.version(sketch_name, version=v) for v in (4, 5)]
    live = {
        d for record in kept if record and record.state_ref for d in svc.state_store.chain(record.state_ref)
    }
    on_disk = set((svc.state_store.root / sketch_name).iterdir())
    assert on_disk == live, "exactly the directories the kept versions read remain"
    assert not orphan.exists()
    # What remains is enough: a new process restores the newest state and maintains on.
    other = sibling(svc)
    deltas.mixed(20).apply(svc.tables)
    (run,) = other.maintain(sketch_name, strategy="incremental")
    assert run.strategy == "incremental"
    assert maintained(other, sketch_name) == fresh_fragments(other, sql, sketch_name, other.latest_sequence())


def test_collecting_expires_the_table_snapshots_no_kept_version_reads(
    small_files: None, spark_svc: SketchService, table: str
) -> None:
    svc = sibling(spark_svc, retain_versions=1, retain_seconds=0)
    held, _ = captured(svc, table, "held")  # an older sketch's only version protects its snapshots
    sketch_name, sql = captured(svc, table, "expiring")
    first = svc.sketch(held).sequence
    deltas = DeltaGenerator(svc.tables, table, ("key",), seed=16)
    for _ in range(3):
        deltas.mixed(20).apply(svc.tables)
        svc.maintain(sketch_name, strategy="incremental")

    def live_sequences() -> list[int]:
        metadata = svc.catalog.load_table(table).metadata
        return [
            c.seq for c in svc.tables.commits(table) if metadata.snapshot_by_id(c.snapshot_id) is not None
        ]

    assert live_sequences()[0] <= first, "the held sketch's version still reads its snapshots"
    assert sibling(svc, expire_table_snapshots=False).collect_garbage([sketch_name]).table_snapshots == {}
    svc.drop_sketch(held)
    report = svc.collect_garbage([sketch_name])
    kept = svc.sketch(sketch_name)
    assert report.table_snapshots.get(table, 0) > 0
    assert live_sequences()[0] == kept.sequence, "kept from the oldest kept version on"
    # The files only the expired snapshots read went with them (the deletes rewrote files).
    assert report.table_files[table].files > 0 and report.table_files[table].bytes > 0
    with pytest.raises(SnapshotExpiredError) as info:
        sibling(svc).query(sql, snapshot=first)
    assert info.value.table == table

    # Maintenance and reports go on from what is kept, in a new process too.
    deltas.mixed(20).apply(svc.tables)
    other = sibling(svc)
    (run,) = other.maintain(sketch_name, strategy="incremental")
    assert run.strategy == "incremental"
    assert maintained(other, sketch_name) == fresh_fragments(other, sql, sketch_name, other.latest_sequence())
    sketched, plain = other.query(sql), other.query(sql, use_sketches=False)
    assert sketched.sketch is not None and sorted_rows(sketched.table) == sorted_rows(plain.table)


def test_a_version_whose_snapshots_expired_is_recaptured_by_auto(
    spark_svc: SketchService, table: str
) -> None:
    sketch_name, sql = captured(spark_svc, table, "outlived")
    DeltaGenerator(spark_svc.tables, table, ("key",), seed=17).mixed(30).apply(spark_svc.tables)
    latest = spark_svc.latest_sequence()
    assert spark_svc.tables.expire_snapshots(table, latest) > 0  # as if the capture outlived retention
    other = sibling(spark_svc)  # a new process: nothing of the old snapshots loaded
    with pytest.raises(SnapshotExpiredError):
        other.maintain(sketch_name, strategy="incremental")
    fresh = sibling(spark_svc)
    assert fresh.plan_maintenance(sketch_name, "auto").strategy == "full", "the expiry is seen"
    (run,) = fresh.maintain(sketch_name, strategy="auto")
    assert run.strategy == "full" and run.to_version == 2
    assert maintained(other, sketch_name) == fresh_fragments(other, sql, sketch_name, latest)


def test_a_sketch_left_far_behind_stops_holding_its_tables_history(
    spark_svc: SketchService, table: str
) -> None:
    svc = sibling(spark_svc, retain_versions=1, retain_seconds=0, stale_history_loads=3)
    sketch_name, sql = captured(svc, table, "far_behind")
    version = svc.sketch(sketch_name).sequence

    def load(k: int) -> None:
        svc.tables.append(table, synthetic_table(10, 60, seed=70 + k, key_start=50_000 + 10 * k))

    def oldest_live() -> int:
        metadata = svc.catalog.load_table(table).metadata
        return min(
            c.seq for c in svc.tables.commits(table) if metadata.snapshot_by_id(c.snapshot_id) is not None
        )

    for k in range(3):  # three loads behind: within the limit, the history stays
        load(k)
    svc.collect_garbage([sketch_name])
    assert oldest_live() == version and svc.plan_maintenance(sketch_name, "auto").strategy == "incremental"
    load(3)  # four: the version no longer holds it
    assert svc.collect_garbage([sketch_name]).table_snapshots[table] > 0
    assert oldest_live() == svc.latest_sequence()
    assert svc.sketch(sketch_name).version == 1, "the version itself is kept"
    # Brought up by a recapture, planned as one; the unlimited setting keeps the history.
    assert svc.plan_maintenance(sketch_name, "auto").strategy == "full"
    (run,) = svc.maintain(sketch_name, strategy="auto")
    assert run.strategy == "full"
    assert maintained(svc, sketch_name) == fresh_fragments(svc, sql, sketch_name, svc.latest_sequence())
    unlimited = sibling(svc, stale_history_loads=0)
    for k in range(4, 9):
        load(k)
    assert unlimited.collect_garbage([sketch_name]).table_snapshots == {}


def test_young_versions_are_kept_whatever_their_number(spark_svc: SketchService, table: str) -> None:
    svc = sibling(spark_svc, retain_versions=1, retain_seconds=3600)
    sketch_name, _ = captured(svc, table, "young")
    deltas = DeltaGenerator(svc.tables, table, ("key",), seed=14)
    for _ in range(2):
        deltas.mixed(20).apply(svc.tables)
        svc.maintain(sketch_name, strategy="incremental")
    assert svc.sketches.versions(sketch_name) == [1, 2, 3], "a query may still be pinned to any of them"
    assert svc.collect_garbage([sketch_name]).version_count == 0


def test_two_maintainers_of_one_sketch_publish_each_version_once(
    spark_svc: SketchService, table: str
) -> None:
    import threading

    svc = spark_svc
    sketch_name, sql = captured(svc, table, "race")
    DeltaGenerator(svc.tables, table, ("key",), seed=15).mixed(60).apply(svc.tables)
    services = [sibling(svc) for _ in range(2)]
    barrier = threading.Barrier(2)
    runs: list[MaintenanceRun] = []

    def maintain(other: SketchService) -> None:
        barrier.wait()
        runs.extend(other.maintain(sketch_name, strategy="incremental"))

    threads = [threading.Thread(target=maintain, args=(other,)) for other in services]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(runs) == 2 and {r.to_version for r in runs} == {2}, "one version, reused by the loser"
    assert svc.sketches.versions(sketch_name) == [1, 2]
    assert maintained(svc, sketch_name) == fresh_fragments(svc, sql, sketch_name, svc.latest_sequence())


def test_a_capture_with_state_is_maintained_from_it(spark_svc: SketchService, table: str) -> None:
    svc = spark_svc
    sketch_name, sql = captured(svc, table, "with_state", TOPK, with_state=True)
    record = svc.sketches.version(sketch_name)
    assert record is not None and record.state_ref is not None
    DeltaGenerator(svc.tables, table, ("key",), seed=16).mixed(60).apply(svc.tables)
    other = sibling(svc)  # nothing kept in memory

    def no_spark(definition: object) -> object:
        raise AssertionError("the stored state should have been used")

    other.engines.spark_summarizer = no_spark  # type: ignore[method-assign,assignment]
    (run,) = other.maintain(sketch_name, strategy="incremental")
    assert run.strategy == "incremental" and run.to_version == 2
    assert maintained(other, sketch_name) == fresh_fragments(other, sql, sketch_name, other.latest_sequence())


@pytest.mark.parametrize("mode", ["off", "incremental"])
def test_a_query_maintains_an_older_sketch_to_its_snapshots_first_when_allowed(
    spark_svc: SketchService, table: str, mode: str
) -> None:
    svc = sibling(spark_svc, maintain_on_query=mode)
    sketch_name, sql = captured(svc, table, "on_query")
    DeltaGenerator(svc.tables, table, ("key",), seed=17).mixed(60).apply(svc.tables)
    result = svc.query(sql)
    plain = svc.query(sql, use_sketches=False)
    assert sorted_rows(result.table) == sorted_rows(plain.table)
    if mode == "off":
        assert result.sketch is None and svc.sketches.versions(sketch_name) == [1]
    else:
        assert result.sketch == (sketch_name, 2) and result.files_read <= result.files_total
        assert maintained(svc, sketch_name) == fresh_fragments(svc, sql, sketch_name, result.sequence)


def test_top_m_state_recaptures_when_deletions_use_up_the_kept_values(
    spark_svc: SketchService, table: str
) -> None:
    svc = sibling(spark_svc, keep_top_m=1)
    sketch_name, sql = captured(svc, table, "top_m", TOPK)
    generator = DeltaGenerator(svc.tables, table, ("key",), seed=18)
    generator.inserts(30).apply(svc.tables)
    (run,) = svc.maintain(sketch_name, strategy="incremental")  # state from Spark, one value kept
    assert run.strategy == "incremental"
    # Every row holding group 7's minimum of d goes: its kept value is gone, the next is unknown.
    lowest = svc.query(f"SELECT MIN(d) AS lo FROM {table} WHERE a = 7", use_sketches=False)
    svc.tables.delete(table, f"a = 7 AND d = {lowest.table.column('lo')[0].as_py()}")
    (run,) = svc.maintain(sketch_name, strategy="incremental")
    assert run.strategy == "full"  # recaptured, though incremental was asked for
    assert maintained(svc, sketch_name) == fresh_fragments(svc, sql, sketch_name, svc.latest_sequence())
    generator.mixed(20).apply(svc.tables)
    (run,) = svc.maintain(sketch_name, strategy="incremental")  # and incremental again after it
    assert run.strategy == "incremental"
    assert maintained(svc, sketch_name) == fresh_fragments(svc, sql, sketch_name, svc.latest_sequence())


def test_top_m_state_from_spark_equals_the_state_built_in_process(
    spark_svc: SketchService, table: str
) -> None:
    svc = sibling(spark_svc, keep_top_m=2)
    sketch_name, _ = captured(svc, table, "top_m_spark", TOPK)
    definition = svc.sketches.definition(sketch_name)
    record = svc.sketches.version(sketch_name)
    assert record is not None
    partitions = {
        t: svc.range_partition(t, a, c)[1] for t, (a, c) in svc.sketch(sketch_name).partitions.items()
    }

    def values(engine: IncrementalSketch) -> dict[object, list[tuple[list[object], bool]]]:
        (aggregate, _) = engine._stateful  # the aggregation, then the top-k over it
        return {
            key: [(list(a.values.keys()), a.partial) for a in group.accumulators if a.values is not None]
            for key, group in aggregate.operator.groups.items()
        }

    in_process = build_engine(svc.tables, definition, partitions, record.sequence, keep_top=2).engine
    from_spark = build_engine(
        svc.tables,
        definition,
        partitions,
        record.sequence,
        summarize=svc.spark_summarizer(definition),
        keep_top=2,
    ).engine
    assert values(from_spark) == values(in_process)
    assert all(len(kept) <= 4 for groups in values(in_process).values() for kept, _ in groups)
    assert any(partial for groups in values(in_process).values() for _, partial in groups)
    assert from_spark.sketch() == in_process.sketch()


JOINED = (
    "SELECT f.a, SUM(f.b) AS s, COUNT(*) AS n, AVG(o.d) AS od FROM {t} f JOIN {o} o ON f.a = o.a "
    "WHERE o.b > -1000 GROUP BY f.a HAVING SUM(f.b) > 100"
)


def state_rows(engine: IncrementalSketch) -> dict[str, list[str]]:
    """The operators' state, the order of rows and of entries within a row aside (join Bloom
    filters are a cache: left out)."""

    def row_text(row: dict[str, Any]) -> str:
        return repr({k: sorted(map(repr, v)) if isinstance(v, list) else v for k, v in row.items()})

    return {
        name: sorted(row_text(row) for row in table.to_pylist())
        for name, table in engine.state_tables().items()
        if not name.startswith("bloom")
    }


def rows_with_keys(keys: list[int], b: int, key_start: int) -> pa.Table:
    """Synthetic rows whose group attribute ``a`` takes the given (new) values."""
    rows = synthetic_table(len(keys), 1, seed=25, key_start=key_start)
    rows = rows.set_column(rows.schema.get_field_index("a"), "a", pa.array(keys, pa.int64()))
    return rows.set_column(rows.schema.get_field_index("b"), "b", pa.array([b] * len(keys), pa.int64()))


@pytest.mark.parametrize("template", [HAVING, TOPK, JOINED], ids=["having", "topk", "join"])
def test_big_deltas_are_maintained_on_spark_and_equal_a_fresh_capture(
    spark_svc: SketchService, table: str, ns: str, template: str
) -> None:
    """Above the in-process threshold the deltas of aggregations that join or keep min/max
    come from Spark (one term per changed table: both sides of the join change). After every
    run the state equals one built from the snapshot in-process, and the sketch a fresh capture;
    the in-process runs after a Spark run show that the Bloom filters it made stale were
    dropped."""
    other = f"{ns}.dims"
    # New join keys 1000.. on purpose, far outside the groups 0..59 the tables held: delta
    # validation would quarantine them as outliers (tests/validation), which is not this test.
    svc = sibling(spark_svc, spark_delta_rows=30, validate_deltas=False)
    svc.tables.create(other, synthetic_table(300, 60, seed=21), sort_by=["a"])
    sql = template.format(t=table, o=other)
    name = f"{ns}_spark_delta"
    tables = {table: "a", other: "a"} if template == JOINED else {table: "a"}
    svc.capture(sql, name=name, attributes=tables, fragments=40, with_state=True)
    definition = svc.sketches.definition(name)
    partitions = {t: svc.range_partition(t, a, 40)[1] for t, a in tables.items()}
    facts = DeltaGenerator(svc.tables, table, ("key",), seed=22)
    dims = DeltaGenerator(svc.tables, other, ("key",), seed=23)
    steps = [  # facts delta rows, whether the dimension table changes, where the run goes
        (6, False, "in-process"),  # builds the join's Bloom filters
        (80, True, "spark"),  # new join keys 1000.. on the dimension side
        (0, False, "in-process"),  # facts rows with those keys: a stale filter would drop them
        (120, True, "spark"),
        (90, False, "spark"),
    ]
    for step, (size, dims_change, expected) in enumerate(steps):
        if size:
            facts.mixed(size).apply(svc.tables)
        if step == 2:
            svc.tables.append(table, rows_with_keys([1000, 1001, 1002], 10_000, key_start=10**7))
        if dims_change:
            dims.mixed(12).apply(svc.tables)
            svc.tables.append(other, rows_with_keys([1000 + step, 1001], 0, key_start=10**7 + 10 * step))
        (run,) = svc.maintain(name, strategy="incremental")
        if template == HAVING:  # join-free, with array state: reduced in-process whatever the size
            expected = "in-process"
        assert (run.strategy, run.where) == ("incremental", expected), f"step {step}"
        sequence = svc.latest_sequence()
        kept = svc.kept_engine(name)
        assert kept is not None
        fresh = build_engine(svc.tables, definition, partitions, sequence).engine
        assert state_rows(kept) == state_rows(fresh), f"step {step}"
        assert maintained(svc, name) == fresh_fragments(svc, sql, name, sequence), f"step {step}"
    scratch = svc.settings.warehouse / SCRATCH_DIRECTORY  # the delta rows handed to Spark
    assert not scratch.exists() or not any(p.is_file() for p in scratch.rglob("*"))
    # A restart from the stored state (whole after a Spark step with joins) agrees too.
    again = sibling(svc)
    facts.inserts(4).apply(svc.tables)
    (run,) = again.maintain(name, strategy="incremental")
    assert run.where == "in-process"
    assert maintained(again, name) == fresh_fragments(again, sql, name, again.latest_sequence())


def test_auto_goes_to_spark_above_the_threshold_only_where_spark_covers_the_delta(
    spark_svc: SketchService, table: str, ns: str
) -> None:
    svc = sibling(spark_svc, incremental_max_delta_rows=30, spark_delta_rows=30)
    covered, covered_sql = captured(svc, table, "auto_covered", TOPK)
    arrays, arrays_sql = captured(svc, table, "auto_arrays", HAVING)
    rows_topk = f"SELECT key, b FROM {table} WHERE c > 0 ORDER BY b DESC, key LIMIT 5"
    uncovered = f"{ns}_auto_uncovered"
    svc.capture(rows_topk, name=uncovered, attributes={table: "a"}, fragments=40)
    DeltaGenerator(svc.tables, table, ("key",), seed=24).mixed(80).apply(svc.tables)
    # The plan says beforehand what each run will do, and whether it needs Spark.
    plans = {n: svc.plan_maintenance(n, "auto") for n in (covered, uncovered, arrays)}
    assert (plans[covered].strategy, plans[covered].on_spark, plans[covered].needs_spark) == (
        "incremental",
        True,
        True,
    )
    # Array state reduces the big delta in-process, but this sketch has no state yet: Spark builds it.
    assert (plans[arrays].strategy, plans[arrays].on_spark, plans[arrays].builds_state) == (
        "incremental",
        False,
        True,
    )
    assert (plans[uncovered].strategy, plans[uncovered].needs_spark) == ("full", True)
    assert {p.delta_rows for p in plans.values()} == {80} and plans[arrays].from_version == 1
    by_name = {n: svc.maintain(n, strategy="auto")[0] for n in (covered, uncovered, arrays)}
    assert (by_name[covered].strategy, by_name[covered].where) == ("incremental", "spark")
    assert (by_name[arrays].strategy, by_name[arrays].where) == ("incremental", "in-process")
    assert by_name[uncovered].strategy == "full"  # a top-k over the table itself: no aggregation
    sequence = svc.latest_sequence()
    assert maintained(svc, covered) == fresh_fragments(svc, covered_sql, covered, sequence)
    assert maintained(svc, arrays) == fresh_fragments(svc, arrays_sql, arrays, sequence)
    # Without Spark for big deltas, min/max state would take this one row by row: recaptured.
    no_spark = sibling(svc, spark_delta_rows=10**9)
    DeltaGenerator(svc.tables, table, ("key",), seed=26).mixed(80).apply(svc.tables)
    (run,) = no_spark.maintain(covered, strategy="auto")
    assert run.strategy == "full"
    assert not no_spark.plan_maintenance(arrays, "auto").needs_spark  # it has state now
    (run,) = no_spark.maintain(arrays, strategy="auto")
    assert (run.strategy, run.where) == ("incremental", "in-process")
    # Up to the threshold, auto maintains incrementally whatever the plan.
    assert svc.maintain(uncovered, strategy="auto")[0].strategy == "full"  # catch up first
    DeltaGenerator(svc.tables, table, ("key",), seed=27).mixed(10).apply(svc.tables)
    (run,) = svc.maintain(uncovered, strategy="auto")
    assert (run.strategy, run.where) == ("incremental", "in-process")
    sequence = svc.latest_sequence()
    assert maintained(svc, uncovered) == fresh_fragments(svc, rows_topk, uncovered, sequence)


def test_scratch_left_by_a_run_that_died_is_collected_once_old(spark_svc: SketchService, ns: str) -> None:
    scratch = spark_svc.settings.warehouse / SCRATCH_DIRECTORY
    old, young = scratch / f"{ns}_old", scratch / f"{ns}_young"
    for directory in (old, young):
        directory.mkdir(parents=True)
        (directory / "t.inserted.parquet").write_bytes(b"rows")
    long_ago = time.time() - 2 * spark_svc.settings.retain_seconds
    os.utime(old, (long_ago, long_ago))
    spark_svc.collect_garbage([])
    assert not old.exists() and young.exists()
    shutil.rmtree(young)


def test_a_sketch_dropped_and_captured_again_under_its_name_never_takes_the_old_engine(
    spark_svc: SketchService, table: str
) -> None:
    svc = spark_svc
    sketch_name, _ = captured(svc, table, "reborn")  # HAVING
    deltas = DeltaGenerator(svc.tables, table, ("key",), seed=21)
    deltas.mixed(40).apply(svc.tables)
    svc.maintain(sketch_name, strategy="incremental")  # version 2; its engine is kept
    svc.drop_sketch(sketch_name)

    topk = TOPK.format(t=table)
    svc.capture(topk, name=sketch_name, attributes={table: "a"}, fragments=40)
    deltas.mixed(40).apply(svc.tables)
    svc.maintain(sketch_name, strategy="full")  # version 2 again, of another query
    deltas.mixed(40).apply(svc.tables)
    (run,) = svc.maintain(sketch_name, strategy="incremental")
    assert (run.from_version, run.to_version) == (2, 3)
    assert maintained(svc, sketch_name) == fresh_fragments(svc, topk, sketch_name, svc.latest_sequence())
    assert sorted_rows(svc.query(topk).table) == sorted_rows(svc.query(topk, use_sketches=False).table)
