"""The plots in docs/benchmarks.md, drawn from the committed results in benchmarks/results/.

    .venv/bin/python -m benchmarks.plots      # writes docs/images/*.png

- ``maintenance_vs_delta.png``: incremental maintenance and recapture time against the delta's
  size (the synthetic benchmark, 10M rows), one panel per query, one line per group count;
- ``use_speedup.png``: the capture/use benchmark's own plot (TPC-H SF1), copied;
- ``workload_auto_vs_best.png``: the ``auto`` strategy's total time per workload cell against the
  best fixed strategy's (1,000 operations on 1M rows);
- ``read_paths.png``: sketched TPC-H Q3, Q10 and Q18 at SF1 and SF10, speedup over plain Spark
  on the Iceberg tables through each read path;
- ``jit_warmup.png``: sketched TPC-H SF10 reports round after round in one session, and the
  JVM's compile time in each run, with Spark's default cache of generated classes and the
  service's.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
IMAGES = Path(__file__).resolve().parents[1] / "docs" / "images"


def maintenance_series(results: list[dict[str, Any]]) -> dict[str, dict[int, list[tuple[int, float, float]]]]:
    """query -> group count -> [(delta rows, incremental s, recapture s)], by delta size."""
    series: dict[str, dict[int, list[tuple[int, float, float]]]] = defaultdict(lambda: defaultdict(list))
    for row in results:
        series[row["query"]][row["groups"]].append((row["delta_rows"], row["incremental_s"], row["full_s"]))
    return {q: {g: sorted(points) for g, points in by_groups.items()} for q, by_groups in series.items()}


def workload_cells(rows: list[dict[str, Any]]) -> list[tuple[str, float, str, float]]:
    """Per (ratio, delta) cell: its label, auto's total seconds, the best other strategy and its total."""
    cells: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    for row in rows:
        cells[row["ratio"], row["delta"]][row["strategy"]] = row["report_s"] + row["update_s"]
    found = []
    for (ratio, delta), totals in sorted(cells.items(), key=lambda c: (c[0][0], c[0][1])):
        if "auto" not in totals:
            continue
        others = {s: t for s, t in totals.items() if s != "auto"}
        best = min(others, key=lambda s: others[s])
        found.append((f"{ratio}\nΔ{delta}", totals["auto"], best, others[best]))
    return found


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    IMAGES.mkdir(parents=True, exist_ok=True)
    synthetic = json.loads((RESULTS / "maintenance_synthetic_10000000.json").read_text())
    series = maintenance_series(synthetic["results"])
    figure, axes = plt.subplots(1, len(series), figsize=(4 * len(series), 3.6), sharey=True)
    for axis, (query, by_groups) in zip(axes, sorted(series.items()), strict=True):
        for groups, points in sorted(by_groups.items()):
            deltas = [p[0] for p in points]
            (line,) = axis.plot(deltas, [p[1] for p in points], "o-", label=f"{groups:,} groups, incremental")
            axis.plot(
                deltas, [p[2] for p in points], "x--", color=line.get_color(), label=f"{groups:,}, recapture"
            )
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_title(query)
        axis.set_xlabel("delta rows")
    axes[0].set_ylabel("seconds")
    axes[-1].legend(fontsize=7)
    figure.suptitle("Maintenance time against delta size (synthetic, 10M rows)")
    figure.tight_layout()
    figure.savefig(IMAGES / "maintenance_vs_delta.png", dpi=110)
    plt.close(figure)

    shutil.copyfile(RESULTS / "capture_use_sf1.png", IMAGES / "use_speedup.png")

    cells = workload_cells(json.loads((RESULTS / "workload_1000000_1000.json").read_text()))
    figure, axis = plt.subplots(figsize=(max(6.0, 0.7 * len(cells)), 3.8))
    positions = range(len(cells))
    axis.bar([p - 0.2 for p in positions], [c[1] for c in cells], width=0.4, label="auto")
    axis.bar([p + 0.2 for p in positions], [c[3] for c in cells], width=0.4, label="best fixed strategy")
    for p, cell in zip(positions, cells, strict=True):
        axis.annotate(cell[2], (p + 0.2, cell[3]), ha="center", va="bottom", fontsize=6, rotation=90)
    axis.set_xticks(list(positions), [c[0] for c in cells], fontsize=7)
    axis.set_ylabel("seconds for 1,000 operations")
    axis.set_title("auto against the best fixed strategy per workload (1M rows)")
    axis.legend()
    figure.tight_layout()
    figure.savefig(IMAGES / "workload_auto_vs_best.png", dpi=110)
    plt.close(figure)
    read_paths_plot(plt)
    skipping_levels_plot(plt)
    tpch_maintenance_plot(plt, "maintenance_sf10_q1_q6_q3_q10_rows_10_100_1000_10000_100000.json")
    jit_warmup_plot(plt)
    print(f"plots written to {IMAGES}")


