"""A report as an Airflow task runs it: alone, in a fresh process, per JVM setting.

An Airflow task is a new Python process with a new JVM: the report it runs is the JVM's first
query, and most of its time goes to loading classes and compiling Spark's own code, not to
reading data. This benchmark runs each report that way, plain and with its sketch, in
processes of their own, under each JVM setting in ``--variants`` (``JIT:ARCHIVE`` pairs; see
``SKETCH_JIT`` and ``SKETCH_CLASS_ARCHIVE`` in the README):

- JIT ``tiered``: HotSpot's default, the C1 compiler then the optimising C2; ``quick``: C1 only
  (``-XX:TieredStopAtLevel=1``): far less compiling, slower peak code;
- archive ``on``: the class archive the bootstrap builds (classes mapped, not loaded; built
  here first when missing), ``off``: none.

Per process: the seconds to a started session (imports, JVM, catalog), the first run of the
report (what the Airflow task pays) and the median of the runs after it in the same process
(what a long-lived process pays). Processes of the settings and modes alternate, so a slow
spell of the machine hits all of them alike. The tables and sketches are the layouts
benchmark's (``python -m benchmarks.layouts``: the advisor's layout applied) when it has run,
else the default load; a report without a sketch gets one captured (the default choice).
Results go to benchmarks/results/fresh_process_sf<scale>.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from sketch_core.config import JIT_SETTINGS, Settings
from sketch_core.datasets.tpch_queries import TPCH_QUERIES
from sketch_core.spark.class_archive import build_archive

RESULTS = Path(__file__).parent / "results"
QUERIES = (3, 10, 18)
VARIANTS = ("tiered:off", "tiered:on", "quick:on")
MODES = ("plain", "sketched")
PREFIX = "layout_"  # the layouts benchmark's database and warehouse


@dataclass
class Process:
    query: str
    mode: str
    variant: str  # JIT:ARCHIVE
    repeat: int
    session_s: float  # from the interpreter's start to a started session
    first_s: float  # the report's first run: what an Airflow task pays
    later_s: list[float]  # the runs after it in the same process
    files_read: int
    files_total: int

    @property
    def warm_s(self) -> float:
        return statistics.median(self.later_s) if self.later_s else float("nan")


def worker(number: int, mode: str, runs: int, scale: float) -> None:
    """One process's measurement, printed as a JSON line (the parent reads the last one)."""
    began = time.perf_counter()
    from benchmarks.stack import bench_service

    with bench_service(scale, Settings.from_env().warehouse.parent, prefix=PREFIX) as svc:
        svc.spark  # noqa: B018 - the session started, as a task's first call starts it
        started = time.perf_counter()
        use = "always" if mode == "sketched" else False
        times, result = [], None
        for _ in range(runs):
            t = time.perf_counter()
            result = svc.query(TPCH_QUERIES[number], use_sketches=use)
            times.append(time.perf_counter() - t)
            if mode == "sketched" and result.sketch is None:
                raise RuntimeError(f"Q{number} ran without a sketch: {result.sketch_reason}")
        assert result is not None
        line = {
            "session_s": started - began,
            "first_s": times[0],
            "later_s": times[1:],
            "files_read": result.files_read,
            "files_total": result.files_total,
        }
        print("RESULT " + json.dumps(line), flush=True)


def prepare(queries: tuple[int, ...], scale: float) -> None:
    """Capture a sketch (the default choice) for each report that no sketch serves yet; in a
    process of its own, before the measured ones."""
    from benchmarks.stack import bench_service

    with bench_service(scale, Settings.from_env().warehouse.parent, prefix=PREFIX) as svc:
        for number in queries:
            if svc.query(TPCH_QUERIES[number], use_sketches="always").sketch is None:
                print(f"capturing a sketch for Q{number}", flush=True)
                svc.capture(TPCH_QUERIES[number], name=f"fresh_q{number}")


