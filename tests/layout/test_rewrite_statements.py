"""The Spark SQL a layout rewrite runs (pure)."""

from __future__ import annotations

from sketch_core.layout.simulation import Layout
from sketch_core.tables.rewrites import layout_statements


def test_a_sort_rewrite_sets_the_write_order_then_rewrites_every_file() -> None:
    order, rewrite = layout_statements("lake", "ns.t", Layout("sort", ("a", "b")))
    assert order.startswith("ALTER TABLE lake.ns.t WRITE ORDERED BY a")
    assert "rewrite_data_files(table => 'ns.t', strategy => 'sort'" in rewrite and "'rewrite-all'" in rewrite


def test_page_rows_become_the_table_s_page_row_limit_before_the_rewrite() -> None:
    pages, order, rewrite = layout_statements("lake", "ns.t", Layout("zorder", ("a", "b")), page_rows=600)
    assert pages == "ALTER TABLE lake.ns.t SET TBLPROPERTIES ('write.parquet.page-row-limit' = '600')"
    assert order == "ALTER TABLE lake.ns.t WRITE UNORDERED" and "zorder(a, b)" in rewrite


def test_pages_alone_rewrite_every_file_as_it_is_and_keep_the_write_order() -> None:
    pages, rewrite = layout_statements("lake", "ns.t", None, page_rows=1_500)
    assert pages.endswith("('write.parquet.page-row-limit' = '1500')")
    assert "strategy => 'binpack'" in rewrite and "'rewrite-all', 'true'" in rewrite
    assert "sort_order" not in rewrite
