"""Layout benchmark: the reports before and after the layout advisor's rewrite of their tables.

The reports: TPC-H Q3, Q5, Q7, Q10, Q18, and two over a synthetic fact table sorted by its
row id (``key``), as tables loaded in arrival order are: the top 10 groups by a sum, and a
HAVING over the groups. Sketches are captured as users capture them (the default attribute
choice, no attributes given). Then, side by side in one run:

1. before: each report plain (no sketch), with its sketch (applied whatever it costs), and as
   users run it (``SKETCH_USE=cost``), with the files read;
2. the advisor (``svc.advise_layout``) for every table a sketch has a partition on, weighted by
   the reports' recorded runs; its recommendation applied (``svc.recluster``, which carries
   the sketches to the ``replace`` commit: no rows read), timed; the sketches maintained after;
3. after: the same timings, and each report's bound (the plain query over the time of the
   query over exactly the rows its sketch keeps, copied together into files like the table's).

Checks printed with the report: under the new layout no report is slower than the plain one
before it by more than 5%, and none is slower than it was as users ran it before.
Results go to benchmarks/results/layouts_sf<scale>.{json,md,png}.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np

from benchmarks.capture_use import sketch_rows_run
from benchmarks.stack import bench_service
from sketch_core.config import DEFAULT_ATTRIBUTE_STRATEGY
from sketch_core.datasets.synthetic import synthetic_table
from sketch_core.datasets.tpch_queries import TPCH_QUERIES
from sketch_core.durations import median_seconds
from sketch_core.layout.simulation import Layout
from sketch_core.service import SketchService

RESULTS = Path(__file__).parent / "results"
SYNTHETIC_TABLE = "bench.facts_by_key"
SYNTHETIC_ROWS = 2_000_000  # at SF1, as in the report of a table sorted by its id
SYNTHETIC_GROUPS = 10_000
TOP_K = ("tpch_q3", "tpch_q10", "tpch_q18")
TOLERANCE = 1.05  # run-to-run noise allowed before a report counts as slower


@dataclass
class Timing:
    plain_s: float
    sketched_s: float
    default_s: float
    default_used: bool
    files_read: int
    files_total: int

    @property
    def speedup(self) -> float:
        return self.plain_s / self.sketched_s

    @property
    def default_speedup(self) -> float:
        return self.plain_s / self.default_s


@dataclass
class ReportResult:
    query: str
    sketch: str
    attributes: dict[str, str]
    before: Timing
    after: Timing | None = None
    rows_s: float = 0.0  # the query over exactly the sketch's rows (after)
    capture_s: float = 0.0  # its capture, as users capture it (the default choice included)

    @property
    def capture_overhead(self) -> float:
        return self.capture_s / self.before.plain_s if self.capture_s else 0.0

    @property
    def bound(self) -> float:
        return self.after.plain_s / self.rows_s if self.after and self.rows_s else 0.0


@dataclass
class TableResult:
    table: str
    reason: str
    layout: str | None
    files_before: dict[str, int]
    files_expected: dict[str, int]
    files_total: int
    rewrite_s: float = 0.0
    page_rows: int | None = None  # the rows per Parquet page the rewrite wrote (None: the table's)

    @property
    def rewritten(self) -> bool:
        return self.layout is not None or self.page_rows is not None

    @property
    def described(self) -> str:
        order = self.layout or ("its own order" if self.page_rows is not None else "kept")
        return f"{order}, pages of {self.page_rows:,} rows" if self.page_rows is not None else order


def synthetic_queries(svc: SketchService, table: str = SYNTHETIC_TABLE) -> dict[str, str]:
    """The top 10 groups by a sum, and the groups whose sum passes its 99.9th percentile."""
    sums = svc.query(f"SELECT a, SUM(b) AS s FROM {table} GROUP BY a", use_sketches=False)
    threshold = int(np.percentile(sums.table.column("s").to_numpy(), 99.9))
    return {
        "syn_top_groups": f"SELECT a, SUM(b) AS total, COUNT(*) AS n FROM {table} "
        "GROUP BY a ORDER BY total DESC, a LIMIT 10",
        "syn_having_sum": f"SELECT a, SUM(b) AS s FROM {table} GROUP BY a HAVING SUM(b) > {threshold}",
    }


def timing(svc: SketchService, sql: str, sketch: str, repeat: int) -> Timing:
    plain = median_seconds(partial(svc.query, sql, use_sketches=False), repeat, warm_up=True)
    always = partial(svc.query, sql, use_sketches="always")
    used = always()
    if used.sketch is None or used.sketch[0] != sketch:
        raise RuntimeError(f"{sketch}: the query used {used.sketch}, not its sketch")
    sketched = median_seconds(always, repeat)
    default = median_seconds(partial(svc.query, sql), repeat, warm_up=True)
    return Timing(
        plain, sketched, default, svc.query(sql).sketch is not None, used.files_read, used.files_total
    )


def run(
    scale: float, repeat: int, home: Path, only: set[str] | None
) -> tuple[list[ReportResult], list[TableResult], list[str]]:
    with bench_service(scale, home, prefix="layout_", fresh=True) as svc:
        svc.settings = replace(svc.settings, attribute_strategy=DEFAULT_ATTRIBUTE_STRATEGY)
        svc.tables.create(
            SYNTHETIC_TABLE,
            synthetic_table(int(SYNTHETIC_ROWS * scale), SYNTHETIC_GROUPS, seed=3),
            sort_by=["key"],
        )
        queries = {f"tpch_q{n}": TPCH_QUERIES[n] for n in (3, 5, 7, 10, 18)}
        queries.update(synthetic_queries(svc))
        if only:
            queries = {label: sql for label, sql in queries.items() if label in only}
        reports = []
        for label, sql in queries.items():
            name = f"layout_{label}"
            started = time.perf_counter()
            version = svc.capture(sql, name=name)
            captured_s = time.perf_counter() - started
            attributes = {t: a for t, (a, _) in version.partitions.items()}
            before = timing(svc, sql, name, repeat)
            reports.append(ReportResult(label, name, attributes, before, capture_s=captured_s))
            print(
                f"{label:16s} before: plain {before.plain_s:.2f}s sketched x{before.speedup:.2f} "
                f"default x{before.default_speedup:.2f} files {before.files_read}/{before.files_total} "
                f"(captured on {attributes} in {captured_s:.1f}s, "
                f"{reports[-1].capture_overhead:.2f}x the plain report)",
                flush=True,
            )
        tables = []
        for table in sorted({t for r in reports for t in r.attributes}):
            advice = svc.advise_layout(table)
            recommended = advice.recommended
            result = TableResult(
                table,
                advice.reason,
                _described(recommended.layout) if recommended and recommended.layout else None,
                {name: reads.files for name, reads in advice.current.reads.items()},
                {name: reads.files for name, reads in (recommended or advice.current).reads.items()},
                max((reads.files_total for reads in advice.current.reads.values()), default=0),
                page_rows=advice.page_rows,
            )
            if result.rewritten:  # a new order, pages of a fragment, or both
                started = time.perf_counter()
                svc.recluster(table)
                result.rewrite_s = time.perf_counter() - started
            tables.append(result)
            print(
                f"{table}: {result.described} ({advice.reason}; {advice.pages}); "
                f"rewrite {result.rewrite_s:.1f}s",
                flush=True,
            )
        # A rewrite changes no rows: svc.recluster carried the sketches to it (maintenance finds
        # them current), or their maintenance carries them now, reading nothing.
        maintenance = [
            f"{m.name}: {m.strategy}{' (carried)' if m.where == 'carried' else ''}, {m.delta_rows} delta rows"
            for m in svc.maintain()
        ]
        print("maintenance after the rewrites:", "; ".join(maintenance), flush=True)
        for report in reports:
            sql = queries[report.query]
            report.after = timing(svc, sql, report.sketch, repeat)
            over_rows = sketch_rows_run(svc, sql, report.sketch, home / "bench-layout-rows")
            report.rows_s = median_seconds(over_rows, repeat, warm_up=True)
            after = report.after
            print(
                f"{report.query:16s} after:  plain {after.plain_s:.2f}s sketched x{after.speedup:.2f} "
                f"default x{after.default_speedup:.2f} files {after.files_read}/{after.files_total} "
                f"bound x{report.bound:.2f}",
                flush=True,
            )
        return reports, tables, maintenance


def _described(layout: Layout) -> str:
    return f"{layout.kind}({', '.join(layout.columns)})"


def report(
    reports: list[ReportResult], tables: list[TableResult], maintenance: list[str], scale: float, command: str
) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = f"layouts_sf{scale:g}"
    payload = {
        "scale": scale,
        "reports": [{**asdict(r), "bound": r.bound, "capture_overhead": r.capture_overhead} for r in reports],
        "tables": [asdict(t) for t in tables],
    }
    (RESULTS / f"{stem}.json").write_text(json.dumps(payload, indent=2))
    lines = [
        f"# Reports before and after the layout advisor's rewrite, TPC-H SF{scale:g}",
        "",
        "Sketches captured with the default attribute choice; times are medians after a warm-up,",
        "all in one run. Speedups are over the plain query under the same layout; `default` is",
        "the report as users run it (the sketch applied where the cost model expects it to pay).",
        "The bound: the plain query over the query over exactly the rows the sketch keeps.",
        "Capture: the report's capture as users run it (the default attribute choice included, the",
        "first of each report in this process) over its plain time before.",
        "",
        "| report | sketch on | capture | plain s before | sketched before | files before | plain s after "
        "| sketched after | default after | files after | bound | share of bound |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in reports:
        b, a = r.before, r.after
        assert a is not None
        on = ", ".join(f"{t}.{c}" for t, c in sorted(r.attributes.items()))
        bound = f"{r.bound:.2f}x | {a.speedup / r.bound:.0%}" if r.bound else "- | -"
        capture = f"{r.capture_overhead:.2f}x" if r.capture_s else "-"
        lines.append(
            f"| {r.query} | {on} | {capture} | {b.plain_s:.2f} | {b.speedup:.2f}x "
            f"| {b.files_read}/{b.files_total} | {a.plain_s:.2f} | {a.speedup:.2f}x "
            f"| {a.default_speedup:.2f}x | {a.files_read}/{a.files_total} | {bound} |"
        )
    lines += ["", "| table | layout | files read per sketch: before -> expected | rewrite s | reason |"]
    lines += ["| --- | --- | --- | ---: | --- |"]
    for t in tables:
        reads = "; ".join(
            f"{name}: {t.files_before[name]} -> {t.files_expected.get(name, '?')}"
            for name in sorted(t.files_before)
        )
        lines.append(
            f"| {t.table} | {t.described} | {reads} (of {t.files_total}) | {t.rewrite_s:.1f} | {t.reason} |"
        )
    lines += ["", "Maintenance after the rewrites: " + "; ".join(maintenance), ""]
    slower_than_plain = [
        r.query for r in reports if r.after and r.after.default_s > TOLERANCE * r.before.plain_s
    ]
    slower_than_before = [
        r.query for r in reports if r.after and r.after.default_s > TOLERANCE * r.before.default_s
    ]
    lines.append(
        f"- as users run them, slower than the plain report before the rewrite by more than 5%: "
        f"{', '.join(slower_than_plain) or 'none'}"
    )
    lines.append(
        f"- slower than before the rewrite (as users run them), by more than 5%: "
        f"{', '.join(slower_than_before) or 'none'}"
    )
    top = [r for r in reports if r.query in TOP_K and r.after]
    if top:
        lines.append(
            "- top-k use speedup after the rewrite: "
            + ", ".join(
                f"{r.query} {r.after.speedup:.2f}x ({r.after.speedup / r.bound:.0%} of bound)"
                for r in top
                if r.after and r.bound
            )
        )
    lines += ["", f"Reproduce: `{command}`"]
    markdown = RESULTS / f"{stem}.md"
    markdown.write_text("\n".join(lines) + "\n")
    _plot(reports, RESULTS / f"{stem}.png")
    return markdown


def _plot(reports: list[ReportResult], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    labels = [r.query for r in reports]
    x = np.arange(len(labels))
    figure, axis = plt.subplots(figsize=(9, 4))
    axis.bar(x - 0.27, [r.before.speedup for r in reports], 0.27, label="sketched, before")
    axis.bar(x, [r.after.speedup if r.after else 0 for r in reports], 0.27, label="sketched, after")
    axis.bar(x + 0.27, [r.bound for r in reports], 0.27, label="bound (after)", alpha=0.5)
    axis.axhline(1.0, color="grey", linewidth=0.8)
    axis.set_yscale("log")  # 1x to 100x: on a linear axis the reports near 1x vanish
    axis.set_xticks(x, labels, rotation=30)
    axis.set_ylabel("speedup over the plain query (log)")
    axis.set_title("Reports before and after the advisor's layout")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.layouts", description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--home", type=Path, default=Path(".cache").resolve())
    parser.add_argument("--queries", default="", help="comma-separated labels (default: all)")
    args = parser.parse_args(argv)
    only = {q.strip() for q in args.queries.split(",") if q.strip()} or None
    reports, tables, maintenance = run(args.scale, args.repeat, args.home, only)
    command = " ".join(["python -m benchmarks.layouts", *(argv if argv is not None else sys.argv[1:])])
    print(report(reports, tables, maintenance, args.scale, command).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
