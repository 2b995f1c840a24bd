"""Odd and hostile input to the operators: refused when the DAG is parsed with a SketchError
that has a hint, or at run time failed without retry (AirflowFailException from that error);
never another exception type."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException
from sketch_airflow.operators.sketch import (
    CaptureSketchOperator,
    MaintainSketchesOperator,
    RefreshSketchesOperator,
    SketchedQueryOperator,
)

from sketch_core.errors import SketchError
from sketch_core.service import SketchService
from tests.reliability.test_public_errors import with_table

NS = "hostile_ops"
TABLE = f"{NS}.facts"
QUERY = f"SELECT a, SUM(b) AS s FROM {TABLE} GROUP BY a HAVING SUM(b) > 10"

Build = Callable[[str, Path], Any]
OPERATORS: dict[str, Build] = {
    "capture garbage": lambda c, _: CaptureSketchOperator(task_id="t", sql="SELEC a", sketch_conn_id=c),
    "capture unknown table": lambda c, _: CaptureSketchOperator(
        task_id="t", sql=f"SELECT a FROM {NS}.nope", sketch_conn_id=c
    ),
    "capture unknown column": lambda c, _: CaptureSketchOperator(
        task_id="t", sql=QUERY, attributes={TABLE: "nope"}, sketch_conn_id=c
    ),
    "capture zero fragments": lambda c, _: CaptureSketchOperator(
        task_id="t", sql=QUERY, fragments=0, sketch_conn_id=c
    ),
    "capture bad policy": lambda c, _: CaptureSketchOperator(
        task_id="t", sql=QUERY, policy={"combine": "sometimes"}, sketch_conn_id=c
    ),
    "maintain unknown sketch": lambda c, _: MaintainSketchesOperator(
        task_id="t", names=["nope"], policy_driven=False, sketch_conn_id=c
    ),
    "maintain unknown strategy": lambda c, _: MaintainSketchesOperator(
        task_id="t", strategy="fast", sketch_conn_id=c
    ),
    "refresh nothing named": lambda c, _: RefreshSketchesOperator(task_id="t", sketch_conn_id=c),
    "refresh unknown sketch": lambda c, _: RefreshSketchesOperator(
        task_id="t", names=["nope"], sketch_conn_id=c
    ),
    "report garbage": lambda c, _: SketchedQueryOperator(task_id="t", sql="SELEC", sketch_conn_id=c),
    "report unknown function": lambda c, _: SketchedQueryOperator(
        task_id="t", sql=f"SELECT nofn(a) AS x FROM {TABLE}", sketch_conn_id=c
    ),
    "report bad output format": lambda c, p: SketchedQueryOperator(
        task_id="t", sql=QUERY, output_path=str(p / "r.xml"), output_format="xml", sketch_conn_id=c
    ),
    "report snapshot in the future": lambda c, _: SketchedQueryOperator(
        task_id="t", sql=QUERY, snapshot=10**12, sketch_conn_id=c
    ),
    "report bad use_sketches": lambda c, _: SketchedQueryOperator(
        task_id="t", sql=QUERY, use_sketches="sometimes", sketch_conn_id=c
    ),
}


@pytest.fixture(scope="module")
def hostile_table(svc: SketchService, spark: object) -> str:
    return with_table(svc, spark, TABLE, rows=500)


@pytest.mark.parametrize("label", sorted(OPERATORS))
def test_every_operator_fails_with_a_typed_error_and_a_hint(
    svc: SketchService, hostile_table: str, sketch_conn: str, tmp_path: Path, label: str
) -> None:
    before = svc.tables.pin(hostile_table).snapshot_id
    with pytest.raises((SketchError, AirflowFailException)) as raised:
        OPERATORS[label](sketch_conn, tmp_path).execute({})
    error = raised.value if isinstance(raised.value, SketchError) else raised.value.__cause__
    assert isinstance(error, SketchError), f"{type(raised.value).__name__} from {error!r}"
    assert error.hint, f"{type(error).__name__} without a hint: {error}"
    assert svc.tables.pin(hostile_table).snapshot_id == before, "nothing published is changed"
