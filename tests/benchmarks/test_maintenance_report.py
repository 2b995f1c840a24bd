"""The maintenance benchmark's crossover: where a recapture becomes the faster way."""

from __future__ import annotations

from benchmarks.maintenance import Measurement, crossover


def cell(rows: int, incremental: float, full: float = 10.0) -> Measurement:
    return Measurement("tpch_q1", "insert", rows, incremental, full, init_s=0.1, cold_s=0.1)


def test_a_measured_loss_is_the_crossover() -> None:
    cells = [cell(1_000, 0.5), cell(100_000, 12.0), cell(10_000, 11.0)]
    assert crossover(cells, "tpch_q1") == "recapture faster from 10,000 delta rows (measured)"


def test_without_a_loss_the_incremental_line_is_extended_to_the_recapture() -> None:
    # 0.01 s + 1 s per 10,000 rows reaches a 10 s recapture at 99,900 rows.
    cells = [cell(n, 0.01 + n / 10_000) for n in (10, 100, 1_000, 10_000)]
    assert crossover(cells, "tpch_q1").startswith("about 99,900 delta rows, extended from sizes up to 10,000")


def test_flat_incremental_times_have_no_crossover_to_extend_to() -> None:
    cells = [cell(n, 0.02) for n in (10, 100, 1_000)]
    assert "no growth to extend" in crossover(cells, "tpch_q1")
    assert "every size measured" in crossover([cell(10, 0.02)], "tpch_q1")
