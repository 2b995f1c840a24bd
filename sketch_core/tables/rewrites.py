"""Rewriting a table's files in a layout, with Iceberg's ``rewrite_data_files`` on Spark.

A rewrite commits a ``replace`` snapshot: new files holding the same rows, so every sketch
stays valid and maintenance after it has nothing to do (:mod:`sketch_core.tables.ingest`).
The table's write order is set first: a sort layout becomes the order later Spark writes follow;
a Z-order cannot be a table's write order in Iceberg, so the table is left unordered. (Setting
the order first also works around Iceberg 1.11-1.12's refusal to rewrite a table created with a
sort order into an order it does not declare: "Cannot use output sort order id 0", apache/iceberg
pull request 17814.)
"""

from __future__ import annotations

from typing import Any

from sketch_core.layout.pages import PAGE_ROW_LIMIT
from sketch_core.layout.simulation import Layout


def layout_statements(
    catalog: str, table: str, layout: Layout | None, page_rows: int | None = None
) -> list[str]:
    """The Spark SQL statements that rewrite ``table`` (``namespace.name``) in ``layout``;
    with ``page_rows``, the table's Parquet pages hold at most that many rows from then on.
    ``layout`` None (pages only): every file rewritten as it is (Iceberg's ``binpack``, which
    keeps each file's rows in their order), the table's write order unchanged."""
    target = f"{catalog}.{table}"
    pages = []
    if page_rows is not None:
        pages = [f"ALTER TABLE {target} SET TBLPROPERTIES ('{PAGE_ROW_LIMIT}' = '{int(page_rows)}')"]
    if layout is None:
        rewrite = (
            f"CALL {catalog}.system.rewrite_data_files(table => '{table}', strategy => 'binpack', "
            "options => map('rewrite-all', 'true'))"
        )
        return [*pages, rewrite]
    if layout.kind == "sort":
        order = f"ALTER TABLE {target} WRITE ORDERED BY {layout.sort_order}"
    else:
        order = f"ALTER TABLE {target} WRITE UNORDERED"
    rewrite = (
        f"CALL {catalog}.system.rewrite_data_files(table => '{table}', strategy => 'sort', "
        f"sort_order => '{layout.sort_order}', options => map('rewrite-all', 'true'))"
    )
    return [*pages, order, rewrite]


def rewrite_in_layout(
    spark: Any, catalog: str, table: str, layout: Layout | None, page_rows: int | None = None
) -> dict[str, Any]:
    """Run the rewrite; returns what Iceberg's procedure reports (files rewritten and added,
    bytes rewritten)."""
    result: dict[str, Any] = {}
    for statement in layout_statements(catalog, table, layout, page_rows):
        rows = spark.sql(statement).collect()
        if rows:
            result = rows[0].asDict()
    return result
