"""File pruning: pure cases, and soundness on real Iceberg files."""

from __future__ import annotations

import datetime as dt
from functools import partial

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sketch_core.datasets import synthetic_table
from sketch_core.partitions import RangePartition
from sketch_core.partitions.pruning import (
    PAGE_INDEX_MAX_INTERVALS,
    prune_files,
    pushed_intervals,
    row_condition_pays,
)
from sketch_core.service import SketchService
from sketch_core.tables.pinned import DataFileInfo

P = RangePartition("t.r", "a", (10, 20, 30))


def file(name: str, low: int | None, high: int | None, nulls: int = 0) -> DataFileInfo:
    bounds = ({"a": low}, {"a": high}) if low is not None else ({}, {})
    return DataFileInfo(name, 10, 100, bounds[0], bounds[1], {"a": nulls})


def names(files: list[DataFileInfo]) -> list[str]:
    return [f.path for f in files]


def test_files_outside_the_sketch_ranges_are_skipped() -> None:
    files = [
        file("low", 0, 9),
        file("mid", 10, 19),
        file("edge", 19, 20),
        file("high", 30, 99),
        file("unknown", None, None),
    ]
    assert names(prune_files(files, P, [1])) == ["mid", "edge", "unknown"]
    assert names(prune_files(files, P, [2])) == ["edge", "unknown"]
    assert names(prune_files(files, P, [0, 3])) == ["low", "high", "unknown"]
    assert names(prune_files(files, P, [])) == ["unknown"]


def test_null_fragment_keeps_files_with_nulls() -> None:
    files = [file("none", 0, 5, nulls=0), file("some", 0, 5, nulls=3)]
    assert names(prune_files(files, P, [P.null_fragment])) == ["some"]


def test_row_condition_only_when_it_drops_at_least_half_of_the_rows_read() -> None:
    total = 1_000_000
    pays = partial(row_condition_pays, rows_total=total, feeds_join=True)
    assert pays(0.01, rows_read=100_000)  # keeps 10% of what is read
    assert pays(0.05, rows_read=100_000)  # exactly half
    assert not pays(0.6, rows_read=total)  # keeps 60%: not worth it
    assert not pays(0.02, rows_read=30_000)  # files already tight
    assert not pays(0.0, rows_read=0)  # nothing is read


def test_row_condition_only_below_a_join() -> None:
    # Dropping 90% of the rows read pays before a join, not before an aggregation of one table.
    assert row_condition_pays(0.01, rows_read=100_000, rows_total=1_000_000, feeds_join=True)
    assert not row_condition_pays(0.01, rows_read=100_000, rows_total=1_000_000, feeds_join=False)


def test_files_with_a_page_index_are_given_the_sketch_s_own_ranges() -> None:
    assert pushed_intervals(4, page_index=False) == 4
    assert pushed_intervals(4, page_index=True) == PAGE_INDEX_MAX_INTERVALS
    assert pushed_intervals(1000, page_index=True) == 1000  # a larger setting is kept
    partition = RangePartition("t", "x", tuple(range(10, 1000, 10)))  # 100 fragments
    scattered = range(0, 100, 3)  # 34 separate ranges
    assert len(partition.intervals(scattered, pushed_intervals(4, page_index=True))) == 34
    assert len(partition.intervals(scattered, pushed_intervals(4, page_index=False))) == 4


def read_rows(files: list[DataFileInfo]) -> pa.Table:
    return pa.concat_tables([pq.read_table(f.path.removeprefix("file://")) for f in files])


def test_pruning_is_sound_on_real_files(small_files: None, svc: SketchService, ns: str) -> None:
    name = f"{ns}.r"
    data = synthetic_table(30_000, groups=40, seed=9)
    svc.tables.create(name, data, sort_by=["key"])
    pinned = svc.tables.pin(name)
    assert len(pinned.files) >= 4
    for attribute in ("key", "a"):  # sorted attribute prunes; unsorted one keeps what it must
        distinct = sorted(set(data.column(attribute).to_pylist()))
        partition = RangePartition(name, attribute, tuple(distinct[:: max(1, len(distinct) // 8)][1:]))
        sketch = {1, 3}
        members = pa.array([v for v in distinct if partition.fragment_of(v) in sketch])
        kept = prune_files(pinned.files, partition, sketch)
        rows = read_rows(kept)
        expected = data.filter(pc.is_in(data.column(attribute), members)).num_rows
        assert rows.filter(pc.is_in(rows.column(attribute), members)).num_rows == expected, attribute
        if attribute == "key":
            assert len(kept) < len(pinned.files), "a sorted attribute must let files be skipped"


def test_date_bounds_decode_to_dates(svc: SketchService, ns: str) -> None:
    days = [dt.date(2021, 1, 1) + dt.timedelta(days=i) for i in range(100)]
    svc.tables.create(f"{ns}.d", pa.table({"d": days}), sort_by=["d"])
    (info,) = svc.tables.pin(f"{ns}.d").files
    assert (info.lower["d"], info.upper["d"]) == (days[0], days[-1])
