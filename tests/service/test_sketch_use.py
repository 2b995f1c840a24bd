"""When a query applies a valid sketch by default (``sketch_use="cost"``): before the sketch
has been timed with the query, when it lets the scan skip enough of the input
(``sketch_core.costs.use``); once timed, by the recorded runs. The result and ``status`` say
which way it went and why; ``use_sketches="always"`` applies it whatever it costs."""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

from sketch_core.datasets import synthetic_table
from sketch_core.datasets.generator_style import generator_style
from sketch_core.service import SketchService
from tests.oracles.results import sorted_rows
from tests.service.test_costs import pinned_model
from tests.service.test_maintain import TOPK, captured, fresh_fragments, maintained


def test_a_sketch_that_skips_most_files_is_used_untimed_and_says_so(
    small_files: None, spark_svc: SketchService, ns: str
) -> None:
    svc = spark_svc
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(40_000, 200, seed=41), sort_by=["a"])
    name, sql = captured(svc, table, "skips_most", template=TOPK)  # top 3 of 200 groups of a
    result = svc.query(sql)
    assert result.sketch == (name, 1) and result.sketch_skipped is None
    assert result.files_read < result.files_total / 2
    assert result.sketch_reason.startswith("use, untimed: the sketch skips"), result.sketch_reason
    assert sorted_rows(result.table) == sorted_rows(svc.query(sql, use_sketches=False).table)
    decision = svc.status(name)[0].cost_decision
    assert decision is not None and (decision.context, decision.action) == ("query", "use")


def test_a_sketch_that_skips_nothing_is_left_unused_and_says_why(
    small_files: None, spark_svc: SketchService, ns: str
) -> None:
    svc = spark_svc
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(40_000, 200, seed=42), sort_by=["a"])
    # Every group qualifies: the sketch keeps every fragment, so every file.
    sql = f"SELECT a, COUNT(*) AS n FROM {table} GROUP BY a HAVING COUNT(*) > 0"
    svc.capture(sql, name=f"{ns}_keeps_all", attributes={table: "a"}, fragments=40)
    name = f"{ns}_keeps_all"
    plain = sorted_rows(svc.query(sql, use_sketches=False).table)
    result = svc.query(sql)
    assert result.sketch is None and result.sketch_skipped == (name, 1)
    assert result.files_read == result.files_total > 1
    assert result.sketch_reason.startswith("skip, untimed: the sketch skips 0 of"), result.sketch_reason
    assert sorted_rows(result.table) == plain
    decision = svc.status(name)[0].cost_decision
    assert decision is not None and (decision.context, decision.action) == ("query", "skip")
    assert "less than the 10%" in decision.reason
    # Asked for, it is applied all the same, and answers the same.
    forced = svc.query(sql, use_sketches="always")
    assert forced.sketch == (name, 1) and sorted_rows(forced.table) == plain


def test_a_capture_on_tables_too_small_to_skip_a_file_works(spark_svc: SketchService, ns: str) -> None:
    """A user trying the service on a sample: one data file per table. A capture without
    attributes is not refused: a report over one table runs without the sketch until it skips
    something, a join may use it (it drops rows before the join), and the sketch is kept up to
    date as the tables change. With a table of several files beside one of one file, only the
    larger is sketched (``min_files_to_sketch``)."""
    svc = spark_svc
    facts, dim = f"{ns}.facts", f"{ns}.groups"
    svc.tables.create(facts, synthetic_table(600, 30, seed=43), sort_by=["a"])
    svc.tables.create(dim, pa.table({"gid": list(range(30)), "tier": [g % 4 for g in range(30)]}))
    assert len(svc.tables.pin(facts).files) == 1 == len(svc.tables.pin(dim).files)

    def plain(sql: str) -> list[tuple[object, ...]]:
        return sorted_rows(svc.query(sql, use_sketches=False).table)

    top = f"SELECT a, SUM(b) AS s FROM {facts} GROUP BY a ORDER BY s DESC LIMIT 3"
    alone = svc.capture(top, name=f"{ns}_alone")
    assert set(alone.partitions) == {facts} and alone.fragments[facts]
    result = svc.query(top)
    assert result.sketch is None and result.sketch_skipped == (alone.name, 1)
    assert result.sketch_reason.startswith("skip, untimed: the sketch skips 0 of"), result.sketch_reason
    assert sorted_rows(result.table) == plain(top)

    join = f"FROM {facts} f JOIN {dim} g ON f.a = g.gid"
    sql = f"SELECT g.tier, f.a, SUM(f.b) AS s {join} GROUP BY g.tier, f.a ORDER BY s DESC LIMIT 3"
    version = svc.capture(sql, name=f"{ns}_small")
    assert set(version.partitions) == {facts, dim} and all(version.fragments.values())
    assert sorted_rows(svc.query(sql).table) == plain(sql)

    svc.tables.append(facts, synthetic_table(600, 30, seed=44))
    sequence = svc.latest_sequence()
    for name, report in ((alone.name, top), (version.name, sql)):
        svc.maintain(name)
        assert maintained(svc, name) == fresh_fragments(svc, report, name, sequence)
        forced = svc.query(report, use_sketches="always")
        assert forced.sketch is not None and forced.sketch[0] == name
        assert sorted_rows(forced.table) == plain(report)
    # The fact table now has two files, the dimension still one: only the facts are sketched.
    assert set(svc.capture(sql, name=f"{ns}_grown").partitions) == {facts}


