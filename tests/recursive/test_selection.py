"""Aggregate selection: least-cost recursions over graphs with cycles, recognised, evaluated
and maintained (absorption provenance and DRed) by deriving only from each group's best row.

The oracle is a Floyd-Warshall written here (NULL costs: a walk over a NULL-cost link costs
NULL, which MIN skips, so a pair connected only through such links has cost NULL). After every
generated batch of inserted and deleted links (zero-cost cycles, self-loops, duplicates,
disconnected parts), the maintained view's best rows, a fresh view's and the in-process
fixpoint's all equal it; so do the best rows over only the links their formulas mention (the
sketch's safety), and a view restored from its stored state.
"""

from __future__ import annotations

import itertools
import math

import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sketch_core.recursive.absorption import AbsorptionView
from sketch_core.recursive.evaluate import fixpoint
from sketch_core.recursive.members import Members, compile_members
from sketch_core.recursive.query import split_recursive
from sketch_core.recursive.rule import RecursionLimitError
from sketch_core.recursive.selection import AggregateSelection, find_selection
from sketch_core.recursive.state import restored_view, view_state
from sketch_core.recursive.view import RecursiveView
from tests.incremental.test_engine import through_ipc

SCHEMA = pa.schema([("src", pa.int64()), ("dst", pa.int64()), ("w", pa.int64())])
EDGES = SCHEMA.names
Link = tuple[int, int, int | None]

LEAST_COST = """WITH RECURSIVE paths(s, d, cost) AS (
    SELECT src, dst, w FROM links
    UNION ALL
    SELECT p.s, l.dst, p.cost + l.w FROM paths p JOIN links l ON l.src = p.d)
SELECT s, d, MIN(cost) AS cost FROM paths GROUP BY s, d ORDER BY cost"""
# Longest paths over the links that go up (a DAG: MAX never ends around a cycle).
LONGEST = """WITH RECURSIVE paths(s, d, len) AS (
    SELECT src, dst, w FROM links WHERE dst > src
    UNION
    SELECT s, dst, w + len FROM paths, links WHERE src = d AND dst > src)
SELECT s, d, MAX(len) FROM paths GROUP BY s, d"""


def _links(rows: list[Link]) -> pa.Table:
    columns = list(zip(*rows, strict=True)) if rows else [(), (), ()]
    return pa.table([pa.array(c, pa.int64()) for c in columns], schema=SCHEMA)


def _members(sql: str) -> Members:
    query = split_recursive(sql)
    assert query is not None
    return compile_members(query, {"links": SCHEMA})


def least_costs(links: list[Link]) -> dict[tuple[int, int], int | None]:
    """Per connected pair (walks of one link or more), its least cost over walks with no NULL
    cost, else None."""
    nodes = sorted({n for s, d, _ in links for n in (s, d)})
    cost = {(a, b): math.inf for a in nodes for b in nodes}
    linked = {(s, d) for s, d, _ in links}
    for s, d, w in links:
        if w is not None:
            cost[(s, d)] = min(cost[(s, d)], w)
    for k, a, b in itertools.product(nodes, nodes, nodes):
        cost[(a, b)] = min(cost[(a, b)], cost[(a, k)] + cost[(k, b)])
        if (a, k) in linked and (k, b) in linked:
            linked.add((a, b))
    return {pair: None if cost[pair] == math.inf else int(cost[pair]) for pair in linked}


def _longest(links: list[Link]) -> dict[tuple[int, int], int | None]:
    """Per pair connected by links that go up, its greatest cost over paths with no NULL
    cost, else None (every path enumerated: the graph is a DAG of at most six nodes)."""
    up = [(s, d, w) for s, d, w in links if d > s]
    costs: dict[tuple[int, int], list[int | None]] = {}
    paths = [((s, d), w) for s, d, w in up]
    while paths:
        for pair, cost in paths:
            costs.setdefault(pair, []).append(cost)
        paths = [
            ((a, d), None if cost is None or w is None else cost + w)
            for (a, b), cost in paths
            for s, d, w in up
            if s == b
        ]
    return {pair: max((c for c in found if c is not None), default=None) for pair, found in costs.items()}


