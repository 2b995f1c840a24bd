"""Which scans a capture annotates under a semi join: the right side's fragments are left out
where the left side's annotation of the same table already holds them (the accuracy oracle,
tests/oracles/test_accuracy.py, checks the captured sketches are still exact)."""

from __future__ import annotations

import pytest

from sketch_core.algebra.frontend import to_ir
from sketch_core.algebra.printer import to_sql
from sketch_core.rewrites.capture import FRAGMENT_COLUMN, instrument_capture

SCHEMAS = {
    "s.orders": [("okey", "bigint"), ("cust", "bigint"), ("price", "double")],
    "s.items": [("okey", "bigint"), ("qty", "bigint"), ("part", "bigint")],
}
Q18_SHAPE = (
    "SELECT o.okey, o.price, SUM(i.qty) AS q FROM s.orders o JOIN s.items i ON o.okey = i.okey "
    "WHERE o.okey IN (SELECT okey FROM s.items GROUP BY okey HAVING SUM(qty) > 300) "
    "GROUP BY o.okey, o.price ORDER BY o.price DESC LIMIT 10"
)


def annotated_scans(sql: str, attributes: dict[str, str]) -> tuple[int, list[str]]:
    """How many scans the capture annotates (read with their fragment, or delayed to the
    result rows), and the tables of the annotations."""
    capture = instrument_capture(to_ir(sql, SCHEMAS).plan, attributes=attributes)
    read = to_sql(capture.rows).count(FRAGMENT_COLUMN)
    return read + len(capture.delayed), sorted(capture.tables.values())


def test_a_semi_join_on_the_attribute_leaves_the_subquery_unannotated() -> None:
    count, tables = annotated_scans(Q18_SHAPE, {"s.items": "okey", "s.orders": "okey"})
    assert count == 2  # orders and the outer items; not the subquery's items
    assert tables == ["s.items", "s.orders"]


@pytest.mark.parametrize(
    ("sql", "attributes"),
    [
        # The subquery's table sketched on another column: its rows' fragments are its own.
        (Q18_SHAPE, {"s.items": "part"}),
        # The left side does not read the subquery's table.
        (
            "SELECT okey FROM s.orders WHERE okey IN (SELECT okey FROM s.items WHERE qty > 3)",
            {"s.items": "okey"},
        ),
        # The right key is not the attribute: a computed key, or another column of the same type.
        (
            "SELECT i.okey FROM s.items i WHERE i.okey IN (SELECT okey + 1 FROM s.items WHERE qty > 3)",
            {"s.items": "okey"},
        ),
        (
            "SELECT i.okey FROM s.items i WHERE i.okey IN "
            "(SELECT o.cust FROM s.items j JOIN s.orders o ON j.okey = o.okey)",
            {"s.items": "okey"},
        ),
    ],
)
def test_a_semi_join_whose_right_fragments_are_its_own_stays_annotated(
    sql: str, attributes: dict[str, str]
) -> None:
    count, _ = annotated_scans(sql, attributes)
    scans_of_sketched = sum(to_sql(to_ir(sql, SCHEMAS).plan).count(t) for t in attributes)
    assert count == scans_of_sketched
