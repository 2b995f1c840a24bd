"""Expected files read by a sketch, from the files' bounds on its attribute (pure)."""

from __future__ import annotations

import datetime as dt

import pytest

from sketch_core.attribute_choice.layout import (
    LayoutPick,
    expected_files_read,
    pick_by_layout,
    reads_every_file,
)
from sketch_core.tables.pinned import DataFileInfo

SORTED = ([0, 100, 200, 300], [99, 199, 299, 399])  # four files cut along the attribute
SCATTERED = ([0, 1, 0, 2], [398, 399, 397, 399])  # four files each holding the whole range


def test_a_sorted_layout_reads_fewer_files_than_a_scattered_one() -> None:
    sorted_read = expected_files_read(*SORTED, fragment_share=0.1, fragments=40)
    scattered_read = expected_files_read(*SCATTERED, fragment_share=0.1, fragments=40)
    # Sorted: each file spans 10 of the 40 fragments, and the sketch keeps 4 of them.
    assert sorted_read == pytest.approx(1 - 0.75**4)
    # Scattered: each file spans every fragment; any kept fragment means reading it.
    assert scattered_read == pytest.approx(1.0)
    assert expected_files_read(*SCATTERED, fragment_share=0.01, fragments=100) == pytest.approx(1.0)


def test_keeping_everything_or_nothing() -> None:
    assert expected_files_read(*SORTED, fragment_share=1.0, fragments=40) == pytest.approx(1.0, abs=1e-4)
    assert expected_files_read(*SORTED, fragment_share=0.0, fragments=40) == 0.0


def test_files_without_bounds_are_always_read() -> None:
    lows, highs = [0, None, 200, 300], [99, None, 299, 399]
    assert expected_files_read(lows, highs, fragment_share=0.0, fragments=40) == 0.25
    assert expected_files_read([], [], fragment_share=0.5, fragments=40) == 1.0


def test_dates_and_strings_compare_as_they_are() -> None:
    days = [dt.date(2024, m, 1) for m in (1, 4, 7, 10)]
    ends = [dt.date(2024, m, 28) for m in (3, 6, 9, 12)]
    assert expected_files_read(days, ends, 0.25, 4) == pytest.approx(0.25)
    assert expected_files_read(["a", "a"], ["z", "z"], 0.25, 4) == pytest.approx(1.0)
    # Bounds that do not compare give no layout: every file counts as read.
    assert expected_files_read([1, "a"], [2, "b"], 0.1, 4) == 1.0


def test_a_scattered_column_reads_every_file_however_little_is_kept() -> None:
    files = [
        DataFileInfo(f"f{i}", 100, 1000, {"key": lo, "note": s_lo}, {"key": hi, "note": s_hi})
        for i, (lo, hi, s_lo, s_hi) in enumerate(zip(*SORTED, *SCATTERED, strict=True))
    ]
    assert not reads_every_file(files, "key", 40)  # one kept fragment meets one file
    assert reads_every_file(files, "note", 40)
    assert reads_every_file(files, "unknown", 40)  # no bounds: every file is read


def _files(**columns: tuple[list[int], list[int]]) -> list[DataFileInfo]:
    count = len(next(iter(columns.values()))[0])
    return [
        DataFileInfo(
            f"f{i}",
            100,
            1000,
            {c: lows[i] for c, (lows, _) in columns.items()},
            {c: highs[i] for c, (_, highs) in columns.items()},
        )
        for i in range(count)
    ]


EIGHT_SORTED = ([i * 100 for i in range(8)], [i * 100 + 99 for i in range(8)])
EIGHT_SCATTERED = ([i for i in range(8)], [790 + i for i in range(8)])


def _pick(files, candidates, key=(), bounds=None):  # type: ignore[no-untyped-def]
    bounds = bounds or {}
    return pick_by_layout(files, candidates, key, lambda a: 80, bounds.get)


def test_the_layout_key_is_picked_where_the_plan_bounds_its_sketch() -> None:
    files = _files(key=EIGHT_SORTED, note=EIGHT_SCATTERED)
    pick = _pick(files, ["note", "key"], ("key",), {"key": 2})
    assert isinstance(pick, LayoutPick)
    assert pick.attribute == "key" and pick.fragments_at_most == 2
    # Each file spans 10 of the 80 fragments: two kept ones meet a file with 1 - (70/80)^2.
    assert pick.files_read == pytest.approx(1 - (70 / 80) ** 2)
    # Not bounded, and no other candidate is: still the one whose files can be skipped.
    unbounded = _pick(files, ["note", "key"])
    assert isinstance(unbounded, LayoutPick) and unbounded.attribute == "key"
    assert unbounded.files_read is None


def test_the_estimates_decide_where_the_layout_does_not_settle_it() -> None:
    files = _files(key=EIGHT_SORTED, note=EIGHT_SCATTERED)
    # A bounded rival (a report's group key on a table sorted by another column).
    assert "note's sketch keeps a few fragments" in _pick(files, ["key", "note"], ("key",), {"note": 3})
    # Every candidate reads every file, and none is bounded: sizes decide.
    scattered = _files(a=EIGHT_SCATTERED, b=EIGHT_SCATTERED)
    assert "the plan bounds none" in _pick(scattered, ["a", "b"])
    # ... or bounded to more than a hundredth of the fragments.
    assert "keeps up to" in _pick(scattered, ["a", "b"], bounds={"b": 2})
    # Files that overlap (appends since a sorted write).
    overlapping = _files(key=([i * 100 for i in range(8)], [i * 100 + 250 for i in range(8)]))
    assert "overlap" in _pick(overlapping, ["key"], ("key",), {"key": 1})
    # A bound too loose to skip a file: as if every candidate spanned the files.
    assert "keeps up to 100%" in _pick(files, ["key"], ("key",), {"key": 80})
    assert _pick(files, []) == "no candidate"


def test_among_disjoint_candidates_the_sort_key_wins_a_tie() -> None:
    files = _files(a=EIGHT_SORTED, key=EIGHT_SORTED)
    pick = _pick(files, ["a", "key"], ("key",))
    assert isinstance(pick, LayoutPick) and pick.attribute == "key"


def test_where_no_sketch_skips_a_file_the_smallest_bounded_one_is_taken() -> None:
    scattered = _files(a=EIGHT_SCATTERED, b=EIGHT_SCATTERED, c=EIGHT_SCATTERED)
    files = lambda a: 1000  # noqa: E731
    bounds = {"b": 10, "c": 5}.get
    pick = pick_by_layout(scattered, ["a", "b", "c"], (), files, bounds)
    assert isinstance(pick, LayoutPick)
    assert (pick.attribute, pick.fragments_at_most, pick.files_read) == ("c", 5, 1.0)
    # The layout key's bound meets every file (12 customers' files, 100 of 10,000 fragments).
    sorted_files = _files(key=EIGHT_SORTED, note=EIGHT_SCATTERED)
    pick = pick_by_layout(sorted_files, ["key", "note"], ("key",), lambda a: 10_000, {"key": 100}.get)
    assert isinstance(pick, LayoutPick) and pick.attribute == "key" and pick.files_read == 1.0
