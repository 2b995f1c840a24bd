"""Every capture, maintenance and query records its timing and sizes, and the sketch's cost
models are fitted from those records (priors until they exist)."""

from __future__ import annotations

from sketch_core.costs import DEFAULT_PRIORS
from sketch_core.datasets import synthetic_table
from sketch_core.datasets.deltas import DeltaGenerator
from sketch_core.service import SketchService
from tests.service.test_maintain import captured


def test_runs_and_queries_are_recorded_and_the_model_is_fitted_from_them(
    spark_svc: SketchService, ns: str
) -> None:
    svc = spark_svc
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(3000, 40, seed=5), sort_by=["a"])
    name, sql = captured(svc, table, "costs")
    untouched = svc.cost_model(name)
    assert untouched.costs["use"] == DEFAULT_PRIORS["use"]  # no query yet: the prior
    assert untouched.costs["capture"].runs == 1

    for _ in range(2):
        svc.query(sql)
    svc.query(sql, use_sketches=False)
    DeltaGenerator(svc.tables, table, ("key",), seed=6).inserts(40).apply(svc.tables)
    (incremental,) = svc.maintain(name, "incremental")
    DeltaGenerator(svc.tables, table, ("key",), seed=7).deletes(30).apply(svc.tables)
    (full,) = svc.maintain(name, "full")
    svc.query(sql)  # the new version

    seen = svc.costs.observations(name)
    rows_now = 3000 + 40 - 30
    assert [o.size for o in seen["capture"]] == [3000]
    assert [o.size for o in seen["incremental"]] == [40]
    assert [o.size for o in seen["full"]] == [rows_now]
    assert sorted(o.size for o in seen["use"]) == [3000, 3000, rows_now]
    assert [o.size for o in seen["plain"]] == [3000]
    assert seen["incremental"][0].seconds > 0 and incremental.seconds > 0
    # The run log keeps the delta a recapture caught up with (the chart plots it).
    assert (
        [r["delta_rows"] for r in svc.sketches.runs(name) if r["strategy"] == "full"]
        == [full.delta_rows]
        == [30]
    )

    model = svc.cost_model(name)
    assert {op: cost.runs for op, cost in model.costs.items()} == {
        "capture": 1,
        "incremental": 1,
        "full": 1,
        "use": 3,
        "plain": 1,
    }
    assert model.costs["plain"] != DEFAULT_PRIORS["plain"]
