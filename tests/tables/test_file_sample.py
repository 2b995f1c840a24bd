"""Samples drawn in-process from a pinned snapshot's data files, uniform or stratified by one
column, and the sample store drawing them there (Spark drawing them where that fails, and those
it cannot draw here)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from sketch_core.attribute_choice.store import SampleStore
from sketch_core.datasets import synthetic_table
from sketch_core.service import SketchService
from sketch_core.spark.views import pinned_dataframe
from sketch_core.tables.file_sample import (
    groupable_here,
    readable_here,
    stratified_file_sample,
    uniform_file_sample,
)

pytestmark = pytest.mark.spark


def rows(count: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + count)
    return pa.table({"id": ids, "g": ids % 40, "v": (ids % 97).astype(np.float64)})


def three_files(svc: SketchService, name: str) -> None:
    svc.tables.create(name, rows(8_000), sort_by=["id"])
    svc.tables.append(name, rows(6_000, start=10_000))
    svc.tables.append(name, rows(6_000, start=20_000))


def test_a_uniform_sample_keeps_about_its_rate_of_every_file_as_the_table_types_them(
    spark_svc: SketchService, ns: str
) -> None:
    name = f"{ns}.facts"
    three_files(spark_svc, name)
    pin = spark_svc.tables.pin(name)
    assert len(pin.files) >= 3 and readable_here(pin)

    sample, live = uniform_file_sample(pin, ["id", "v"], 0.1, seed=3)
    assert live == 20_000
    assert sample.schema.names == ["id", "v"]
    assert sample.schema.field("v").type == pin.schema.field("v").type
    ids = sample.column("id").to_numpy()
    assert len(np.unique(ids)) == len(ids)
    # Binomial(20,000, 0.1): 2,000 +- 42 (one standard deviation); per batch too.
    assert 1_800 < len(ids) < 2_200
    for low, high, count in ((0, 8_000, 8_000), (10_000, 16_000, 6_000), (20_000, 26_000, 6_000)):
        held = ids[(ids >= low) & (ids < high)]
        assert abs(len(held) - count / 10) < 5 * np.sqrt(count * 0.09)
    # Each row kept as the table holds it.
    assert np.array_equal(sample.column("v").to_numpy(), (ids % 97).astype(np.float64))

    wider, _ = uniform_file_sample(pin, ["id", "g", "v"], 0.1, seed=3)
    assert wider.column("id").to_pylist() == sample.column("id").to_pylist()  # a redraw widens
    other, _ = uniform_file_sample(pin, ["id"], 0.1, seed=4)
    assert other.column("id").to_pylist() != sample.column("id").to_pylist()


def test_rows_deleted_by_merge_on_read_are_never_sampled(spark_svc: SketchService, ns: str) -> None:
    svc, name = spark_svc, f"{ns}.facts"
    svc.tables.create(name, synthetic_table(6_000, 20, seed=5), sort_by=["key"])
    target = f"{svc.settings.catalog_name}.{name}"
    svc.spark.sql(f"ALTER TABLE {target} SET TBLPROPERTIES ('write.delete.mode' = 'merge-on-read')")
    svc.spark.sql(f"DELETE FROM {target} WHERE key % 7 = 0")  # position deletes in every file
    pin = svc.tables.pin(name)
    assert any(f.deletes for f in pin.files)

    everything, live = uniform_file_sample(pin, list(pin.schema.names), 1.0, seed=0)
    spark_rows = pinned_dataframe(svc.spark, pin).toArrow()
    assert live == spark_rows.num_rows == everything.num_rows
    assert sorted(everything.column("key").to_pylist()) == sorted(spark_rows.column("key").to_pylist())
    assert not any(k % 7 == 0 for k in everything.column("key").to_pylist())


def test_the_store_draws_uniform_samples_from_the_files_and_falls_back_to_spark(
    spark_svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"{ns}.facts"
    three_files(spark_svc, name)
    pin = spark_svc.tables.pin(name)
    on_spark: list[tuple[str, ...]] = []
    original = SampleStore._draw_on_spark

    def counted(store: SampleStore, pinned, columns, *args):  # type: ignore[no-untyped-def]
        on_spark.append(tuple(columns))
        return original(store, pinned, columns, *args)

    monkeypatch.setattr(SampleStore, "_draw_on_spark", counted)
    stored = spark_svc.samples.sample(pin, [], ["id"])
    assert stored.drawn and on_spark == []
    assert list(stored.sample.stratum_rows) == [20_000]
    assert 0 < stored.sample.rows.num_rows < 20_000

    def broken(*_: object) -> None:
        raise OSError("unreadable here")

    monkeypatch.setattr("sketch_core.attribute_choice.store.uniform_file_sample", broken)
    wider = spark_svc.samples.sample(pin, [], ["id", "v"])  # a column it lacks: drawn again
    assert wider.drawn and on_spark == [()]
    assert {"id", "v"} <= set(wider.sample.rows.column_names)
    assert list(wider.sample.stratum_rows) == [20_000]

    grouped = spark_svc.samples.sample(pin, ["g"])  # stratified by one column: here too
    assert grouped.drawn and on_spark == [()] and grouped.sample.stratified
    assert list(grouped.sample.stratum_rows) == [500] * 40
    two = spark_svc.samples.sample(pin, ["g", "v"])  # by two columns: Spark groups them
    assert two.drawn and on_spark == [(), ("g", "v")]


def test_a_whole_sample_equals_sparks_read_across_types_names_and_schema_changes(
    spark_svc: SketchService, ns: str
) -> None:
    """At rate 1 the sample is the table: it must equal Spark's read of the pin, row for row,
    for decimals, timestamps, dates and strings, a name Iceberg stores escaped, a column added
    (NULL in the files written before), one widened, and one renamed in Spark (read by id)."""
    svc, name = spark_svc, f"{ns}.odd"
    count = 300
    ids = np.arange(count)
    first = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "Event Id": pa.array([f"e-{i}" for i in ids]),
            "amount": pa.array([Decimal(int(i)) / 100 for i in ids], pa.decimal128(9, 2)),
            "at": pa.array(
                [int(datetime(2024, 1, 1, tzinfo=UTC).timestamp() + i) * 1_000_000 for i in ids],
                pa.int64(),
            ).cast(pa.timestamp("us", tz="UTC")),
            "day": pa.array([date(2024, 1, 1 + int(i) % 28) for i in ids], pa.date32()),
            "small": pa.array(ids % 100, pa.int32()),
        }
    )
    svc.tables.create(name, first, sort_by=["id"])
    svc.tables.evolve_schema(name, add={"extra": pa.string()}, widen={"small": pa.int64()})
    later = first.slice(0, 50).set_column(0, "id", pa.array(ids[:50] + count, pa.int64()))
    later = later.set_column(5, "small", later.column("small").cast(pa.int64()))
    svc.tables.append(name, later.append_column("extra", pa.array(["x"] * 50)))
    svc.spark.sql(f"ALTER TABLE {svc.settings.catalog_name}.{name} RENAME COLUMN day TO sale_day")
    pin = svc.tables.pin(name)
    assert "sale_day" in pin.schema.names

    everything, live = uniform_file_sample(pin, list(pin.schema.names), 1.0, seed=0)
    spark_rows = pinned_dataframe(svc.spark, pin).toArrow()
    assert live == everything.num_rows == spark_rows.num_rows == count + 50
    assert everything.schema.names == spark_rows.schema.names
    mine = sorted(everything.to_pylist(), key=lambda row: row["id"])
    sparks = sorted(spark_rows.to_pylist(), key=lambda row: row["id"])
    assert mine == sparks
    assert mine[0]["extra"] is None and mine[-1]["extra"] == "x"


def test_a_stratified_sample_keeps_each_groups_quota_of_its_live_rows(
    spark_svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Groups of a string column (NULL one of them) of unequal sizes: each keeps
    max(1, ceil(rate * n)) of its live rows, rows deleted by merge-on-read count in no group and
    are never kept; more groups than the sample may hold is left to Spark (None)."""
    from sketch_core.attribute_choice.sampling import quota
    from sketch_core.spark.sampling import OVERSAMPLE

    svc, name = spark_svc, f"{ns}.facts"
    sizes = {"a": 4_000, "b": 1_000, "c": 40, None: 600}
    labels = [label for label, size in sizes.items() for _ in range(size)]
    order = np.random.default_rng(1).permutation(len(labels))
    table = pa.table({"id": np.arange(len(labels)), "label": pa.array([labels[i] for i in order])})
    svc.tables.create(name, table, sort_by=["id"])
    target = f"{svc.settings.catalog_name}.{name}"
    svc.spark.sql(f"ALTER TABLE {target} SET TBLPROPERTIES ('write.delete.mode' = 'merge-on-read')")
    svc.spark.sql(f"DELETE FROM {target} WHERE id % 10 = 0")
    pin = svc.tables.pin(name)
    live = {
        label: sum(1 for i, j in enumerate(order) if labels[j] == label and i % 10 != 0) for label in sizes
    }

    drawn = stratified_file_sample(pin, "label", ["id", "label"], 0.05, seed=2, oversample=OVERSAMPLE)
    assert drawn is not None
    sample, group_rows = drawn
    kept = sample.column("id").to_numpy()
    assert not np.any(kept % 10 == 0) and len(np.unique(kept)) == len(kept)
    labels_kept = sample.column("label").to_pylist()
    assert {label: labels_kept.count(label) for label in sizes} == {
        label: quota(rows, 0.05) for label, rows in live.items()
    }
    assert [live[label] for label in labels_kept] == group_rows.tolist()
    # Each row is the table's: its label is the one the table holds for its id.
    assert all(labels[order[i]] == label for i, label in zip(kept, labels_kept, strict=True))

    wider = stratified_file_sample(pin, "label", ["label", "id"], 0.05, seed=2, oversample=OVERSAMPLE)
    assert wider is not None and wider[0].column("id").to_pylist() == sample.column("id").to_pylist()
    assert stratified_file_sample(pin, "id", ["id"], 0.05, seed=2, oversample=OVERSAMPLE) is None
    # The files' counts merged as they come: too many groups are found before all are held.
    monkeypatch.setattr("sketch_core.tables.file_sample._MERGE_ROWS", 0)
    assert stratified_file_sample(pin, "id", ["id"], 0.05, seed=2, oversample=OVERSAMPLE) is None
    merged = stratified_file_sample(pin, "label", ["id", "label"], 0.05, seed=2, oversample=OVERSAMPLE)
    assert merged is not None and merged[0].column("id").to_pylist() == sample.column("id").to_pylist()


