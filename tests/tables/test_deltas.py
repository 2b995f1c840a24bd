"""Deltas between snapshots, against an independent oracle: the bag difference of two full
reads of the table (PyIceberg's own scan) at the two commit sequence numbers."""

from __future__ import annotations

import math
import uuid
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from sketch_core.datasets import synthetic_table
from sketch_core.datasets.deltas import DeltaGenerator
from sketch_core.errors import DeltaRangeError
from sketch_core.service import SketchService
from sketch_core.tables import deltas as deltas_module
from sketch_core.tables import service as table_service_module
from sketch_core.tables.deltas import TableDelta, bag_difference


def bag(table: pa.Table) -> Counter[tuple[Any, ...]]:
    def canonical(value: Any) -> Any:  # NaN != NaN would keep equal rows apart
        return "NaN" if isinstance(value, float) and math.isnan(value) else value

    return Counter(tuple(canonical(v) for v in row.values()) for row in table.to_pylist())


def oracle(
    svc: SketchService, name: str, before: int | None, after: int
) -> tuple[Counter[Any], Counter[Any]]:
    old = bag(svc.tables.read_arrow(name, before)) if before is not None else Counter()
    new = bag(svc.tables.read_arrow(name, after))
    return new - old, old - new


def assert_matches_oracle(svc: SketchService, delta: TableDelta, before: int | None, after: int) -> None:
    inserted, deleted = oracle(svc, delta.table, before, after)
    assert bag(delta.inserted) == inserted
    assert bag(delta.deleted) == deleted


