"""The expectation suite's pure parts: learning a suite, the allowed ranges, widening, JSON."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from sketch_core.validation.suite import (
    ColumnRule,
    Domain,
    TableSuite,
    as_number,
    column_kind,
    domain_bounds,
    identifier_columns,
    learn_suite,
    observed_ranges,
)

SCHEMA = pa.schema(
    [("key", pa.int64()), ("price", pa.float64()), ("day", pa.date32()), ("name", pa.string())]
)


def test_a_learned_suite_has_the_schema_and_ranges_of_numbers_and_dates_only() -> None:
    bounds = {"key": (0, 2999), "price": (1.5, 9.5), "day": (dt.date(1992, 1, 1), dt.date(1998, 12, 31))}
    suite = learn_suite("n.t", SCHEMA, bounds | {"name": ("a", "z")})
    assert suite.column_names == ["key", "price", "day", "name"]
    assert [c.type for c in suite.columns] == ["int64", "double", "date32[day]", "string"]
    by_name = {c.name: c for c in suite.columns}
    assert by_name["key"].domain == Domain(0, 2999)
    assert by_name["day"].domain == Domain(as_number(dt.date(1992, 1, 1)), as_number(dt.date(1998, 12, 31)))  # type: ignore[arg-type]
    assert by_name["name"].domain is None, "strings get no range (Iceberg truncates their bounds)"
    assert learn_suite("n.t", SCHEMA, {}).columns[0].domain is None, "no values yet: nothing learned"


def test_the_allowed_range_grows_with_the_span_and_the_magnitude() -> None:
    assert Domain(0, 2999).allowed(10) == (-29_990, 32_989)
    # A tight spread around a large value: an order of magnitude either side, not +-10 spans.
    assert Domain(1_000_000, 1_000_010).allowed(10) == (1_000_000 - 10_000_100, 1_000_010 + 10_000_100)
    assert Domain(5, 5).allowed(1) == (0, 10)
    assert Domain(0, 0).allowed(2) == (-2, 2), "a column of zeros still gets a width of 1"
    tpch_days = Domain(as_number(dt.date(1992, 1, 1)), as_number(dt.date(1998, 12, 31)))  # type: ignore[arg-type]
    low, high = tpch_days.allowed(10, "date")
    assert low > as_number(dt.date(1900, 1, 1)) and high < as_number(dt.date(9999, 12, 31))  # type: ignore[operator]
    assert low < as_number(dt.date(1950, 1, 1)) and high > as_number(dt.date(2050, 1, 1))  # type: ignore[operator]


def test_bounds_are_given_in_each_column_s_own_terms() -> None:
    days = ColumnRule(
        "day", "date32[day]", Domain(as_number(dt.date(2000, 1, 1)), as_number(dt.date(2000, 1, 11)))
    )  # type: ignore[arg-type]
    low, high = domain_bounds(days, 1)  # type: ignore[misc]
    assert (low, high) == ("1998-12-31", "2001-01-11"), "a year's width at least, not the epoch's"
    assert domain_bounds(ColumnRule("k", "int64", Domain(0.0, 3.0)), 0.5) == (-2, 5)
    assert domain_bounds(ColumnRule("s", "string"), 1) is None
    huge = ColumnRule("day", "date32[day]", Domain(0, 1_000_000))
    assert domain_bounds(huge, 10)[1] == dt.date.max.isoformat(), "clamped, not an overflow"  # type: ignore[index]


def test_widening_takes_in_what_a_batch_holds_and_ignores_nan_and_nulls() -> None:
    suite = learn_suite("n.t", SCHEMA, {"key": (0, 10), "price": (1.0, 2.0)})
    batch = pa.table(
        {
            "key": pa.array([5, None, 40], pa.int64()),
            "price": pa.array([float("nan"), 0.5, None]),
            "day": pa.array([dt.date(2001, 1, 1), None, None]),
            "name": ["x", None, "y"],
        }
    )
    assert observed_ranges(batch) == {"key": (5, 40), "price": (0.5, 0.5), "day": (11323, 11323)}
    widened = {c.name: c.domain for c in suite.widened(batch).columns}
    assert widened == {
        "key": Domain(0, 40),
        "price": Domain(0.5, 2.0),
        "day": Domain(11323, 11323),
        "name": None,
    }


def test_required_columns_leave_out_the_declared_nullable_and_unknown_ones() -> None:
    suite = learn_suite("n.t", SCHEMA, {}).declaring_nullable({"day"})
    assert suite.required({"key", "day", "gone"}) == ["key"]
    with pytest.raises(ValueError, match="nope"):
        suite.declaring_nullable({"nope"})


def test_columns_holding_nulls_in_the_history_may_get_more() -> None:
    suite = learn_suite("n.t", SCHEMA, {}, holding_nulls=frozenset({"day", "gone"}))
    assert suite.required({"key", "day"}) == ["key"]
    assert suite.nullable == frozenset({"day"})


def test_a_suite_survives_its_json_form() -> None:
    suite = learn_suite("n.t", SCHEMA, {"key": (0, 10)}).declaring_nullable({"name"})
    assert TableSuite.from_json(suite.to_json()) == suite


def test_values_and_kinds() -> None:
    types = ("int32", "uint8", "double", "decimal128(10, 2)", "timestamp[us]", "string")
    assert [column_kind(t) for t in types] == ["int", "int", "float", "decimal", "timestamp", "other"]
    assert as_number(dt.datetime(1970, 1, 1, 0, 0, 1)) == 1e6
    assert as_number(dt.datetime(1970, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1)))) == 0.0
    assert as_number(True) is None and as_number("x") is None and as_number(None) is None


def test_identifiers_are_told_from_measures_and_get_no_domain() -> None:
    sample = pa.table(
        {
            "id": pa.array(range(100), pa.int64()),
            "group": pa.array([i % 7 for i in range(100)], pa.int64()),
            "sparse_id": pa.array([None, *range(99)], pa.int64()),
            "price": pa.array([float(i) for i in range(100)]),
        }
    )
    assert identifier_columns(sample) == {"id"}
    assert identifier_columns(sample.slice(0, 10)) == frozenset(), "too few rows to tell"
    suite = learn_suite("n.t", sample.schema, {"id": (0, 99), "group": (0, 6)}, frozenset({"id"}))
    rules = {c.name: c for c in suite.columns}
    assert rules["id"].identifier and rules["id"].domain is None and rules["group"].domain == Domain(0, 6)
    jumped = suite.widened(pa.table({"id": pa.array([10**9], pa.int64())}))
    assert {c.name: c.domain for c in jumped.columns}["id"] is None, "ids never learn a range"
    assert TableSuite.from_json(suite.to_json()) == suite


def test_the_suite_follows_columns_added_widened_dropped_and_renamed() -> None:
    suite = learn_suite("n.t", SCHEMA, {"key": (0, 2999), "price": (1.5, 9.5)})
    # Another engine renamed price to amount, dropped name and added region.
    evolved = pa.schema(
        [("key", pa.int64()), ("amount", pa.float64()), ("day", pa.date32()), ("region", pa.string())]
    )
    adapted = suite.adapted_to(evolved)
    assert adapted.column_names == ["key", "amount", "day", "region"]
    assert {c.name: c.domain for c in adapted.columns}["key"] == Domain(0, 2999), (
        "kept rules keep their domain"
    )
    assert {c.name: c.domain for c in adapted.columns}["amount"] is None, "a renamed column starts over"


def test_a_decimal_widened_by_another_engine_keeps_its_rule_with_the_new_type() -> None:
    """Spark's ``ALTER COLUMN amount TYPE DECIMAL(14, 2)`` on a DECIMAL(9, 2): Iceberg allows a
    decimal's precision to grow at the same scale, so batches of the new type pass."""
    schema = pa.schema([("key", pa.int64()), ("amount", pa.decimal128(9, 2))])
    suite = learn_suite("n.t", schema, {"key": (0, 99), "amount": (Decimal("1.00"), Decimal("99.00"))})
    widened = suite.adapted_to(pa.schema([("key", pa.int64()), ("amount", pa.decimal128(14, 2))]))
    rule = {c.name: c for c in widened.columns}["amount"]
    assert (
        rule.type == "decimal128(14, 2)"
        and rule.domain == {c.name: c for c in suite.columns}["amount"].domain
    )
    # A changed scale is not a widening: the rule keeps the old type, and batches fail on it.
    rescaled = suite.adapted_to(pa.schema([("key", pa.int64()), ("amount", pa.decimal128(14, 4))]))
    assert {c.name: c.type for c in rescaled.columns}["amount"] == "decimal128(9, 2)"
