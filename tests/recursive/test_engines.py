"""The recursive engines against each other and against evaluation from scratch.

Hypothesis draws small graphs (duplicate links, self-loops, cycles, disconnected parts) and a
sequence of inserted and deleted links; after every step the view maintained with absorption
provenance and the one maintained by DRed both equal a fresh fixpoint, and each row's formula
is its derivability: true under a set of links exactly when the row is derivable from them.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sketch_core.recursive.absorption import AbsorptionView
from sketch_core.recursive.dred import DRedView
from sketch_core.recursive.evaluate import fixpoint
from sketch_core.recursive.rule import FormulasTooLargeError, LinearRule, RecursionLimitError, Row, row_by_row

Links = dict[int, tuple[int, int, int]]  # base tuple id -> (src, dst, cost)


def _bounded_hops(r: Row, e: Row) -> Row | None:
    return (r[0], e[1], r[2] + 1) if r[2] < 3 else None


def _capped_cost(r: Row, e: Row) -> Row | None:
    return (r[0], e[1], r[2] + e[2]) if r[2] + e[2] <= 9 else None


# name: (rule, seed of a link, DRed's copied columns)
RULES: dict[str, tuple[LinearRule, Callable[[tuple[int, int, int]], Row], tuple[tuple[int, int], ...]]] = {
    "reachable": (
        LinearRule((1,), (0,), row_by_row(lambda r, e: (r[0], e[1]))),
        lambda link: link[:2],
        ((0, 0),),
    ),
    "hops_below_4": (
        LinearRule((1,), (0,), row_by_row(_bounded_hops)),
        lambda link: (link[0], link[1], 1),
        ((0, 0),),
    ),
    "cost_at_most_9": (LinearRule((1,), (0,), row_by_row(_capped_cost)), lambda link: link, ((0, 0),)),
}

LINK = st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(1, 4))
STEP = st.one_of(
    st.tuples(st.just("insert"), st.lists(LINK, min_size=1, max_size=4)),
    st.tuples(st.just("delete"), st.integers(1, 3)),  # how many links, drawn from those present
)


def _derived(links: Links, seed: Callable[[tuple[int, int, int]], Row]) -> tuple[list, list]:
    seeds = [(seed(link), frozenset({i})) for i, link in links.items()]
    edges = [(link, frozenset({i})) for i, link in links.items()]
    return seeds, edges


def _expected(rule: LinearRule, links: Links, seed: Callable[[tuple[int, int, int]], Row]) -> set[Row]:
    return fixpoint(rule, [seed(link) for link in links.values()], links.values())


@pytest.mark.parametrize("name", sorted(RULES))
@given(start=st.lists(LINK, max_size=8), steps=st.lists(STEP, min_size=1, max_size=5), draw=st.randoms())
def test_maintained_views_equal_a_fresh_fixpoint_after_every_step(
    name: str, start: list[tuple[int, int, int]], steps: list, draw: random.Random
) -> None:
    rule, seed, copied = RULES[name]
    links: Links = dict(enumerate(start))
    ids = itertools.count(len(start))
    absorbed, dred = AbsorptionView(rule), DRedView(rule, copied)
    for view in (absorbed, dred):
        view.insert(*_derived(links, seed))
    for kind, what in steps:
        before = _expected(rule, links, seed)
        if kind == "insert":
            added: Links = {next(ids): link for link in what}
            links.update(added)
            changes = [view.insert(*_derived(added, seed)) for view in (absorbed, dred)]
        else:
            gone = draw.sample(sorted(links), min(what, len(links)))
            for i in gone:
                del links[i]
            changes = [view.delete(gone) for view in (absorbed, dred)]
        expected = _expected(rule, links, seed)
        assert set(absorbed.rows) == expected == dred.rows
        for change in changes:
            assert (change.added, change.removed) == (expected - before, before - expected)
        # A formula is the row's derivability: check it under a few subsets of the links.
        for _ in range(3):
            present = {i for i in links if draw.random() < 0.6}
            derivable = _expected(rule, {i: links[i] for i in present}, seed)
            for row, formula in absorbed.rows.items():
                assert absorbed.formulas.holds(formula, present) == (row in derivable), (row, present)


def _figure_2() -> tuple[AbsorptionView, DRedView]:
    """The paper's network: p1 = A->B, p2 = B->C, p3 = C->A, p4 = C->B."""
    rule, seed, copied = RULES["reachable"]
    links: Links = {1: ("A", "B", 1), 2: ("B", "C", 1), 3: ("C", "A", 1), 4: ("C", "B", 1)}  # type: ignore[dict-item]
    views = AbsorptionView(rule), DRedView(rule, copied)
    for view in views:
        view.insert(*_derived(links, seed))
    return views


