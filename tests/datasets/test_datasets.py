"""TPC-H loading, the synthetic workload, and the delta generators."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from sketch_core.datasets import TPCH_SORT_KEYS, DeltaGenerator, load_tpch, synthetic_table
from sketch_core.datasets.deltas import rows_predicate
from sketch_core.errors import DatasetError
from sketch_core.service import SketchService


def test_synthetic_groups_and_correlation() -> None:
    data = synthetic_table(50_000, groups=50, seed=7)
    a = data.column("a").to_numpy()
    counts = np.bincount(a, minlength=50)
    assert len(counts) == 50 and counts.min() > 0.8 * 1000 and counts.max() < 1.2 * 1000
    assert pc.count_distinct(data.column("key")).as_py() == 50_000
    for name in ("b", "c", "j"):
        assert np.corrcoef(a, data.column(name).to_numpy())[0, 1] > 0.9
    assert pc.min(data.column("b")).as_py() < 0, "values are centred, so negatives occur"
    assert synthetic_table(10, groups=3, seed=1).equals(synthetic_table(10, groups=3, seed=1))
    with pytest.raises(DatasetError):
        synthetic_table(10, groups=0)


def test_tpch_loads_with_matching_counts(svc: SketchService, ns: str, tpch_dir: Path) -> None:
    created = load_tpch(svc.tables, 0.01, tpch_dir.parents[1], namespace=ns)
    assert sorted(created) == sorted(f"{ns}.{t}" for t in TPCH_SORT_KEYS)
    for table, keys in TPCH_SORT_KEYS.items():
        expected = pq.read_metadata(tpch_dir / f"{table}.parquet").num_rows
        assert svc.tables.pin(f"{ns}.{table}").record_count == expected, table
        assert svc.tables.commit_log.get_table(f"{ns}.{table}").sort_by == keys  # type: ignore[union-attr]
    assert len(svc.tables.pin(f"{ns}.lineitem").files) > 1
    # Loading again keeps what is there.
    assert load_tpch(svc.tables, 0.01, tpch_dir.parents[1], namespace=ns) == created


@pytest.mark.parametrize("kind", ["inserts", "deletes", "mixed", "updates"])
def test_delta_generators_have_exact_sizes(svc: SketchService, ns: str, tpch_dir: Path, kind: str) -> None:
    name = f"{ns}.lineitem"
    svc.tables.create(name, tpch_dir / "lineitem.parquet", sort_by=list(TPCH_SORT_KEYS["lineitem"]))
    before = svc.tables.read_arrow(name)
    delta = getattr(DeltaGenerator(svc.tables, name, TPCH_SORT_KEYS["lineitem"], seed=3), kind)(40)
    delta.apply(svc.tables)
    after = svc.tables.read_arrow(name)
    commit = svc.tables.commits(name)[-1]
    assert (commit.added_rows, commit.deleted_rows) == (delta.inserted_rows, delta.deleted_rows)
    assert after.num_rows == before.num_rows + delta.inserted_rows - delta.deleted_rows
    keys = list(
        zip(after.column("l_orderkey").to_pylist(), after.column("l_linenumber").to_pylist(), strict=True)
    )
    assert len(set(keys)) == len(keys), "keys stay unique"
    expected_sizes = {"inserts": (40, 0), "deletes": (0, 40), "mixed": (20, 20), "updates": (40, 40)}
    assert (delta.inserted_rows, delta.deleted_rows) == expected_sizes[kind]
    if kind == "updates":
        assert after.num_rows == before.num_rows


def test_clustered_deletes_remove_one_run_of_keys_from_few_files(
    small_files: None, svc: SketchService, ns: str
) -> None:
    name = f"{ns}.r"
    svc.tables.create(name, synthetic_table(40_000, groups=20, seed=1), sort_by=["key"])
    before = svc.tables.pin(name)
    assert len(before.files) >= 4
    delta = DeltaGenerator(svc.tables, name, ("key",), seed=4, clustered=True).deletes(300)
    delta.apply(svc.tables)
    gone = sorted(set(range(40_000)) - set(svc.tables.read_arrow(name).column("key").to_pylist()))
    assert len(gone) == 300 and gone[-1] - gone[0] == 299, "one run of consecutive keys"
    assert svc.tables.commits(name)[-1].removed_files <= 2


@pytest.mark.parametrize("read_rows_limit", [1_000_000, 12_000])
def test_clustered_deletes_on_two_key_columns_name_whole_groups_by_a_range(
    svc: SketchService, ns: str, read_rows_limit: int
) -> None:
    """Lines of orders: a run of 3,000 rows is a range of whole orders and the two orders it
    cuts, exactly those rows, whether the generator read the whole table or a run of files."""
    name = f"{ns}.lines"
    orders = np.repeat(np.arange(0, 40_000, 4), 4)  # 10,000 orders of 4 lines, keys with gaps
    lines = np.tile(np.arange(1, 5), 10_000)
    rows = pa.table(
        {"o": pa.array(orders, pa.int64()), "l": pa.array(lines, pa.int64()), "v": pa.array(lines * 2.0)}
    )
    svc.tables.create(name, rows.slice(0, 10_000), sort_by=["o", "l"])
    for start in range(10_000, 40_000, 10_000):  # four files, each its own range of orders
        svc.tables.append(name, rows.slice(start, 10_000))
    # A late fifth line for every hundredth order: a file reaching into every other's range.
    late = np.arange(0, 40_000, 400)
    fifth = pa.table({"o": pa.array(late, pa.int64()), "l": pa.array(np.full(len(late), 5), pa.int64())})
    svc.tables.append(name, fifth.append_column("v", pa.array(np.full(len(late), 10.0))))
    generator = DeltaGenerator(
        svc.tables, name, ("o", "l"), seed=8, clustered=True, read_rows_limit=read_rows_limit
    )
    delta = generator.deletes(3_001)
    assert delta.delete_where is not None and len(delta.delete_where) < 300, delta.delete_where
    assert "BETWEEN" in delta.delete_where
    before = set(zip(*svc.tables.read_arrow(name).select(["o", "l"]).to_pydict().values(), strict=True))
    delta.apply(svc.tables)
    after = set(zip(*svc.tables.read_arrow(name).select(["o", "l"]).to_pydict().values(), strict=True))
    gone = sorted(before - after)
    assert len(gone) == 3_001 and len(after) == 40_100 - 3_001
    assert gone == sorted(before)[sorted(before).index(gone[0]) :][:3_001], "one run in key order"


def test_deletes_among_the_newest_rows_touch_only_the_newest_files(svc: SketchService, ns: str) -> None:
    name = f"{ns}.r"
    svc.tables.create(name, synthetic_table(20_000, groups=20, seed=1), sort_by=["a"])
    generator = DeltaGenerator(svc.tables, name, ("key",), seed=6)
    generator.inserts(500).apply(svc.tables)
    delta = generator.deletes(200, among_newest=500)
    delta.apply(svc.tables)
    gone = set(range(20_500)) - set(svc.tables.read_arrow(name).column("key").to_pylist())
    assert len(gone) == 200 and min(gone) >= 20_000, "only rows of the last load"
    assert svc.tables.commits(name)[-1].removed_files <= 1
    mixed = generator.mixed(100, among_newest=500)
    assert mixed.delete_where is not None and mixed.inserts is not None
    mixed.apply(svc.tables)
    keys = svc.tables.read_arrow(name).column("key").to_pylist()
    assert len(keys) == 20_500 - 200 + 50 - 50 and min(set(range(20_000)) - set(keys), default=None) is None


def test_inserts_come_from_the_same_distribution(svc: SketchService, ns: str) -> None:
    name = f"{ns}.r"
    svc.tables.create(name, synthetic_table(20_000, groups=20, seed=1), sort_by=["key"])
    fresh = DeltaGenerator(svc.tables, name, ("key",), seed=2).inserts(5_000).inserts
    assert fresh is not None
    assert pc.min(fresh.column("key")).as_py() == 20_000
    assert set(fresh.column("a").to_pylist()) <= set(range(20))
    assert (
        abs(pc.mean(fresh.column("b")).as_py() - pc.mean(svc.tables.read_arrow(name).column("b")).as_py()) < 5
    )


def test_deltas_of_a_large_table_come_from_a_run_of_its_files(
    small_files: None, svc: SketchService, ns: str
) -> None:
    name = f"{ns}.big"
    svc.tables.create(name, synthetic_table(40_000, groups=20, seed=1), sort_by=["key"])
    assert len(svc.tables.pin(name).files) >= 4
    # As if the table were too big to read whole: deltas from ~5,000 rows' worth of files.
    generator = DeltaGenerator(svc.tables, name, ("key",), seed=5, read_rows_limit=5_000)
    fresh = generator.inserts(200).inserts
    assert fresh is not None and pc.min(fresh.column("key")).as_py() == 40_000, (
        "above the table's largest key"
    )
    delta = generator.mixed(300)
    delta.apply(svc.tables)
    keys = svc.tables.read_arrow(name).column("key").to_pylist()
    assert len(keys) == 40_000 + 150 - 150 and len(set(keys)) == len(keys)


def test_rows_predicate_is_shallow_for_many_rows() -> None:
    import pyarrow as pa

    keys = pa.table({"k1": list(range(3000)), "k2": [1] * 3000})
    predicate = rows_predicate(keys, ("k1", "k2"))
    assert predicate.count("(") < 3000 * 3 and "k1 = 2999" in predicate


def test_runs_of_consecutive_keys_become_ranges(svc: SketchService, ns: str) -> None:
    import pyarrow as pa

    keys = [*range(100, 50_100), 7, 9, 10, 60_000, 60_001, 60_002]
    predicate = rows_predicate(pa.table({"key": keys}), ("key",))
    assert len(predicate) < 200, predicate
    name = f"{ns}.r"
    svc.tables.create(name, synthetic_table(70_000, groups=5, seed=1), sort_by=["key"])
    svc.tables.delete(name, predicate)
    left = set(svc.tables.read_arrow(name, columns=("key",)).column("key").to_pylist())
    assert left == set(range(70_000)) - set(keys), "exactly the named rows are gone"
