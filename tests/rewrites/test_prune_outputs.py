"""Shown-only outputs at the top of a plan are dropped; the ones that decide rows stay."""

from __future__ import annotations

from sketch_core.algebra.frontend import to_ir
from sketch_core.algebra.ir import Aggregate, Project, Relation
from sketch_core.rewrites.prune_outputs import prune_outputs

SCHEMAS = {"t.facts": [("g", "bigint"), ("x", "double"), ("label", "string")]}


def top_projection(plan: Relation) -> Project:
    assert isinstance(plan, Project) or plan.children
    node = plan
    while not isinstance(node, Project):
        node = node.children[0]
    return node


def test_a_rounded_aggregate_that_is_only_shown_is_dropped() -> None:
    plan = to_ir("SELECT g, ROUND(SUM(x), 2) AS r FROM t.facts GROUP BY g HAVING SUM(x) > 10", SCHEMAS).plan
    pruned = prune_outputs(plan)
    printed = [e.sql(dialect="spark") for _, e in top_projection(pruned).outputs]
    assert not any("ROUND" in p for p in printed)
    # Everything below the chain is the same object: scans keep their identity.
    below = [n for n in pruned.walk() if isinstance(n, Aggregate)]
    assert below and below[0] is next(n for n in plan.walk() if isinstance(n, Aggregate))


def test_outputs_read_by_top_k_keys_stay() -> None:
    plan = to_ir(
        "SELECT g, CAST(SUM(x) AS DOUBLE) AS s, UPPER(MAX(label)) AS l FROM t.facts GROUP BY g "
        "ORDER BY s DESC LIMIT 3",
        SCHEMAS,
    ).plan
    outputs = dict(top_projection(prune_outputs(plan)).outputs)
    assert list(outputs) == ["s"]
    assert "CAST" in outputs["s"].sql(dialect="spark")


def test_a_projection_that_keeps_nothing_passes_one_column() -> None:
    plan = to_ir("SELECT UPPER(label) AS u FROM t.facts", SCHEMAS).plan
    pruned = prune_outputs(plan)
    assert isinstance(pruned, Project) and len(pruned.outputs) == 1
    assert pruned.outputs[0][1].sql() == pruned.child.columns[0]


def test_sorts_are_dropped_with_the_outputs_they_order_by() -> None:
    plan = to_ir("SELECT g, SUM(x) AS s FROM t.facts GROUP BY g ORDER BY s DESC, g", SCHEMAS).plan
    pruned = prune_outputs(plan)
    assert not any(type(n).__name__ == "Sort" for n in pruned.walk())
    assert isinstance(pruned, Project) and len(pruned.outputs) == 1


def aggregate_below(plan: Relation) -> Aggregate:
    return next(n for n in prune_outputs(plan).walk() if isinstance(n, Aggregate))


def calls_kept(sql: str) -> list[str]:
    return [call.func for _, call in aggregate_below(to_ir(sql, SCHEMAS).plan).aggregates]


def test_aggregates_only_shown_are_not_computed_and_the_ones_that_decide_rows_are() -> None:
    # TPC-H Q1's shape: groups shown with their sums, nothing filters on them.
    assert (
        calls_kept("SELECT g, SUM(x) AS s, AVG(x) AS a, COUNT(*) AS n FROM t.facts GROUP BY g ORDER BY g")
        == []
    )
    assert calls_kept("SELECT g, SUM(x) AS s, AVG(x) AS a FROM t.facts GROUP BY g HAVING AVG(x) > 1") == [
        "avg"
    ]
    assert calls_kept(
        "SELECT g, SUM(x) AS s, COUNT(*) AS n FROM t.facts GROUP BY g ORDER BY n DESC LIMIT 2"
    ) == ["count"]


def test_pruning_keeps_the_provenance_model_of_min_max_aggregations() -> None:
    # Only MIN/MAX: the provenance is the rows holding the extremes, decided by every call.
    assert calls_kept("SELECT g, MIN(x) AS lo, MAX(x) AS hi FROM t.facts GROUP BY g") == ["min", "max"]
    # Mixed: all of a group's rows; pruned to its MAX it keeps a COUNT(*) so that it stays so.
    assert calls_kept(
        "SELECT g, SUM(x) AS s, MAX(x) AS hi FROM t.facts GROUP BY g ORDER BY hi DESC LIMIT 2"
    ) == [
        "max",
        "count",
    ]


def test_a_global_aggregation_keeps_one_aggregate_for_its_one_row() -> None:
    assert calls_kept("SELECT SUM(x) AS s, AVG(x) AS a FROM t.facts WHERE g > 1") == ["count"]
