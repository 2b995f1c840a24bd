"""Calendar arithmetic in Arrow against Python's calendar (proleptic Gregorian, as Spark's):
ADD_MONTHS cuts the day to the end of a shorter month, LAST_DAY, TRUNC to a unit."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from sketch_core.arrow.plans import project_table
from sketch_core.incremental.dates import add_months, last_day, trunc_date


def _month_end(year: int, month: int) -> int:
    following = dt.date(year + month // 12, month % 12 + 1, 1)
    return (following - dt.timedelta(days=1)).day


def expected_add_months(day: dt.date, months: int) -> dt.date | None:
    year, month = divmod(day.year * 12 + day.month - 1 + months, 12)
    if not 1 <= year <= 9999:
        return None  # outside Python's calendar: checked separately
    return dt.date(year, month + 1, min(day.day, _month_end(year, month + 1)))


def evaluate(days: list[dt.date], **expressions: pc.Expression) -> dict[str, list[object]]:
    table = pa.table({"d": pa.array(days, pa.date32())})
    return project_table(table, expressions).to_pydict()


DATES = st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31))


@given(days=st.lists(DATES, min_size=1, max_size=20), months=st.integers(-1200, 1200))
@settings(max_examples=60, deadline=None)
def test_add_months_and_last_day_match_the_calendar(days: list[dt.date], months: int) -> None:
    in_range = [d for d in days if expected_add_months(d, months) is not None]
    got = evaluate(
        in_range,
        added=add_months(pc.field("d"), pc.scalar(pa.scalar(months, pa.int64()))),
        last=last_day(pc.field("d")),
    )
    assert got["added"] == [expected_add_months(d, months) for d in in_range]
    assert got["last"] == [d.replace(day=_month_end(d.year, d.month)) for d in in_range]


def test_documented_examples_and_truncation() -> None:
    got = evaluate(
        [dt.date(2016, 8, 31), dt.date(2020, 2, 29), dt.date(2024, 5, 17), dt.date(1, 1, 1)],
        next_month=add_months(pc.field("d"), pc.scalar(pa.scalar(1, pa.int64()))),
        next_year=add_months(pc.field("d"), pc.scalar(pa.scalar(12, pa.int64()))),
        year=trunc_date(pc.field("d"), "year"),
        quarter=trunc_date(pc.field("d"), "quarter"),
        month=trunc_date(pc.field("d"), "month"),
        week=trunc_date(pc.field("d"), "week"),
    )
    assert got["next_month"][:3] == [dt.date(2016, 9, 30), dt.date(2020, 3, 29), dt.date(2024, 6, 17)]
    assert got["next_year"][1] == dt.date(2021, 2, 28)
    assert got["quarter"][2] == dt.date(2024, 4, 1) and got["year"][2] == dt.date(2024, 1, 1)
    assert got["month"][0] == dt.date(2016, 8, 1) and got["week"][2] == dt.date(2024, 5, 13)


@given(days=st.lists(DATES, min_size=1, max_size=20))
@settings(max_examples=40, deadline=None)
def test_truncation_matches_the_calendar(days: list[dt.date]) -> None:
    after_week_one = [d for d in days if d >= dt.date(1, 1, 8)]  # Monday before 0001-01-01: year 0
    got = evaluate(
        after_week_one,
        year=trunc_date(pc.field("d"), "year"),
        quarter=trunc_date(pc.field("d"), "quarter"),
        month=trunc_date(pc.field("d"), "month"),
        week=trunc_date(pc.field("d"), "week"),
    )
    assert got["year"] == [d.replace(month=1, day=1) for d in after_week_one]
    assert got["quarter"] == [d.replace(month=(d.month - 1) // 3 * 3 + 1, day=1) for d in after_week_one]
    assert got["month"] == [d.replace(day=1) for d in after_week_one]
    assert got["week"] == [d - dt.timedelta(days=d.weekday()) for d in after_week_one]
