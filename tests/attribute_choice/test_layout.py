"""Expected files read by a sketch, from the files' bounds on its attribute (pure)."""

from __future__ import annotations

import datetime as dt

import pytest

from sketch_core.attribute_choice.layout import expected_files_read, reads_every_file
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
