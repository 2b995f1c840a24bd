"""Pages of a fragment on a real table: the advisor suggests them where a table's default
pages span many of its sketches' fragments, ``recluster`` writes them in the table's own order
when no other layout is advised, and the table is not advised them again."""

from __future__ import annotations

import pytest

from sketch_core.datasets import synthetic_table
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