def _bests(selection: AggregateSelection, rows: list | set) -> dict[tuple[object, ...], object]:
    return {selection.group(row): row[selection.cost] for row in rows}


def _engine(view: RecursiveView) -> AbsorptionView:
    assert isinstance(view.engine, AbsorptionView)
    return view.engine


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (LEAST_COST, ("min", 2)),
        (LONGEST, ("max", 2)),
        # Hop-bounded (an upper bound on the cost column is kept by a better cost).
        (
            "WITH RECURSIVE h(node, n) AS (SELECT dst, 1 FROM links WHERE src = 0 UNION ALL "
            "SELECT l.dst, h.n + 1 FROM h JOIN links l ON l.src = h.node WHERE h.n < 3) "
            "SELECT node, MIN(n) AS n FROM h WHERE node <> 0 GROUP BY node",
            ("min", 1),
        ),
        # One pair's cost, no GROUP BY.
        (
            LEAST_COST.split("SELECT s, d")[0] + "SELECT MIN(cost) FROM paths WHERE s = 1 AND d = 3",
            ("min", 2),
        ),
    ],
)
def test_least_and_greatest_cost_recursions_are_recognised(sql: str, expected: tuple[str, int]) -> None:
    query = split_recursive(sql)
    assert query is not None
    selection = find_selection(query, EDGES)
    assert selection is not None and (selection.kind, selection.cost) == expected


NOT_SELECTED = {
    "a lower bound on the cost": LEAST_COST.replace("ON l.src = p.d", "ON l.src = p.d WHERE p.cost > 2"),
    "a cost multiplied": LEAST_COST.replace("p.cost + l.w", "p.cost * l.w"),
    "a group read from the cost": LEAST_COST.replace("p.s, l.dst", "p.cost, l.dst"),
    "COUNT(*) beside MIN": LEAST_COST.replace("MIN(cost) AS cost", "MIN(cost) AS cost, COUNT(*) AS n"),
    "the cost in WHERE": LEAST_COST.replace("GROUP BY", "WHERE cost < 5 GROUP BY"),
    "MIN and MAX of the cost": LEAST_COST.replace("MIN(cost) AS cost", "MIN(cost) AS lo, MAX(cost) AS hi"),
    "a window over the rows": LEAST_COST.replace(
        "MIN(cost) AS cost FROM paths GROUP BY s, d ORDER BY cost",
        "MIN(cost) OVER (PARTITION BY s) FROM paths",
    ),
    "the CTE joined": LEAST_COST.replace("FROM paths GROUP BY", "FROM paths JOIN links ON src = s GROUP BY"),
    "a row per derivation": LEAST_COST.replace(
        "SELECT s, d, MIN(cost) AS cost FROM paths GROUP BY s, d ORDER BY cost", "SELECT * FROM paths"
    ),
}


@pytest.mark.parametrize("what", sorted(NOT_SELECTED))
def test_recursions_where_pruning_would_change_the_answer_are_evaluated_without_it(what: str) -> None:
    query = split_recursive(NOT_SELECTED[what])
    assert query is not None
    assert find_selection(query, EDGES) is None


LINK = st.tuples(
    st.integers(0, 5), st.integers(0, 5), st.one_of(st.integers(0, 4), st.integers(0, 4), st.none())
)
BATCH = st.tuples(st.lists(LINK, max_size=3), st.lists(st.integers(0, 20), max_size=3))


