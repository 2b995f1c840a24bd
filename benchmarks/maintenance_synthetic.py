"""Maintenance benchmark (issue 4, second part): synthetic tables, IMP Sec. 10.5.

A single-table aggregation with HAVING over a synthetic table of ``--rows`` rows (10M for the
issue's figures) with 50, 5,000 and 500,000 groups, sketched on the group attribute with 1,000
fragments. Mixed deltas (half inserts, half deletes of one run of rows) of 0.1%, 1% and 10% of
the table: full recapture on Spark against incremental maintenance, side by side in one run;
where the two cross is the break-even point.

Optimizations, each on and off in the same run (the same delta size, each side its own delta):
- selection push-down (IMP 9.4.2): a query whose WHERE keeps ~10% of the rows, with the delta
  read unfiltered (``SKETCH_DELTA_PUSHDOWN=off``) and filtered;
- join Bloom filters (IMP 9.4.1): IMP's Q_joinsel, the table joined with a helper table that
  holds 1% of the group values (``SKETCH_JOIN_BLOOM=off`` and on);
- top-m (IMP 9.4.3): a MIN/MAX query maintained as two sketches, one keeping every value
  (``SKETCH_KEEP_TOP_M=0``) and one keeping the top ``TOP_M`` per group.

Memory: the state's groups, its kept min/max values and top-k rows, and the bytes of its files.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from benchmarks.stack import bench_service
from sketch_core.config import Settings
from sketch_core.datasets import DeltaGenerator
from sketch_core.datasets.synthetic import synthetic_table
from sketch_core.service import SketchService

RESULTS = Path(__file__).parent / "results"
GROUPS = (50, 5_000, 500_000)
FRACTIONS = (0.001, 0.01, 0.1)
FRAGMENTS = 1000
TOP_M = 16
HAVING = "SELECT a, SUM(b) AS s, COUNT(*) AS n FROM {t} GROUP BY a HAVING SUM(b) > {threshold}"
# c grows with a (plus noise): c > its 90th percentile keeps ~10% of the rows.
SELECTIVE = "SELECT a, SUM(b) AS s FROM {t} WHERE c > {cut} GROUP BY a HAVING COUNT(*) > 0"
# IMP's Q_joinsel: the helper holds 1% of the group values.
JOINSEL = (
    "SELECT f.a, AVG(f.b) AS ab FROM {t} f JOIN {helper} h ON f.a = h.ttid "
    "WHERE f.d < {dcut} GROUP BY f.a HAVING AVG(f.c) < {ccut}"
)
# Over the ~10% of rows with c above its 90th percentile: keeping every value is then ~2M
# Python entries at 10M rows (all the rows would be ~20M, more than a benchmark should hold).
MINMAX = "SELECT a, MIN(b) AS lo, MAX(d) AS hi FROM {t} WHERE c > {cut} GROUP BY a HAVING MAX(d) > {hcut}"
# Which optimization each query measures: the setting turned off for the comparison run.
COMPARED = {"selective": "push-down", "joinsel": "bloom filter", "minmax": f"top-{TOP_M}"}


@dataclass
class Measurement:
    groups: int
    query: str
    fraction: float
    delta_rows: int
    full_s: float
    incremental_s: float
    # The same delta size maintained with the query's optimization off (None: not compared).
    without_s: float | None
    state_entries: int
    kept_values: int  # min/max values and top-k rows in the state
    state_bytes: int
    without_values: int | None = None  # kept values with the optimization off (top-m)
    where: str = "in-process"  # where the incremental run reduced the delta (or "spark")

    @property
    def speedup(self) -> float:
        return self.full_s / self.incremental_s


def _state_bytes(svc: SketchService, name: str) -> int:
    record = svc.sketches.version(name)
    if record is None or not record.state_ref:
        return 0
    return sum(f.stat().st_size for d in svc.state_store.chain(record.state_ref) for f in d.glob("*"))


WHERE: dict[str, str] = {}  # sketch -> where its last timed run reduced the delta


def _timed_maintain(svc: SketchService, name: str) -> float:
    svc.collect_garbage([name])  # not timed: done between runs (it is throttled in maintain)
    began = time.perf_counter()
    (run,) = svc.maintain(name, strategy="incremental")
    seconds = time.perf_counter() - began
    if run.strategy != "incremental":  # top-m ran out: the time is a recapture's
        print(f"  {name}: {run.strategy} instead of incremental", flush=True)
    WHERE[name] = run.where
    return seconds


def _kept_values(svc: SketchService, name: str) -> int:
    engine = svc.kept_engine(name)
    return engine.ordered_values() if engine is not None else 0


def _maintained_with(svc: SketchService, settings: Settings, name: str) -> float:
    """``_timed_maintain`` with other settings for this one run."""
    original = svc.settings
    svc.settings = settings
    try:
        return _timed_maintain(svc, name)
    finally:
        svc.settings = original


def _queries(base: SketchService, table: str, group_count: int) -> dict[str, str]:
    b_values = base.query(f"SELECT a, SUM(b) AS s FROM {table} GROUP BY a", use_sketches=False)
    threshold = int(np.percentile(b_values.table.column("s").to_numpy(), 90))
    columns = base.tables.read_arrow(table, columns=("c", "d"))
    cut = float(np.percentile(columns.column("c").to_numpy(), 90))
    dcut = int(np.percentile(columns.column("d").to_numpy(), 50))
    helper = f"syn.join_helper_{group_count}"
    if base.commit_log.get_table(helper) is None:
        ttid = np.arange(0, group_count, 100, dtype=np.int64)  # 1% of the group values
        base.tables.create(helper, pa.table({"ttid": ttid, "tag": ttid % 7}), sort_by=["ttid"])
    return {
        "having": HAVING.format(t=table, threshold=threshold),
        "selective": SELECTIVE.format(t=table, cut=cut),
        "joinsel": JOINSEL.format(t=table, helper=helper, dcut=dcut, ccut=cut),
        "minmax": MINMAX.format(t=table, cut=cut, hcut=dcut),
    }


def run(rows: int, home: Path, groups: tuple[int, ...], fractions: tuple[float, ...]) -> list[Measurement]:
    results: list[Measurement] = []
    with bench_service(0.01, home, prefix="maintsyn_") as base:  # TPC-H SF0.01: loaded, unused
        everything = base.settings
        turned_off = {
            "selective": dataclasses.replace(everything, delta_pushdown=False),
            "joinsel": dataclasses.replace(everything, join_bloom=False),
        }
        kept_all, kept_top = (dataclasses.replace(everything, keep_top_m=m) for m in (0, TOP_M))
        for group_count in groups:
            # Sorted by key: a deleted run of rows is then one key range (one BETWEEN), and the
            # copy-on-write delete rewrites only the files holding it.
            table = f"syn.facts_by_key_{rows}_{group_count}"
            if base.commit_log.get_table(table) is None:
                print(f"loading {table}", flush=True)
                base.tables.create(table, synthetic_table(rows, group_count, seed=7), sort_by=["key"])
            generator = DeltaGenerator(base.tables, table, ("key",), seed=group_count, clustered=True)
            for label, sql in _queries(base, table, group_count).items():
                name = f"syn_{label}_{rows}_{group_count}"
                names = [name, f"{name}_all"] if label == "minmax" else [name]
                for each in names:
                    if any(d.name == each for d in base.sketches.definitions()):
                        base.drop_sketch(each)
                    # The top-m sketch's state is cut to the top m from the start (on Spark).
                    base.settings = kept_top if each == name and label == "minmax" else everything
                    base.capture(
                        sql, name=each, attributes={table: "a"}, fragments=FRAGMENTS, with_state=True
                    )
                base.settings = everything
                for fraction in fractions:
                    size = max(2, int(rows * fraction))
                    without_s = without_values = None
                    if label in turned_off:  # the same delta size once with the optimization off
                        generator.mixed(size).apply(base.tables)
                        without_s = _maintained_with(base, turned_off[label], name)
                    sequence = generator.mixed(size).apply(base.tables)
                    if label == "minmax":  # both sketches take the same delta, each its own way
                        incremental_s = _maintained_with(base, kept_top, name)
                        without_s = _maintained_with(base, kept_all, names[1])
                        without_values = _kept_values(base, names[1])
                    else:
                        incremental_s = _timed_maintain(base, name)  # from the engine the last run kept
                    began = time.perf_counter()
                    check = base.capture(
                        sql,
                        name=f"{name}_full",
                        attributes={table: "a"},
                        fragments=FRAGMENTS,
                        snapshot=sequence,
                    )
                    full_s = time.perf_counter() - began
                    kept = base.sketch(name).fragments
                    assert set(check.fragments[table]) == set(kept[table]), f"{name}: differs from a capture"
                    base.drop_sketch(check.name)
                    m = Measurement(
                        group_count,
                        label,
                        fraction,
                        size,
                        full_s,
                        incremental_s,
                        without_s,
                        base.kept_state_entries(name) or 0,
                        _kept_values(base, name),
                        _state_bytes(base, name),
                        without_values,
                        WHERE.get(name, "in-process"),
                    )
                    compared = (
                        f" (without {COMPARED[label]} {without_s:7.3f}s)" if without_s is not None else ""
                    )
                    print(
                        f"{time.strftime('%H:%M:%S')} {group_count:>7} groups {label:9s} {fraction:6.1%} "
                        f"({size} rows): incremental {incremental_s:7.3f}s full {full_s:7.3f}s "
                        f"x{m.speedup:6.1f}{compared}",
                        flush=True,
                    )
                    results.append(m)
    return results


def break_even(results: list[Measurement], groups: int, query: str) -> str:
    """The delta fraction where incremental stops being faster (linear between measurements)."""
    points = sorted((m.fraction, m.speedup) for m in results if m.groups == groups and m.query == query)
    for (f0, s0), (f1, s1) in itertools.pairwise(points):
        if s0 >= 1 > s1:
            return f"{f0 + (f1 - f0) * (s0 - 1) / (s0 - s1):.1%}"
    if points and points[-1][1] >= 1:
        return f"above {points[-1][0]:.0%} (incremental is still {points[-1][1]:.1f}x faster there)"
    return f"below {points[0][0]:.1%}" if points else "-"


def report(results: list[Measurement], rows: int, partial: bool) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = f"maintenance_synthetic_{rows}" + ("_partial" if partial else "")
    payload = [{**asdict(m), "speedup": m.speedup} for m in results]
    (RESULTS / f"{stem}.json").write_text(json.dumps({"rows": rows, "results": payload}, indent=2))
    lines = [
        f"# Incremental vs full maintenance, synthetic table of {rows:,} rows",
        "",
        f"Sketch on the group attribute, {FRAGMENTS} fragments; mixed deltas (half inserts, half a",
        "deleted run of rows). Full = a fresh capture on Spark at the same snapshot; incremental =",
        "`svc.maintain(strategy='incremental')` continuing from the engine the previous run kept "
        "(garbage collection between runs, untimed); `where`: in-process, or the delta's partial",
        "aggregates computed on Spark (above `SKETCH_SPARK_DELTA_ROWS` changed rows, for aggregations",
        "that join or keep min/max). Same run.",
        "`without` = the same delta size maintained with the query's optimization off: push-down",
        f"(selective), the join Bloom filter (joinsel), top-{TOP_M} (minmax: a second sketch keeping",
        "every value, which takes the same delta).",
        "",
        "| groups | query | delta | rows | incremental s | where | full s | full / incremental | "
        "without s | state groups | kept values (without) | state files |",
        "| ---: | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for m in results:
        without = f"{m.without_s:.3f}" if m.without_s is not None else "-"
        values = f"{m.kept_values:,}" + (f" ({m.without_values:,})" if m.without_values is not None else "")
        lines.append(
            f"| {m.groups:,} | {m.query} | {m.fraction:.1%} | {m.delta_rows:,} | {m.incremental_s:.3f} | "
            f"{m.where} | "
            f"{m.full_s:.3f} | {m.speedup:.1f}x | {without} | {m.state_entries:,} | {values} | "
            f"{m.state_bytes / 2**20:.1f} MiB |"
        )
    lines.append("")
    for groups in sorted({m.groups for m in results}):
        lines.append(f"- break-even, {groups:,} groups, HAVING: {break_even(results, groups, 'having')}")
    for label, optimization in COMPARED.items():
        pairs = [(m.without_s, m.incremental_s) for m in results if m.query == label and m.without_s]
        if pairs:
            ratios = sorted(off / on for off, on in pairs)
            lines.append(
                f"- {optimization}: without / with, median {ratios[len(ratios) // 2]:.2f}x "
                f"(from {ratios[0]:.2f}x to {ratios[-1]:.2f}x over {len(ratios)} cells)"
            )
    markdown = RESULTS / f"{stem}.md"
    markdown.write_text("\n".join(lines) + "\n")
    return markdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--groups", default=",".join(map(str, GROUPS)))
    parser.add_argument("--fractions", default=",".join(map(str, FRACTIONS)))
    args = parser.parse_args()
    groups = tuple(int(g) for g in args.groups.split(","))
    fractions = tuple(float(f) for f in args.fractions.split(","))
    home = Settings.from_env().warehouse.parent
    results = run(args.rows, home, groups, fractions)
    partial = groups != GROUPS or fractions != FRACTIONS
    print(report(results, args.rows, partial).read_text())


if __name__ == "__main__":
    main()