@pytest.mark.parametrize(
    "kind",
    [pa.decimal128(9, 2), pa.timestamp("us", tz="UTC"), pa.date32(), pa.bool_(), pa.int32()],
    ids=str,
)
def test_groups_of_each_kind_drawn_here_keep_their_quota(
    spark_svc: SketchService, ns: str, kind: pa.DataType
) -> None:
    """Group columns of every kind the store draws here: each group (NULL one) keeps its quota,
    and the group sizes are the table's."""
    from sketch_core.attribute_choice.sampling import quota
    from sketch_core.spark.sampling import OVERSAMPLE

    name = f"{ns}.facts"
    ids = np.arange(3_000)
    slot = ids % 7 if kind != pa.bool_() else ids % 2
    values = pa.array(slot, pa.int64()).cast(pa.int32())
    if pa.types.is_decimal(kind):
        values = pa.array([Decimal(int(s)) / 4 for s in slot], pa.decimal128(9, 2))
    elif pa.types.is_timestamp(kind):
        values = pa.array(slot * 86_400_000_000, pa.int64()).cast(kind)
    elif pa.types.is_date(kind):
        values = values.cast(pa.date32())
    elif pa.types.is_boolean(kind):
        values = pa.array(slot == 1)
    mask = pa.array(ids % 11 == 0)  # NULL in some rows: a group of its own
    values = pc.if_else(mask, pa.scalar(None, values.type), values)
    spark_svc.tables.create(name, pa.table({"id": ids, "g": values}), sort_by=["id"])
    pin = spark_svc.tables.pin(name)
    assert groupable_here(pin, ["g"])

    drawn = stratified_file_sample(pin, "g", ["id", "g"], 0.1, seed=5, oversample=OVERSAMPLE)
    assert drawn is not None
    sample, sizes = drawn
    table_sizes: dict[object, int] = {}
    for value in values.to_pylist():
        table_sizes[value] = table_sizes.get(value, 0) + 1
    kept: dict[object, int] = {}
    for value in sample.column("g").to_pylist():
        kept[value] = kept.get(value, 0) + 1
    assert kept == {value: quota(size, 0.1) for value, size in table_sizes.items()}
    assert sizes.tolist() == [table_sizes[v] for v in sample.column("g").to_pylist()]


