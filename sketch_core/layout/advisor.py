"""Which layout of a table serves its reports best (pure): the layout advisor's choice.

Given the reports whose sketches read a table, each weighted by how often it runs, the advisor
simulates candidate layouts on a sample of the table (:mod:`.simulation`) and recommends the
one under which the reports read the fewest files in all (weighted), among the layouts under
which no report reads more files than it does now: a rewrite must not make a report it was
given slower. Candidates are a sort on each sketch attribute the reports use, and where they
use several, a Z-order over the two most used and over all of them (up to four): a sort serves
one attribute perfectly and the others not at all; a Z-order serves each partly.

Example: reports A (10 runs, sketch on ``customer``) and B (1 run, sketch on ``day``) over a
table sorted by ``sale_id``, each reading all 100 files. ``sort(customer)`` reads 2 for A and 100
for B (weighted share (10*2 + 100) / 11 / 100 = 0.11); ``zorder(customer, day)`` reads, say, 12 and 15
(0.12); ``sort(day)``: 100 and 2 (0.91). The advisor recommends ``sort(customer)``: no report
reads more than now, and the weighted share falls from 1.0 to 0.11.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sketch_core.layout.simulation import Layout, SketchOnSample, UnitsRead, row_order, units_read

# A recommendation must cut the weighted share of files read by this much (relative) to be
# worth a rewrite of the whole table; smaller gains are within what the simulation can tell.
MIN_GAIN = 0.10
MAX_ZORDER_COLUMNS = 4


@dataclass(frozen=True)
class ReportSketch:
    """A report's sketch on the table, and how often the report runs (its weight)."""

    report: str
    runs: float
    sketch: SketchOnSample


@dataclass(frozen=True)
class LayoutEstimate:
    """What each report reads under ``layout`` (None: the table as it lies now)."""

    layout: Layout | None
    reads: Mapping[str, UnitsRead]
    weighted_share: float


@dataclass(frozen=True)
class Advice:
    """The advisor's answer for one table: the current reads, every candidate simulated, the
    recommended layout (None: keep the table's, ``reason`` says why) and page size."""

    table: str
    current: LayoutEstimate
    candidates: tuple[LayoutEstimate, ...]
    recommended: LayoutEstimate | None
    reason: str
    # Rows per Parquet page the rewrite should write (None: keep the table's), and why (see
    # :mod:`.pages`).
    page_rows: int | None = None
    pages: str = ""


def candidate_layouts(reports: Sequence[ReportSketch]) -> list[Layout]:
    """A sort on each attribute the reports' sketches use (most run first), and Z-orders over
    the two most run and over all of them, where there are several."""
    weight: dict[str, float] = {}
    for report in reports:
        weight[report.sketch.attribute] = weight.get(report.sketch.attribute, 0.0) + report.runs
    attributes = sorted(weight, key=lambda a: (-weight[a], a))
    layouts = [Layout("sort", (a,)) for a in attributes]
    if len(attributes) >= 2:
        layouts.append(Layout("zorder", tuple(attributes[:2])))
    if len(attributes) >= 3:
        layouts.append(Layout("zorder", tuple(attributes[:MAX_ZORDER_COLUMNS])))
    return layouts


def weighted_share(reports: Sequence[ReportSketch], reads: Mapping[str, UnitsRead]) -> float:
    """The share of the table's files the reports read, each report weighted by its runs."""
    total = sum(r.runs for r in reports)
    if total <= 0:
        return 1.0
    return sum(r.runs * reads[r.report].file_share for r in reports) / total


def advise(
    table: str,
    reports: Sequence[ReportSketch],
    ranks: Mapping[str, np.ndarray],
    current: Mapping[str, UnitsRead],
    files: int,
    row_groups_per_file: int,
    write_order: Sequence[str] = (),
) -> Advice:
    """The layout of ``table`` that serves ``reports`` best. ``ranks``: per candidate column,
    each sample row's rank-like key (see :func:`.simulation.row_order`); ``current``: what each
    report reads now (from the table's file statistics); ``files`` and ``row_groups_per_file``:
    the table's shape after the rewrite; ``write_order``: the columns the table declares it is
    sorted by (Iceberg's sort order), if any.

    A sort on the table's own write order is recommended only when it gains more than where the
    files' boundaries fall can account for: the simulation cuts equal runs, a rewrite cuts
    where Spark's writers end, so each report may read one file more or fewer than simulated.
    Without this, a table rewritten in the advised order could be advised the same rewrite
    again (at 9 files, one file is 11%), and a scheduled recluster would rewrite it every run."""
    now = LayoutEstimate(None, dict(current), weighted_share(reports, current))
    if not reports:
        return Advice(table, now, (), None, "no report with a sketch on this table has run")
    estimates = []
    for layout in candidate_layouts(reports):
        if any(column not in ranks for column in layout.columns):
            continue
        order = row_order(layout, ranks)
        reads = {r.report: units_read(order, r.sketch, files, row_groups_per_file) for r in reports}
        estimates.append(LayoutEstimate(layout, reads, weighted_share(reports, reads)))
    eligible = [
        e for e in estimates if all(e.reads[r.report].files <= current[r.report].files for r in reports)
    ]
    if not eligible:
        return Advice(
            table, now, tuple(estimates), None, "every candidate layout makes some report read more files"
        )
    best = min(eligible, key=lambda e: (e.weighted_share, str(e.layout)))
    in_write_order = bool(write_order) and best.layout == Layout("sort", tuple(write_order))
    if in_write_order and (
        weighted_share(reports, _one_more_file(best.reads)) > now.weighted_share * (1 - MIN_GAIN)
    ):
        return Advice(
            table,
            now,
            tuple(estimates),
            None,
            f"the table is written in {best.layout} already: a rewrite in the same order would only "
            "move its files' boundaries",
        )
    if best.weighted_share > now.weighted_share * (1 - MIN_GAIN):
        return Advice(
            table,
            now,
            tuple(estimates),
            None,
            f"the table's layout serves these reports within {MIN_GAIN:.0%} of the best candidate "
            f"({best.layout})",
        )
    return Advice(
        table,
        now,
        tuple(estimates),
        best,
        f"{best.layout}: the reports read {best.weighted_share:.0%} of the files (weighted by runs), "
        f"against {now.weighted_share:.0%} now",
    )


def _one_more_file(reads: Mapping[str, UnitsRead]) -> dict[str, UnitsRead]:
    """Each report reading one file (and row group) more, within the table."""
    return {
        name: UnitsRead(
            min(r.files + 1, r.files_total),
            r.files_total,
            min(r.row_groups + 1, r.row_groups_total),
            r.row_groups_total,
        )
        for name, r in reads.items()
    }
