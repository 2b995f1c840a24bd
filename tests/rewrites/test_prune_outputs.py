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
