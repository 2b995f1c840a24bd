"""The layouts report: the capture column is the capture's time over the plain report's, and
the checks name the reports that got slower."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import benchmarks.layouts as layouts
from benchmarks.layouts import ReportResult, TableResult, Timing


def timing(plain: float, sketched: float, default: float) -> Timing:
    return Timing(plain, sketched, default, True, 10, 100)


def test_the_report_shows_capture_overhead_and_names_slower_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(layouts, "RESULTS", tmp_path)
    monkeypatch.setattr(layouts, "_plot", lambda reports, path: None)
    reports = [
        ReportResult(
            "tpch_q3",
            "s3",
            {"tpch.lineitem": "l_orderkey"},
            timing(10.0, 1.0, 1.0),
            timing(10.0, 0.5, 0.5),
            rows_s=0.25,
            capture_s=12.0,
        ),
        ReportResult(
            "tpch_q5",
            "s5",
            {"tpch.lineitem": "l_suppkey"},
            timing(20.0, 19.0, 19.0),
            timing(20.0, 19.0, 22.0),
            rows_s=10.0,
        ),
    ]
    tables = [
        TableResult("tpch.lineitem", "kept", None, {"s3": 10}, {"s3": 10}, 100, page_rows=5_998),
        TableResult("tpch.orders", "kept", "sort(o_custkey)", {"s3": 10}, {"s3": 4}, 100),
        TableResult("tpch.customer", "kept", None, {"s3": 10}, {"s3": 10}, 100),
    ]
    markdown = layouts.report(reports, tables, ["s3: none, 0 delta rows"], 10, "python -m benchmarks.layouts")
    text = markdown.read_text()
    assert "| tpch_q3 | tpch.lineitem.l_orderkey | 1.20x | 10.00 |" in text
    assert "| tpch_q5 | tpch.lineitem.l_suppkey | - | 20.00 |" in text, "a run that did not time it"
    assert "slower than the plain report before the rewrite by more than 5%: tpch_q5" in text
    assert "tpch_q3 20.00x (50% of bound)" in text
    # A rewrite in the table's own order that only changes its pages is a rewrite too.
    assert [t.rewritten for t in tables] == [True, True, False]
    assert "| tpch.lineitem | its own order, pages of 5,998 rows |" in text
    assert "| tpch.orders | sort(o_custkey) |" in text
    assert "| tpch.customer | kept |" in text
    payload = json.loads((tmp_path / "layouts_sf10.json").read_text())
    assert [r["capture_overhead"] for r in payload["reports"]] == [1.2, 0.0]