def test_string_columns_stored_as_dictionaries_are_sampled_as_when_decoded_whole(
    spark_svc: SketchService, ns: str
) -> None:
    """A flag column the files store as dictionary indices is read as a dictionary and decoded
    only in the rows drawn: the samples (uniform and stratified, by the flag and by another
    column) hold the rows and values a draw decoding every row holds, as the table types them."""
    from sketch_core.spark.sampling import OVERSAMPLE
    from sketch_core.tables.file_columns import dictionary_encoded

    svc, name = spark_svc, f"{ns}.flags"
    ids = np.arange(12_000)
    flags = pa.array([("A", "N", "R", None)[i % 4] for i in ids], pa.large_string())
    notes = pa.array([f"note {i:08d}" for i in ids], pa.large_string())
    svc.tables.create(name, pa.table({"id": ids, "g": ids % 9, "flag": flags, "note": notes}), sort_by=["id"])
    pin = svc.tables.pin(name)
    assert all(
        dictionary_encoded(pq.ParquetFile(info.path).metadata, ["flag", "note"]) == ["flag"]
        for info in pin.files
    )

    def draws(as_dictionaries: bool) -> list[pa.Table]:
        how = {"as_dictionaries": as_dictionaries}
        by_flag = stratified_file_sample(pin, "flag", ["id", "flag", "note"], 0.05, 2, OVERSAMPLE, **how)
        by_g = stratified_file_sample(pin, "g", ["g", "flag", "id"], 0.05, 2, OVERSAMPLE, **how)
        assert by_flag is not None and by_g is not None
        return [
            uniform_file_sample(pin, ["flag", "id", "note"], 0.2, seed=7, **how)[0],
            by_flag[0].append_column("rows", pa.array(by_flag[1])),
            by_g[0].append_column("rows", pa.array(by_g[1])),
        ]

    with_dictionaries, decoded_whole = draws(True), draws(False)
    for mine, reference in zip(with_dictionaries, decoded_whole, strict=True):
        assert mine.schema.field("flag").type == pin.schema.field("flag").type
        assert mine.num_rows > 0 and mine.equals(reference)
    flags_drawn = with_dictionaries[0].column("flag").to_pylist()
    assert flags_drawn == [
        ("A", "N", "R", None)[i % 4] for i in with_dictionaries[0].column("id").to_pylist()
    ]