class TestBagDifference:
    def test_duplicates_nulls_and_nans_cancel_row_by_row(self) -> None:
        added = pa.table({"k": [1, 1, 1, None, 2], "x": [0.5, 0.5, 0.5, float("nan"), None]})
        removed = pa.table({"k": [1, None, 3], "x": [0.5, float("nan"), 1.0]})
        inserted, deleted = bag_difference(added, removed)
        assert bag(inserted) == Counter({(1, 0.5): 2, (2, None): 1})
        assert bag(deleted) == Counter({(3, 1.0): 1})
        assert inserted.schema == added.schema

    def test_nested_columns_cancel_by_value(self) -> None:
        """Tables Spark writes may hold structs, lists and maps (Arrow dictionary-encodes none of
        them): equal rows still cancel, and a NULL struct differs from one of NULL fields."""
        kind = pa.struct([("a", pa.int32()), ("b", pa.string())])
        tags, props = pa.list_(pa.string()), pa.map_(pa.string(), pa.int64())

        def rows(ids: list[int], structs: list[Any], lists: list[Any], maps: list[Any]) -> pa.Table:
            return pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "s": pa.array(structs, kind),
                    "l": pa.array(lists, tags),
                    "m": pa.array(maps, props),
                }
            )

        added = rows(
            [1, 2, 3, 4],
            [{"a": 1, "b": "x"}, {"a": None, "b": None}, None, {"a": 2, "b": "y"}],
            [["t1"], [], None, ["t1", "t2"]],
            [[("k", 1)], None, [], [("k", 2)]],
        )
        removed = rows(
            [1, 2, 3, 4],
            [{"a": 1, "b": "x"}, None, None, {"a": 2, "b": "y"}],
            [["t1"], [], None, ["t2", "t1"]],
            [[("k", 1)], None, [], [("k", 2)]],
        )
        inserted, deleted = bag_difference(added, removed)
        assert inserted.column("id").to_pylist() == [2, 4]
        assert deleted.column("id").to_pylist() == [2, 4]
        assert inserted.column("s").to_pylist()[0] == {"a": None, "b": None}
        assert deleted.column("s").to_pylist()[0] is None

    def test_uuids_and_fixed_bytes_compare_by_value(self) -> None:
        """Iceberg's uuid (an Arrow extension type, as PyIceberg reads it) and fixed columns."""
        ids = [uuid.UUID(int=n).bytes for n in (1, 2, 2)]

        def rows(keys: list[int], uuids: list[bytes]) -> pa.Table:
            storage = pa.array(uuids, pa.binary(16))
            return pa.table(
                {
                    "k": keys,
                    "u": pa.ExtensionArray.from_storage(pa.uuid(), storage),
                    "f": pa.array([u[:3] for u in uuids], pa.binary(3)),
                }
            )

        inserted, deleted = bag_difference(rows([1, 2, 3], ids), rows([1, 2, 3], [ids[0], ids[0], ids[2]]))
        assert inserted.column("k").to_pylist() == [2] and deleted.column("k").to_pylist() == [2]
        assert inserted.column("u").type == pa.uuid()

    @pytest.mark.parametrize("seed", range(30))
    def test_sides_that_share_no_value_of_a_column_are_returned_as_they_are(self, seed: int) -> None:
        """A column whose values the sides do not share means no row cancels (an overwrite's
        new rows and its old ones): returned without grouping, the same bags as grouping gives,
        over sides that share values in some columns, all, or none."""
        rng = np.random.default_rng(seed)

        def side(n: int, offset: int) -> pa.Table:
            pool = [None, 0.5, float("nan"), 2.0]
            return pa.table(
                {
                    "small": pa.array(rng.integers(0, 3, n) + offset * rng.integers(0, 2), pa.int64()),
                    "x": pa.array([pool[i] for i in rng.integers(0, 4, n)], pa.float64()),
                    "s": pa.array([f"v{i}" for i in rng.integers(0, 4, n) + offset * 10]),
                    "l": pa.array([[int(i)] for i in rng.integers(0, 2, n)], pa.list_(pa.int64())),
                }
            )

        def rows(table: pa.Table) -> Counter[tuple[Any, ...]]:  # lists as tuples, NaN as one value
            return Counter(
                tuple(
                    tuple(v)
                    if isinstance(v, list)
                    else "NaN"
                    if isinstance(v, float) and math.isnan(v)
                    else v
                    for v in row.values()
                )
                for row in table.to_pylist()
            )

        added = side(int(rng.integers(1, 30)), 0)
        removed = side(int(rng.integers(1, 30)), int(rng.integers(0, 2)))
        inserted, deleted = bag_difference(added, removed)
        assert rows(inserted) == rows(added) - rows(removed)
        assert rows(deleted) == rows(removed) - rows(added)
        assert inserted.schema == added.schema

    def test_one_side_empty_returns_the_other_unchanged(self) -> None:
        rows = pa.table({"k": [3, 1, 2]})
        assert bag_difference(rows, rows.slice(0, 0)) == (rows, rows.slice(0, 0))
        assert bag_difference(rows.slice(0, 0), rows)[1] == rows


def test_append_delete_and_update_each_give_their_rows(svc: SketchService, ns: str) -> None:
    name = f"{ns}.r"
    created = svc.tables.create(name, synthetic_table(5000, 20, seed=1), sort_by=["key"])
    generator = DeltaGenerator(svc.tables, name, ("key",), seed=2)
    previous = created
    for delta in (generator.inserts(40), generator.deletes(30), generator.updates(25), generator.mixed(50)):
        current = delta.apply(svc.tables)
        result = svc.tables.delta(name, previous, current)
        assert_matches_oracle(svc, result, previous, current)
        # An update may rewrite a row to the values it had (the donor row can be the victim):
        # that cancels, so only inserts and deletes have exact counts.
        if delta.kind in ("insert", "delete"):
            assert (result.inserted.num_rows, result.deleted.num_rows) == (
                delta.inserted_rows,
                delta.deleted_rows,
            )
        if delta.kind == "insert":  # a small append's rows come from its record: no file read
            assert result.files_read == 0
        previous = current


