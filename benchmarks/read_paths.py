"""Read paths: the service's own file lists against Iceberg's Spark source, with and without a sketch.

For each query, at one pinned snapshot, in one run, medians of several runs after a warm-up:
  plain (files)    ``svc.query(..., use_sketches=False)``: the snapshot's Parquet files, listed
                   by the service, handed to Spark's Parquet reader
  plain (Iceberg)  the same SQL through Iceberg's Spark source (``VERSION AS OF``): plain Spark
                   over the Iceberg tables, the baseline a platform would compare against
  sketch (files)   ``svc.query(..., use_sketches="always")``: the sketch's range conditions, and
                   only the files whose bounds overlap its fragments
  sketch (Iceberg) ``svc.sketched(..., use_sketches="always")``: the range conditions in the
                   scan, Iceberg's planning skipping files by their manifest statistics
Each sketched result is checked against the plain one. Reports: the speedup of each path's
sketch over plain Iceberg, and each path's time relative to the other. Results go to
benchmarks/results/read_paths_sf<scale>.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import pyarrow as pa

from benchmarks.capture_use import SYNTHETIC_TABLE, synthetic_queries
from benchmarks.stack import bench_service
from sketch_core.algebra.query_text import template_key
from sketch_core.config import Settings
from sketch_core.datasets.synthetic import synthetic_table
from sketch_core.datasets.tpch_queries import TPCH_QUERIES
from sketch_core.durations import median_seconds
from sketch_core.service import SketchService

RESULTS = Path(__file__).parent / "results"
TPCH = (3, 5, 7, 10, 18, 19)


@dataclass
class ReadPaths:
    query: str
    plain_files_s: float
    plain_iceberg_s: float
    sketch_files_s: float
    sketch_iceberg_s: float
    files_read: int
    files_total: int

    @property
    def files_speedup(self) -> float:
        return self.plain_iceberg_s / self.sketch_files_s

    @property
    def iceberg_speedup(self) -> float:
        return self.plain_iceberg_s / self.sketch_iceberg_s


def _sorted_rows(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted(tuple(row.values()) for row in table.to_pylist())


def _collect(frame_of: Callable[[], object]) -> Callable[[], pa.Table]:
    def run() -> pa.Table:
        return frame_of().toArrow()  # type: ignore[attr-defined]

    return run


def measure(svc: SketchService, label: str, sql: str, fragments: int, repeat: int) -> ReadPaths:
    sequence = svc.latest_sequence()
    for definition in svc.sketches.definitions(template_key(sql)):
        svc.drop_sketch(definition.name)
    attributes = {SYNTHETIC_TABLE: "a"} if label.startswith("syn") else None
    svc.capture(sql, name=f"paths_{label}", fragments=fragments, attributes=attributes)
    runs: dict[str, Callable[[], object]] = {
        "plain_files": partial(svc.query, sql, snapshot=sequence, use_sketches=False),
        "plain_iceberg": _collect(partial(svc.sketched, sql, snapshot=sequence, use_sketches=False)),
        "sketch_files": partial(svc.query, sql, snapshot=sequence, use_sketches="always"),
        "sketch_iceberg": _collect(partial(svc.sketched, sql, snapshot=sequence, use_sketches="always")),
    }
    expected = _sorted_rows(svc.query(sql, snapshot=sequence, use_sketches=False).table)
    used = svc.query(sql, snapshot=sequence, use_sketches="always")
    assert used.sketch is not None and _sorted_rows(used.table) == expected, label
    frame = svc.sketched(sql, snapshot=sequence, use_sketches="always")
    assert _sorted_rows(frame.toArrow()) == expected, label
    # Interleaved rounds, so drift on a noisy machine hits every path alike.
    times: dict[str, list[float]] = {key: [] for key in runs}
    for _ in range(repeat):
        for key, run in runs.items():
            times[key].append(median_seconds(run, 1, warm_up=not times[key]))
    median = {key: sorted(values)[len(values) // 2] for key, values in times.items()}
    result = ReadPaths(
        label,
        median["plain_files"],
        median["plain_iceberg"],
        median["sketch_files"],
        median["sketch_iceberg"],
        used.files_read,
        used.files_total,
    )
    print(
        f"{label:18s} plain files {result.plain_files_s:6.3f}s iceberg {result.plain_iceberg_s:6.3f}s | "
        f"sketch files {result.sketch_files_s:6.3f}s (x{result.files_speedup:5.2f}) "
        f"iceberg {result.sketch_iceberg_s:6.3f}s (x{result.iceberg_speedup:5.2f}) "
        f"files {result.files_read}/{result.files_total}",
        flush=True,
    )
    return result


def report(results: list[ReadPaths], scale: float, fragments: int) -> Path:
    RESULTS.mkdir(exist_ok=True)
    stem = f"read_paths_sf{scale:g}"  # not Path.with_suffix: SF0.1 would lose its ".1"
    (RESULTS / f"{stem}.json").write_text(
        json.dumps(
            {"scale": scale, "fragments": fragments, "results": [asdict(r) for r in results]}, indent=2
        )
    )
    lines = [
        f"# Read paths at TPC-H SF{scale:g}, {fragments} fragments",
        "",
        "Medians of interleaved runs in one session, every path at the same snapshot. Speedups",
        "are over plain Spark through Iceberg's source (`VERSION AS OF`), the same Iceberg tables.",
        "",
        "| query | plain files / plain Iceberg | sketch, own file lists | sketch, Iceberg source "
        "| own lists / Iceberg source (sketched) | files read/total |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        lines.append(
            f"| {r.query} | {r.plain_files_s / r.plain_iceberg_s:.2f}x | {r.files_speedup:.2f}x "
            f"| {r.iceberg_speedup:.2f}x | {r.sketch_files_s / r.sketch_iceberg_s:.2f}x "
            f"| {r.files_read}/{r.files_total} |"
        )
    lines += [
        "",
        f"Reproduce: `{' '.join(['python -m benchmarks.read_paths', *sys.argv[1:]])}`",
        "",
    ]
    path = RESULTS / f"{stem}.md"
    path.write_text("\n".join(lines))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=0.1, help="TPC-H scale factor")
    parser.add_argument("--fragments", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds (median)")
    parser.add_argument("--queries", default="", help="comma-separated labels (default: all)")
    args = parser.parse_args()
    home = Settings.from_env().warehouse.parent
    only = {q.strip() for q in args.queries.split(",") if q.strip()}
    with bench_service(args.scale, home) as svc:
        queries = {f"tpch_q{n}": TPCH_QUERIES[n] for n in TPCH}
        if not only or any(label.startswith("syn") for label in only):
            if svc.commit_log.get_table(SYNTHETIC_TABLE) is None:
                rows = synthetic_table(int(6_000_000 * args.scale), 1000, seed=1)
                svc.tables.create(SYNTHETIC_TABLE, rows, sort_by=["a"])
            queries.update(synthetic_queries(svc))
        results = [
            measure(svc, label, sql, args.fragments, args.repeat)
            for label, sql in queries.items()
            if not only or label in only
        ]
    print(report(results, args.scale, args.fragments).read_text())


if __name__ == "__main__":
    main()