def test_a_table_spark_wrote_samples_its_dictionary_columns_as_when_decoded_whole(
    spark_svc: SketchService, ns: str
) -> None:
    """Spark's Iceberg writer (Parquet's Java writer: other page layouts and encodings than
    Arrow's) wrote the table, and deleted rows by merge-on-read: its flag column is read as a
    dictionary, its distinct notes are not, and the draws equal the decode-everything draws."""
    from sketch_core.spark.sampling import OVERSAMPLE
    from sketch_core.tables.file_columns import dictionary_encoded

    svc, name = spark_svc, f"{ns}.spark_flags"
    lake = f"{svc.settings.catalog_name}.{name}"
    svc.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {svc.settings.catalog_name}.{ns}")
    svc.spark.sql(
        f"CREATE TABLE {lake} (id BIGINT, g INT, flag STRING, note STRING) USING iceberg "
        "TBLPROPERTIES ('write.delete.mode' = 'merge-on-read')"
    )
    svc.spark.sql(
        f"""INSERT INTO {lake} SELECT id, CAST(id % 9 AS INT),
        CASE WHEN id % 5 = 0 THEN NULL ELSE element_at(array('A', 'N', 'R'), CAST(id % 3 AS INT) + 1) END,
        concat('a note that says little, number ', id) FROM range(30000)"""
    )
    svc.spark.sql(f"DELETE FROM {lake} WHERE id % 11 = 0")
    pin = svc.tables.pin(name)
    assert any(info.deletes for info in pin.files)
    assert all(
        dictionary_encoded(pq.ParquetFile(info.path).metadata, ["flag", "note"]) == ["flag"]
        for info in pin.files
    )
    for as_dictionaries in (True, False):
        how = {"as_dictionaries": as_dictionaries}
        uniform, live = uniform_file_sample(pin, ["id", "flag", "note"], 0.1, seed=1, **how)
        by_flag = stratified_file_sample(pin, "flag", ["id", "flag"], 0.05, 1, OVERSAMPLE, **how)
        by_g = stratified_file_sample(pin, "g", ["id", "g", "flag"], 0.05, 1, OVERSAMPLE, **how)
        assert by_flag is not None and by_g is not None
        drawn = [uniform, by_flag[0].append_column("rows", pa.array(by_flag[1])), by_g[0]]
        if as_dictionaries:
            first = drawn
        else:
            assert all(a.num_rows > 0 and a.equals(b) for a, b in zip(first, drawn, strict=True))
    assert live == 30000 - len(range(0, 30000, 11))
    ids = uniform.column("id").to_pylist()
    assert not any(i % 11 == 0 for i in ids)
    expected = [None if i % 5 == 0 else "ANR"[i % 3] for i in ids]
    assert first[0].column("flag").to_pylist() == expected