def test_a_delta_over_several_commits_composes_and_cancels(svc: SketchService, ns: str) -> None:
    name = f"{ns}.r"
    start = svc.tables.create(name, synthetic_table(3000, 10, seed=3), sort_by=["key"])
    fresh = synthetic_table(20, 10, seed=4, key_start=100_000)
    svc.tables.append(name, fresh)
    # Delete half of the rows just inserted, and some old ones: the deleted new rows cancel.
    svc.tables.delete(name, "key >= 100010 OR key < 15")
    end = svc.tables.append(name, synthetic_table(5, 10, seed=5, key_start=200_000))
    delta = svc.tables.delta(name, start, end)
    assert_matches_oracle(svc, delta, start, end)
    keys = set(delta.inserted.column("key").to_pylist())
    assert keys == set(range(100_000, 100_010)) | set(range(200_000, 200_005))
    assert sorted(delta.deleted.column("key").to_pylist()) == list(range(15))


def test_reinserting_deleted_rows_is_an_empty_delta(svc: SketchService, ns: str) -> None:
    name = f"{ns}.r"
    data = synthetic_table(2000, 10, seed=6)
    start = svc.tables.create(name, data, sort_by=["key"])
    svc.tables.delete(name, "key < 50")
    end = svc.tables.append(name, data.filter(pc.less(data.column("key"), 50)))
    delta = svc.tables.delta(name, start, end)
    assert delta.is_empty
    assert svc.tables.delta(name, end, end).is_empty


def test_from_before_the_table_existed_everything_is_inserted(svc: SketchService, ns: str) -> None:
    before = svc.latest_sequence()
    name = f"{ns}.r"
    data = synthetic_table(700, 5, seed=7)
    created = svc.tables.create(name, data, sort_by=["key"])
    for start in (None, before):
        delta = svc.tables.delta(name, start, created)
        assert bag(delta.inserted) == bag(data) and delta.deleted.num_rows == 0