def test_a_delete_that_leaves_every_row_derivable_changes_nothing_and_derives_nothing() -> None:
    absorbed, dred = _figure_2()
    assert len(absorbed.rows) == 9  # every node reaches every node
    f = absorbed.formulas
    assert absorbed.rows[("C", "B")] == f.variable(4) | (f.variable(1) & f.variable(3))

    kept = absorbed.delete([4])
    assert (kept.added, kept.removed) == (set(), set())
    assert kept.work.derivations == 0 and kept.work.removed == 0
    assert absorbed.rows[("C", "B")] == f.variable(1) & f.variable(3)
    # DRed gets the same view by over-deleting all nine rows and deriving them again.
    redone = dred.delete([4])
    assert (redone.added, redone.removed) == (set(), set())
    assert redone.work.overdeleted == 9 and redone.work.rederived == 9


def test_a_delete_that_cuts_the_graph_removes_exactly_the_rows_left_without_a_derivation() -> None:
    absorbed, _ = _figure_2()
    cut = absorbed.delete([2])  # B->C: nothing reaches C or A any more, and A reaches only B
    assert cut.removed == {("A", "C"), ("A", "A"), ("B", "A"), ("B", "B"), ("B", "C"), ("C", "C")}
    assert set(absorbed.rows) == {("A", "B"), ("C", "A"), ("C", "B")}
    assert absorbed.support() == {1, 3, 4}


def test_a_recursion_that_grows_values_around_a_cycle_stops_at_its_limit_with_a_typed_error() -> None:
    rule = LinearRule((1,), (0,), row_by_row(lambda r, e: (r[0], e[1], r[2] + e[2])), limit=5_000)
    cycle = [((0, 1, 1), frozenset({1})), ((1, 0, 1), frozenset({2}))]
    for view in (AbsorptionView(rule), DRedView(rule)):
        with pytest.raises(RecursionLimitError, match="5,000 derivations") as info:
            view.insert(cycle, cycle)
        assert "WHERE hops < 20" in str(info.value)
    with pytest.raises(RecursionLimitError):
        fixpoint(rule, [r for r, _ in cycle], [r for r, _ in cycle])


def test_formulas_that_outgrow_their_node_limit_end_the_load_with_a_typed_error() -> None:
    rule, seed, _ = RULES["reachable"]
    links: Links = {
        i: (a, b, 1) for i, (a, b) in enumerate((a, b) for a in range(6) for b in range(6) if a != b)
    }
    view = AbsorptionView(rule, node_limit=200)
    with pytest.raises(FormulasTooLargeError, match="outgrew 200 BDD nodes") as info:
        view.insert(*_derived(links, seed))
    assert "run the query without a sketch" in str(info.value) and info.value.seconds is None
    assert AbsorptionView(rule).insert(*_derived(links, seed)).added == {
        (a, b) for a in range(6) for b in range(6)
    }


def test_formulas_that_take_too_long_for_one_change_end_it_with_a_typed_error() -> None:
    # Reachability over a dense random graph: its formulas grow exponentially with the width.
    rng = random.Random(3)
    links = {(rng.randrange(40), rng.randrange(40)) for _ in range(240)}
    rule = LinearRule((1,), (0,), row_by_row(lambda r, e: (r[0], e[1])))
    view = AbsorptionView(rule, seconds_limit=0.5)
    started = time.monotonic()
    with pytest.raises(FormulasTooLargeError, match=r"took more than 0.5 s for one change") as caught:
        view.insert(
            [(link, frozenset({link})) for link in links if link[0] < 3],
            [(link, frozenset({link})) for link in links],
        )
    assert caught.value.seconds == 0.5 and time.monotonic() - started < 30
