"""The layout advisor's choice (pure): fewest files read by the reports, weighted by their
runs, among the layouts under which no report reads more than now."""

from __future__ import annotations

import numpy as np

from sketch_core.layout.advisor import ReportSketch, advise, candidate_layouts
from sketch_core.layout.simulation import Layout, SketchOnSample, UnitsRead

ROWS, FILES = 40_000, 100


def _table(seed: int = 5) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"customer": rng.integers(0, 1000, ROWS), "day": rng.integers(0, 1000, ROWS)}


def _report(name: str, runs: float, column: str, ranks: dict[str, np.ndarray], kept: range) -> ReportSketch:
    return ReportSketch(name, runs, SketchOnSample(column, ranks[column], 1000, frozenset(kept)))


def _customer_and_day(ranks: dict[str, np.ndarray], runs_a: float, runs_b: float) -> list[ReportSketch]:
    """Report a with a sketch on ``customer``, b on ``day``, each keeping 5 of 1,000 fragments."""
    return [
        _report("a", runs_a, "customer", ranks, range(10, 15)),
        _report("b", runs_b, "day", ranks, range(500, 505)),
    ]


def _all_files(*names: str) -> dict[str, UnitsRead]:
    return {n: UnitsRead(FILES, FILES, FILES * 4, FILES * 4) for n in names}


def test_the_most_run_report_s_attribute_is_sorted_on_when_no_report_loses() -> None:
    ranks = _table()
    reports = _customer_and_day(ranks, 10, 1)
    advice = advise("t", reports, ranks, _all_files("a", "b"), FILES, 4)
    assert advice.recommended is not None, advice.reason
    assert advice.recommended.layout == Layout("sort", ("customer",))
    assert advice.recommended.reads["a"].files <= 2
    assert advice.recommended.weighted_share < 0.2 < advice.current.weighted_share
    by_layout = {str(e.layout): e for e in advice.candidates}
    assert set(by_layout) == {"sort(customer)", "sort(day)", "zorder(customer, day)"}
    zorder = by_layout["zorder(customer, day)"].reads
    assert zorder["a"].files < FILES and zorder["b"].files < FILES


def test_two_equally_run_reports_get_a_zorder_that_serves_both() -> None:
    ranks = _table()
    reports = _customer_and_day(ranks, 5, 5)
    advice = advise("t", reports, ranks, _all_files("a", "b"), FILES, 4)
    assert advice.recommended is not None and advice.recommended.layout == Layout(
        "zorder", ("customer", "day")
    )


def test_no_layout_that_makes_a_given_report_read_more_is_recommended() -> None:
    ranks = _table()
    reports = _customer_and_day(ranks, 10, 1)
    # Today the table is sorted by day: b reads 1 file; every candidate costs b more files
    # except sort(day) itself, which changes nothing.
    current = {"a": UnitsRead(FILES, FILES, 400, 400), "b": UnitsRead(1, FILES, 1, 400)}
    advice = advise("t", reports, ranks, current, FILES, 4)
    assert advice.recommended is None
    assert "within 10%" in advice.reason or "read more files" in advice.reason


def test_a_table_already_laid_out_for_its_reports_is_left_alone() -> None:
    ranks = _table()
    reports = [_report("a", 3, "customer", ranks, range(10, 15))]
    advice = advise("t", reports, ranks, {"a": UnitsRead(1, FILES, 2, 400)}, FILES, 4)
    assert advice.recommended is None, advice.reason
    assert advise("t", [], ranks, {}, FILES, 4).reason.startswith("no report")


def test_candidates_are_sorts_then_zorders_most_run_first() -> None:
    ranks = {c: np.arange(10) for c in "abc"}
    reports = [
        _report("r1", 1, "c", ranks, range(1)),
        _report("r2", 5, "a", ranks, range(1)),
        _report("r3", 2, "b", ranks, range(1)),
    ]
    assert [str(layout) for layout in candidate_layouts(reports)] == [
        "sort(a)",
        "sort(b)",
        "sort(c)",
        "zorder(a, b)",
        "zorder(a, b, c)",
    ]


def test_the_table_s_own_write_order_is_advised_again_only_beyond_where_its_files_end() -> None:
    """Sorted by customer already, report a reads 3 files where the simulation's equal cuts
    read 2: a rewrite in the same order would only move the boundaries. Once appends have
    scattered the rows (a reads 40), the same rewrite is worth it."""
    ranks = _table()
    reports = [_report("a", 3, "customer", ranks, range(10, 11))]
    simulated = advise("t", reports, ranks, {"a": UnitsRead(FILES, FILES, 400, 400)}, FILES, 4)
    assert simulated.recommended is not None and simulated.recommended.reads["a"].files == 2
    now = {"a": UnitsRead(3, FILES, 3, 400)}
    assert advise("t", reports, ranks, now, FILES, 4).recommended is not None, "no order declared"
    kept = advise("t", reports, ranks, now, FILES, 4, write_order=("customer",))
    assert kept.recommended is None and "only move" in kept.reason, kept.reason
    scattered = {"a": UnitsRead(40, FILES, 40, 400)}
    again = advise("t", reports, ranks, scattered, FILES, 4, write_order=("customer",))
    assert again.recommended is not None and again.recommended.layout == Layout("sort", ("customer",))
    other = advise("t", reports, ranks, now, FILES, 4, write_order=("day",))
    assert other.recommended is not None, "another order declared: simulated as before"
