"""Stratified samples drawn on Spark, stored under the warehouse, reused, and redrawn on drift."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from sketch_core.attribute_choice.group_probe import more_groups_than
from sketch_core.attribute_choice.sampling import quota
from sketch_core.attribute_choice.store import sample_rate
from sketch_core.service import SketchService
from sketch_core.spark.sampling import STRATUM_ROWS, WHOLE_GROUPS, draw_sample
from sketch_core.spark.views import pinned_dataframe

pytestmark = pytest.mark.spark


def grouped(groups: int, rows_per_group: int, start: int = 0) -> pa.Table:
    g = np.repeat(np.arange(groups), rows_per_group)
    return pa.table({"id": np.arange(start, start + len(g)), "g": g, "v": np.arange(len(g)) % 97})


def test_each_group_keeps_its_quota_and_the_sample_is_reused(spark_svc: SketchService, ns: str) -> None:
    name = f"{ns}.facts"
    spark_svc.tables.create(name, grouped(40, 500), sort_by=["id"])
    pin = spark_svc.tables.pin(name)
    stored = spark_svc.samples.sample(pin, ["g"])
    sample = stored.sample
    assert stored.drawn and sample.stratified
    assert list(sample.stratum_rows) == [500] * 40
    # The quota is 25 rows a group; the Spark job falls short only with tiny probability.
    assert list(sample.stratum_samples) == [quota(500, spark_svc.settings.sample_rate)] * 40
    ids = sample.rows.column("id").to_numpy()
    assert len(set(ids)) == len(ids)  # no row twice
    assert np.array_equal(sample.rows.column("g").to_numpy(), ids // 500)  # each row from its group

    again = spark_svc.samples.sample(pin, ["g"])
    assert not again.drawn
    assert again.sample.rows.column("id").to_pylist() == sample.rows.column("id").to_pylist()


def test_a_sample_holds_the_columns_asked_for_and_widens_for_more(spark_svc: SketchService, ns: str) -> None:
    name = f"{ns}.facts"
    spark_svc.tables.create(name, grouped(40, 500), sort_by=["id"])
    pin = spark_svc.tables.pin(name)
    narrow = spark_svc.samples.sample(pin, ["g"], ["v"])
    assert narrow.drawn and {"g", "v"} <= set(narrow.sample.rows.column_names)
    assert "id" not in narrow.sample.rows.column_names  # never decoded
    assert not spark_svc.samples.sample(pin, ["g"], ["v"]).drawn

    wider = spark_svc.samples.sample(pin, ["g"], ["id"])
    assert wider.drawn and {"g", "v", "id"} <= set(wider.sample.rows.column_names)  # v kept
    assert not Path(narrow.path).exists()  # replaced, as a redrawn sample is
    assert np.array_equal(
        wider.sample.rows.column("g").to_numpy(), wider.sample.rows.column("id").to_numpy() // 500
    )
    assert not spark_svc.samples.sample(pin, ["g"], ["v"]).drawn  # the wider one serves both
    assert not spark_svc.samples.sample(pin, ["g"]).drawn  # and every column is in it now


def test_a_table_that_drifted_gets_a_new_sample_and_the_old_file_goes(
    spark_svc: SketchService, ns: str
) -> None:
    name = f"{ns}.facts"
    spark_svc.tables.create(name, grouped(10, 200), sort_by=["id"])
    spark_svc.samples.sample(spark_svc.tables.pin(name), ["g"])
    first = spark_svc.samples.repository.find(name, ["g"], spark_svc.settings.sample_rate)
    assert first is not None and Path(first.path).exists()

    spark_svc.tables.append(name, grouped(1, 100, start=10_000))  # 5% of the table: still fresh
    assert not spark_svc.samples.sample(spark_svc.tables.pin(name), ["g"]).drawn
    spark_svc.tables.append(name, grouped(1, 300, start=20_000))  # 20% now
    redrawn = spark_svc.samples.sample(spark_svc.tables.pin(name), ["g"])
    assert redrawn.drawn and int(redrawn.sample.stratum_rows.sum()) == 2_400
    second = spark_svc.samples.repository.find(name, ["g"], spark_svc.settings.sample_rate)
    assert second is not None and second.path != first.path
    assert not Path(first.path).exists() and Path(second.path).exists()


def test_too_many_groups_are_sampled_whole(spark_svc: SketchService, ns: str) -> None:
    name = f"{ns}.facts"
    spark_svc.tables.create(name, grouped(2_000, 2), sort_by=["id"])  # 2,000 groups, 200-row sample
    sample = spark_svc.samples.sample(spark_svc.tables.pin(name), ["g"]).sample
    assert sample.whole_groups and not sample.stratified
    kept = sample.rows.column("g").to_numpy()
    assert np.all(np.bincount(kept)[np.unique(kept)] == 2)  # every kept group is complete
    assert 100 < sample.rows.num_rows < 320  # each group kept with probability 5%: 200 rows expected
    stored = spark_svc.samples.repository.find(name, ["g"], spark_svc.settings.sample_rate)
    assert stored is not None and stored.strata == 0
    reloaded = spark_svc.samples.sample(spark_svc.tables.pin(name), ["g"])
    assert not reloaded.drawn and reloaded.sample.whole_groups
    # The first file's groups told so in-process; Spark counting every group draws the same.
    pin = spark_svc.tables.pin(name)
    assert more_groups_than(pin, ["g"], spark_svc.settings.sample_rate * pin.record_count)
    rate = spark_svc.settings.sample_rate
    counted, how = draw_sample(pinned_dataframe(spark_svc.spark, pin), ["g"], rate, spark_svc.samples.seed)
    assert how == WHOLE_GROUPS
    assert sorted(counted.column("id").to_pylist()) == sorted(sample.rows.column("id").to_pylist())


def test_null_group_keys_are_a_stratum(spark_svc: SketchService, ns: str) -> None:
    name = f"{ns}.facts"
    g = pa.array([None] * 300 + [1] * 300, type=pa.int64())
    spark_svc.tables.create(name, pa.table({"id": np.arange(600), "g": g}), sort_by=["id"])
    sample = spark_svc.samples.sample(spark_svc.tables.pin(name), ["g"]).sample
    assert sorted(sample.stratum_rows.tolist()) == [300, 300]
    assert sample.rows.column("g").null_count == quota(300, spark_svc.settings.sample_rate)


def test_the_rate_halves_until_the_sample_fits() -> None:
    assert sample_rate(0.05, 1_000_000, 500_000) == 0.05
    assert sample_rate(0.05, 10_000_000, 500_000) == 0.05  # 500,000 rows: fits
    assert sample_rate(0.05, 60_000_000, 500_000) == 0.05 / 8  # 375,000 rows
    assert sample_rate(0.05, 70_000_000, 500_000) == 0.05 / 8  # a growing table keeps its rate
    assert sample_rate(1.0, 0, 500_000) == 1.0


def test_a_large_table_gets_a_sample_of_bounded_size_and_keeps_it(
    spark_svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if 20,000 rows were many: a sample of at most 100 rows.
    monkeypatch.setattr("sketch_core.attribute_choice.store.MAX_SAMPLE_ROWS", 100)
    name = f"{ns}.facts"
    spark_svc.tables.create(name, grouped(4, 5_000), sort_by=["id"])
    stored = spark_svc.samples.sample(spark_svc.tables.pin(name), [])
    rate = spark_svc.settings.sample_rate / 16  # 0.05 / 16 of 20,000 rows: 62.5 expected
    assert stored.drawn and stored.sample.rate == rate
    assert 20 <= stored.sample.rows.num_rows <= 120
    record = spark_svc.samples.repository.find(name, [], rate)
    assert record is not None and record.rate == rate
    assert not spark_svc.samples.sample(spark_svc.tables.pin(name), []).drawn


def test_a_uniform_sample_told_the_row_count_draws_the_same_rows(spark_svc: SketchService, ns: str) -> None:
    name = f"{ns}.facts"
    spark_svc.tables.create(name, grouped(4, 500), sort_by=["id"])
    pin = spark_svc.tables.pin(name)
    frame = pinned_dataframe(spark_svc.spark, pin)
    counted, _ = draw_sample(frame, [], 0.1, seed=7)
    told, how = draw_sample(frame, [], 0.1, seed=7, rows=pin.record_count)
    assert how == "uniform" and 100 < told.num_rows < 300
    assert told.column("id").to_pylist() == counted.column("id").to_pylist()
    assert (
        set(told.column(STRATUM_ROWS).to_pylist()) == set(counted.column(STRATUM_ROWS).to_pylist()) == {2_000}
    )
