"""A top-k restored from its stored state without a key per entry (StoredEntries) behaves as
the one restored by reading every entry: the same entries in the same order, the same counts,
and the same changes emitted for every later batch, however the stored state was layered."""

from __future__ import annotations

import math
import random
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from sortedcontainers import SortedDict

from sketch_core.algebra.ir import Scan, SortKey, TopK
from sketch_core.incremental.annotated import FRAGMENTS, AnnotatedDelta
from sketch_core.incremental.state import restore_topk, topk_state
from sketch_core.incremental.stored_topk import StoredEntries
from sketch_core.incremental.topk import TopKOperator

SCHEMA = pa.schema([("n", pa.int64()), ("x", pa.float64()), ("s", pa.string()), ("d", pa.decimal128(10, 2))])
SCAN = Scan("t.facts", "f", ("n", "x", "s", "d"), ("n", "x", "s", "d"))
ORDERS = [
    (SortKey("n"),),
    (SortKey("x", descending=True), SortKey("s")),
    (SortKey("s", descending=True, nulls_first=True), SortKey("d", descending=True)),
    (SortKey("d", nulls_first=False), SortKey("n", descending=True)),
]


def random_row(rng: random.Random) -> tuple[Any, ...]:
    """Few distinct values, so that rows tie on the ORDER BY and repeat exactly."""
    return (
        rng.choice([None, -1, 0, 2, 3]),
        rng.choice([None, math.nan, -0.0, 1.5, 2.5]),
        rng.choice([None, "", "a", "b", "é"]),
        rng.choice([None, Decimal("1.10"), Decimal("-2.00"), Decimal("7.00")]),
    )


def batch(rng: random.Random, live: list[tuple[tuple[Any, ...], list[int]]], size: int) -> AnnotatedDelta:
    """Inserted rows, and deletions of rows inserted before (with their own annotations)."""
    changes: list[tuple[tuple[Any, ...], list[int], int]] = []
    for _ in range(size):
        if live and rng.random() < 0.4:
            row, ids = live.pop(rng.randrange(len(live)))
            changes.append((row, ids, -1))
        else:
            row, ids = random_row(rng), sorted(rng.sample(range(6), rng.randint(0, 2)))
            live.append((row, ids))
            changes.append((row, ids, 1))
    data = pa.table({n: [c[0][i] for c in changes] for i, n in enumerate(SCHEMA.names)}, SCHEMA)
    return AnnotatedDelta.build(
        data, [c[2] for c in changes], {"a": pa.array([c[1] for c in changes], FRAGMENTS)}
    )


def through_ipc(table: pa.Table) -> pa.Table:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return pa.ipc.open_file(sink.getvalue()).read_all()


def operator(order: tuple[SortKey, ...], limit: int) -> TopKOperator:
    return TopKOperator(TopK(SCAN, order, limit), SCHEMA, ["a"])


def entries(op: TopKOperator) -> str:
    """The operator's entries in order (as text: NaN is not equal to itself)."""
    return repr(list(op.rows.items()))


def emitted(delta: AnnotatedDelta) -> list[str]:
    return sorted(repr(row) for row in delta.table.to_pylist())


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("order", ORDERS, ids=lambda o: ",".join(repr(k) for k in o))
def test_a_searched_state_behaves_as_a_state_read_whole(order: tuple[SortKey, ...], seed: int) -> None:
    rng = random.Random(seed)
    limit = rng.choice([1, 3, 8])
    eager = operator(order, limit)
    live: list[tuple[tuple[Any, ...], list[int]]] = []
    eager.apply(batch(rng, live, 40))
    layers = [through_ipc(topk_state(eager))]
    eager.dirty.clear()
    searched = None
    for step in range(12):
        if step % 4 == 1:  # restart from the layers stored so far
            searched = operator(order, limit)
            restore_topk(searched, layers)
            assert isinstance(searched.rows, StoredEntries)
            assert len(searched.rows) == len(eager.rows)
            assert entries(searched) == entries(eager)
            for key, entry in eager.rows.items():
                assert repr(searched.rows.get(key)) == repr(entry)
        delta = batch(rng, live, rng.randint(1, 12))
        expected = eager.apply(delta)
        if searched is not None:
            assert emitted(searched.apply(delta)) == emitted(expected)
            assert len(searched.rows) == len(eager.rows)
            assert entries(searched) == entries(eager)
            assert repr(topk_state(searched, changes_only=True).to_pylist()) == repr(
                topk_state(eager, changes_only=True).to_pylist()
            )
            searched.dirty.clear()
        layers.append(through_ipc(topk_state(eager, changes_only=True)))
        eager.dirty.clear()
    assert searched is not None
    # A whole state written from the searched one is the same state, and it is now read whole.
    assert repr(topk_state(searched).to_pylist()) == repr(topk_state(eager).to_pylist())
    assert isinstance(searched.rows, SortedDict)


def test_an_entry_gone_and_back_and_a_missing_one() -> None:
    op = operator((SortKey("n"),), 2)
    rows = [(1, 1.0, "a", Decimal("1.00")), (2, 2.0, "b", None), (3, None, None, None)]
    data = pa.table({n: [r[i] for r in rows] for i, n in enumerate(SCHEMA.names)}, SCHEMA)
    op.apply(AnnotatedDelta.build(data, [1, 2, 1], {"a": pa.array([[1], [2], []], FRAGMENTS)}))
    searched = operator((SortKey("n"),), 2)
    restore_topk(searched, [through_ipc(topk_state(op))])
    stored = searched.rows
    assert isinstance(stored, StoredEntries) and len(stored) == 3
    keys = [key for key, _ in stored.items()]
    assert stored.pop(keys[1]) == (rows[1], 2) and len(stored) == 2
    assert stored.get(keys[1]) is None and stored.pop(keys[1]) is None and len(stored) == 2
    assert [key for key, _ in stored.items()] == [keys[0], keys[2]]
    stored[keys[1]] = (rows[1], 5)
    assert len(stored) == 3 and stored.get(keys[1]) == (rows[1], 5)
    absent = (((1, (0, 9)),), keys[0][1], ((1,),))
    assert stored.get(absent) is None and stored.get(absent, (rows[0], 0)) == (rows[0], 0)
    with pytest.raises(ValueError, match="pop it instead"):
        stored[keys[0]] = (rows[0], 0)


def test_top_m_and_states_without_a_count_are_read_whole() -> None:
    op = TopKOperator(TopK(SCAN, (SortKey("n"),), 1), SCHEMA, ["a"], keep=1)
    data = pa.table(
        {
            n: [r[i] for r in [(1, 1.0, "a", None), (2, 2.0, "b", None), (3, 3.0, "c", None)]]
            for i, n in enumerate(SCHEMA.names)
        },
        SCHEMA,
    )
    op.apply(AnnotatedDelta.build(data, [1, 1, 1], {"a": pa.array([[1], [2], [3]], FRAGMENTS)}))
    kept = TopKOperator(TopK(SCAN, (SortKey("n"),), 1), SCHEMA, ["a"], keep=1)
    restore_topk(kept, [through_ipc(topk_state(op))])
    assert isinstance(kept.rows, SortedDict)
    whole = operator((SortKey("n"),), 1)
    whole.apply(AnnotatedDelta.build(data, [1, 1, 1], {"a": pa.array([[1], [2], [3]], FRAGMENTS)}))
    uncounted = topk_state(whole).replace_schema_metadata({"partial": "0"})  # stored before the count
    again = operator((SortKey("n"),), 1)
    restore_topk(again, [through_ipc(uncounted)])
    assert isinstance(again.rows, SortedDict) and entries(again) == entries(whole)