@pytest.mark.parametrize("whole_read_bytes", [1 << 20, 0], ids=["read-whole", "skip-row-groups"])
def test_columns_and_filter_restrict_the_delta_exactly(
    svc: SketchService, ns: str, whole_read_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Selection commutes with the bag difference. Projection does not: rows that differ only
    in columns left out cancel, as they do for a query that reads only these columns. Small
    files are read whole and filtered in memory, big ones through row-group statistics: both
    ways give the same rows."""
    monkeypatch.setattr(deltas_module, "_WHOLE_READ_BYTES", whole_read_bytes)
    name = f"{ns}.r"
    start = svc.tables.create(name, synthetic_table(4000, 40, seed=8), sort_by=["key"])
    end = DeltaGenerator(svc.tables, name, ("key",), seed=9).mixed(300).apply(svc.tables)
    condition = pc.field("a") < 10
    from_files = svc.tables.delta(name, start, end, columns=("a", "b"), row_filter=condition)
    full = svc.tables.delta(name, start, end)

    def read_again(*args: object, **kwargs: object) -> None:
        raise AssertionError("the whole delta was just read: restricted in memory, not read again")

    # What maintenance asks right after validation read the whole delta.
    monkeypatch.setattr(svc.tables, "_recorded_delta", read_again)
    monkeypatch.setattr(table_service_module, "snapshot_delta", read_again)
    from_memory = svc.tables.delta(name, start, end, columns=("a", "b"), row_filter=condition)
    new, old = (bag(side.filter(condition).select(["a", "b"])) for side in (full.inserted, full.deleted))
    for restricted in (from_files, from_memory):
        assert (bag(restricted.inserted), bag(restricted.deleted)) == (new - old, old - new)
        assert restricted.row_count < full.row_count


def test_a_backwards_delta_is_refused(svc: SketchService, ns: str) -> None:
    name = f"{ns}.r"
    first = svc.tables.create(name, synthetic_table(10, 2, seed=10), sort_by=["key"])
    second = svc.tables.append(name, synthetic_table(10, 2, seed=11, key_start=10))
    with pytest.raises(DeltaRangeError) as info:
        svc.tables.delta(name, second, first)
    assert (info.value.from_sequence, info.value.to_sequence) == (second, first)


def test_random_histories_match_the_oracle(svc: SketchService, ns: str) -> None:
    name = f"{ns}.r"
    sequences = [svc.tables.create(name, synthetic_table(3000, 30, seed=12), sort_by=["key"])]
    generator = DeltaGenerator(svc.tables, name, ("key",), seed=13)
    rng = np.random.default_rng(14)
    for _ in range(8):
        kind = rng.choice(["inserts", "deletes", "updates", "mixed"])
        sequences.append(getattr(generator, kind)(int(rng.integers(1, 60))).apply(svc.tables))
    for _ in range(6):
        i, j = sorted(rng.choice(len(sequences), size=2, replace=False))
        assert_matches_oracle(
            svc, svc.tables.delta(name, sequences[i], sequences[j]), sequences[i], sequences[j]
        )


def test_keyed_reads_open_only_files_that_can_hold_the_keys(
    small_files: None, svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:

    name = f"{ns}.r"
    svc.tables.create(name, synthetic_table(20_000, 50, seed=15), sort_by=["key"])
    pin = svc.tables.pin(name)
    assert len(pin.files) >= 4
    opened: list[int] = []
    real = deltas_module.read_files

    def counting(files, *args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(len(files))
        return real(files, *args, **kwargs)

    monkeypatch.setattr(deltas_module, "read_files", counting)
    keys = pa.array([3, 17, 9_999, 123_456_789, None], pa.int64())
    rows = deltas_module.read_matching(pin, ["key", "a"], {"key": keys})
    assert sorted(rows.column("key").to_pylist()) == [3, 17, 9_999]
    assert opened[-1] < len(pin.files)  # the files around key 10,000 and beyond are skipped
    everything = deltas_module.read_matching(pin, ["a"])
    assert everything.num_rows == 20_000 and opened[-1] == len(pin.files)


def test_recorded_rows_make_deletes_cheap_and_missing_records_fall_back(svc: SketchService, ns: str) -> None:
    import shutil

    name = f"{ns}.r"
    start = svc.tables.create(name, synthetic_table(20_000, 50, seed=16), sort_by=["key"])
    generator = DeltaGenerator(svc.tables, name, ("key",), seed=17)
    generator.deletes(40).apply(svc.tables)  # scattered: rewrites most files
    generator.updates(10).apply(svc.tables)
    end = generator.inserts(5).apply(svc.tables)
    recorded = svc.tables.delta(name, start, end)
    assert_matches_oracle(svc, recorded, start, end)
    assert recorded.files_read == 0, "every commit's rows come from its record"
    appended = svc.tables.recorded_rows.root / name / f"{end}.inserted.arrow"
    appended.unlink()  # the append as another writer's: its rows are read from its file
    read_appended = svc.tables.delta(name, start, end)
    assert_matches_oracle(svc, read_appended, start, end)
    assert read_appended.files_read == 1, "only the appended file is read; deletes come from their records"
    shutil.rmtree(svc.tables.recorded_rows.root / name)  # as if another tool had written them
    compared = svc.tables.delta(name, start, end)
    assert_matches_oracle(svc, compared, start, end)
    assert compared.files_read > read_appended.files_read


def test_only_small_appends_record_their_rows(
    svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append up to RECORDED_APPEND_ROWS rows is also kept as written, and its delta read from
    that; a bigger one is stored once, in its files, and its delta read from them."""
    from sketch_core.tables import service as service_module

    name = f"{ns}.r"
    start = svc.tables.create(name, synthetic_table(500, 10, seed=21), sort_by=["key"])
    monkeypatch.setattr(service_module, "RECORDED_APPEND_ROWS", 5)
    small = svc.tables.append(name, synthetic_table(5, 10, seed=22, key_start=10_000))
    big = svc.tables.append(name, synthetic_table(6, 10, seed=23, key_start=20_000))
    records = svc.tables.recorded_rows.root / name
    assert (records / f"{small}.inserted.arrow").exists()
    assert not (records / f"{big}.inserted.arrow").exists()
    for before, after, files in ((start, small, 0), (small, big, 1), (start, big, 1)):
        delta = svc.tables.delta(name, before, after)
        assert_matches_oracle(svc, delta, before, after)
        assert delta.files_read == files
