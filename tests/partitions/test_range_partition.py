"""Range partitions (pure): lookup, merging, predicates, storage; checked against brute force."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from sketch_core.partitions import RangePartition
from sketch_core.partitions.range_partition import MAX_TREE_INTERVALS, PartitionError

P = RangePartition("t.r", "a", (10, 20, 30))  # fragments: <10, [10,20), [20,30), >=30, NULL


def brute_force_fragment(cuts: tuple[int, ...], value: int | None) -> int:
    if value is None:
        return len(cuts) + 1
    return sum(1 for c in cuts if c <= value)


def test_lookup_covers_the_whole_domain() -> None:
    assert [P.fragment_of(v) for v in (-1_000, 9, 10, 19, 20, 29, 30, 10**9)] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert P.fragment_of(None) == P.null_fragment == 4
    assert P.fragment_count == 4


@settings(max_examples=200, deadline=None)
@given(
    cuts=st.lists(st.integers(-1000, 1000), min_size=0, max_size=30, unique=True).map(
        lambda c: tuple(sorted(c))
    ),
    values=st.lists(st.one_of(st.none(), st.integers(-2000, 2000)), max_size=50),
)
def test_lookup_and_predicates_agree_with_brute_force(
    cuts: tuple[int, ...], values: list[int | None]
) -> None:
    partition = RangePartition("t.r", "a", cuts)
    expected = [brute_force_fragment(cuts, v) for v in values]
    assert [partition.fragment_of(v) for v in values] == expected
    non_null = [v for v in values if v is not None]
    assert list(partition.fragments_of(np.array(non_null, dtype=np.int64))) == [
        e for e in expected if e <= len(cuts)
    ]
    # The rendered predicate of any sketch selects exactly the values of its fragments.
    sketch = set(expected[::2])
    predicate = partition.predicate(sketch)
    for value, fragment in zip(values, expected, strict=True):
        assert bool(evaluate(predicate, value)) is (fragment in sketch)


def evaluate(node: exp.Expr, a: int | None) -> bool | None:
    """SQL three-valued evaluation of the predicate shapes the partition renders."""
    if isinstance(node, exp.Paren):
        return evaluate(node.this, a)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.If):  # a NULL condition takes the false branch, as in Spark
        branch = node.args["true"] if evaluate(node.this, a) else node.args["false"]
        return evaluate(branch, a)
    if isinstance(node, exp.Is):
        return a is None
    if isinstance(node, exp.Not):
        inner = evaluate(node.this, a)
        return None if inner is None else not inner
    if isinstance(node, exp.And | exp.Or):
        left, right = evaluate(node.left, a), evaluate(node.right, a)
        if isinstance(node, exp.And):
            return False if False in (left, right) else None if None in (left, right) else True
        return True if True in (left, right) else None if None in (left, right) else False
    if a is None:
        return None
    bound = node.expression.to_py()
    return a >= bound if isinstance(node, exp.GTE) else a < bound


@settings(max_examples=200, deadline=None)
@given(
    sketch=st.sets(st.integers(0, 40), max_size=25),
    limit=st.integers(1, 8),
)
def test_coarsened_intervals_are_the_cheapest_superset_and_the_predicate_stays_exact(
    sketch: set[int], limit: int
) -> None:
    partition = RangePartition("t.r", "a", tuple(range(10, 410, 10)))  # 41 fragments
    exact = partition.intervals(sketch)
    coarse = partition.intervals(sketch, max_intervals=limit)
    covered = {f for i in coarse for f in range(i.first, i.last + 1)}
    assert len(coarse) <= limit
    assert covered >= sketch  # still a sound filter
    # Each closed gap adds its own fragments, so the cheapest choice closes the narrowest ones.
    gaps = [exact[i + 1].first - exact[i].last - 1 for i in range(len(exact) - 1)]
    to_close = max(0, len(exact) - limit)
    cheapest = sum(sorted(gaps)[:to_close])
    assert len(covered) - len(sketch) == cheapest
    # The coarse ranges are pushed down; the predicate with them still selects the sketch exactly.
    predicate = partition.predicate(sketch | {partition.null_fragment}, max_intervals=limit)
    for value in [None, *range(-5, 420, 5)]:
        assert bool(evaluate(predicate, value)) is (partition.fragment_of(value) in sketch | {41})
    assert bool(evaluate(partition.predicate(sketch, max_intervals=limit), None)) is False


def test_a_sketch_of_very_many_ranges_gets_a_bounded_superset_condition() -> None:
    partition = RangePartition("t.r", "a", tuple(range(10, 10_000, 10)))  # 1,000 fragments
    sketch = set(range(0, 1000, 2))  # 500 separate ranges
    predicate = partition.predicate(sketch, max_intervals=4)
    assert len(list(predicate.find_all(exp.If))) < 2 * MAX_TREE_INTERVALS + 1
    selected = {partition.fragment_of(v) for v in range(-5, 10_010, 5) if evaluate(predicate, v)}
    assert selected >= sketch and len(selected) < 1000


def test_predicate_share_counts_the_fragments_the_condition_lets_through() -> None:
    partition = RangePartition("t.r", "a", tuple(range(10, 10_000, 10)))  # 1,000 fragments
    assert partition.predicate_share(range(100)) == 0.1
    assert partition.predicate_share([1, 3, 5], max_intervals=4) == 0.003  # exact: a tree of 3
    many = set(range(0, 1000, 2))  # 500 ranges: the tree tests a coarsened superset
    share = partition.predicate_share(many, max_intervals=4)
    selected = {partition.fragment_of(v) for v in range(-5, 10_010, 5)}
    predicate = partition.predicate(many, max_intervals=4)
    kept = {f for f in selected if evaluate(predicate, partition.cuts[f - 1] if f else -5)}
    assert 0.5 < share < 1 and len(kept) == round(share * 1000)


def test_adjacent_fragments_merge_into_one_interval() -> None:
    merged = P.intervals([0, 1, 3])
    assert [(i.first, i.last, i.low, i.high) for i in merged] == [(0, 1, None, 20), (3, 3, 30, None)]


def test_predicate_sql() -> None:
    assert P.predicate_sql([1, 2]) == "a >= 10 AND a < 30"
    assert P.predicate_sql([0, 3]) == "a < 10 OR a >= 30"
    assert P.predicate_sql([4]) == "a IS NULL"
    assert P.predicate_sql([0, 1, 2, 3]) == "NOT a IS NULL"
    assert P.predicate_sql([]) == "FALSE"
    assert P.predicate_sql([2], column="l.a") == "l.a >= 20 AND l.a < 30"


def test_dates_strings_and_decimals_render_as_typed_literals() -> None:
    dates = RangePartition("t.r", "d", (dt.date(1995, 1, 1),))
    assert dates.predicate_sql([1]) == "d >= CAST('1995-01-01' AS DATE)"
    names = RangePartition("t.r", "s", ("it's",))
    assert names.predicate_sql([0]) == "s < 'it\\'s'"
    money = RangePartition("t.r", "m", (Decimal("1.50"),))
    assert money.fragment_of(Decimal("1.49")) == 0 and money.predicate_sql([1]) == "m >= 1.50"


@pytest.mark.parametrize(
    "cuts",
    [
        (1, 2, 3),
        (1.5, 2.5),
        (Decimal("1.1"),),
        (dt.date(2020, 1, 1),),
        (dt.datetime(2020, 1, 1, 12),),
        ("a", "b"),
        (),
    ],
)
def test_json_round_trip(cuts: tuple[object, ...]) -> None:
    partition = RangePartition("t.r", "a", cuts)
    assert RangePartition.from_json("t.r", "a", partition.to_json()) == partition


def test_construction_from_values_and_quantiles() -> None:
    few = RangePartition.from_distinct_values("t.r", "a", [3, 1, None, 2, 3, 1])
    assert few.cuts == (2, 3) and few.fragment_count == 3
    assert [few.fragment_of(v) for v in (1, 2, 3)] == [0, 1, 2], "one fragment per distinct value"
    skewed = RangePartition.from_quantiles("t.r", "a", [5, 5, 5, 9])
    assert skewed.cuts == (5, 9)


@pytest.mark.parametrize(
    ("cuts", "message"),
    [
        ((3, 1), "strictly increasing"),
        ((1, 1), "strictly increasing"),
        ((1, "a"), "mix types"),
        ((None,), "NULL"),
    ],
)
def test_bad_cut_points_are_refused(cuts: tuple[object, ...], message: str) -> None:
    with pytest.raises(PartitionError, match=message):
        RangePartition("t.r", "a", cuts)


def test_unknown_fragment_ids_are_refused() -> None:
    with pytest.raises(PartitionError, match="outside"):
        P.intervals([7])


@settings(max_examples=50, deadline=None)
@given(
    cuts=st.lists(st.text(max_size=4), min_size=1, max_size=20, unique=True).map(lambda c: tuple(sorted(c))),
    values=st.lists(st.one_of(st.none(), st.text(max_size=5)), min_size=33, max_size=80),
)
def test_string_lookup_in_numpy_agrees_with_bisect(cuts: tuple[str, ...], values: list[str | None]) -> None:
    partition = RangePartition("t.r", "s", cuts)
    assert list(partition.fragments_of(values)) == [partition.fragment_of(v) for v in values]


def test_date_and_timestamp_lookup_in_numpy_agrees_with_bisect() -> None:
    days = RangePartition(
        "t.r", "d", tuple(dt.date(2020, 1, 1) + dt.timedelta(days=7 * i) for i in range(50))
    )
    values = [None if i % 11 == 0 else dt.date(2019, 12, 1) + dt.timedelta(days=i) for i in range(400)]
    expected = [days.fragment_of(v) for v in values]
    assert list(days.fragments_of(values)) == expected
    as_numpy = np.array([np.datetime64("NaT") if v is None else np.datetime64(v) for v in values])
    assert list(days.fragments_of(as_numpy)) == expected
    start = dt.datetime(2021, 5, 1, 12)
    moments = RangePartition("t.r", "t", tuple(start + dt.timedelta(hours=5 * i) for i in range(40)))
    stamps = [start + dt.timedelta(minutes=37 * i) for i in range(300)]
    assert list(moments.fragments_of(stamps)) == [moments.fragment_of(v) for v in stamps]


SOME_CHARACTERS = "ab é\x00\u00ff\U0001f600"  # NUL, two-byte, four-byte UTF-8


@settings(max_examples=200, deadline=None)
@given(
    cuts=st.lists(st.text(alphabet=SOME_CHARACTERS, max_size=4), min_size=1, max_size=12, unique=True),
    values=st.lists(st.one_of(st.none(), st.text(alphabet=SOME_CHARACTERS, max_size=5)), max_size=60),
    split=st.integers(min_value=0, max_value=60),
)
def test_string_fragments_found_in_arrow_match_the_binary_search(
    cuts: list[str], values: list[str | None], split: int
) -> None:
    partition = RangePartition.from_quantiles("t", "a", cuts)
    column = pa.chunked_array([pa.array(values[:split], pa.string()), pa.array(values[split:], pa.string())])
    found = partition.fragments_of_strings(column)
    assert found.tolist() == [partition.fragment_of(v) for v in values]


def test_aware_timestamps_fall_where_their_utc_instant_does() -> None:
    """Spark's TIMESTAMP is Iceberg's timestamptz: read through Arrow its values are aware
    datetimes, while the cuts (computed by Spark in its UTC session) are naive UTC ones."""

    partition = RangePartition("t", "ts", (dt.datetime(2024, 3, 2), dt.datetime(2024, 3, 4)))
    utc, plus_two = dt.UTC, dt.timezone(dt.timedelta(hours=2))
    values = [
        None,
        dt.datetime(2024, 3, 3, 1, tzinfo=plus_two),
        dt.datetime(2024, 3, 1, 23, tzinfo=utc),
        dt.datetime(2024, 3, 4, 1, tzinfo=plus_two),  # 23:00 UTC the day before the cut
    ]
    expected = [partition.null_fragment, 1, 0, 1]
    assert [partition.fragment_of(v) for v in values] == expected
    assert partition.fragments_of(values).tolist() == expected
    assert partition.fragments_of(values * 20).tolist() == expected * 20  # the vectorised search
