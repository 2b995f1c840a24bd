"""Odd and hostile input to the public API: every failure is a SketchError with a hint, never
a TypeError, an AttributeError or Spark's own exception (the held-out suite checks the same)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest

from sketch_core.datasets import synthetic_table
from sketch_core.errors import SketchError
from sketch_core.service import SketchService

NS = "hostile_api"
TABLE = f"{NS}.facts"
QUERY = f"SELECT a, SUM(b) AS s FROM {TABLE} GROUP BY a HAVING SUM(b) > 10"

Call = Callable[[SketchService], Any]
CALLS: dict[str, Call] = {
    "capture sql None": lambda s: s.capture(None),  # type: ignore[arg-type]
    "capture sql int": lambda s: s.capture(123),  # type: ignore[arg-type]
    "capture empty": lambda s: s.capture(""),
    "capture garbage": lambda s: s.capture("SELEC a FROM"),
    "capture two statements": lambda s: s.capture("SELECT 1; SELECT 2"),
    "capture an insert": lambda s: s.capture(f"INSERT INTO {TABLE} VALUES (1)"),
    "capture unknown table": lambda s: s.capture(f"SELECT a FROM {NS}.nope"),
    "capture unknown column": lambda s: s.capture(f"SELECT zz FROM {TABLE}"),
    "capture fragments 0": lambda s: s.capture(QUERY, fragments=0),
    "capture fragments text": lambda s: s.capture(QUERY, fragments="x"),  # type: ignore[arg-type]
    "capture fragments negative": lambda s: s.capture(QUERY, fragments={TABLE: -1}),
    "capture attribute unknown column": lambda s: s.capture(QUERY, attributes={TABLE: "nope"}),
    "capture attribute unknown table": lambda s: s.capture(QUERY, attributes={"x.y": "a"}),
    "capture attributes as a list": lambda s: s.capture(QUERY, attributes=["a"]),  # type: ignore[arg-type]
    "capture params as a list": lambda s: s.capture(QUERY, params=[1]),  # type: ignore[arg-type]
    "capture param of no SQL type": lambda s: s.capture(
        f"SELECT a, COUNT(*) AS n FROM {TABLE} WHERE a > :x GROUP BY a", params={"x": object()}
    ),
    "capture snapshot negative": lambda s: s.capture(QUERY, snapshot=-5),
    "capture a relative date": lambda s: s.capture(
        f"SELECT a, SUM(b) AS s FROM {TABLE} WHERE CAST(c AS DATE) > date_add(current_date(), -7) GROUP BY a"
    ),
    "capture snapshot in the future": lambda s: s.capture(QUERY, snapshot=10**12),
    "capture snapshot text": lambda s: s.capture(QUERY, snapshot="x"),  # type: ignore[arg-type]
    "capture name empty": lambda s: s.capture(QUERY, name=""),
    "capture name int": lambda s: s.capture(QUERY, name=5),  # type: ignore[arg-type]
    "query sql None": lambda s: s.query(None),  # type: ignore[arg-type]
    "query garbage": lambda s: s.query("SELEC"),
    "query snapshot text": lambda s: s.query(QUERY, snapshot="x"),  # type: ignore[arg-type]
    "query unknown function": lambda s: s.query(f"SELECT nofn(a) FROM {TABLE}"),
    "query division by zero": lambda s: s.query(f"SELECT a / 0 FROM {TABLE}"),
    "query malformed cast": lambda s: s.query(f"SELECT CAST('x' AS INT) + a FROM {TABLE}"),
    "maintain unknown": lambda s: s.maintain("nope"),
    "maintain unknown strategy": lambda s: s.maintain(None, strategy="fast"),
    "maintain name int": lambda s: s.maintain(5),  # type: ignore[arg-type]
    "sketch unknown": lambda s: s.sketch("nope"),
    "sketch None": lambda s: s.sketch(None),  # type: ignore[arg-type]
    "sketch_files unknown": lambda s: s.sketch_files("nope"),
    "sketch_rows unknown": lambda s: s.sketch_rows("nope"),
    "drop_sketch unknown": lambda s: s.drop_sketch("nope"),
    "status unknown": lambda s: s.status("nope"),
    "estimate_attributes garbage": lambda s: s.estimate_attributes("SELEC"),
    "estimate_attributes sql int": lambda s: s.estimate_attributes(7),  # type: ignore[arg-type]
    "choose_attributes unknown table": lambda s: s.choose_attributes(f"SELECT a FROM {NS}.nope"),
    "range_partition unknown table": lambda s: s.range_partition(f"{NS}.nope", "a", 10),
    "range_partition unknown column": lambda s: s.range_partition(TABLE, "nope", 10),
    "range_partition zero fragments": lambda s: s.range_partition(TABLE, "a", 0),
    "set_policy unknown sketch": lambda s: s.set_policy("nope", None),  # type: ignore[arg-type]
    "drop_table unknown": lambda s: s.drop_table(f"{NS}.nope"),
    "tables.create without namespace": lambda s: s.tables.create("nons", pa.table({"x": [1]})),
    "tables.create not data": lambda s: s.tables.create(f"{NS}.bad", 42),  # type: ignore[arg-type]
    "tables.append unknown": lambda s: s.tables.append(f"{NS}.nope", pa.table({"x": [1]})),
    "tables.append wrong schema": lambda s: s.tables.append(TABLE, pa.table({"x": ["a"]})),
    "tables.delete bad predicate": lambda s: s.tables.delete(TABLE, "a >>> 1"),
    "tables.delete unknown column": lambda s: s.tables.delete(TABLE, "nope = 1"),
    "tables.overwrite wrong schema": lambda s: s.tables.overwrite(TABLE, pa.table({"x": [1]}), where="a = 1"),
}


def with_table(svc: SketchService, spark: Any, table: str, rows: int = 2000) -> str:
    """The session's service on Spark, with ``table`` (created once) for hostile input."""
    svc.context.spark_session = spark
    if svc.commit_log.get_table(table) is None:
        svc.tables.create(table, synthetic_table(rows, 20, seed=1), sort_by=["key"])
    return table


@pytest.fixture(scope="module")
def hostile_svc(svc: SketchService, spark: Any) -> Iterator[SketchService]:
    with_table(svc, spark, TABLE)
    yield svc


@pytest.mark.parametrize("label", sorted(CALLS))
def test_every_failure_is_a_sketch_error_with_a_hint(hostile_svc: SketchService, label: str) -> None:
    before = hostile_svc.tables.pin(TABLE).snapshot_id
    with pytest.raises(SketchError) as info:
        CALLS[label](hostile_svc)
    assert info.value.hint, f"{type(info.value).__name__} without a hint: {info.value}"
    assert hostile_svc.tables.pin(TABLE).snapshot_id == before, "nothing published is changed"


def test_a_report_with_a_changing_value_runs_without_a_sketch(hostile_svc: SketchService) -> None:
    """A random value (as ``current_date()``): no sketch is captured for it, and the report runs
    plain, by default and when asked to use sketches always."""
    sql = f"SELECT a, COUNT(*) AS n FROM {TABLE} WHERE rand() < 2 GROUP BY a"
    for how in (True, "always"):
        result = hostile_svc.query(sql, use_sketches=how)
        assert result.sketch is None and result.table.num_rows == 20
