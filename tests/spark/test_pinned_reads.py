"""Pinned reads on real Spark: a query at sequence N sees exactly the data of N."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pyspark.sql import DataFrame, SparkSession

from sketch_core.algebra.query_text import bind_tables, referenced_tables
from sketch_core.datasets import synthetic_table
from sketch_core.errors import QueryError, SequenceOutOfRangeError
from sketch_core.service import SketchService
from sketch_core.spark import views
from sketch_core.spark.views import register_view
from sketch_core.tables.pinned import PinnedSnapshot

pytestmark = pytest.mark.spark

REPORT = "SELECT a, count(*) AS n, sum(b) AS sb FROM {t} GROUP BY a ORDER BY a"


def test_old_snapshot_still_reads_old_data_after_later_commits(spark_svc: SketchService, ns: str) -> None:
    svc, name = spark_svc, f"{ns}.r"
    first = svc.tables.create(name, synthetic_table(5_000, groups=7, seed=1), sort_by=["key"])
    before = svc.query(REPORT.format(t=name), snapshot=first)
    svc.tables.append(name, synthetic_table(1_000, groups=7, seed=2, key_start=10_000))
    svc.tables.delete(name, "a = 3")
    latest = svc.query(REPORT.format(t=name))

    again = svc.query(REPORT.format(t=name), snapshot=first)
    assert again.table.equals(before.table)
    assert again.table_sequences == {name: first}
    assert sum(again.table.column("n").to_pylist()) == 5_000
    assert sum(latest.table.column("n").to_pylist()) == svc.tables.read_arrow(name).num_rows
    assert 3 not in latest.table.column("a").to_pylist()
    # The oracle for the whole snapshot: Spark's answer equals one computed from PyIceberg's rows.
    rows = svc.tables.read_arrow(name, sequence=first)
    expected = rows.group_by("a").aggregate([("key", "count"), ("b", "sum")]).sort_by("a")
    assert again.table.column("n").to_pylist() == expected.column("key_count").to_pylist()
    assert again.table.column("sb").to_pylist() == expected.column("b_sum").to_pylist()


def test_query_pins_every_table_at_one_sequence(spark_svc: SketchService, ns: str) -> None:
    svc = spark_svc
    svc.tables.create(f"{ns}.r", synthetic_table(300, groups=5, seed=3), sort_by=["key"])
    svc.tables.create(f"{ns}.s", synthetic_table(200, groups=5, seed=4), sort_by=["key"])
    seq = svc.latest_sequence()
    svc.tables.append(f"{ns}.s", synthetic_table(50, groups=5, seed=5, key_start=1_000))
    sql = f"SELECT count(*) AS n FROM {ns}.r r JOIN {ns}.s s ON r.key = s.key"
    pinned = svc.query(sql, snapshot=seq)
    assert pinned.table_sequences[f"{ns}.s"] < svc.latest_sequence()
    assert pinned.table.column("n").to_pylist() == [200]
    assert pinned.files_read == pinned.files_total >= 2


def test_params_bind_named_placeholders(spark_svc: SketchService, ns: str) -> None:
    svc = spark_svc
    svc.tables.create(f"{ns}.r", synthetic_table(1_000, groups=4, seed=6), sort_by=["key"])
    result = svc.query(f"SELECT count(*) AS n FROM {ns}.r WHERE a = :grp", params={"grp": 2})
    expected = svc.tables.read_arrow(f"{ns}.r", where="a = 2").num_rows
    assert result.table.column("n").to_pylist() == [expected]


def test_empty_table_reads_as_empty(spark_svc: SketchService, ns: str) -> None:
    svc = spark_svc
    svc.tables.create(f"{ns}.r", synthetic_table(0, groups=1), sort_by=["key"])
    assert svc.query(f"SELECT count(*) AS n FROM {ns}.r").table.column("n").to_pylist() == [0]


def test_sequences_out_of_range_are_refused(spark_svc: SketchService, ns: str) -> None:
    svc = spark_svc
    svc.tables.create(f"{ns}.r", synthetic_table(10, groups=2), sort_by=["key"])
    latest = svc.latest_sequence()
    for bad in (0, latest + 1):
        with pytest.raises(SequenceOutOfRangeError) as info:
            svc.query(f"SELECT count(*) FROM {ns}.r", snapshot=bad)
        assert (info.value.sequence, info.value.latest) == (bad, latest)


def test_table_references_are_found_and_bound() -> None:
    sql = "WITH x AS (SELECT * FROM a.t) SELECT * FROM x JOIN B.U u ON x.k = u.k"
    assert referenced_tables(sql) == ["a.t", "b.u"]
    bound = bind_tables(sql, {"a.t": "a__t__s1", "b.u": "b__u__s2"})
    assert "a__t__s1 AS t" in bound and "b__u__s2 AS u" in bound
    with pytest.raises(QueryError):
        referenced_tables("SELECT FROM WHERE")


def test_a_view_is_reused_only_while_it_covers_the_same_files(
    small_files: None, spark_svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc, name = spark_svc, f"{ns}.r"
    builds: list[int] = []  # file counts of the views actually built
    real = views.pinned_dataframe

    def counting(spark: SparkSession, pinned: PinnedSnapshot) -> DataFrame:
        builds.append(len(pinned.files))
        return real(spark, pinned)

    monkeypatch.setattr(views, "pinned_dataframe", counting)
    svc.tables.create(name, synthetic_table(4_000, groups=5, seed=4), sort_by=["key"])
    pin = svc.tables.pin(name)
    n = len(pin.files)
    assert n >= 2
    view = register_view(svc.spark, pin)
    assert register_view(svc.spark, pin) == view
    assert builds == [n]  # same files: reused, not rebuilt
    # Same name over fewer files (a pruned read): rebuilt.
    register_view(svc.spark, replace(pin, files=pin.files[:1]), name=view)
    assert svc.spark.table(view).count() == pin.files[0].record_count
    # Back to all files, then dropped behind our back: registered again.
    register_view(svc.spark, pin)
    svc.spark.catalog.dropTempView(view)
    register_view(svc.spark, pin)
    assert svc.spark.table(view).count() == 4_000
    assert builds == [n, 1, n, n]


def test_only_the_most_recently_used_views_are_kept(
    spark_svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # View names are per snapshot: a service reporting at ever new snapshots must not keep them
    # all (each holds its plan and file listing in the driver).
    svc, name = spark_svc, f"{ns}.lru"
    monkeypatch.setattr(views, "MAX_VIEWS", 3)
    svc.tables.create(name, synthetic_table(200, groups=5, seed=5), sort_by=["key"])
    pins = [svc.tables.pin(name)]
    for step in range(3):
        svc.tables.append(name, synthetic_table(10, groups=5, seed=6 + step, key_start=1000 * (step + 1)))
        pins.append(svc.tables.pin(name))
    first, second, third, fourth = (register_view(svc.spark, pin) for pin in pins)
    assert len({first, second, third, fourth}) == 4
    # Four views, room for three: the least recently used is dropped from the session too.
    assert not svc.spark.catalog.tableExists(first)
    assert views.kept_views(svc.spark)[-3:] == [second, third, fourth]
    # Using a view again makes it the most recent: the next one evicts another.
    register_view(svc.spark, pins[1])
    register_view(svc.spark, pins[0])
    assert not svc.spark.catalog.tableExists(third)
    assert svc.spark.catalog.tableExists(second) and svc.spark.catalog.tableExists(fourth)
    # An evicted view is built again when wanted, over the same rows.
    assert svc.spark.table(register_view(svc.spark, pins[2])).count() == 220
