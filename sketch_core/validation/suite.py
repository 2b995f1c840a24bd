"""A table's expectation suite, in the project's own terms (pure: no I/O, no Great Expectations).

What a delta batch of a table must satisfy before any sketch is maintained with it:

- **schema and types**: the columns, in order, with the Arrow types the suite learned;
- **no NULLs** in the columns that must have values: the table's sort key and the attributes
  its sketches' partitions are on, unless declared nullable or holding NULLs in the history the
  suite was learned from;
- **value domains learned from history**: each numeric, date or timestamp column stays within
  the range the table has held so far, widened on both sides by ``slack`` times that range's
  width (see :meth:`Domain.allowed`): growth and new key ranges pass, a sentinel like
  -999999999 or a slip of units does not; NaN is outside every domain. Batches that pass widen
  the learned range to what they hold;
- **row counts** that agree with the commit's metadata (checked per batch, see
  :mod:`sketch_core.validation.expectations`).

The suite is stored as JSON in the metastore; :mod:`sketch_core.validation.expectations` turns
it into Great Expectations expectations.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sketch_core.tables.data import is_type_widening

# Kinds of column whose domain is a range of numbers: values are compared as numbers (dates as
# days since the epoch, timestamps as microseconds).
_RANGED = ("int", "float", "decimal", "date", "timestamp")
_EPOCH = dt.date(1970, 1, 1)
_YEAR_DAYS = 366.0
_DAY_MICROS = 86_400 * 1e6


@dataclass(frozen=True)
class Domain:
    """The range of values a column has held: ``low``..``high`` as numbers (see ``_RANGED``)."""

    low: float
    high: float

    def allowed(self, slack: float, kind: str = "int") -> tuple[float, float]:
        """The range a new batch may use: the learned one widened on each side by ``slack``
        times its width. For numbers the width is the larger of the span and the values'
        magnitude (keys 0..2,999 may grow to ~33,000 at slack 10; values near 10^6 with a
        small spread may go anywhere within an order of magnitude). Dates and timestamps count
        from an arbitrary epoch, so only their span counts, and at least a year (TPC-H's seven
        years of dates allow 1924 to 2066 at slack 10: a 1900-01-01 sentinel fails)."""
        span = self.high - self.low
        if kind in ("date", "timestamp"):
            width = max(span, _YEAR_DAYS * (1 if kind == "date" else _DAY_MICROS))
        else:
            width = max(span, abs(self.low), abs(self.high), 1.0)
        return self.low - slack * width, self.high + slack * width

    def including(self, low: float, high: float) -> Domain:
        return Domain(min(self.low, low), max(self.high, high))


@dataclass(frozen=True)
class ColumnRule:
    name: str
    type: str  # the Arrow type, as Arrow prints it
    domain: Domain | None = None  # None: no range learned (strings, booleans, no values yet)
    # An identifier (integers all distinct in the history sampled): new ranges of ids are
    # normal (a new source system, a jump in a sequence), so it gets no domain.
    identifier: bool = False

    @property
    def kind(self) -> str:
        return column_kind(self.type)


@dataclass(frozen=True)
class TableSuite:
    table: str
    columns: tuple[ColumnRule, ...]
    # declared by an operator, or holding NULLs in the history the suite was learned from
    nullable: frozenset[str] = field(default_factory=frozenset)

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def required(self, wanted: set[str]) -> list[str]:
        """Of the columns that must have values (``wanted``: sort key and partition
        attributes), those the table has and that are not declared nullable, in table order."""
        return [c.name for c in self.columns if c.name in wanted and c.name not in self.nullable]

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "columns": [
                {"name": c.name, "type": c.type}
                | ({"low": c.domain.low, "high": c.domain.high} if c.domain else {})
                | ({"identifier": True} if c.identifier else {})
                for c in self.columns
            ],
            "nullable": sorted(self.nullable),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TableSuite:
        columns = tuple(
            ColumnRule(
                c["name"],
                c["type"],
                Domain(float(c["low"]), float(c["high"])) if "low" in c else None,
                bool(c.get("identifier", False)),
            )
            for c in data["columns"]
        )
        return cls(str(data["table"]), columns, frozenset(data.get("nullable", ())))

    def widened(self, batch: pa.Table) -> TableSuite:
        """The suite with each ranged column's domain widened to the values ``batch`` holds
        (what a batch that passed, or that an operator accepted, teaches)."""
        observed = observed_ranges(batch)
        columns = []
        for c in self.columns:
            seen = observed.get(c.name)
            if seen is not None and c.kind in _RANGED and not c.identifier:
                c = replace(c, domain=c.domain.including(*seen) if c.domain else Domain(*seen))
            columns.append(c)
        return replace(self, columns=tuple(columns))

    def adapted_to(self, schema: pa.Schema) -> TableSuite:
        """The suite for the table after a schema evolution (``svc.tables.evolve_schema``, or
        another engine's ``ALTER TABLE``): columns added get a rule with no domain yet, widened
        columns their new type with the domain kept, and the rules of columns the table dropped
        go (a rename is a drop and an add). A column whose type changed in any other way keeps
        its rule, so batches fail on it, as they should. (Batches are read in the table's
        schema: a column missing from ``schema`` is missing from the table, not from a batch.)"""
        known = {c.name: c for c in self.columns}
        columns = [c for c in self.columns if c.name in schema.names]
        for f in schema:
            rule = known.get(f.name)
            if rule is None:
                columns.append(ColumnRule(f.name, str(f.type)))
            elif rule.type != str(f.type) and is_type_widening(rule.type, str(f.type)):
                columns[columns.index(rule)] = replace(rule, type=str(f.type))
        order = {name: i for i, name in enumerate(schema.names)}
        columns.sort(key=lambda c: order.get(c.name, len(order)))
        return replace(self, columns=tuple(columns))

    def declaring_nullable(self, columns: set[str]) -> TableSuite:
        unknown = sorted(columns - set(self.column_names))
        if unknown:
            raise ValueError(f"no such columns in {self.table}: {', '.join(unknown)}")
        return replace(self, nullable=self.nullable | frozenset(columns))


def column_kind(arrow_type: str) -> str:
    """``int``, ``float``, ``decimal``, ``date``, ``timestamp`` or ``other``."""
    for prefix, kind in (
        ("int", "int"),
        ("uint", "int"),
        ("double", "float"),
        ("float", "float"),
        ("halffloat", "float"),
        ("decimal", "decimal"),
        ("date", "date"),
        ("timestamp", "timestamp"),
    ):
        if arrow_type.startswith(prefix):
            return kind
    return "other"


def as_number(value: Any) -> float | None:
    """A bound or value as the number domains compare (None: not comparable)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return float((value - dt.datetime(1970, 1, 1)).total_seconds() * 1e6)
    if isinstance(value, dt.date):
        return float((value - _EPOCH).days)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def learn_suite(
    table: str,
    schema: pa.Schema,
    bounds: Mapping[str, tuple[Any, Any]],
    identifiers: frozenset[str] = frozenset(),
    holding_nulls: frozenset[str] = frozenset(),
) -> TableSuite:
    """A table's first suite: its schema, and the value ranges of its history (``bounds``:
    per column, the (min, max) over the table's data files, from Iceberg's metadata), except
    for ``identifiers`` (see :func:`identifier_columns`). The columns of ``holding_nulls``
    (NULLs in the history) are nullable: a batch with NULLs there is what the table has held."""
    columns = []
    for f in schema:
        rule = ColumnRule(f.name, str(f.type), identifier=f.name in identifiers)
        low, high = (as_number(b) for b in bounds.get(f.name, (None, None)))
        if rule.kind in _RANGED and low is not None and high is not None and not rule.identifier:
            rule = replace(rule, domain=Domain(low, high))
        columns.append(rule)
    return TableSuite(table, tuple(columns), holding_nulls & frozenset(schema.names))


# Fewer sampled rows than this say nothing about whether a column's values repeat.
_MIN_IDENTIFIER_ROWS = 20


def identifier_columns(sample: pa.Table) -> frozenset[str]:
    """The integer columns of a sample of the history whose values are all distinct and
    present: identifiers, not measures."""
    if sample.num_rows < _MIN_IDENTIFIER_ROWS:
        return frozenset()
    return frozenset(
        name
        for name in sample.column_names
        if column_kind(str(sample.column(name).type)) == "int"
        and sample.column(name).null_count == 0
        and pc.count_distinct(sample.column(name)).as_py() == sample.num_rows
    )


def observed_ranges(batch: pa.Table) -> dict[str, tuple[float, float]]:
    """Per ranged column of ``batch``, the (min, max) of its values as numbers (NaN ignored)."""
    ranges: dict[str, tuple[float, float]] = {}
    for name in batch.column_names:
        column = batch.column(name)
        if column_kind(str(column.type)) not in _RANGED or column.null_count == len(column):
            continue
        if pa.types.is_floating(column.type):
            column = pc.filter(column, pc.invert(pc.is_nan(column)))
        extremes = pc.min_max(column).as_py()
        low, high = as_number(extremes["min"]), as_number(extremes["max"])
        if low is not None and high is not None:
            ranges[name] = (low, high)
    return ranges


def domain_bounds(rule: ColumnRule, slack: float) -> tuple[Any, Any] | None:
    """The allowed range of a column in the column's own terms (dates as ISO strings, as Great
    Expectations compares them), or None when it has no learned domain."""
    if rule.domain is None:
        return None
    low, high = rule.domain.allowed(slack, rule.kind)
    if rule.kind == "date":
        return _day(low).isoformat(), _day(high).isoformat()
    if rule.kind == "timestamp":
        zone = "+00:00" if "tz=" in rule.type else ""  # zoned values compare with zoned bounds
        return _instant(low).isoformat() + zone, _instant(high).isoformat() + zone
    if rule.kind == "int":
        return int(low) - (1 if low != int(low) else 0), int(high) + (1 if high != int(high) else 0)
    return low, high


def _day(days: float) -> dt.date:
    clamped = min(max(days, (dt.date.min - _EPOCH).days), (dt.date.max - _EPOCH).days)
    return _EPOCH + dt.timedelta(days=int(clamped))


def _instant(micros: float) -> dt.datetime:
    base = dt.datetime(1970, 1, 1)
    low, high = (dt.datetime.min - base), (dt.datetime.max - base)
    delta = dt.timedelta(microseconds=micros) if -1e17 < micros < 1e17 else (low if micros < 0 else high)
    return base + min(max(delta, low), high)
