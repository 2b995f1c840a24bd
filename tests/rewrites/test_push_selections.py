"""Pushing selections into joins keeps every result row and its lineage (the lineage oracle
evaluates both plans), and leaves no cross product where a conjunct relates the two sides."""

from __future__ import annotations

from collections import Counter

from sketch_core.algebra.frontend import to_ir
from sketch_core.algebra.ir import Join, Relation
from sketch_core.rewrites.push_selections import push_selections
from tests.oracles.lineage import run

SCHEMAS = {
    "t.r": [("a", "bigint"), ("b", "bigint")],
    "t.s": [("c", "bigint"), ("d", "bigint")],
    "t.u": [("e", "bigint"), ("f", "bigint")],
}
TABLES = {
    "t.r": [{"a": i % 4, "b": i} for i in range(12)],
    "t.s": [{"c": i % 5, "d": -i} for i in range(10)],
    "t.u": [{"e": i % 3, "f": i * 2} for i in range(9)],
}


def joins(plan: Relation) -> list[Join]:
    found = [plan] if isinstance(plan, Join) else []
    return found + [j for c in plan.children for j in joins(c)]


def lineage_bag(plan: Relation) -> Counter[str]:
    return Counter(f"{sorted(row.items())}|{sorted(lineage)}" for row, lineage in run(plan, TABLES))


def pushed_with_same_lineage(sql: str) -> Relation:
    """The pushed plan, after checking it gives the same rows with the same lineage."""
    plan = to_ir(sql, SCHEMAS).plan
    pushed = push_selections(plan)
    assert lineage_bag(pushed) == lineage_bag(plan) and lineage_bag(plan)
    return pushed


def test_comma_joins_become_inner_joins_with_the_same_lineage() -> None:
    sql = (
        "SELECT r.b, s.d, u.f FROM t.r r, t.s s, t.u u "
        "WHERE r.a = s.c AND s.c = u.e AND r.b > 2 AND u.f < 14 AND r.b + s.d > -5 AND 1 = 1"
    )
    pushed = pushed_with_same_lineage(sql)
    assert all(j.kind == "inner" for j in joins(pushed)) and joins(pushed)


def test_semi_and_anti_joins_keep_their_right_sides() -> None:
    sql = "SELECT r.b FROM t.r r WHERE r.b > 1 AND r.a NOT IN (SELECT s.c FROM t.s s WHERE s.d < -7)"
    pushed_with_same_lineage(sql)


def test_an_equality_repeated_in_every_branch_of_an_or_becomes_the_join_key() -> None:
    sql = (
        "SELECT r.b FROM t.r r, t.s s WHERE (r.a = s.c AND r.b < 4 AND s.d > -3) "
        "OR (r.a = s.c AND r.b > 8) OR (s.c = 99 AND r.a = s.c)"
    )
    (join,) = joins(pushed_with_same_lineage(sql))
    assert join.kind == "inner" and join.condition is not None
    assert "a = c" in join.condition.sql().replace("r.", "").replace("s.", "")