@settings(max_examples=60)
@example(  # a delete takes a group's best; a row it kept, not one derived again, is the next best
    case=(LEAST_COST, least_costs),
    start=[(0, 0, None)] * 4 + [(0, 0, 0), (0, 1, 0)],
    batches=[([(0, 1, None), (0, 1, 1)], [0]), ([], [4])],
)
@given(
    case=st.sampled_from([(LEAST_COST, least_costs), (LONGEST, _longest)]),
    start=st.lists(LINK, max_size=10),
    batches=st.lists(BATCH, min_size=1, max_size=4),
)
def test_maintained_best_rows_equal_shortest_paths_after_every_batch(
    case: tuple, start: list[Link], batches: list
) -> None:
    sql, truth = case
    members = _members(sql)
    selection = members.rule.selection
    assert selection is not None
    view, dred = RecursiveView(members), RecursiveView(members, "dred")
    for each in (view, dred):
        each.insert({"links": _links(start)})
    links = list(start)
    for added, deleted in batches:
        gone = [links[i] for i in sorted(set(deleted)) if i < len(links)]
        for link in gone:
            links.remove(link)
        for each in (view, dred):
            each.delete({"links": _links(gone)})
            each.insert({"links": _links(added)})
        links += added
        expected = truth(links)
        engine = _engine(view)
        assert _bests(selection, engine.best_rows()) == expected
        assert _bests(selection, dred.engine.best_rows()) == expected
        fresh = RecursiveView(members)
        fresh.insert({"links": _links(links)})
        assert _bests(selection, _engine(fresh).best_rows()) == expected
        seeds = [s for s in members.seeds_of(_links(links)) if s is not None]
        edges = [e for e in members.edges_of(_links(links)) if e is not None]
        assert _bests(selection, fixpoint(members.rule, seeds, edges)) == expected
        # The sketch's safety: the links in the best rows' formulas give the same best costs.
        kept = {k for row in engine.best_rows() for k in engine.formulas.keys(engine.rows[row])}
        assert truth([row for _, row, _ in kept]) == expected  # type: ignore[misc]
        # A view restored from its stored state answers the next batch as this one does.
        restored = restored_view(members, through_ipc(view_state(view, {"links": SCHEMA})))
        assert _bests(selection, _engine(restored).best_rows()) == expected


def test_a_delete_of_the_best_path_releases_the_next_best_without_rederiving_the_rest() -> None:
    # 0 -> 1 costs 1 directly or 5 through 2; 1 -> 3 costs 1. The cycle 1 -> 0 never ends the
    # query as written (its costs grow around it); with aggregate selection it ends.
    links: list[Link] = [(0, 1, 1), (0, 2, 2), (2, 1, 3), (1, 3, 1), (1, 0, 1)]
    members = _members(LEAST_COST)
    view = RecursiveView(members)
    view.insert({"links": _links(links)})
    engine = _engine(view)
    selection = members.rule.selection
    assert selection is not None
    assert _bests(selection, engine.best_rows()) == least_costs(links)
    change = view.delete({"links": _links([(0, 1, 1)])})
    assert _bests(selection, engine.best_rows())[(0, 1)] == 5
    assert _bests(selection, engine.best_rows())[(0, 3)] == 6
    assert (0, 1, 1) in change.removed and (0, 1, 5) not in change.removed
    assert _bests(selection, engine.best_rows()) == least_costs(links[1:])
    # The cycle's link goes: the pairs through it leave, the others keep their rows.
    change = view.delete({"links": _links([(1, 0, 1)])})
    assert _bests(selection, engine.best_rows()) == least_costs(links[1:4])
    assert {row[:2] for row in change.removed} >= {(1, 0), (1, 2), (0, 0)}
    assert not change.added


def test_without_a_selection_the_same_cycle_ends_at_the_derivation_limit() -> None:
    sql = LEAST_COST.replace("MIN(cost) AS cost", "MIN(cost) AS cost, COUNT(*) AS walks")
    query = split_recursive(sql)
    assert query is not None
    members = compile_members(query, {"links": SCHEMA}, limit=2_000)
    assert members.rule.selection is None
    with pytest.raises(RecursionLimitError):
        RecursiveView(members).insert({"links": _links([(0, 1, 1), (1, 0, 1)])})
