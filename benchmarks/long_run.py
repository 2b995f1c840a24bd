"""The long run (issue 8): many sketches over several tables, kept up by the
``intermittent_maintenance`` DAG across many commits, with no drift.

Tables ``long.t0`` ... are loaded and each gets sketches of HAVING and top-k reports with
their own thresholds (some under a policy that lets them fall behind for a while). Then commits
of random inserts, deletes and updates land on random tables; every ``--check-every`` commits
the DAG runs (``dag.test()``, Airflow for real), then some reports with the sketches are
compared with the plain query, and every version not yet checked (each version a sketch ever
has, the captured ones too) with a fresh capture at its snapshot. Figures are printed and
written to ``benchmarks/results/long_run_*.{json,md}``; the run fails if any version or report
differed.

``python -m benchmarks.long_run`` (50 sketches, 5 tables, 200 commits; ``make long-run``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from sketch_core.datasets import synthetic_table
from sketch_core.datasets.deltas import DeltaGenerator
from sketch_core.policy import Policy
from sketch_core.service import SketchService

RESULTS = Path(__file__).resolve().parent / "results"
TEMPLATES = (
    "SELECT a, SUM(b) AS s, COUNT(*) AS n FROM {t} WHERE c > {low} GROUP BY a HAVING SUM(b) > {high}",
    "SELECT a, MIN(d) AS lo, MAX(e) AS hi FROM {t} WHERE c > {low} GROUP BY a ORDER BY hi DESC, a LIMIT {k}",
)
GROUPS = 60
FRAGMENTS = 32


@dataclass
class LongRunFigures:
    tables: int
    sketches: int
    commits: int = 0
    rows_changed: int = 0
    dag_runs: int = 0
    maintenance: dict[str, int] = field(default_factory=dict)  # runs by strategy
    versions_published: int = 0
    versions_checked: int = 0
    reports_checked: int = 0
    drifted: list[str] = field(default_factory=list)  # versions that differed from a fresh capture
    wrong_reports: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def lost(self) -> int:
        return len(self.drifted) + len(self.wrong_reports)


def run_long(
    svc: SketchService,
    maintain: Callable[[], Any],
    *,
    tables: int,
    sketches: int,
    commits: int,
    check_every: int,
    seed: int = 1,
    console: Console | None = None,
    namespace: str = "long",
) -> LongRunFigures:
    """The long run on a service whose tables and sketches ``maintain()`` (one run of the
    intermittent-maintenance DAG) keeps up."""
    started = time.perf_counter()

    def say(text: str) -> None:
        if console is not None:
            console.print(text)

    rng = np.random.default_rng(seed)
    figures = LongRunFigures(tables, sketches)
    names = [f"{namespace}.t{i}" for i in range(tables)]
    for i, table in enumerate(names):
        svc.tables.create(table, synthetic_table(4000, GROUPS, seed=seed * 100 + i), sort_by=["a"])
    queries: dict[str, str] = {}
    for j in range(sketches):
        table = names[j % tables]
        template = TEMPLATES[j % len(TEMPLATES)]
        low = int(rng.integers(-60, 0))
        sql = template.format(t=table, low=low, high=int(rng.integers(100, 1500)), k=int(rng.integers(2, 8)))
        name = f"{namespace}_s{j}"
        svc.capture(sql, name=name, attributes={table: "a"}, fragments=FRAGMENTS, with_state=True)
        if (j // tables) % 3 == 2:  # every third of a table's sketches waits for 150 changed rows
            svc.set_policy(name, Policy(delta_rows=150))
        queries[name] = sql
    say(f"{tables} tables, {sketches} sketches captured")
    generators = {
        t: DeltaGenerator(svc.tables, t, ("key",), seed=seed * 1000 + i) for i, t in enumerate(names)
    }
    seen_versions: dict[str, set[int]] = {name: set() for name in queries}
    for commit in range(1, commits + 1):
        table = names[int(rng.integers(tables))]
        size = int(rng.integers(1, 80))
        kind = ("inserts", "deletes", "mixed", "updates")[int(rng.integers(4))]
        delta = getattr(generators[table], kind)(size)
        delta.apply(svc.tables)
        figures.commits += 1
        figures.rows_changed += size
        if commit % check_every == 0 or commit == commits:
            maintain()
            figures.dag_runs += 1
            _check(svc, queries, seen_versions, figures, rng)
            say(
                f"  {commit}/{commits} commits: {figures.versions_checked} versions checked, "
                f"{figures.lost} differed"
            )
    for name in queries:
        for run in svc.sketches.runs(name)[1:]:
            if run["status"] == "succeeded":
                figures.maintenance[str(run["strategy"])] = (
                    figures.maintenance.get(str(run["strategy"]), 0) + 1
                )
    figures.versions_published = sum(len(svc.sketches.versions(name)) for name in queries)
    figures.seconds = time.perf_counter() - started
    return figures


def _check(
    svc: SketchService,
    queries: dict[str, str],
    seen: dict[str, set[int]],
    figures: LongRunFigures,
    rng: np.random.Generator,
) -> None:
    """A few reports with the sketches against the plain query, then every version not yet
    checked (each sketch's newest, and any published since the last check) against a fresh
    capture at its snapshot."""
    for name in rng.choice(sorted(queries), size=min(5, len(queries)), replace=False):
        sql = queries[str(name)]
        sketched, plain = svc.query(sql), svc.query(sql, use_sketches=False)
        figures.reports_checked += 1
        if Counter(map(repr, sketched.table.to_pylist())) != Counter(map(repr, plain.table.to_pylist())):
            figures.wrong_reports.append(f"{name} at sequence {sketched.sequence}")
    for name, sql in queries.items():
        for number in svc.sketches.versions(name):
            if number in seen[name]:
                continue
            seen[name].add(number)
            version = svc.sketch(name, version=number)
            check = svc.capture(
                sql,
                name=f"{name}__check",
                attributes={t: a for t, (a, _) in version.partitions.items()},
                fragments={t: c for t, (_, c) in version.partitions.items()},
                snapshot=version.sequence,
            )
            svc.drop_sketch(check.name)
            figures.versions_checked += 1
            if check.fragments != version.fragments:
                figures.drifted.append(f"{name} v{version.version} at sequence {version.sequence}")


def write_results(figures: LongRunFigures) -> Path:
    RESULTS.mkdir(exist_ok=True)
    stem = RESULTS / f"long_run_{figures.sketches}_{figures.tables}_{figures.commits}"
    stem.with_suffix(".json").write_text(json.dumps(asdict(figures), indent=1))
    lines = [
        f"# Long run: {figures.sketches} sketches, {figures.tables} tables, {figures.commits} commits",
        "",
        "Kept up by the `intermittent_maintenance` DAG (Airflow, `dag.test()`); after every DAG run",
        "each sketch's newest version is compared with a fresh capture at its snapshot, and five",
        "reports with the sketches with the plain query. Command: `python -m benchmarks.long_run`.",
        "",
        "| figure | value |",
        "| --- | ---: |",
        f"| commits (random inserts, deletes, updates) | {figures.commits} |",
        f"| rows changed | {figures.rows_changed:,} |",
        f"| DAG runs | {figures.dag_runs} |",
        f"| maintenance runs | {', '.join(f'{k} {v}' for k, v in sorted(figures.maintenance.items()))} |",
        f"| versions published | {figures.versions_published} |",
        f"| versions checked against a fresh capture | {figures.versions_checked} |",
        f"| versions that differed | {len(figures.drifted)} |",
        f"| reports checked against the plain query | {figures.reports_checked} |",
        f"| reports that differed | {len(figures.wrong_reports)} |",
        f"| seconds | {figures.seconds:.0f} |",
    ]
    path = stem.with_suffix(".md")
    path.write_text("\n".join(lines) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    from examples.airflow_demo import AirflowSetupError, airflow_stack

    parser = argparse.ArgumentParser(prog="python -m benchmarks.long_run", description=__doc__)
    parser.add_argument("--sketches", type=int, default=50)
    parser.add_argument("--tables", type=int, default=5)
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--check-every", type=int, default=10, help="commits between DAG runs")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    console = Console()
    try:
        with airflow_stack("long-run", "sketch_long_run", console) as (svc, dags):
            dag = dags["intermittent_maintenance"]

            def maintain() -> None:
                run = dag.test()
                if run.state not in ("success", "skipped"):
                    raise RuntimeError(f"intermittent_maintenance run {run.run_id} ended {run.state}")

            figures = run_long(
                svc,
                maintain,
                tables=args.tables,
                sketches=args.sketches,
                commits=args.commits,
                check_every=args.check_every,
                seed=args.seed,
                console=console,
            )
    except AirflowSetupError:
        return 1
    console.print(write_results(figures).read_text())
    return 0 if figures.lost == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
