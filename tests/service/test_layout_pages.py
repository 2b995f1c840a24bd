"""Pages of a fragment on a real table: the advisor suggests them where a table's default
pages span many of its sketches' fragments, ``recluster`` writes them in the table's own order
when no other layout is advised (each file as it is where the table declares no order), and the
table is not advised them again."""

from __future__ import annotations

import pytest

from sketch_core.datasets import synthetic_table
from sketch_core.errors import ConfigurationError
from sketch_core.layout.pages import PAGE_ROW_LIMIT
from sketch_core.service.facade import SketchService
from tests.oracles.results import sorted_rows

pytestmark = pytest.mark.spark


def test_pages_of_a_fragment_are_advised_written_in_the_tables_order_and_not_advised_again(
    spark_svc: SketchService, ns: str
) -> None:
    svc, table, name = spark_svc, f"{ns}.events", f"{ns}_recent"
    svc.tables.create(table, synthetic_table(60_000, 300, seed=61), sort_by=["key"])
    sql, params = f"SELECT key, b FROM {table} WHERE key < :top", {"top": 2_000}
    svc.capture(sql, params=params, name=name, attributes={table: "key"}, fragments=20)

    advice = svc.advise_layout(table)
    assert advice.recommended is None, "sorted by its sketch's attribute already"
    assert advice.page_rows == 60_000 // 20 and "3,000" in advice.pages, advice.pages
    assert PAGE_ROW_LIMIT not in svc.tables.properties(table)  # Iceberg's 20,000 so far

    sequence = svc.recluster(table)
    assert svc.tables.commits(table)[-1].operation == "replace"
    assert svc.tables.properties(table)[PAGE_ROW_LIMIT] == "3000"
    (run,) = svc.maintain(name)
    assert run.strategy == "none" and svc.sketches.version(name).sequence == sequence  # type: ignore[union-attr]
    sketched = svc.query(sql, params, use_sketches="always")
    assert sketched.sketch is not None
    assert sorted_rows(sketched.table) == sorted_rows(svc.query(sql, params, use_sketches=False).table)

    again = svc.advise_layout(table)
    assert again.page_rows is None and again.recommended is None, again.pages
    assert "3,000" in again.pages, "it says the pages hold a fragment already"


def test_pages_of_a_fragment_are_written_on_a_table_that_declares_no_order(
    spark_svc: SketchService, ns: str
) -> None:
    # Written in the order of its key by a job that declared none, as other engines write.
    svc, table, name = spark_svc, f"{ns}.unordered", f"{ns}_unordered_recent"
    svc.tables.create(table, synthetic_table(60_000, 300, seed=62))
    assert not svc.tables.record(table).sort_by
    sql, params = f"SELECT key, b FROM {table} WHERE key < :top", {"top": 2_000}
    svc.capture(sql, params=params, name=name, attributes={table: "key"}, fragments=20)
    advice = svc.advise_layout(table)
    assert advice.recommended is None and advice.page_rows == 3_000, (advice.reason, advice.pages)
    before = sorted_rows(svc.query(sql, params, use_sketches=False).table)

    sequence = svc.recluster(table)
    assert svc.tables.commits(table)[-1].operation == "replace"
    assert svc.tables.properties(table)[PAGE_ROW_LIMIT] == "3000"
    assert not svc.tables.record(table).sort_by, "no order declared for it"
    (run,) = svc.maintain(name)
    assert run.strategy == "none" and svc.sketches.version(name).sequence == sequence  # type: ignore[union-attr]
    sketched = svc.query(sql, params, use_sketches="always")
    assert sketched.sketch is not None and sorted_rows(sketched.table) == before
    assert svc.advise_layout(table).page_rows is None, "not advised again"


def test_a_rewrite_with_neither_a_layout_nor_pages_is_refused(spark_svc: SketchService, ns: str) -> None:
    table = f"{ns}.nothing_to_do"
    svc = spark_svc
    svc.tables.create(table, synthetic_table(1_000, 10, seed=63))
    with pytest.raises(ConfigurationError, match="neither a layout nor a page size"):
        svc.tables.recluster(table, None)
    assert len(svc.tables.commits(table)) == 1, "nothing written"
