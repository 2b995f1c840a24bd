"""The choice to use a sketch never timed with its query: from the bytes it lets the scan skip,
or rows it drops before a join."""

from __future__ import annotations

from sketch_core.costs.use import MIN_SKIPPED_SHARE, ScanFootprint, untimed_use_choice


def lineitem(files_read: int, *, joins: bool = False) -> ScanFootprint:
    """The docstring's example: 148 files of ~61 MB each."""
    size = 61_000_000
    return ScanFootprint("tpch.lineitem", 148, files_read, 148 * size, files_read * size, True, joins)


PART = ScanFootprint("tpch.part", 4, 4, 200_000_000, 200_000_000, sketched=False)


def test_a_sketch_that_skips_a_large_share_of_the_input_is_used() -> None:
    choice = untimed_use_choice([lineitem(89), PART])
    assert choice.action == "use"
    assert "skips 59 of 148 files of tpch.lineitem" in choice.reason and "39%" in choice.reason


def test_a_sketch_that_skips_little_is_not_used_and_says_why() -> None:
    choice = untimed_use_choice([lineitem(140), PART])
    assert choice.action == "skip"
    assert "skips 8 of 148 files" in choice.reason and "5% of the query's input bytes" in choice.reason
    assert f"{MIN_SKIPPED_SHARE:.0%}" in choice.reason


def test_the_unsketched_tables_count_in_the_share() -> None:
    # 20% of lineitem alone, but lineitem is a fifth of the input: 4% of it.
    small = ScanFootprint("t.f", 10, 8, 1_000, 800, True)
    big = ScanFootprint("t.d", 10, 10, 4_000, 4_000, False)
    assert untimed_use_choice([small]).action == "use"
    assert untimed_use_choice([small, big]).action == "skip"


def test_rows_dropped_before_a_join_pay_without_skipping_files() -> None:
    choice = untimed_use_choice([lineitem(148, joins=True), PART])
    assert choice.action == "use" and "drops rows of tpch.lineitem before a join" in choice.reason


def test_an_empty_input_skips_nothing() -> None:
    empty = ScanFootprint("t.e", 0, 0, 0, 0, True)
    assert untimed_use_choice([empty]).action == "skip"
