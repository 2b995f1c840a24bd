"""The layout advisor on real tables: what a report's sketch reads now (from the files'
footers) is what the query reads; the recommended layout, applied with ``recluster``, makes
the report read what the advisor expected, and no report it was given reads more."""

from __future__ import annotations

import pytest

from sketch_core.datasets import synthetic_table
from sketch_core.errors import ConfigurationError
from sketch_core.layout.simulation import Layout
from sketch_core.service.facade import SketchService
from tests.oracles.results import sorted_rows

# Layouts matter to tables of many files: these tests' tables span several (conftest's SMALL_FILES).
pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("small_files")]

BY_GROUP = "SELECT a, SUM(b) AS s FROM {t} GROUP BY a HAVING SUM(b) > :floor"
BY_KEY = "SELECT key, b FROM {t} WHERE key < :top"


def _report(svc: SketchService, sql: str, params: dict[str, int], runs: int) -> tuple[int, int]:
    for _ in range(runs):
        result = svc.query(sql, params, use_sketches="always")
    assert sorted_rows(result.table) == sorted_rows(svc.query(sql, params, use_sketches=False).table)
    return result.files_read, result.files_total


def _group_report(
    svc: SketchService,
    table: str,
    seed: int,
    sort_by: str,
    name: str,
    attributes: dict[str, str] | None = None,
) -> tuple[str, dict[str, int]]:
    """A 60,000-row table sorted by ``sort_by`` and the group report's sketch ``name``."""
    svc.tables.create(table, synthetic_table(60_000, 300, seed=seed), sort_by=[sort_by])
    sql, params = BY_GROUP.format(t=table), {"floor": 4000}
    svc.capture(sql, params=params, name=name, attributes=attributes, fragments=100)
    return sql, params


def test_the_advisor_sorts_a_table_for_its_report_and_recluster_delivers_it(
    spark_svc: SketchService, ns: str
) -> None:
    svc, table, name = spark_svc, f"{ns}.sales", f"{ns}_groups"
    sql, params = _group_report(svc, table, 51, "key", name, attributes={table: "a"})
    read_before, total = _report(svc, sql, params, runs=3)
    assert read_before == total > 4, "sorted by key, every file holds every group"

    advice = svc.advise_layout(table)
    assert advice.current.reads[name].files == read_before, "the footers tell what the query reads"
    assert advice.recommended is not None and advice.recommended.layout == Layout("sort", ("a",)), (
        advice.reason
    )
    expected = advice.recommended.reads[name].files
    assert expected < read_before / 2

    sequence = svc.recluster(table)
    assert svc.tables.commits(table)[-1].seq == sequence
    carried = svc.sketches.version(name)
    assert carried is not None and carried.sequence == sequence, "carried to the rewrite at once"
    (run,) = svc.maintain(name)
    assert run.strategy == "none"
    read_after, _ = _report(svc, sql, params, runs=1)
    assert read_after <= expected + 1, (read_after, expected)


def test_no_layout_is_recommended_that_makes_a_given_report_read_more(
    spark_svc: SketchService, ns: str
) -> None:
    svc, table = spark_svc, f"{ns}.orders"
    svc.tables.create(table, synthetic_table(60_000, 300, seed=52), sort_by=["key"])
    groups, keys = BY_GROUP.format(t=table), BY_KEY.format(t=table)
    svc.capture(groups, params={"floor": 4000}, name=f"{ns}_g", attributes={table: "a"}, fragments=100)
    svc.capture(keys, params={"top": 500}, name=f"{ns}_k", attributes={table: "key"}, fragments=100)
    _report(svc, groups, {"floor": 4000}, runs=2)
    read_keys, total = _report(svc, keys, {"top": 500}, runs=2)
    assert read_keys < total

    advice = svc.advise_layout(table)
    assert advice.recommended is None, advice.reason
    # Every layout that would serve the group report costs the key report files it skips now.
    for candidate in advice.candidates:
        if candidate.layout != Layout("sort", ("key",)):
            assert candidate.reads[f"{ns}_k"].files > read_keys, candidate
    with pytest.raises(ConfigurationError, match="recommends no rewrite"):
        svc.recluster(table)
    assert svc.tables.commits(table)[-1].operation == "create", "nothing rewritten"


