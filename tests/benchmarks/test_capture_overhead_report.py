"""The capture-overhead benchmark's report: ratios of medians, against the plain query's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import benchmarks.capture_overhead as bench
from benchmarks.capture_overhead import Overhead


def test_ratios_are_medians_over_the_plain_median(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    run = Overhead(
        "tpch_q3",
        {"tpch.lineitem": "l_orderkey"},
        plain_s=[10.0, 12.0, 11.0],
        default_s=[30.0, 13.2, 12.1],  # the first round draws the sample: the median ignores it
        given_s=[11.0, 11.0, 9.0],
        drew_sample=True,
    )
    assert run.ratio(run.default_s) == pytest.approx(1.2)
    assert run.ratio(run.given_s) == pytest.approx(1.0)
    assert run.first_ratio == pytest.approx(30.0 / 11.0)  # the capture that drew it, on its own
    text = bench.report([run], 10.0, "python -m benchmarks.capture_overhead --scale 10").read_text()
    assert "| tpch_q3 | 11.00 | 1.20x | 2.73x | yes | 1.00x | lineitem.l_orderkey |" in text
    assert (tmp_path / "capture_overhead_sf10.json").exists()
    other = bench.report([run], 10.0, "python -m benchmarks.capture_overhead --queries 5,7", (5, 7))
    assert other.name == "capture_overhead_sf10_q5_q7.md", "a run of other queries keeps the default's report"
    assert (tmp_path / "capture_overhead_sf10.md").read_text() == text
    synthetic = bench.report([run], 10.0, "-", (), synthetic_rows=2_000_000)
    assert synthetic.name == "capture_overhead_sf10_syn2000000.md"
    assert (tmp_path / "capture_overhead_sf10.md").read_text() == text
    # A first default capture that drew no sample (a top-k report chosen from the files' bounds).
    unsampled = replace(run, drew_sample=False)
    assert "| 2.73x | no | 1.00x |" in bench.report([unsampled], 10.0, "-").read_text()
