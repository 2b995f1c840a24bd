"""Workload benchmark (issue 6), modeled on IMP Sec. 10.4: when to maintain, recapture, or skip.

A synthetic table, a HAVING report sketched on its group attribute, and a stream of operations
mixing updates (U) and runs of the report (Q) at ratios 1U1Q, 1U5Q and 5U1Q, with deltas of
1, 20, 200 and 2,000 rows (updates alternate appending fresh rows and deleting live ones from
neighbouring groups, so the table keeps its size; see ``Updates``). Four strategies serve the
same stream side by side (each operation is applied to all four before the next), each on its
own copy of the table:

- ``no-sketch``: every report runs without a sketch;
- ``capture``: a report that finds the sketch stale recaptures it first;
- ``incremental``: a report that finds it stale maintains it incrementally first;
- ``auto``: the cost model chooses per report among the three (``maintain_on_query="cost"``).

Maintenance is lazy in all of them (it happens when a report needs the sketch), so the figure
compared is the seconds spent serving the reports, maintenance included; the updates' own
commits cost the same in every strategy and are reported apart. The last report of every run is
checked against the plain query at the same snapshot. Target: auto within 10% of the best of
the other three in every cell, and better than no-sketch wherever a sketch helps.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import itertools
import json
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from benchmarks.stack import bench_service
from sketch_core.config import Settings
from sketch_core.datasets.synthetic import synthetic_table
from sketch_core.errors import SketchError
from sketch_core.service import QueryResult, SketchService

RESULTS = Path(__file__).parent / "results"
RATIOS = {"1U1Q": (1, 1), "1U5Q": (1, 5), "5U1Q": (5, 1)}
DELTAS = (1, 20, 200, 2000)
STRATEGIES = {"no-sketch": "off", "capture": "full", "incremental": "incremental", "auto": "cost"}
GROUPS = 5_000
FRAGMENTS = 1000
REPORT = "SELECT a, SUM(b) AS s, COUNT(*) AS n FROM {t} GROUP BY a HAVING SUM(b) > {threshold}"
TARGET = 1.10
# A sketch helps "clearly" in a cell when a strategy that keeps one serves its reports faster
# than no-sketch by more than this share. Smaller gains are within the noise: repeated runs of
# one cell moved auto / best by up to 4% (1U5Q delta 2,000: 0.98 at db65e1a, 1.02 at 36ffd16).
CLEAR_GAIN = 0.03
# Every this many operations each strategy's garbage is collected (untimed, as a housekeeping
# DAG would): old sketch versions, table snapshots nothing kept reads, and the files only they
# read. Each random delete rewrites the whole table (copy-on-write), so a 1,000-operation cell
# would otherwise leave ~8 GB per strategy on disk, and pins would load ever longer metadata.
COLLECT_EVERY = 20


@dataclass
class Cell:
    ratio: str
    delta: int
    strategy: str
    ops: int
    reports: int
    updates: int
    report_s: float  # serving the reports, maintenance on the way included
    update_s: float  # the updates' own commits
    decisions: dict[str, int]  # what served the reports: "sketch"/"plain" reports, maintenance runs
    correct: bool  # the last report equals the plain query
    commit: str = ""  # the code measured (cells of several runs share one report)
    collect_s: float = 0.0  # garbage collection, untimed in report_s


def schedule(ratio: str, ops: int) -> list[str]:
    updates, reports = RATIOS[ratio]
    return list(itertools.islice(itertools.cycle("U" * updates + "Q" * reports), ops))


def balanced_orders(sides: int) -> list[list[int]]:
    """A Williams design: orders of ``sides`` strategies in which each serves in each position
    equally often and each directly follows each other one equally often (what ran just before
    matters: the JVM's and Python's garbage from a maintenance run is collected in the next
    query's time)."""
    first = [0]
    low, high = 1, sides - 1
    while len(first) < sides:
        first.append(low)
        low += 1
        if len(first) < sides:
            first.append(high)
            high -= 1
    orders = [[(strategy + shift) % sides for strategy in first] for shift in range(sides)]
    return orders if sides % 2 == 0 else orders + [order[::-1] for order in orders]


def service_orders(stream: list[str], sides: int) -> list[list[int]]:
    """The order the strategies serve each operation in: the balanced orders in turn, per kind
    of operation, so that reports and updates each get them all equally often. Rotating by the
    operation's index instead gave the reports of a 1U1Q or 5U1Q stream only two orders, in
    which auto always ran right after incremental or first, and no-sketch right after auto
    (in the 5U1Q delta-2000 cell the same plain query took a median 40 ms longer after
    incremental's maintenance than first)."""
    orders = balanced_orders(sides)
    seen: Counter[str] = Counter()
    chosen = []
    for op in stream:
        chosen.append(orders[seen[op] % len(orders)])
        seen[op] += 1
    return chosen


class Updates:
    """Alternately appends ``delta`` fresh rows and deletes ``delta`` live ones, without
    reading the table (the live keys of each group are tracked here).

    A delete takes its rows from a run of neighbouring groups (the sort key), as a retraction
    of one source's rows would: the table is sorted by group, so the delete rewrites the one
    or two files holding them (copy-on-write), not the whole table. Random rows from every
    group would rewrite every file of the table for every delete (~0.75 s at 1M rows), and
    the updates, which the figures leave out, would take most of a 1,000-operation run."""

    def __init__(self, svc: SketchService, table: str, data: pa.Table, delta: int, seed: int) -> None:
        self.svc, self.table, self.delta = svc, table, delta
        self.rng = np.random.default_rng(seed)
        self.live: dict[int, list[int]] = {}
        self._track(data)
        self.next_key = data.num_rows
        self.count = 0

    def _track(self, rows: pa.Table) -> None:
        for group, key in zip(rows.column("a").to_pylist(), rows.column("key").to_pylist(), strict=True):
            self.live.setdefault(group, []).append(key)

    def apply(self) -> None:
        if self.count % 2 == 0:
            fresh = synthetic_table(
                self.delta, GROUPS, seed=int(self.rng.integers(1 << 30)), key_start=self.next_key
            )
            self.svc.tables.append(self.table, fresh)
            self._track(fresh)
            self.next_key += self.delta
        else:
            self.svc.tables.delete(self.table, self._victims())
        self.count += 1

    def _victims(self) -> str:
        """A predicate for ``delta`` live rows drawn from neighbouring groups, from a random
        one on (wrapping around), which forgets them."""
        groups = sorted(g for g, keys in self.live.items() if keys)
        start = int(self.rng.integers(len(groups)))
        victims: list[int] = []
        chosen: list[int] = []
        for group in groups[start:] + groups[:start]:
            keys = self.live[group]
            take = min(len(keys), self.delta - len(victims))
            picks = set(self.rng.choice(len(keys), size=take, replace=False).tolist())
            victims.extend(k for i, k in enumerate(keys) if i in picks)
            self.live[group] = [k for i, k in enumerate(keys) if i not in picks]
            chosen.append(group)
            if len(victims) == self.delta:
                break
        # The group bounds let Iceberg skip the files that cannot hold the rows.
        return f"a BETWEEN {min(chosen)} AND {max(chosen)} AND key IN ({', '.join(map(str, victims))})"


@dataclass
class Contender:
    """One strategy's side of a cell: its service, its copy of the table, its figures."""

    strategy: str
    svc: SketchService
    table: str
    sql: str
    updates: Updates
    report_s: float = 0.0
    update_s: float = 0.0
    collect_s: float = 0.0
    reports: int = 0
    served: Counter[str] = dataclasses.field(default_factory=Counter)
    last: QueryResult | None = None
    correct: bool = True  # the stream's last report equals the plain query at its snapshot

    @property
    def uses_sketches(self) -> bool:
        return self.strategy != "no-sketch"

    @property
    def sketch(self) -> str:
        return self.table.replace(".", "_")

    def step(self, op: str, final_report: bool = False) -> None:
        started = time.perf_counter()
        if op == "U":
            self.updates.apply()
            self.update_s += time.perf_counter() - started
            return
        self.last = self.svc.query(self.sql, use_sketches=self.uses_sketches)
        self.report_s += time.perf_counter() - started
        self.reports += 1
        self.served["sketch" if self.last.sketch is not None else "plain"] += 1
        if final_report:  # checked now, untimed: a later collection may expire its snapshot
            plain = self.svc.query(self.sql, snapshot=self.last.sequence, use_sketches=False)
            self.correct = sorted(self.last.table.to_pylist(), key=repr) == sorted(
                plain.table.to_pylist(), key=repr
            )

    def collect(self) -> None:
        """Collect this strategy's garbage: with a sketch, what its kept version no longer
        needs (its own snapshots and later stay, for incremental maintenance); without one,
        every snapshot before the last report's."""
        started = time.perf_counter()
        if self.uses_sketches:
            self.svc.collect_garbage([self.sketch])
        else:
            last = self.last.sequence if self.last is not None else self.svc.latest_sequence()
            self.svc.tables.expire_snapshots(self.table, last)
            self.svc.tables.remove_unreferenced_files(self.table, time.time())
        self.collect_s += time.perf_counter() - started

    def finish(self) -> None:
        """Once the cell is measured: drop the table with its sketch, and their files (a
        failure here costs disk space, not the measurement)."""
        try:
            self.svc.drop_table(self.table, cascade=True)
            self.svc.collect_garbage([])  # the state files no version reads any more
        except SketchError as exc:
            print(f"  could not drop {self.table}: {exc}", flush=True)

    def cell(self, ratio: str, delta: int, ops: int) -> Cell:
        served = Counter(self.served)
        if self.uses_sketches:
            runs = self.svc.sketches.runs(self.sketch)[1:]  # after the capture
            served.update(r["strategy"] for r in runs if r["status"] == "succeeded")
        return Cell(
            ratio,
            delta,
            self.strategy,
            ops,
            self.reports,
            self.updates.count,
            self.report_s,
            self.update_s,
            dict(served),
            self.correct,
            collect_s=self.collect_s,
        )


def contender(base: SketchService, rows: int, ratio: str, delta: int, strategy: str, seed: int) -> Contender:
    """A strategy's own service and copy of the table (a namespace per cell and strategy),
    from the same rows as every other strategy's, with its sketch captured."""
    svc = SketchService(
        dataclasses.replace(
            base.settings,
            maintain_on_query=STRATEGIES[strategy],
            # Collections keep what the sketch's current version reads, nothing older.
            retain_versions=1,
            retain_seconds=0,
            # Delta validation costs the same per commit whatever the strategy (in production
            # a step after each load): it is not what the strategies are compared on.
            validate_deltas=False,
        ),
        base.engine,
        base.catalog,
        base.spark,
    )
    table = f"wl_{ratio.lower()}_{delta}_{strategy.replace('-', '_')}_{int(time.time() * 1000)}.facts"
    data = synthetic_table(rows, GROUPS, seed=seed)
    svc.tables.create(table, data, sort_by=["a"])
    threshold = int(np.percentile(_group_sums(data), 99))  # ~1% of the groups qualify
    sql = REPORT.format(t=table, threshold=threshold)
    side = Contender(strategy, svc, table, sql, Updates(svc, table, data, delta, seed))
    if side.uses_sketches:
        svc.capture(sql, name=side.sketch, attributes={table: "a"}, fragments=FRAGMENTS, with_state=True)
    svc.query(sql, use_sketches=side.uses_sketches)  # warm-up, untimed: Spark's code paths for this plan
    return side


def run_cells(
    base: SketchService,
    rows: int,
    ratio: str,
    delta: int,
    strategies: list[str],
    ops: int,
    seed: int,
    progress: bool = True,
) -> list[Cell]:
    """The strategies serve the same stream side by side: each operation is applied to every
    strategy's copy before the next, in balanced orders (see :func:`service_orders`). The machine's slow
    spells then fall on all of them alike, and the ratios compare like with like (run one
    after another, the same strategy's total varied by a fifth between runs)."""
    sides = [contender(base, rows, ratio, delta, s, seed) for s in strategies]
    stream = schedule(ratio, ops)
    final_report = max((i for i, op in enumerate(stream) if op == "Q"), default=-1)
    for index, (op, order) in enumerate(zip(stream, service_orders(stream, len(sides)), strict=True)):
        for side in (sides[i] for i in order):
            side.step(op, final_report=index == final_report)
            if (index + 1) % COLLECT_EVERY == 0:
                side.collect()
        if progress and (index + 1) % max(1, ops // 10) == 0:
            figures = ", ".join(f"{s.strategy} {s.report_s:.1f}s" for s in sides)
            print(f"  {ratio} delta {delta}: {index + 1}/{ops} operations; reports {figures}", flush=True)
    cells = [side.cell(ratio, delta, ops) for side in sides]
    for side in sides:
        side.finish()
    return cells


def _group_sums(data: object) -> list[float]:
    import pyarrow.compute as pc

    grouped = data.group_by("a").aggregate([("b", "sum")])  # type: ignore[attr-defined]
    return [float(v) for v in pc.fill_null(grouped.column("b_sum"), 0).to_pylist()]


def save(measured: list[Cell], rows: int, ops: int) -> list[Cell]:
    """Merge newly measured cells into this size's results (a cell measured again replaces
    its old figures) and rewrite the report; returns every cell. Runs over disjoint cells may
    go on in parallel (``--ratios``/``--deltas``, each with a warehouse of its own, see
    :func:`warehouse_lock`): the merge holds a lock on the file."""
    RESULTS.mkdir(exist_ok=True)
    path = (RESULTS / f"workload_{rows}_{ops}").with_suffix(".json")
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cells = {(c.ratio, c.delta, c.strategy): c for c in load_cells(rows, ops)}
        cells.update({(c.ratio, c.delta, c.strategy): c for c in measured})
        merged = list(cells.values())
        path.write_text(json.dumps([asdict(c) for c in merged], indent=1))
        report(merged, rows, ops)
    return merged


def report(cells: list[Cell], rows: int, ops: int) -> Path:
    stem = RESULTS / f"workload_{rows}_{ops}"
    lines = [
        f"# Workload benchmark: {rows:,} rows, {ops:,} operations per cell",
        "",
        "Seconds serving the reports (maintenance included), per strategy; auto / best of the other",
        f"three (target <= {TARGET:.2f}); the updates' own commits apart. Command: "
        f"`python -m benchmarks.workload --rows {rows} --ops {ops}`. Auto served by: its reports run",
        "with the sketch (`sketch`) and without (`plain`), and its incremental (`incremental`) and full",
        "(`full`) maintenance runs. Collect s: each strategy's garbage collection every "
        f"{COLLECT_EVERY} operations (untimed in the reports; the most any strategy spent).",
        "",
        "| ratio | delta | no-sketch | capture | incremental | auto | auto / best | auto served by "
        "| updates s | collect s | correct |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |",
    ]
    by_cell: dict[tuple[str, int], dict[str, Cell]] = {}
    for cell in cells:
        by_cell.setdefault((cell.ratio, cell.delta), {})[cell.strategy] = cell
    met = measured = helped = beat_plain = clear = beat_clear = 0
    lost: list[str] = []  # cells where a sketch helped and auto was slower than no-sketch
    for (ratio, delta), runs in sorted(
        by_cell.items(), key=lambda item: (list(RATIOS).index(item[0][0]), item[0][1])
    ):
        others = [runs[s].report_s for s in ("no-sketch", "capture", "incremental") if s in runs]
        auto = runs.get("auto")
        ratio_text = f"{auto.report_s / min(others):.2f}" if auto and others else "-"
        if auto and len(others) == 3:
            measured += 1
            met += auto.report_s <= TARGET * min(others)
            plain, kept = others[0], min(others[1:])  # kept: the sketch, by either strategy
            if kept < plain:  # a sketch helped here
                helped += 1
                beats = auto.report_s < plain
                beat_plain += beats
                gain = 1 - kept / plain
                if gain > CLEAR_GAIN:
                    clear += 1
                    beat_clear += beats
                if not beats:
                    lost.append(
                        f"{ratio} delta {delta:,} (auto {auto.report_s / plain - 1:+.1%} against "
                        f"no-sketch; the sketch's gain {gain:.1%})"
                    )
        chose = ", ".join(f"{a} {n}" for a, n in sorted(auto.decisions.items())) if auto else "-"
        figures = " | ".join(f"{runs[s].report_s:.2f}" if s in runs else "-" for s in STRATEGIES)
        correct = all(c.correct for c in runs.values())
        update_s = max(c.update_s for c in runs.values())
        collect_s = max(c.collect_s for c in runs.values())
        lines.append(
            f"| {ratio} | {delta:,} | {figures} | {ratio_text} | {chose} | {update_s:.1f} "
            f"| {collect_s:.1f} | {correct} |"
        )
    commits = sorted({c.commit for c in cells if c.commit})
    lines += [
        "",
        f"Measured at commit {', '.join(commits) or 'unknown'}.",
        "",
        f"auto within {TARGET:.2f}x of the best in {met} of {measured} complete cells; sketches helped "
        f"(capture or incremental faster than no-sketch) in {helped}, and auto beat no-sketch in "
        f"{beat_plain} of those; by more than {CLEAR_GAIN:.0%} (beyond the noise) in {clear}, and auto beat "
        f"no-sketch in {beat_clear} of those.",
    ]
    if lost:
        lines += ["", f"Auto slower than no-sketch where a sketch helped: {'; '.join(lost)}."]
    path = stem.with_suffix(".md")
    path.write_text("\n".join(lines) + "\n")
    return path


def load_cells(rows: int, ops: int) -> list[Cell]:
    """The cells measured so far for this size (a run is resumable: each cell is saved as done)."""
    path = (RESULTS / f"workload_{rows}_{ops}").with_suffix(".json")
    if not path.exists():
        return []
    return [Cell(**c) for c in json.loads(path.read_text())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--ops", type=int, default=1000, help="operations per cell")
    parser.add_argument("--ratios", default=",".join(RATIOS))
    parser.add_argument("--deltas", default=",".join(map(str, DELTAS)))
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--resume",
        action="store_true",
        help="run only the cells not yet measured at this size (measured cells are always merged "
        "into the size's results, so runs over disjoint --ratios/--deltas may go on in parallel, "
        "each with its own SKETCH_HOME)",
    )
    args = parser.parse_args()
    home = Settings.from_env().warehouse.parent
    done = {(c.ratio, c.delta, c.strategy) for c in load_cells(args.rows, args.ops)} if args.resume else set()
    measured: list[Cell] = []
    with (
        warehouse_lock(home),
        bench_service(0.01, home, prefix="workload_") as base,  # TPC-H SF0.01: loaded, unused
    ):
        strategies = args.strategies.split(",")
        for ratio, delta in itertools.product(
            args.ratios.split(","), (int(d) for d in args.deltas.split(","))
        ):
            missing = [s for s in strategies if (ratio, delta, s) not in done]
            if not missing:
                continue
            for cell in run_cells(base, args.rows, ratio, delta, missing, args.ops, args.seed):
                print(
                    f"{ratio} delta {delta}: {cell.strategy} {cell.report_s:.2f}s reports, "
                    f"{cell.update_s:.2f}s updates {cell.decisions or ''}",
                    flush=True,
                )
                measured.append(dataclasses.replace(cell, commit=_commit()))
            save(measured, args.rows, args.ops)  # as it goes: --resume continues from here
    cells = save(measured, args.rows, args.ops)
    print(report(cells, args.rows, args.ops).read_text())


@contextmanager
def warehouse_lock(home: Path) -> Iterator[None]:
    """Hold ``home`` (the warehouses' parent) for this run alone. The strategies collect their
    garbage with no retention time, so a collection deletes every state file no published
    version reads, another run's written but not yet published ones included: two runs may go
    on in parallel only with warehouses of their own (SKETCH_HOME)."""
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".workload-benchmark.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(
                f"error: another workload benchmark is running on {home}; to run one beside it, "
                "give this one a directory of its own (SKETCH_HOME=/some/other/dir); its cells "
                "are merged into the same results"
            ) from None
        yield


def _commit() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return ""
    return head.stdout.strip()


if __name__ == "__main__":
    main()