def skipping_levels_plot(plt: Any) -> None:
    """Sketched speedup per report and layout at each level of skipping (files, row groups,
    pages), SF1 and SF10."""
    runs = [json.loads(path.read_text()) for path in sorted(RESULTS.glob("skipping_levels_sf*.json"))]
    short = {"rewritten by Spark": "rewritten", "pages of a fragment": "fragment\npages"}
    bars = [
        (
            f"{r['query'].replace('tpch_', '').upper()} SF{run['scale']:g}\n"
            f"{short.get(r['layout'], 'loaded')}",
            r,
        )
        for run in sorted(runs, key=lambda run: run["scale"])
        if run["scale"] >= 1  # the committed runs, not quick trials
        for r in run["results"]
    ]
    levels = ("files", "row groups", "pages")
    figure, axis = plt.subplots(figsize=(max(7.0, 0.9 * len(bars)), 4.2))
    positions = range(len(bars))
    for offset, level in zip((-0.27, 0.0, 0.27), levels, strict=True):
        axis.bar(
            [p + offset for p in positions],
            [r["speedups"][level] for _, r in bars],
            width=0.27,
            label={"files": "files only", "row groups": "+ row groups", "pages": "+ pages (default)"}[level],
        )
    axis.axhline(1.0, color="grey", linewidth=0.8)
    axis.set_xticks(list(positions), [label for label, _ in bars], fontsize=7)
    axis.set_ylabel("speedup over the plain report")
    axis.set_title("Sketched reports by level of skipping")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(IMAGES / "skipping_levels.png", dpi=110)
    plt.close(figure)


def tpch_maintenance_plot(plt: Any, name: str) -> None:
    """Incremental (warm, per delta kind) and recapture time against delta size per query."""
    path = RESULTS / name
    if not path.exists():
        return
    run = json.loads(path.read_text())
    queries = sorted({r["query"] for r in run["results"]}, key=lambda q: int(q.removeprefix("tpch_q")))
    figure, axes = plt.subplots(1, len(queries), figsize=(3.6 * len(queries), 3.4), sharey=True)
    for axis, query in zip(axes, queries, strict=True):
        rows = [r for r in run["results"] if r["query"] == query]
        for kind in ("insert", "delete", "mixed"):
            points = sorted((r["delta_rows"], r["incremental_s"]) for r in rows if r["kind"] == kind)
            axis.plot([p[0] for p in points], [p[1] for p in points], "o-", label=f"incremental, {kind}")
        full = sorted((r["delta_rows"], r["full_s"]) for r in rows)
        axis.plot([p[0] for p in full], [p[1] for p in full], "kx", label="recapture")
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_title(f"{query.replace('tpch_', '').upper()}, SF{run['scale']:g}")
        axis.set_xlabel("delta rows")
    axes[0].set_ylabel("seconds")
    axes[-1].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(IMAGES / f"maintenance_tpch_sf{run['scale']:g}.png", dpi=110)
    plt.close(figure)


def read_paths_plot(plt: Any) -> None:
    """Use speedup over plain Spark on the Iceberg tables, per query and scale, through the
    service's own file lists and through Iceberg's source."""
    runs = [json.loads(path.read_text()) for path in sorted(RESULTS.glob("read_paths_sf*.json"))]
    bars = [
        (f"{r['query'].replace('tpch_', '').upper()} SF{run['scale']:g}", r)
        for run in sorted(runs, key=lambda run: run["scale"])
        for r in run["results"]
        if r["query"].startswith("tpch_") and r["query"] in {"tpch_q3", "tpch_q10", "tpch_q18"}
    ]
    figure, axis = plt.subplots(figsize=(max(6.0, 0.9 * len(bars)), 3.6))
    positions = range(len(bars))
    axis.bar(
        [p - 0.2 for p in positions],
        [r["plain_iceberg_s"] / r["sketch_files_s"] for _, r in bars],
        width=0.4,
        label="sketch, own file lists (svc.query)",
    )
    axis.bar(
        [p + 0.2 for p in positions],
        [r["plain_iceberg_s"] / r["sketch_iceberg_s"] for _, r in bars],
        width=0.4,
        label="sketch, Iceberg's source (svc.sketched)",
    )
    axis.axhline(1.0, color="grey", linewidth=0.8)
    axis.set_xticks(list(positions), [label for label, _ in bars], fontsize=8)
    axis.set_ylabel("speedup over plain Spark on Iceberg")
    axis.set_title("Sketched reports: use speedup by read path, TPC-H SF1 and SF10")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(IMAGES / "read_paths.png", dpi=110)
    plt.close(figure)


def jit_warmup_plot(plt: Any) -> None:
    """Per report, the sketched run's wall time (solid) and compile time (dotted) in each round,
    one colour per size of Spark's cache of generated classes."""
    runs = {}
    for path in sorted(RESULTS.glob("jit_warmup_sf10*.json")):
        payload = json.loads(path.read_text())
        runs[payload["codegen_cache"]] = [r for r in payload["runs"] if r["mode"] == "sketched"]
    queries = list(dict.fromkeys(r["query"] for by_cache in runs.values() for r in by_cache))
    figure, axes = plt.subplots(1, len(queries), figsize=(4 * len(queries), 3.6))
    for axis, query in zip(axes, queries, strict=True):
        for cache, sketched in sorted(runs.items()):
            mine = [r for r in sketched if r["query"] == query]
            rounds = [r["round"] for r in mine]
            label = f"{cache:,} plans" + (" (Spark's default)" if cache == 100 else "")
            (line,) = axis.plot(rounds, [r["wall_s"] for r in mine], "o-", label=f"{label}: run")
            axis.plot(
                rounds, [r["jit_s"] for r in mine], "x:", color=line.get_color(), label=f"{label}: compiling"
            )
        axis.set_title(query.replace("tpch_", "").upper() + " sketched, SF10")
        axis.set_xlabel("round")
        axis.set_ylim(bottom=0)
    axes[0].set_ylabel("seconds")
    axes[-1].legend(fontsize=7)
    figure.suptitle("Sketched reports round after round: run time and the JVM's compile time")
    figure.tight_layout()
    figure.savefig(IMAGES / "jit_warmup.png", dpi=110)
    plt.close(figure)


if __name__ == "__main__":
    main()
