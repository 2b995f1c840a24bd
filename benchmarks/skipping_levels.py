"""Skipping levels: what files, row groups and pages each buy a sketched report.

For TPC-H reports with sketches on the tables' sort keys (10,000 fragments), each report runs
plain (``svc.query(..., use_sketches=False)``) and with its sketch at three levels, each adding
to the one before (all read only the sketch's kept files, with its row condition):

  files       Parquet filter push-down off: every row of the kept files is decoded and filtered
  row groups  push-down on, the page index ignored: row groups whose statistics miss the
              pushed ranges are skipped
  pages       the default: also the pages whose column-index bounds miss them

on the tables as loaded and, with ``--rewrite``, after two rewrites of every sketched table by
Spark in its sort order (``svc.recluster``): with Iceberg's default pages (at most 20,000
rows), then with ``write.parquet.page-row-limit`` set to one fragment's rows (at least
``MIN_PAGE_ROWS``), so that a page holds about one fragment. Each layout is read at its own
snapshot, and every run of every layout is timed in the same interleaved rounds (medians of
``--repeat``). Each sketched result is checked against the plain one. Results go to
benchmarks/results/skipping_levels_sf<scale>.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import pyarrow as pa

from benchmarks.stack import bench_service
from sketch_core.config import Settings
from sketch_core.datasets import TPCH_SORT_KEYS
from sketch_core.datasets.tpch_queries import TPCH_QUERIES
from sketch_core.durations import median_seconds
from sketch_core.layout.simulation import Layout
from sketch_core.service import SketchService
from sketch_core.tables.page_index import has_page_index

RESULTS = Path(__file__).parent / "results"
QUERIES = (3, 10, 18)
FRAGMENTS = 10_000
# Spark settings per level (SQL settings reach the Parquet reader's Hadoop configuration).
LEVELS: dict[str, dict[str, str]] = {
    "files": {"spark.sql.parquet.filterPushdown": "false"},
    "row groups": {"parquet.filter.columnindex.enabled": "false"},
    "pages": {},
}
RESET = {"spark.sql.parquet.filterPushdown": "true", "parquet.filter.columnindex.enabled": "true"}
# Pages much smaller than this cost more in headers and index entries than they skip.
MIN_PAGE_ROWS = 1_000


@dataclass
class Levels:
    layout: str
    query: str
    plain_s: float
    level_s: dict[str, float]
    files_read: int
    files_total: int
    page_index: dict[str, bool] = field(default_factory=dict)

    def speedup(self, level: str) -> float:
        return self.plain_s / self.level_s[level]


def _sorted_rows(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted(tuple(row.values()) for row in table.to_pylist())


def _at_level(svc: SketchService, level: str, run: Callable[[], object]) -> Callable[[], object]:
    def timed() -> object:
        for key, value in {**RESET, **LEVELS[level]}.items():
            svc.spark.conf.set(key, value)
        try:
            return run()
        finally:
            for key, value in RESET.items():
                svc.spark.conf.set(key, value)

    return timed


@dataclass
class _Cell:
    """One report on one layout, ready to time: its plain and sketched runs at the layout's
    snapshot, each checked against the plain result."""

    layout: str
    number: int
    runs: dict[str, Callable[[], object]]
    files_read: int
    files_total: int
    page_index: dict[str, bool]


def prepare(svc: SketchService, layout: str, number: int) -> _Cell:
    """Report ``number`` on the tables as they are now, pinned at this snapshot (the timing
    comes later, with every layout's: see :func:`time_cells`)."""
    sql, name = TPCH_QUERIES[number], f"levels_q{number}"
    if all(d.name != name for d in svc.sketches.definitions()):
        svc.capture(sql, name=name, fragments=FRAGMENTS)
    else:
        svc.maintain(name)  # over a rewrite: no rows changed, nothing to do but publish
    sequence = svc.latest_sequence()
    plain = partial(svc.query, sql, snapshot=sequence, use_sketches=False)
    sketched = partial(svc.query, sql, snapshot=sequence, use_sketches="always")
    expected = _sorted_rows(plain().table)
    used = sketched()
    assert used.sketch is not None, used.sketch_reason
    runs: dict[str, Callable[[], object]] = {"plain": plain}
    for level in LEVELS:
        run = _at_level(svc, level, sketched)
        assert _sorted_rows(run().table) == expected, (layout, number, level)  # type: ignore[attr-defined]
        runs[level] = run
    version = svc.sketch(name)
    page_index = {
        table: has_page_index(svc.tables.pin(table, sequence).files, attribute)
        for table, (attribute, _) in version.partitions.items()
    }
    return _Cell(layout, number, runs, used.files_read, used.files_total, page_index)


def time_cells(cells: list[_Cell], repeat: int) -> list[Levels]:
    """Every cell's runs timed in interleaved rounds, layouts included: timed one layout after
    another, the first layout's reports ran on a fresher machine (at SF10 a plain Q10 read the
    tables as loaded in 8.9 s and their rewrites in 11.4 s to 11.7 s; side by side, all three
    took 11.0 s to 11.4 s)."""
    times: list[dict[str, list[float]]] = [{key: [] for key in cell.runs} for cell in cells]
    for round_number in range(repeat):
        for cell, cell_times in zip(cells, times, strict=True):
            for key, run in cell.runs.items():
                cell_times[key].append(median_seconds(run, 1, warm_up=not cell_times[key]))
            print(
                f"round {round_number + 1}/{repeat}: {cell.layout}, Q{cell.number}: plain "
                f"{cell_times['plain'][-1]:.3f}s, pages {cell_times['pages'][-1]:.3f}s",
                flush=True,
            )
    results = []
    for cell, cell_times in zip(cells, times, strict=True):
        median = {key: statistics.median(values) for key, values in cell_times.items()}
        result = Levels(
            cell.layout,
            f"tpch_q{cell.number}",
            median.pop("plain"),
            median,
            cell.files_read,
            cell.files_total,
            cell.page_index,
        )
        print(
            f"{cell.layout:22s} Q{cell.number:<3} plain {result.plain_s:6.3f}s "
            + " ".join(
                f"{level} {s:6.3f}s (x{result.speedup(level):5.2f})" for level, s in result.level_s.items()
            )
            + f" files {result.files_read}/{result.files_total}",
            flush=True,
        )
        results.append(result)
    return results


def _rewrite(svc: SketchService, tables: set[str], page_rows: dict[str, int] | None) -> None:
    """Every table rewritten by Spark in its sort order, with pages of ``page_rows`` rows."""
    for table in sorted(tables):
        key = TPCH_SORT_KEYS[table.split(".")[-1]]
        rows = page_rows[table] if page_rows is not None else None
        print(f"rewriting {table} by {', '.join(key)} (pages: {rows or 'default'})", flush=True)
        svc.recluster(table, Layout("sort", key), page_rows=rows)


def run(scale: float, home: Path, queries: tuple[int, ...], repeat: int, rewrite: bool) -> list[Levels]:
    # A fresh warehouse when the run rewrites the tables; otherwise the capture-and-use one.
    # Each layout is a snapshot of its own: every one is read again at its snapshot while the
    # runs are timed, after the last rewrite.
    with bench_service(scale, home, prefix="levels_" if rewrite else "", fresh=rewrite) as svc:
        loaded = "as loaded (Spark)" if scale >= 10 else "as loaded (PyIceberg)"
        cells = [prepare(svc, loaded, number) for number in queries]
        if rewrite:
            tables = {t for number in queries for t in svc.sketch(f"levels_q{number}").partitions}
            _rewrite(svc, tables, None)
            cells += [prepare(svc, "rewritten by Spark", number) for number in queries]
            page_rows = {t: max(MIN_PAGE_ROWS, svc.tables.pin(t).record_count // FRAGMENTS) for t in tables}
            _rewrite(svc, tables, page_rows)
            cells += [prepare(svc, "pages of a fragment", number) for number in queries]
        return time_cells(cells, repeat)


def report(results: list[Levels], scale: float, command: str, queries: tuple[int, ...] = QUERIES) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    # A run of some of the queries keeps to a report of its own (the full run's stays).
    only = "" if queries == QUERIES else "_" + "_".join(f"q{n}" for n in queries)
    stem = f"skipping_levels_sf{scale:g}{only}"
    payload = [{**asdict(r), "speedups": {level: r.speedup(level) for level in r.level_s}} for r in results]
    (RESULTS / f"{stem}.json").write_text(json.dumps({"scale": scale, "results": payload}, indent=2))
    lines = [
        f"# Skipping levels at TPC-H SF{scale:g}",
        "",
        f"Sketches on the sort keys, {FRAGMENTS:,} fragments; each sketched run reads the sketch's files",
        "with its row condition. Speedups over the plain query (the service's file lists) in the same",
        "run; each level adds to the one before (files: no Parquet push-down; row groups: push-down",
        "without the page index; pages: the default).",
        "",
        "| layout | query | plain s | files | row groups | pages | files read | page index |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in results:
        indexed = ", ".join(t.split(".")[-1] for t, has in sorted(r.page_index.items()) if has) or "none"
        lines.append(
            f"| {r.layout} | {r.query} | {r.plain_s:.3f} | "
            + " | ".join(f"{r.speedup(level):.2f}x ({r.level_s[level]:.3f} s)" for level in LEVELS)
            + f" | {r.files_read}/{r.files_total} | {indexed} |"
        )
    lines += ["", f"Reproduce: `{command}`"]
    markdown = RESULTS / f"{stem}.md"
    markdown.write_text("\n".join(lines) + "\n")
    return markdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--queries", default=",".join(map(str, QUERIES)))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rewrite", action="store_true", help="also after Spark rewrites of the tables")
    args = parser.parse_args()
    queries = tuple(int(q) for q in args.queries.split(","))
    home = Settings.from_env().warehouse.parent
    results = run(args.scale, home, queries, args.repeat, args.rewrite)
    command = "python -m benchmarks.skipping_levels " + " ".join(sys.argv[1:])
    print(report(results, args.scale, command, queries).read_text())


if __name__ == "__main__":
    main()
