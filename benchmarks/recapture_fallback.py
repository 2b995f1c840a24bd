"""Sketches whose operator state cannot be built: what ``auto`` maintenance costs them.

TPC-H Q18 at SF10 reads ``lineitem`` in an ``IN`` subquery under a join: its operator state
would hold ``customer``, ``orders`` and ``lineitem`` in-process (76M rows, more than
``IN_PROCESS_STATE_ROWS``). The capture (``with_state=True``, as the Airflow operator captures)
refuses the state from its plan, before any Spark job, and remembers why (the sketch's state
mode ``none``, shown by ``status``). Each ``auto`` maintenance after a 100-row insert then
recaptures without trying the state again. Side by side in one run, per round: the ``auto``
run and a fresh capture at the same snapshot (its sketch checked equal to the maintained one);
the figure is auto / full (the target: about 1, no cost for the state that cannot be built).

Runs on the maintenance benchmark's tables (``benchmarks.maintenance``), which it loads when
missing; its inserts land there, as the maintenance benchmark's own do.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.stack import bench_service
from sketch_core.config import Settings
from sketch_core.datasets import TPCH_SORT_KEYS, DeltaGenerator
from sketch_core.datasets.tpch_queries import TPCH_QUERIES

RESULTS = Path(__file__).parent / "results"
FRAGMENTS = 1000
DELTA_ROWS = 100


@dataclass
class Round:
    auto_s: float
    auto_strategy: str
    full_s: float

    @property
    def ratio(self) -> float:
        return self.auto_s / self.full_s


def run(scale: float, home: Path, query: int, rounds: int) -> tuple[float, str, list[Round]]:
    """The capture's seconds, the sketch's state mode as ``status`` shows it, and the rounds."""
    name = f"fallback_q{query}"
    with bench_service(scale, home, prefix="maint_") as svc:
        generator = DeltaGenerator(
            svc.tables, "tpch.lineitem", TPCH_SORT_KEYS["lineitem"], seed=7, clustered=True
        )
        if any(d.name == name for d in svc.sketches.definitions()):
            svc.drop_sketch(name)
        began = time.perf_counter()
        svc.capture(TPCH_QUERIES[query], name=name, fragments=FRAGMENTS, with_state=True)
        captured_s = time.perf_counter() - began
        (shown,) = svc.status(name)
        mode = f"{shown.state_mode.mode}: {shown.state_mode.reason}" if shown.state_mode else "kept in full"
        print(f"captured in {captured_s:.1f}s; state: {mode}", flush=True)
        version = svc.sketch(name)
        attributes = {t: a for t, (a, _) in version.partitions.items()}
        counts = {t: c for t, (_, c) in version.partitions.items()}
        measured = []
        for number in range(rounds):
            sequence = generator.inserts(DELTA_ROWS).apply(svc.tables)
            began = time.perf_counter()
            (auto,) = svc.maintain(name)
            auto_s = time.perf_counter() - began
            scratch = f"{name}_full"  # a recapture at the same snapshot, as the maintenance benchmark's
            began = time.perf_counter()
            full = svc.capture(
                TPCH_QUERIES[query], name=scratch, attributes=attributes, fragments=counts, snapshot=sequence
            )
            full_s = time.perf_counter() - began
            kept = svc.sketch(name).fragments
            same = all(set(full.fragments.get(t, [])) == set(ids) for t, ids in kept.items())
            assert same, f"Q{query}: the maintained sketch differs from a fresh capture"
            svc.drop_sketch(scratch)
            measured.append(Round(auto_s, auto.strategy, full_s))
            print(f"round {number + 1}: auto ({auto.strategy}) {auto_s:.2f}s, full {full_s:.2f}s", flush=True)
        svc.drop_sketch(name)
    return captured_s, mode, measured


def report(scale: float, query: int, captured_s: float, mode: str, rounds: list[Round]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"recapture_fallback_q{query}_sf{scale:g}.md"
    lines = [
        f"# A state that cannot be built: TPC-H Q{query} at SF{scale:g}",
        "",
        f"Capture (`with_state=True`, {FRAGMENTS} fragments): {captured_s:.1f} s.",
        f"State mode after it: {mode}",
        "",
        f"Each round: {DELTA_ROWS} rows inserted into lineitem, then `svc.maintain(name)` (auto) and a",
        "fresh capture at the same snapshot (equal sketches checked). Same run.",
        "",
        "| round | auto s | auto ran | full s | auto / full |",
        "| ---: | ---: | --- | ---: | ---: |",
    ]
    lines += [
        f"| {i + 1} | {r.auto_s:.2f} | {r.auto_strategy} | {r.full_s:.2f} | {r.ratio:.2f} |"
        for i, r in enumerate(rounds)
    ]
    lines += ["", f"Median auto / full: {statistics.median(r.ratio for r in rounds):.2f}", ""]
    path.write_text("\n".join(lines))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", type=float, default=10)
    parser.add_argument("--query", type=int, default=18)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    home = Settings.from_env().warehouse.parent
    captured_s, mode, rounds = run(args.scale, home, args.query, args.rounds)
    print(report(args.scale, args.query, captured_s, mode, rounds).read_text())


if __name__ == "__main__":
    main()
