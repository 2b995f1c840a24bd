"""Calendar arithmetic on Arrow date columns, as Spark does it: months added with the day cut
to the end of a shorter month, the last day of a month, dates truncated to a unit.

Arrow has no kernel that builds a date from year, month and day, so dates are built from days
since the epoch with the civil-calendar formula (proleptic Gregorian, as Spark 3+ and Java's
``LocalDate``): ``days_from_civil(y, m, d)`` counts 400-year eras of 146,097 days from March 1
of year 0, so that leap days fall at the end of each era-year.

Examples: ``ADD_MONTHS(DATE '2016-08-31', 1) = 2016-09-30``, ``ADD_MONTHS(DATE '2020-02-29',
12) = 2021-02-28``, ``LAST_DAY(DATE '2024-02-10') = 2024-02-29``, ``TRUNC(DATE '2024-05-17',
'QUARTER') = 2024-04-01``, ``TRUNC(DATE '2024-05-17', 'WEEK') = 2024-05-13`` (a Monday).
"""

from __future__ import annotations

from typing import TypeAlias

import pyarrow as pa
import pyarrow.compute as pc


def _call(name: str, args: list[pc.Expression]) -> pc.Expression:
    return pc.Expression._call(name, args)


def _int(value: int) -> pc.Expression:
    return pc.scalar(pa.scalar(value, pa.int64()))


Operand: TypeAlias = pc.Expression | int


def _e(value: Operand) -> pc.Expression:
    return _int(value) if isinstance(value, int) else value


# Checked: a date far out of range fails as Spark's does, instead of wrapping around.
def _add(a: Operand, b: Operand) -> pc.Expression:
    return _call("add_checked", [_e(a), _e(b)])


def _sub(a: Operand, b: Operand) -> pc.Expression:
    return _call("subtract_checked", [_e(a), _e(b)])


def _mul(a: Operand, b: Operand) -> pc.Expression:
    return _call("multiply_checked", [_e(a), _e(b)])


def _floor_divide(value: pc.Expression, by: int) -> pc.Expression:
    """``floor(value / by)`` for int64 ``value`` (Arrow's integer division truncates)."""
    quotient = _call("floor", [_call("divide", [value.cast(pa.float64()), pc.scalar(float(by))])])
    return quotient.cast(pa.int64())


def days_from_civil(year: pc.Expression, month: pc.Expression, day: Operand) -> pc.Expression:
    """Days since 1970-01-01 of (year, month, day), int64 expressions."""
    january_or_february = _call("less_equal", [month, _int(2)])
    year = _sub(year, _call("if_else", [january_or_february, _int(1), _int(0)]))  # years from March
    era = _floor_divide(year, 400)
    year_of_era = _sub(year, _mul(era, 400))  # 0..399
    month_from_march = _call("if_else", [january_or_february, _add(month, 9), _sub(month, 3)])  # 0..11
    day_of_year = _add(_floor_divide(_add(_mul(month_from_march, 153), 2), 5), _sub(day, 1))
    leap_days = _sub(_floor_divide(year_of_era, 4), _floor_divide(year_of_era, 100))
    day_of_era = _add(_add(_mul(year_of_era, 365), leap_days), day_of_year)
    return _sub(_add(_mul(era, 146_097), day_of_era), 719_468)


def _as_date(days: pc.Expression) -> pc.Expression:
    return days.cast(pa.int32()).cast(pa.date32())  # the int32 cast fails past Spark's range


def _part(kernel: str, date: pc.Expression) -> pc.Expression:
    return _call(kernel, [date]).cast(pa.int64())


def _month_start(months: pc.Expression) -> pc.Expression:
    """Days since the epoch of the first day of month ``months`` (counted as year * 12 + m - 1)."""
    year = _floor_divide(months, 12)
    return days_from_civil(year, _add(_sub(months, _mul(year, 12)), 1), 1)


def add_months(date: pc.Expression, months: pc.Expression) -> pc.Expression:
    """``ADD_MONTHS(date, months)``: the same day ``months`` later, cut to the month's end."""
    current = _add(_mul(_part("year", date), 12), _sub(_part("month", date), 1))
    target = _add(current, months.cast(pa.int64()))
    start = _month_start(target)
    length = _sub(_month_start(_add(target, 1)), start)
    offset = _call("min_element_wise", [_sub(_part("day", date), 1), _sub(length, 1)])
    return _as_date(_add(start, offset))


def last_day(date: pc.Expression) -> pc.Expression:
    """``LAST_DAY(date)``: the last day of the date's month."""
    following = _add(_mul(_part("year", date), 12), _part("month", date))  # the next month
    return _as_date(_sub(_month_start(following), 1))


# TRUNC(date, fmt)'s formats (Spark's names, case-insensitive) -> the unit.
TRUNC_UNITS = {
    "YEAR": "year",
    "YYYY": "year",
    "YY": "year",
    "QUARTER": "quarter",
    "MONTH": "month",
    "MM": "month",
    "MON": "month",
    "WEEK": "week",
}


def trunc_date(date: pc.Expression, unit: str) -> pc.Expression:
    """``TRUNC(date, unit)``: the first day of the date's year, quarter, month or week (weeks
    start on Monday)."""
    if unit == "week":
        weekday = _part("day_of_week", date)  # Monday = 0
        return _as_date(_sub(date.cast(pa.int32()).cast(pa.int64()), weekday))
    year, month = _part("year", date), _part("month", date)
    if unit == "year":
        month = _int(1)
    elif unit == "quarter":
        month = _add(_mul(_floor_divide(_sub(month, 1), 3), 3), 1)
    return _as_date(days_from_civil(year, month, 1))
