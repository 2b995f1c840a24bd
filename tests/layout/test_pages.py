"""The page size the advisor suggests: one fragment's rows, from 1,500 rows up, where the
table's pages hold over twice that."""

from __future__ import annotations

import pytest

from sketch_core.layout.pages import (
    ICEBERG_PAGE_ROWS,
    MIN_PAGE_ROWS,
    PAGE_ROW_LIMIT,
    fragment_page_rows,
    page_row_limit,
)


@pytest.mark.parametrize(
    ("table_rows", "fragments", "limit", "expected"),
    [
        (60_000_000, 10_000, ICEBERG_PAGE_ROWS, 6_000),  # SF10 lineitem
        (15_000_000, 10_000, ICEBERG_PAGE_ROWS, 1_500),  # SF10 orders: at the floor
        (1_500_000, 10_000, ICEBERG_PAGE_ROWS, None),  # SF10 customer: 150-row fragments
        (6_000_000, 10_000, ICEBERG_PAGE_ROWS, None),  # SF1 lineitem: 600-row fragments
        (60_000_000, 10_000, 6_000, None),  # pages of one fragment already
        (60_000_000, 10_000, 12_000, None),  # two fragments a page: not worth a rewrite
        (60_000_000, 10_000, 12_001, 6_000),
        (60_000_000, 0, ICEBERG_PAGE_ROWS, None),  # no sketch on the table
        (0, 100, ICEBERG_PAGE_ROWS, None),
    ],
)
def test_pages_of_a_fragment_are_suggested_only_where_they_pay(
    table_rows: int, fragments: int, limit: int, expected: int | None
) -> None:
    rows, why = fragment_page_rows(table_rows, fragments, limit)
    assert rows == expected and why
    if rows is not None:
        assert rows >= MIN_PAGE_ROWS and limit > 2 * rows and f"{rows:,}" in why


def test_a_second_advice_after_the_rewrite_suggests_nothing() -> None:
    """Stable: the table rewritten with the suggested pages is not advised again as it grows
    (its fragments grow past its pages); only when it shrinks below half."""
    rows, _ = fragment_page_rows(60_000_000, 10_000, ICEBERG_PAGE_ROWS)
    assert rows is not None
    assert fragment_page_rows(60_000_000, 10_000, rows)[0] is None
    assert fragment_page_rows(600_000_000, 10_000, rows)[0] is None
    assert fragment_page_rows(31_000_000, 10_000, rows)[0] is None
    assert fragment_page_rows(20_000_000, 10_000, rows)[0] == 2_000


def test_the_page_limit_is_read_from_the_table_properties() -> None:
    assert page_row_limit({}) == ICEBERG_PAGE_ROWS
    assert page_row_limit({PAGE_ROW_LIMIT: "4000"}) == 4000
    assert page_row_limit({PAGE_ROW_LIMIT: "many"}) == ICEBERG_PAGE_ROWS
