"""JIT warm-up: how much of a sketched report's time is the JVM still compiling.

A sketched report at TPC-H SF10 runs for one to a few seconds, and its time varied by 1.5x to
3.4x with what ran before it in the session. This benchmark shows where that goes. Each report
runs plain and then with its sketch (``use_sketches="always"``), in rounds, in one session; per
run it records the wall time, the time HotSpot's compiler threads spent compiling
(``CompilationMXBean``: C1 and C2 together) and the CPU time of Spark's tasks. On a machine with
few cores the compiler threads take those cores from the tasks.

``--codegen-cache N`` runs the session with Spark's cache of generated classes at N plans
(``spark.sql.codegen.cache.maxEntries``; the service sets 1,000, Spark's default is 100): a
smaller cache than the reports need has every run generate and JIT-compile its classes again.

The sketches are the capture-and-use benchmark's (on the tables' sort keys, 10,000 fragments),
captured here when missing. Results go to benchmarks/results/jit_warmup_sf<scale>.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from benchmarks.stack import bench_service
from sketch_core.config import Settings
from sketch_core.datasets.tpch_queries import TPCH_QUERIES
from sketch_core.service import SketchService
from sketch_core.spark.session import CODEGEN_CACHE_ENTRIES, CODEGEN_CACHE_KEY

RESULTS = Path(__file__).parent / "results"
QUERIES = (3, 10, 18)
FRAGMENTS = 10_000


@dataclass
class Run:
    round: int
    query: str
    mode: str  # "plain" or "sketched"
    wall_s: float
    jit_s: float  # compiler threads' time during the run
    task_cpu_s: float  # Spark tasks' CPU time during the run


class JvmClock:
    """The driver JVM's total compile time and its Spark tasks' CPU time, read between runs
    (local mode: the tasks run in the driver's JVM)."""

    def __init__(self, spark: SparkSession) -> None:
        context = spark.sparkContext
        jvm: Any = context._jvm
        gateway: Any = context._gateway
        self._jvm, self._gateway = jvm, gateway
        self._store: Any = context._jsc.sc().statusStore()
        self._compiler: Any = jvm.java.lang.management.ManagementFactory.getCompilationMXBean()

    def compile_ms(self) -> int:
        return int(self._compiler.getTotalCompilationTime())

    def last_stage(self) -> int:
        return max((stage for stage, _ in self._stages()), default=-1)

    def task_cpu_ms(self, after_stage: int) -> int:
        """The CPU time of the stages after ``after_stage`` (nanoseconds in Spark's store)."""
        return sum(cpu for stage, cpu in self._stages() if stage > after_stage) // 1_000_000

    def _stages(self) -> list[tuple[int, int]]:
        listing = self._store.stageList(
            self._jvm.java.util.ArrayList(),
            False,
            False,
            self._gateway.new_array(self._jvm.double, 0),
            self._jvm.java.util.ArrayList(),
        )
        found, entries = [], listing.iterator()
        while entries.hasNext():
            stage = entries.next()
            found.append((int(stage.stageId()), int(stage.executorCpuTime())))
        return found


def timed(svc: SketchService, clock: JvmClock, number: int, sketched: bool, round_number: int) -> Run:
    stage, compiled = clock.last_stage(), clock.compile_ms()
    started = time.perf_counter()
    result = svc.query(TPCH_QUERIES[number], use_sketches="always" if sketched else False)
    wall = time.perf_counter() - started
    if sketched and result.sketch is None:
        raise RuntimeError(f"Q{number} ran without its sketch: {result.sketch_reason}")
    return Run(
        round_number,
        f"tpch_q{number}",
        "sketched" if sketched else "plain",
        wall,
        (clock.compile_ms() - compiled) / 1000,
        clock.task_cpu_ms(stage) / 1000,
    )


def run(
    scale: float,
    home: Path,
    queries: tuple[int, ...],
    rounds: int,
    codegen_cache: int = CODEGEN_CACHE_ENTRIES,
) -> list[Run]:
    with bench_service(scale, home, spark_conf={CODEGEN_CACHE_KEY: str(codegen_cache)}) as svc:
        names = {d.name for d in svc.sketches.definitions()}
        for number in queries:
            if f"jit_q{number}" not in names:
                svc.capture(TPCH_QUERIES[number], name=f"jit_q{number}", fragments=FRAGMENTS)
        clock = JvmClock(svc.spark)
        runs = []
        for round_number in range(1, rounds + 1):
            for number in queries:
                for sketched in (False, True):
                    runs.append(timed(svc, clock, number, sketched, round_number))
                    r = runs[-1]
                    print(
                        f"round {round_number}/{rounds} Q{number} {r.mode:8s} {r.wall_s:7.2f} s, "
                        f"compiling {r.jit_s:5.2f} s, tasks' CPU {r.task_cpu_s:7.2f} s",
                        flush=True,
                    )
        return runs


def _median(runs: list[Run], attribute: str) -> float:
    return float(statistics.median(getattr(r, attribute) for r in runs))


def report(runs: list[Run], scale: float, command: str, codegen_cache: int = CODEGEN_CACHE_ENTRIES) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = f"jit_warmup_sf{scale:g}" + (
        "" if codegen_cache == CODEGEN_CACHE_ENTRIES else f"_cache_{codegen_cache}"
    )
    (RESULTS / f"{stem}.json").write_text(
        json.dumps(
            {"scale": scale, "codegen_cache": codegen_cache, "runs": [asdict(r) for r in runs]}, indent=2
        )
    )
    lines = [
        f"# JIT warm-up at TPC-H SF{scale:g}, generated classes of {codegen_cache:,} plans kept",
        "",
        "Each report plain, then with its sketch, in rounds in one session; per run its wall",
        "time, the time the JVM's compiler threads spent compiling, and Spark's tasks' CPU time.",
        "",
        "| round | query | plain s | compiling s | sketched s | compiling s | tasks' CPU s |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    pairs: dict[tuple[int, str], dict[str, Run]] = {}
    for r in runs:
        pairs.setdefault((r.round, r.query), {})[r.mode] = r
    for (round_number, query), pair in pairs.items():
        plain, sketched = pair["plain"], pair["sketched"]
        lines.append(
            f"| {round_number} | {query} | {plain.wall_s:.2f} | {plain.jit_s:.2f} | {sketched.wall_s:.2f} | "
            f"{sketched.jit_s:.2f} | {sketched.task_cpu_s:.2f} |"
        )
    lines += ["", "Medians per report over the rounds after the first:", ""]
    lines += [
        "| query | plain s | sketched s | speedup | compiling s (sketched) | tasks' CPU s (sketched) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for query in dict.fromkeys(r.query for r in runs):
        mine = [r for r in runs if r.query == query]
        later = [r for r in mine if r.round > 1] or mine
        plain_runs = [r for r in later if r.mode == "plain"]
        sketched_runs = [r for r in later if r.mode == "sketched"]
        plain_s, sketched_s = _median(plain_runs, "wall_s"), _median(sketched_runs, "wall_s")
        lines.append(
            f"| {query} | {plain_s:.2f} | {sketched_s:.2f} | {plain_s / sketched_s:.1f}x | "
            f"{_median(sketched_runs, 'jit_s'):.2f} | {_median(sketched_runs, 'task_cpu_s'):.2f} |"
        )
    lines += ["", f"Reproduce: `{command}`", ""]
    path = RESULTS / f"{stem}.md"
    path.write_text("\n".join(lines))
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scale", type=float, default=10.0)
    parser.add_argument("--queries", default=",".join(map(str, QUERIES)))
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--codegen-cache", type=int, default=CODEGEN_CACHE_ENTRIES)
    args = parser.parse_args(argv)
    queries = tuple(int(q) for q in args.queries.split(","))
    unknown = [q for q in queries if q not in TPCH_QUERIES]
    if unknown or args.rounds < 1 or args.codegen_cache < 0:
        parser.error(
            f"queries must be among {sorted(TPCH_QUERIES)}, --rounds at least 1, --codegen-cache not negative"
        )
    home = Settings.from_env().warehouse.parent
    runs = run(args.scale, home, queries, args.rounds, args.codegen_cache)
    command = "python -m benchmarks.jit_warmup " + " ".join(sys.argv[1:] if argv is None else argv)
    print(f"report: {report(runs, args.scale, command.strip(), args.codegen_cache)}")


if __name__ == "__main__":
    main()