def test_a_capture_on_an_empty_table_works_and_warns_that_its_partition_stays_coarse(
    spark_svc: SketchService, ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A pipeline's first capture before its first load: the partition is computed from no
    rows (one fragment) and stored for good; the capture says so. The sketch is exact all the
    same as rows arrive."""
    svc = spark_svc
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(10, 5, seed=47).schema.empty_table())
    sql = f"SELECT a, SUM(b) AS s FROM {table} GROUP BY a ORDER BY s DESC LIMIT 3"
    with caplog.at_level(logging.WARNING, logger="sketch_core.service.partition_store"):
        version = svc.capture(sql, name=f"{ns}_early", fragments=40)
    assert version.fragments == {table: []}
    assert f"{table} has 0 rows: its partition on a has 1 of the 40 fragments" in caplog.text
    svc.tables.append(table, synthetic_table(2000, 60, seed=48))
    sequence = svc.latest_sequence()
    svc.maintain(version.name)
    assert maintained(svc, version.name) == fresh_fragments(svc, sql, version.name, sequence) == {table: {0}}
    forced = svc.query(sql, use_sketches="always")
    assert sorted_rows(forced.table) == sorted_rows(svc.query(sql, use_sketches=False).table)


def test_a_report_whose_preferred_attributes_are_unsafe_is_sketched_on_a_column_it_reads(
    spark_svc: SketchService, ns: str
) -> None:
    """TPC-H Q17's shape as generators print it: a global aggregate over the rows below their
    group's average, correlated on the group. The sort key is unsafe (a group's average over
    part of its rows differs), there is no group-by or ordering attribute, and the dimension is
    one file (not sketched by default): the capture falls back to the columns the query reads
    and sketches the correlation key, and the sketched report equals the plain one."""
    svc = spark_svc
    facts, dim = f"{ns}.facts", f"{ns}.groups"
    svc.tables.create(facts, synthetic_table(3000, 30, seed=45), sort_by=["key"])
    svc.tables.append(facts, synthetic_table(3000, 30, seed=46))
    svc.tables.create(dim, pa.table({"gid": list(range(30)), "tier": [g % 4 for g in range(30)]}))
    assert len(svc.tables.pin(facts).files) >= 2 and len(svc.tables.pin(dim).files) == 1
    written = (
        f"SELECT SUM(f.b) / 7.0 AS avg_yearly FROM {facts} f, {dim} p WHERE p.gid = f.a AND p.tier = 1 "
        f"AND f.b < (SELECT 0.5 * AVG(f2.b) FROM {facts} f2 WHERE f2.a = p.gid)"
    )
    columns = {facts: tuple(svc.tables.pin(facts).schema.names), dim: ("gid", "tier")}
    sql = generator_style(written, columns)
    version = svc.capture(sql, name=f"{ns}_correlated")
    assert version.partitions[facts][0] == "a" and set(version.partitions) == {facts}
    forced = svc.query(sql, use_sketches="always")
    assert forced.sketch == (version.name, 1)
    assert sorted_rows(forced.table) == sorted_rows(svc.query(sql, use_sketches=False).table)


def test_once_timed_the_recorded_runs_decide(small_files: None, spark_svc: SketchService, ns: str) -> None:
    svc = spark_svc
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(40_000, 200, seed=43), sort_by=["a"])
    name, sql = captured(svc, table, "timed", template=TOPK)
    assert svc.query(sql).sketch == (name, 1)  # untimed: it skips most files
    # Timed slower with the sketch than without (its conditions outweigh what it skips).
    pinned_model(svc, name, use=(0.5, 0.0), plain=(0.1, 0.0))
    slower = svc.query(sql)
    assert slower.sketch is None and slower.sketch_skipped == (name, 1)
    assert slower.sketch_reason.startswith("skip: the query runs faster without the sketch")
    pinned_model(svc, name, use=(0.1, 0.0), plain=(0.5, 0.0))
    faster = svc.query(sql)
    assert faster.sketch == (name, 1) and faster.sketch_reason.startswith(
        "use: the sketch is current and pays"
    )