def test_status_tells_the_files_a_sketch_was_expected_to_read_and_those_its_last_use_read(
    spark_svc: SketchService, ns: str
) -> None:
    svc, table, name = spark_svc, f"{ns}.visits", f"{ns}_chosen"
    sql, params = _group_report(svc, table, 53, "a", name)  # the default, cost-based choice
    (status,) = svc.status(name)
    assert set(status.files_expected) == {table} and 0 < status.files_expected[table] < 1, status
    assert status.last_use is None
    used = svc.query(sql, params, use_sketches="always")
    (status,) = svc.status(name)
    assert status.last_use == (used.files_read, used.files_total)


def _counting_samples(svc: SketchService) -> list[str]:
    """The tables each sample the choice asks for is of (a spy on the service's own store)."""
    asked: list[str] = []
    store = svc.context.samples
    draw = store.sample

    def counted(pinned, *args, **kwargs):  # type: ignore[no-untyped-def]
        asked.append(pinned.table)
        return draw(pinned, *args, **kwargs)

    store.sample = counted  # type: ignore[method-assign]
    return asked


@pytest.mark.parametrize(
    "report",
    [
        "SELECT key, b FROM {t} ORDER BY b DESC, key LIMIT 10",
        "SELECT key, SUM(b) AS s FROM {t} WHERE c > 0 GROUP BY key ORDER BY s DESC, key LIMIT 5",
    ],
    ids=["top rows", "top groups"],
)
def test_a_top_k_report_on_a_sorted_table_is_sketched_on_its_layout_key_without_a_sample(
    spark_svc: SketchService, ns: str, report: str
) -> None:
    svc, table, name = spark_svc, f"{ns}.events", f"{ns}_top"
    svc.tables.create(table, synthetic_table(60_000, 300, seed=54), sort_by=["key"])
    asked = _counting_samples(svc)
    sql = report.format(t=table)
    version = svc.capture(sql, name=name, fragments=100)  # the default, cost-based choice
    assert asked == [], "the files' bounds settle the choice: no sample drawn"
    assert {t: p[0] for t, p in version.partitions.items()} == {table: "key"}
    (status,) = svc.status(name)
    assert 0 < status.files_expected[table] < 1, status
    used = svc.query(sql, use_sketches="always")
    assert used.files_read < used.files_total
    assert sorted_rows(used.table) == sorted_rows(svc.query(sql, use_sketches=False).table)


def test_a_top_k_report_grouped_on_another_column_still_draws_a_sample(
    spark_svc: SketchService, ns: str
) -> None:
    # The group column's sketch keeps at most 10 fragments and the sort key's is not bounded:
    # which reads fewer files is the estimates' to say (after the advisor's layout, the group's).
    svc, table, name = spark_svc, f"{ns}.orders", f"{ns}_top_groups"
    svc.tables.create(table, synthetic_table(60_000, 300, seed=55), sort_by=["key"])
    asked = _counting_samples(svc)
    sql = f"SELECT a, SUM(b) AS s FROM {table} GROUP BY a ORDER BY s DESC LIMIT 10"
    version = svc.capture(sql, name=name, fragments=100)
    assert asked == [table]
    assert {t: p[0] for t, p in version.partitions.items()} == {table: "a"}


def test_a_failure_of_the_layout_shortcut_costs_a_sample_not_the_capture(
    spark_svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc, table, name = spark_svc, f"{ns}.events", f"{ns}_top_fallback"
    svc.tables.create(table, synthetic_table(60_000, 300, seed=56), sort_by=["key"])

    def misjudged(plan: object) -> None:
        raise RuntimeError("a case the shortcut misjudges")

    monkeypatch.setattr("sketch_core.service.attributes.top_k_bound", misjudged)
    asked = _counting_samples(svc)
    sql = f"SELECT key, SUM(b) AS s FROM {table} GROUP BY key ORDER BY s DESC, key LIMIT 5"
    version = svc.capture(sql, name=name, fragments=100)
    assert asked == [table], "the estimates chose instead"
    assert {t: p[0] for t, p in version.partitions.items()} == {table: "key"}
    used = svc.query(sql, use_sketches="always")
    assert sorted_rows(used.table) == sorted_rows(svc.query(sql, use_sketches=False).table)
