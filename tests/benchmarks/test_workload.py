"""The workload benchmark: its stream orders, its report, and its run guard (two runs never
share a warehouse: their garbage collections, with no retention time, would delete each
other's unpublished state)."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import pytest

import benchmarks.workload as workload
from benchmarks.workload import Cell, balanced_orders, schedule, service_orders, warehouse_lock


def test_a_second_run_on_the_same_warehouse_is_refused_until_the_first_ends(tmp_path: Path) -> None:
    with warehouse_lock(tmp_path):
        with pytest.raises(SystemExit, match="SKETCH_HOME"), warehouse_lock(tmp_path):
            pass
        with warehouse_lock(tmp_path / "other"):  # a directory of its own runs beside it
            pass
    with warehouse_lock(tmp_path):  # released with the first run
        pass


def test_the_stream_cycles_through_the_ratio() -> None:
    assert schedule("5U1Q", 8) == list("UUUUUQUU")
    assert schedule("1U5Q", 7) == list("UQQQQQU")


@pytest.mark.parametrize("sides", [2, 3, 4, 5])
def test_balanced_orders_put_each_strategy_in_each_place_and_after_each_other_equally(sides: int) -> None:
    orders = balanced_orders(sides)
    assert all(sorted(order) == list(range(sides)) for order in orders)
    places = Counter((strategy, place) for order in orders for place, strategy in enumerate(order))
    follows = Counter(pair for order in orders for pair in itertools.pairwise(order))
    assert set(places.values()) == {len(orders) // sides}
    assert len(places) == sides * sides
    assert len(follows) == sides * (sides - 1) and len(set(follows.values())) == 1


@pytest.mark.parametrize("ratio", ["1U1Q", "1U5Q", "5U1Q"])
def test_every_report_order_comes_equally_often_whatever_the_ratio(ratio: str) -> None:
    stream = schedule(ratio, 240)
    report_orders = Counter(
        tuple(order) for op, order in zip(stream, service_orders(stream, 4), strict=True) if op == "Q"
    )
    assert sorted(report_orders) == sorted(tuple(order) for order in balanced_orders(4))
    assert len(set(report_orders.values())) == 1


def _cells(delta: int, no_sketch: float, capture: float, incremental: float, auto: float) -> list[Cell]:
    times = {"no-sketch": no_sketch, "capture": capture, "incremental": incremental, "auto": auto}
    return [Cell("1U1Q", delta, s, 10, 5, 5, seconds, 1.0, {}, True, "abc") for s, seconds in times.items()]


def test_the_report_counts_clear_gains_apart_and_names_the_cells_auto_lost_to_no_sketch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workload, "RESULTS", tmp_path)
    cells = [
        *_cells(1, 100.0, 150.0, 80.0, 82.0),  # a clear gain (20%), auto beats no-sketch
        *_cells(20, 100.0, 150.0, 99.0, 101.0),  # a 1% gain (noise), auto 1% slower: named
        *_cells(200, 100.0, 150.0, 120.0, 130.0),  # no gain; auto 1.30x of the best: a miss
    ]
    text = workload.report(cells, 10, 10).read_text()
    assert "within 1.10x of the best in 2 of 3 complete cells" in text
    assert "sketches helped (capture or incremental faster than no-sketch) in 2" in text
    assert "auto beat no-sketch in 1 of those; by more than 3% (beyond the noise) in 1" in text
    assert "1U1Q delta 20 (auto +1.0% against no-sketch; the sketch's gain 1.0%)" in text
    assert "delta 200 (" not in text
