"""Great Expectations over delta batches: each kind of expectation fails when it should, with
a message that names the column, what was expected and what was found."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from sketch_core.validation.expectations import great_expectations_failures, validate_batch
from sketch_core.validation.screen import certainly_passes
from sketch_core.validation.suite import learn_suite

HISTORY = pa.table(
    {
        "key": pa.array([0, 1, 2], pa.int64()),
        "amount": pa.array([1.0, 2.0, 3.0]),
        "day": pa.array([dt.date(2020, 1, 1), dt.date(2020, 6, 1), dt.date(2020, 12, 31)]),
        "note": ["a", None, "c"],
    }
)
SUITE = learn_suite(
    "n.t",
    HISTORY.schema,
    {"key": (0, 2), "amount": (1.0, 3.0), "day": (dt.date(2020, 1, 1), dt.date(2020, 12, 31))},
)


def batch(**columns: list[object]) -> pa.Table:
    """The history's rows with some columns' values replaced."""
    arrays = {}
    for field in HISTORY.schema:
        arrays[field.name] = pa.array(
            columns.get(field.name, HISTORY.column(field.name).to_pylist()), field.type
        )
    return pa.table(arrays)


def failures(table: pa.Table, required: list[str] | None = None, rows: int | None = None) -> dict[str, str]:
    found = validate_batch(SUITE, table, required or [], rows, slack=1.0)
    return {f"{f.expectation}:{f.column}": f.detail for f in found}


def test_a_batch_like_its_history_passes() -> None:
    assert failures(batch(key=[2, 3, 4]), required=["key"], rows=3) == {}
    # ... and is told so without Great Expectations (seconds of import in every task process).
    assert certainly_passes(SUITE, batch(key=[2, 3, 4]), ["key"], 3, slack=1.0)
    assert certainly_passes(SUITE, batch(day=[dt.date(2021, 3, 1), None, None]), ["key"], 3, slack=1.0)
    assert failures(HISTORY.slice(0, 0), required=["key"], rows=0) == {}, "an empty batch passes"


def test_nulls_where_values_are_required() -> None:
    found = failures(batch(key=[None, 1, None]), required=["key", "note"])
    assert found["expect_column_values_to_not_be_null:key"].startswith("2 NULL values")
    assert "expect_column_values_to_not_be_null:note" in found


def test_values_outside_the_learned_domains_with_examples() -> None:
    found = failures(batch(amount=[float("nan"), 2.0, -1e12], day=[dt.date(1900, 1, 1), None, None]))
    assert "2 values outside the learned domain" in found["expect_column_values_to_be_between:amount"]
    assert "-1000000000000.0" in found["expect_column_values_to_be_between:amount"]
    assert "1900-01-01" in found["expect_column_values_to_be_between:day"]
    assert set(found) == {
        "expect_column_values_to_be_between:amount",
        "expect_column_values_to_be_between:day",
    }


def test_row_counts_that_disagree_with_the_commit() -> None:
    found = failures(batch(), rows=5)
    assert found == {"expect_table_row_count_to_equal:None": found["expect_table_row_count_to_equal:None"]}
    assert (
        "3 rows inserted" in found["expect_table_row_count_to_equal:None"]
        and "says 5" in found["expect_table_row_count_to_equal:None"]
    )


def test_schema_changes_name_the_columns_and_types() -> None:
    added = batch().append_column("extra", pa.array([1, 2, 3]))
    found = failures(added, required=["key"], rows=3)
    assert set(found) == {"expect_table_columns_to_match_ordered_list:None"}
    assert "extra" in found["expect_table_columns_to_match_ordered_list:None"]
    widened = batch().set_column(0, "key", pa.array([0, 1, 2], pa.int32()))
    assert failures(widened) == {"expect_column_type:key": "type int32, expected int64"}


def test_timestamps_with_and_without_a_zone_are_compared_in_their_terms() -> None:
    for zone in (None, "UTC"):
        kind = pa.timestamp("us", tz=zone)
        start, end = dt.datetime(2024, 1, 1), dt.datetime(2024, 3, 1)
        suite = learn_suite("n.t", pa.schema([("at", kind)]), {"at": (start, end)})
        values = [dt.datetime(2024, 2, 1), dt.datetime(1970, 1, 1), None]
        found = validate_batch(suite, pa.table({"at": pa.array(values, kind)}), [], None, slack=1.0)
        assert [(f.expectation, f.column) for f in found] == [("expect_column_values_to_be_between", "at")]
        assert "1 values outside" in found[0].detail, found[0].detail


# The Arrow screen that spares most batches Great Expectations' import: whenever it says a
# batch certainly passes, Great Expectations finds no failure in it.
_KEYS = st.one_of(st.none(), st.integers(-3, 6))
_AMOUNTS = st.one_of(
    st.none(), st.floats(-10.0, 10.0), st.sampled_from([float("nan"), float("inf"), -0.0, 1e12])
)
_DAYS = st.one_of(st.none(), st.dates(dt.date(2018, 1, 1), dt.date(2023, 12, 31)))


@given(
    rows=st.lists(st.tuples(_KEYS, _AMOUNTS, _DAYS), max_size=6),
    required=st.sampled_from([[], ["key"], ["key", "day"]]),
    stated=st.one_of(st.none(), st.integers(0, 6)),
    decimal_amounts=st.booleans(),
)
@settings(max_examples=40, deadline=None)
def test_the_arrow_screen_passes_only_what_great_expectations_passes(
    rows: list[tuple[int | None, float | None, dt.date | None]],
    required: list[str],
    stated: int | None,
    decimal_amounts: bool,
) -> None:
    kind = pa.decimal128(16, 2) if decimal_amounts else pa.float64()
    history = HISTORY.set_column(1, "amount", HISTORY.column("amount").cast(kind))
    domains = {"key": (0, 2), "amount": (1.0, 3.0), "day": (dt.date(2020, 1, 1), dt.date(2020, 12, 31))}
    suite = learn_suite("n.t", history.schema, domains)
    amounts = [
        None if a is None else (Decimal(str(round(a, 2))) if decimal_amounts else a)
        for _, a, _ in rows
        if not (decimal_amounts and a is not None and not math.isfinite(a))
    ]
    rows = rows[: len(amounts)]
    table = pa.table(
        {
            "key": pa.array([k for k, _, _ in rows], pa.int64()),
            "amount": pa.array(amounts, kind),
            "day": pa.array([d for _, _, d in rows], pa.date32()),
            "note": pa.array(["x"] * len(rows), pa.string()),
        }
    )
    gx_failures = great_expectations_failures(suite, table, required, stated, slack=1.0)
    if certainly_passes(suite, table, required, stated, slack=1.0):
        assert gx_failures == [], f"the screen passed a batch that fails: {gx_failures}"
    assert validate_batch(suite, table, required, stated, slack=1.0) == gx_failures


def test_a_batch_of_a_widened_decimal_passes_once_the_suite_follows_the_schema() -> None:
    """Spark's ``ALTER COLUMN ... TYPE DECIMAL(14, 2)`` on a DECIMAL(9, 2) column: the batches
    after it have the new type, which is no failure (it was quarantined as a changed type)."""
    history = pa.table(
        {"key": pa.array([0, 1], pa.int64()), "amt": pa.array([Decimal("1.00")] * 2, pa.decimal128(9, 2))}
    )
    suite = learn_suite("n.t", history.schema, {"key": (0, 1), "amt": (Decimal("1.00"), Decimal("9.00"))})
    widened = pa.table(
        {"key": pa.array([2], pa.int64()), "amt": pa.array([Decimal("5.00")], pa.decimal128(14, 2))}
    )
    assert [f.expectation for f in great_expectations_failures(suite, widened, [], 1, 0.1)] == [
        "expect_column_type"
    ]
    adapted = suite.adapted_to(widened.schema)
    assert validate_batch(adapted, widened, [], 1, 0.1) == []
    assert great_expectations_failures(adapted, widened, [], 1, 0.1) == []
