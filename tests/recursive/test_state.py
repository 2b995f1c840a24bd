"""A recursive view stored as tables and restored answers every later change as the stored view
would: same rows, and formulas that are the same functions of the same base tuples."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from sketch_core.recursive.absorption import AbsorptionView
from sketch_core.recursive.formulas import Formulas
from sketch_core.recursive.members import compile_members
from sketch_core.recursive.query import split_recursive
from sketch_core.recursive.state import decode_formulas, encode_formulas, restored_view, view_state
from sketch_core.recursive.view import RecursiveView
from tests.incremental.test_engine import through_ipc
from tests.recursive.test_members import FROM_ROOT, HOPS, LINK, REACH, SCHEMA, _links


def _formulas(view: RecursiveView) -> dict[object, tuple[frozenset[object], tuple[bool, ...]]]:
    """Per row its base tuples and its truth under fixed random subsets of all base tuples."""
    engine = view.engine
    assert isinstance(engine, AbsorptionView)
    keys = sorted({k for f in engine.rows.values() for k in engine.formulas.keys(f)}, key=repr)
    subsets = [
        {k for k in keys if random.Random(i * 7919 + hash(repr(k)) % 1000).random() < 0.6} for i in range(8)
    ]
    return {
        row: (
            frozenset(engine.formulas.keys(f)),
            tuple(engine.formulas.holds(f, s) for s in subsets),
        )
        for row, f in engine.rows.items()
    }


@given(
    sql=st.sampled_from([REACH, HOPS, FROM_ROOT]),
    start=st.lists(LINK, max_size=10),
    added=st.lists(LINK, max_size=4),
    deleted=st.integers(0, 4),
)
def test_a_restored_view_equals_the_stored_one_after_later_changes(
    sql: str, start: list, added: list, deleted: int
) -> None:
    split = split_recursive(sql)
    assert split is not None
    members = compile_members(split, {"links": SCHEMA})
    stored = RecursiveView(members)
    stored.insert({"links": _links(start)})
    restored = restored_view(members, through_ipc(view_state(stored, {"links": SCHEMA})))
    assert restored.rows == stored.rows and restored.copies == stored.copies
    assert _formulas(restored) == _formulas(stored)
    for view in (stored, restored):
        view.delete({"links": _links(start[:deleted])})
        view.insert({"links": _links(added)})
    assert restored.rows == stored.rows
    assert _formulas(restored) == _formulas(stored)


def test_formulas_with_complemented_edges_survive_encoding() -> None:
    # CUDD stores negations as complemented edges; every kind of them must come back.
    source = Formulas()
    a, b, c, d = (source.variable(k) for k in "abcd")
    roots = [a & ~b | c, ~a, (a & ~b) | (~a & b), ~(c | d) & b, source.true, source.false, a]
    table, references = encode_formulas(source, roots)
    target = Formulas()
    for key in "abcd":
        target.adopt(key, source.name_of(key) or "")
    decode = decode_formulas(target, table)
    for root, reference in zip(roots, references, strict=True):
        rebuilt = decode(reference)
        for present in (set(s) for s in ["", "a", "b", "ab", "c", "acd", "bd", "abcd"]):
            assert source.holds(root, present) == target.holds(rebuilt, present), (root, present)
