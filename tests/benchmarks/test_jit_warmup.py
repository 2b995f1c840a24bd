"""The JIT warm-up benchmark: its report (medians after the first round, named by the cache's
size) and its clock, read from a real session."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import benchmarks.jit_warmup as bench
from benchmarks.jit_warmup import JvmClock, Run


def _runs() -> list[Run]:
    runs = []
    for round_number, (plain, sketched, jit) in enumerate(
        [(30.0, 9.0, 8.0), (10.0, 2.0, 0.5), (12.0, 3.0, 0.7)]
    ):
        runs.append(Run(round_number + 1, "tpch_q18", "plain", plain, 1.0, plain * 1.5))
        runs.append(Run(round_number + 1, "tpch_q18", "sketched", sketched, jit, sketched / 2))
    return runs


def test_the_summary_leaves_the_first_round_out_and_names_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    text = bench.report(_runs(), 10.0, "python -m benchmarks.jit_warmup --scale 10").read_text()
    # medians of rounds 2 and 3: plain 11.0, sketched 2.5, compiling 0.6, tasks 1.25
    assert "| tpch_q18 | 11.00 | 2.50 | 4.4x | 0.60 | 1.25 |" in text
    assert "| 1 | tpch_q18 | 30.00 | 1.00 | 9.00 | 8.00 | 4.50 |" in text
    small = bench.report(_runs(), 10.0, "python -m benchmarks.jit_warmup --codegen-cache 100", 100)
    assert small.name == "jit_warmup_sf10_cache_100.md"
    assert (tmp_path / "jit_warmup_sf10.json").exists() and (
        tmp_path / "jit_warmup_sf10.md"
    ).read_text() == text


def test_the_clock_sees_a_jobs_task_time_and_the_jvms_compiling(spark: SparkSession) -> None:
    clock = JvmClock(spark)
    stage, compiled = clock.last_stage(), clock.compile_ms()
    assert clock.task_cpu_ms(stage) == 0
    spark.range(2_000_000).selectExpr("sum(id * 7 % 13) AS s").collect()
    assert clock.last_stage() > stage
    assert clock.task_cpu_ms(stage) > 0
    assert clock.compile_ms() >= compiled
