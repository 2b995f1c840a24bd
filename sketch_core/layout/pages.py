"""How many rows a table's Parquet pages should hold for its reports' sketches (pure).

A sketch's ranges reach Spark's Parquet reader, which skips the pages of a row group whose
bounds (the page index) miss every range. A page spanning many fragments is read for any one
of them; pages of about one fragment's rows let the reader keep to the fragments a sketch
keeps. Each page has its header, statistics and index entries, though, which the reports that
read whole files pay for.

Measured side by side (docs/benchmarks.md, "Skipping levels"): at TPC-H SF10, the tables
rewritten with pages of one fragment's rows (10,000 fragments: 6,000 rows for ``lineitem``,
1,500 for ``orders``, and 1,000 for ``customer``, whose fragments hold 150) made the sketched Q3,
Q10 and Q18 22%, 15% and 26% faster than Iceberg's 20,000-row pages, and no plain report
slower. At SF1, pages of 1,000 rows (fragments of 150 to 600 rows) made the sketched reports
12% to 23% faster, but the plain Q10 28% slower. So pages of one fragment are suggested only
from :data:`MIN_PAGE_ROWS` rows up, and only where the table's pages hold over twice that.

Example: ``lineitem`` at SF10 (60M rows) under sketches of 10,000 fragments, written with
Iceberg's default pages: pages of 6,000 rows. With 100,000 fragments (600 rows each): none.
"""

from __future__ import annotations

from collections.abc import Mapping

# The smallest page suggested (see the module docstring for the measurements behind it).
MIN_PAGE_ROWS = 1_500
# The table property that caps the rows of a Parquet page in Iceberg's writers.
PAGE_ROW_LIMIT = "write.parquet.page-row-limit"
# Iceberg's cap when the table sets none.
ICEBERG_PAGE_ROWS = 20_000


def page_row_limit(properties: Mapping[str, str]) -> int:
    """The rows a page of the table's Parquet files holds at most, from its properties."""
    try:
        return max(1, int(properties.get(PAGE_ROW_LIMIT, ICEBERG_PAGE_ROWS)))
    except ValueError:  # a value another engine set that is no number: Iceberg's default applies
        return ICEBERG_PAGE_ROWS


def fragment_page_rows(table_rows: int, fragments: int, page_limit: int) -> tuple[int | None, str]:
    """Pages of one fragment's rows of the finest partition the reports' sketches use
    (``fragments``), when that is worth a rewrite; and why (not)."""
    if fragments < 1 or table_rows < 1:
        return None, "no sketch partitions this table, or it has no rows: its pages stay as they are"
    rows = table_rows // fragments
    if rows < MIN_PAGE_ROWS:
        return None, (
            f"its fragments hold {rows:,} rows, fewer than the {MIN_PAGE_ROWS:,} a page is worth "
            "suggesting at (smaller pages slow the reports that read whole files): pages stay as they are"
        )
    if page_limit <= 2 * rows:
        return None, f"its pages hold at most {page_limit:,} rows, about one fragment of {rows:,} already"
    return rows, (
        f"pages of {rows:,} rows (one fragment) instead of {page_limit:,}: the sketches' ranges then "
        "skip within the files they read"
    )
