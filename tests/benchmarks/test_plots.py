"""The plots' data: drawn from the committed results, grouped as the plots show them."""

from __future__ import annotations

from benchmarks.plots import maintenance_series, workload_cells


def test_maintenance_points_are_grouped_by_query_and_groups_and_ordered_by_delta() -> None:
    rows = [
        {"query": "having", "groups": 50, "delta_rows": 100, "incremental_s": 0.2, "full_s": 1.0},
        {"query": "having", "groups": 50, "delta_rows": 10, "incremental_s": 0.1, "full_s": 1.1},
        {"query": "minmax", "groups": 5, "delta_rows": 10, "incremental_s": 0.3, "full_s": 2.0},
    ]
    series = maintenance_series(rows)
    assert series["having"][50] == [(10, 0.1, 1.1), (100, 0.2, 1.0)]
    assert series["minmax"] == {5: [(10, 0.3, 2.0)]}


def test_each_workload_cell_compares_auto_with_the_cheapest_other_strategy() -> None:
    def row(strategy: str, reports: float, updates: float) -> dict[str, object]:
        return {"ratio": "1U1Q", "delta": 20, "strategy": strategy, "report_s": reports, "update_s": updates}

    rows = [row("auto", 10, 5), row("capture", 20, 5), row("incremental", 9, 5), row("no-sketch", 30, 0)]
    ((label, auto, best, best_total),) = workload_cells([*rows, {**row("capture", 1, 1), "delta": 200}])
    assert (label, auto, best, best_total) == ("1U1Q\nΔ20", 15, "incremental", 14)
