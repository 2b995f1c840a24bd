"""Partial aggregates of a batch, against sums worked out by hand."""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pyarrow as pa

from sketch_core.incremental.annotated import FRAGMENTS
from sketch_core.incremental.partials import ArgumentSpec, combined, compute_partials


def by_group(table: pa.Table) -> dict[object, dict[str, object]]:
    rows = table.to_pylist()
    return {row.pop("__g0"): row for row in rows}


def test_sums_counts_and_fragments_net_out_per_group() -> None:
    keys = [pa.array(["x", "x", "y", "x", None])]
    price = pa.array(
        [Decimal("1.50"), Decimal("2.25"), None, Decimal("1.50"), Decimal("4.00")], pa.decimal128(12, 2)
    )
    weight = pa.array([0.5, math.nan, math.inf, 2.0, None])
    multiplicity = pa.array([3, 1, 1, -1, 2])
    fragments = pa.array([[1], [1, 2], [], [1], None], FRAGMENTS)
    specs = [ArgumentSpec(0, False, False), ArgumentSpec(1, False, False)]
    partials = compute_partials(keys, {0: price, 1: weight}, specs, multiplicity, {"__ps_1": fragments})

    groups = by_group(partials.groups)
    assert groups["x"]["__rows"] == 3 and groups["y"]["__rows"] == 1 and groups[None]["__rows"] == 2
    assert groups["x"]["nn0"] == 3 and groups["x"]["sum0"] == Decimal("1.50") * 3 + Decimal("2.25") - Decimal(
        "1.50"
    )
    assert groups["y"]["nn0"] == 0 and groups["y"]["sum0"] == 0
    assert groups["x"]["sum1"] == 0.5 * 3 - 2.0 and groups["x"]["nan1"] == 1 and groups["x"]["nn1"] == 3
    assert groups["y"]["pinf1"] == 1 and groups["y"]["sum1"] == 0 and groups[None]["nn1"] == 0

    counters = {(r["__g0"], r["__fragment"]): r["__n"] for r in partials.counters["__ps_1"].to_pylist()}
    assert counters == {("x", 1): 3 + 1 - 1, ("x", 2): 1}


def test_min_max_values_are_counted_per_value_and_fragment() -> None:
    keys = [pa.array([1, 1, 1, 2])]
    value = pa.array([5, 7, 5, None])
    multiplicity = pa.array([1, 1, -1, 1])
    fragments = pa.array([[10], [11], [10], [12]], FRAGMENTS)
    specs = [ArgumentSpec(0, True, True)]
    partials = compute_partials(keys, {0: value}, specs, multiplicity, {"a": fragments})

    values = {(r["__g0"], r["__value"]): r["__n"] for r in partials.values[0].to_pylist()}
    assert values == {(1, 5): 0, (1, 7): 1}
    at_value = {
        (r["__g0"], r["__value"], r["__fragment"]): r["__n"] for r in partials.at_value[(0, "a")].to_pylist()
    }
    assert at_value == {(1, 5, 10): 0, (1, 7, 11): 1}
    assert by_group(partials.groups)[2]["__rows"] == 1


def test_a_global_aggregate_has_one_group() -> None:
    partials = compute_partials(
        [], {0: pa.array([1, 2])}, [ArgumentSpec(0, False, False)], pa.array([1, 1]), {}
    )
    assert partials.groups.to_pylist() == [{"__rows": 2, "nn0": 2, "sum0": 3}]


def test_partials_of_a_difference_are_the_difference_of_partials() -> None:
    """combined([(A, +1), (B, -1)]) equals the partials of A's rows and B's rows negated."""
    rng = np.random.default_rng(3)

    def batch(n: int) -> tuple[list[pa.Array], dict[int, pa.Array], pa.Array, dict[str, pa.Array]]:
        keys = [pa.array(rng.choice(["p", "q", "r"], n).tolist())]
        price = pa.array(
            [Decimal(int(c)).scaleb(-2) for c in rng.integers(-999, 999, n)], pa.decimal128(12, 2)
        )
        low = pa.array(rng.integers(0, 5, n))
        fragments = pa.array([[int(f)] for f in rng.integers(0, 4, n)], FRAGMENTS)
        return keys, {0: price, 1: low}, pa.array(np.ones(n, np.int64)), {"__ps_1": fragments}

    specs = [ArgumentSpec(0, False, False), ArgumentSpec(1, True, True)]
    a, b = batch(40), batch(30)
    direct = compute_partials(
        [pa.concat_arrays([a[0][0], b[0][0]])],
        {j: pa.concat_arrays([a[1][j], b[1][j]]) for j in (0, 1)},
        specs,
        pa.concat_arrays([a[2], pa.array(-b[2].to_numpy())]),
        {"__ps_1": pa.concat_arrays([a[3]["__ps_1"], b[3]["__ps_1"]])},
    )
    difference = combined(
        [(compute_partials(*a[:2], specs, *a[2:]), 1), (compute_partials(*b[:2], specs, *b[2:]), -1)]
    )

    def rows(table: pa.Table) -> list[tuple[object, ...]]:
        return sorted(tuple(r.values()) for r in table.to_pylist())

    assert by_group(difference.groups) == by_group(direct.groups)
    assert rows(difference.values[1]) == rows(direct.values[1])
    assert rows(difference.counters["__ps_1"]) == rows(direct.counters["__ps_1"])
    assert rows(difference.at_value[(1, "__ps_1")]) == rows(direct.at_value[(1, "__ps_1")])


def test_sums_without_a_plan_equal_the_plans() -> None:
    """A global aggregate's sums and one integer key's int64 sums are taken without an Arrow
    plan: the same rows, types and NULLs as the hash aggregation's, over random batches."""
    from sketch_core.incremental.partials import _sum_by

    rng = np.random.default_rng(3)
    for _ in range(30):
        n = int(rng.integers(1, 400))
        table = pa.table(
            {
                "k": pa.array(rng.integers(-5, 40, n), pa.int32()),
                "a": pa.array(rng.integers(-3, 4, n), pa.int64()),
                "b": pa.array(rng.integers(-1, 2, n), pa.int64()),
                "d": pa.array(
                    [Decimal(int(v)) / 100 for v in rng.integers(-999, 999, n)], pa.decimal128(15, 2)
                ),
                "nulls": pa.array([None] * n, pa.int64()),
            }
        )
        for keys, sums in (([], ["a", "d", "nulls"]), (["k"], ["a", "b"])):
            planned = table.group_by(keys, use_threads=False).aggregate([(c, "sum") for c in sums])
            planned = planned.rename_columns([c.removesuffix("_sum") for c in planned.column_names])
            fast = _sum_by(table, keys, sums)
            assert fast.schema == planned.schema
            if keys:
                fast, planned = fast.sort_by(keys[0]), planned.sort_by(keys[0])
            assert fast.to_pylist() == planned.to_pylist()
