"""The workload benchmark's run guard: two runs never share a warehouse (their garbage
collections, with no retention time, would delete each other's unpublished state)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.workload import schedule, warehouse_lock


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
