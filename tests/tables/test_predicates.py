"""The predicate translator alone (pure): Spark SQL text to PyIceberg expressions."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.expressions.visitors import expression_evaluator
from pyiceberg.io.pyarrow import pyarrow_to_schema
from pyiceberg.schema import Schema
from pyiceberg.table.name_mapping import MappedField, NameMapping

from sketch_core.errors import InvalidPredicateError
from sketch_core.tables.predicates import to_iceberg_expression

ARROW = pa.schema([("id", pa.int64()), ("price", pa.float64()), ("name", pa.string()), ("day", pa.date32())])
SCHEMA: Schema = pyarrow_to_schema(
    ARROW,
    name_mapping=NameMapping([MappedField(field_id=i + 1, names=[f.name]) for i, f in enumerate(ARROW)]),
)
ROWS = [
    {"id": 1, "price": 9.5, "name": "apple", "day": 10},
    {"id": 2, "price": -3.0, "name": "banana", "day": 20},
    {"id": 3, "price": 0.0, "name": None, "day": 30},
    {"id": -4, "price": 100.0, "name": "apricot", "day": 40},
]


def matching_ids(predicate: str) -> list[int]:
    expression = to_iceberg_expression(predicate, SCHEMA, "t.x")
    evaluate = expression_evaluator(SCHEMA, expression, case_sensitive=True)
    from pyiceberg.typedef import Record

    return [row["id"] for row in ROWS if evaluate(Record(*row.values()))]


@pytest.mark.parametrize(
    ("predicate", "expected"),
    [
        ("id = 2", [2]),
        ("2 = id", [2]),
        ("id > 1", [2, 3]),
        ("1 < id", [2, 3]),
        ("id >= -4 AND id <= 1", [1, -4]),
        ("id < 0 OR price > 9", [1, -4]),
        ("NOT (id = 1)", [2, 3, -4]),
        ("id <> 1", [2, 3, -4]),
        ("id IN (1, 3)", [1, 3]),
        ("id NOT IN (1, 3)", [2, -4]),
        ("price BETWEEN -3 AND 0", [2, 3]),
        ("name IS NULL", [3]),
        ("name IS NOT NULL", [1, 2, -4]),
        ("name LIKE 'ap%'", [1, -4]),
        ("name NOT LIKE 'ap%'", [2]),
        ("ID = 1", [1]),
        ("id = -4", [-4]),
        ("true", [1, 2, 3, -4]),
        ("NOT false", [1, 2, 3, -4]),
        ("price NOT BETWEEN -3 AND 0", [1, -4]),
        # SQL's three-valued logic: a NULL name makes these UNKNOWN, so row 3 never matches.
        ("name <> 'apple'", [2, -4]),
        ("NOT (name = 'apple')", [2, -4]),
        ("NOT (id = 3 AND name = 'zzz')", [1, 2, -4]),
        ("NOT (id = 2 OR name = 'zzz')", [1, -4]),
        ("name NOT IN ('apple')", [2, -4]),
        # ...but FALSE AND UNKNOWN is FALSE, so its negation holds for row 3.
        ("NOT (id = 1 AND name = 'apple') AND id = 3", [3]),
    ],
)
def test_translation_selects_the_same_rows_as_sql(predicate: str, expected: list[int]) -> None:
    assert sorted(matching_ids(predicate)) == sorted(expected)


def test_dates_compare_with_date_literals() -> None:
    assert matching_ids("day < DATE '1970-01-21'") == [1]  # day 20
    assert matching_ids("day <= DATE '1970-01-21'") == [1, 2]


@pytest.mark.parametrize(
    ("predicate", "reason"),
    [
        ("", "empty"),
        ("id = ", "does not parse"),
        ("nope = 1", "unknown column 'nope'"),
        ("id = 1; DROP TABLE x", "single expression"),
        ("id + 1 = 2", "expected a column"),
        ("id = price", "expected a literal"),
        ("id = 1.5", "not an integer"),
        ("name = 5", "quoted strings"),
        ("id = NULL", "use IS NULL"),
        ("name LIKE '%an%'", "prefix patterns"),
        ("id IN (SELECT 1)", "subquery"),
        ("upper(name) = 'A'", "expected a column"),
        ("t.id = 1", "qualified column"),
        ("id IN (1, NULL)", "use IS NULL"),
        ("id IS 1", "IS 1"),
    ],
)
def test_bad_predicates_are_refused_with_the_reason(predicate: str, reason: str) -> None:
    with pytest.raises(InvalidPredicateError) as info:
        to_iceberg_expression(predicate, SCHEMA, "t.x")
    assert reason in info.value.reason
    assert info.value.table == "t.x"
    assert info.value.predicate == predicate