def measure(number: int, mode: str, variant: str, repeat: int, runs: int, scale: float) -> Process:
    jit, archive = variant.split(":")
    env = {**os.environ, "SKETCH_JIT": jit, "SKETCH_CLASS_ARCHIVE": archive}
    command = [sys.executable, "-m", "benchmarks.fresh_process", "--worker", str(number), mode]
    command += ["--runs", str(runs), "--scale", str(scale)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(
            f"Q{number} {mode} {variant} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
        )
    found = json.loads(lines[-1][len("RESULT ") :])
    return Process(f"tpch_q{number}", mode, variant, repeat, **found)


def run(
    queries: tuple[int, ...], variants: tuple[str, ...], repeat: int, runs: int, scale: float
) -> list[Process]:
    done = []
    for r in range(1, repeat + 1):
        for number in queries:
            for mode in MODES:
                # Alternate the order of the settings between rounds (no setting always first).
                for variant in variants if r % 2 else tuple(reversed(variants)):
                    # A plain run at SF10 takes tens of seconds: one later run of it is enough.
                    p = measure(number, mode, variant, r, runs if mode == "sketched" else 2, scale)
                    print(
                        f"{time.strftime('%H:%M:%S')} round {r} Q{number} {mode:8s} {variant:10s} session "
                        f"{p.session_s:5.1f} s, first {p.first_s:6.2f} s, later {p.warm_s:6.2f} s "
                        f"files {p.files_read}/{p.files_total}",
                        flush=True,
                    )
                    done.append(p)
    return done


_MEASURES = ("session_s", "first_s", "warm_s")


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


def report(processes: list[Process], scale: float, command: str) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = f"fresh_process_sf{scale:g}"
    (RESULTS / f"{stem}.json").write_text(
        json.dumps({"scale": scale, "processes": [asdict(p) for p in processes]}, indent=2)
    )
    variants = list(dict.fromkeys(p.variant for p in processes))
    lines = [
        f"# A report in a fresh process at TPC-H SF{scale:g}, per JVM setting",
        "",
        "Each report alone in a new process, as an Airflow task runs it; medians over the",
        f"repeats ({max(p.repeat for p in processes)}). first: the report's first run (what the task",
        "pays); later: the median of the runs after it in the same process; session: the seconds",
        "to a started session. Speedup: plain over sketched under the same setting. Setting:",
        "the JIT compilers (`SKETCH_JIT`), then whether the class archive was mapped.",
        "",
        "| query | setting | session s | plain first s | sketched first s | first speedup | "
        "plain later s | sketched later s | later speedup |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]

    def cell(query: str, variant: str, mode: str, attribute: str) -> float:
        mine = [p for p in processes if (p.query, p.variant, p.mode) == (query, variant, mode)]
        return _median([getattr(p, attribute) for p in mine])

    for query in dict.fromkeys(p.query for p in processes):
        for variant in variants:
            session = _median([p.session_s for p in processes if (p.query, p.variant) == (query, variant)])
            pf, sf = cell(query, variant, "plain", "first_s"), cell(query, variant, "sketched", "first_s")
            pw, sw = cell(query, variant, "plain", "warm_s"), cell(query, variant, "sketched", "warm_s")
            lines.append(
                f"| {query} | {variant} | {session:.1f} | {pf:.2f} | {sf:.2f} | {pf / sf:.1f}x | "
                f"{pw:.2f} | {sw:.2f} | {pw / sw:.1f}x |"
            )
    baseline = variants[0]
    for variant in variants[1:]:
        lines += [
            "",
            f"{variant} against {baseline} ({baseline}'s seconds / {variant}'s; above 1: faster):",
            "",
        ]
        lines += ["| query | mode | session | first | later |", "| --- | --- | ---: | ---: | ---: |"]
        for query in dict.fromkeys(p.query for p in processes):
            for mode in MODES:
                ratios = [cell(query, baseline, mode, a) / cell(query, variant, mode, a) for a in _MEASURES]
                lines.append(f"| {query} | {mode} | " + " | ".join(f"{x:.2f}" for x in ratios) + " |")
    lines += ["", f"Reproduce: `{command}`", ""]
    path = RESULTS / f"{stem}.md"
    path.write_text("\n".join(lines))
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scale", type=float, default=10.0)
    parser.add_argument("--queries", default=",".join(map(str, QUERIES)))
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help="JIT:ARCHIVE pairs, the first the baseline"
    )
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--runs", type=int, default=4, help="runs of the report per process")
    parser.add_argument("--worker", nargs=2, metavar=("QUERY", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(int(args.worker[0]), args.worker[1], args.runs, args.scale)
        return
    queries = tuple(int(q) for q in args.queries.split(","))
    variants = tuple(v.strip() for v in args.variants.split(","))
    if any(q not in TPCH_QUERIES for q in queries) or args.repeat < 1 or args.runs < 1:
        parser.error(f"queries must be among {sorted(TPCH_QUERIES)}, --repeat and --runs at least 1")
    if any(
        v.partition(":")[0] not in JIT_SETTINGS or v.partition(":")[2] not in ("on", "off") for v in variants
    ):
        parser.error(
            f"--variants takes JIT:ARCHIVE pairs: JIT one of {', '.join(JIT_SETTINGS)}, ARCHIVE on or off"
        )
    if any(v.endswith(":on") for v in variants):
        print(build_archive())
    prepare(queries, args.scale)
    processes = run(queries, variants, args.repeat, args.runs, args.scale)
    command = "python -m benchmarks.fresh_process " + " ".join(sys.argv[1:] if argv is None else argv)
    print(f"report: {report(processes, args.scale, command.strip())}")


if __name__ == "__main__":
    main()
