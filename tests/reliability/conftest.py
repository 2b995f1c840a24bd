from __future__ import annotations

from collections.abc import Iterator

import pytest

from sketch_core import faults
from sketch_core.datasets import synthetic_table
from sketch_core.service import SketchService
from tests.service.test_maintain import captured, sibling


@pytest.fixture(autouse=True)
def rearmed_faults() -> Iterator[None]:
    """Each test's faults fire afresh (a fault fires once per process)."""
    faults.reset()
    yield
    faults.reset()


def sketch_with_state_then_load(
    spark_svc: SketchService, ns: str, suffix: str, seed: int, load_rows: int
) -> tuple[SketchService, str, str, str]:
    """A table, a HAVING sketch on it with stored state (version 1), then a load:
    (svc, table, sketch, sql)."""
    svc = sibling(spark_svc)
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(3000, 40, seed=seed), sort_by=["a"])
    name, sql = captured(svc, table, suffix, with_state=True)
    svc.tables.append(table, synthetic_table(load_rows, 40, seed=seed + 1, key_start=3000))
    return svc, table, name, sql
