"""The layout advisor over the service's tables, sketches and recorded runs (adapter).

For a table: the reports are the sketches with a partition on it, each weighted by how often
its query template ran in the last ``RUNS_WINDOW``; what each reads now comes from the table's
files' Parquet footers (the row groups' bounds on the sketch's attribute, as Spark's reader
skips them); the candidates are simulated on a uniform sample of the table's rows
(:mod:`sketch_core.layout.advisor`). ``recluster`` applies a layout as one Iceberg rewrite.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sketch_core.errors import ConfigurationError
from sketch_core.layout.advisor import Advice, ReportSketch, advise
from sketch_core.layout.pages import fragment_page_rows, page_row_limit
from sketch_core.layout.simulation import Layout, SketchOnSample, UnitsRead
from sketch_core.partitions import RangePartition
from sketch_core.service.context import ServiceContext
from sketch_core.tables.deltas import read_files
from sketch_core.tables.orphans import local_path
from sketch_core.tables.pinned import PinnedSnapshot

log = logging.getLogger(__name__)

# Rows of the table the candidate layouts are simulated on: enough for a few hundred rows per
# run at the hundreds of files an SF10 fact table has, and a bounded read.
SAMPLE_ROWS = 200_000
# The runs that weigh a report: its template's in this window (at least one: it has a sketch).
RUNS_WINDOW = timedelta(days=30)


@dataclass(frozen=True)
class _Report:
    name: str
    runs: float
    attribute: str
    partition: RangePartition
    kept: frozenset[int]


class LayoutAdvisor:
    def __init__(self, context: ServiceContext) -> None:
        self.context = context

    def advise(self, table: str, seed: int = 0) -> Advice:
        """See :meth:`SketchService.advise_layout`."""
        pin = self.context.tables.pin(table)
        reports = self._reports(pin.table)
        footers = _RowGroupBounds(pin, {r.attribute for r in reports})
        current = {r.name: footers.units_read(r.attribute, r.partition, r.kept) for r in reports}
        sample = _sample(pin, sorted({r.attribute for r in reports}), seed)
        fragments = {r.name: r.partition.fragments_of(_values(sample.column(r.attribute))) for r in reports}
        finest: dict[str, _Report] = {}
        for report in reports:  # the finest partition of each attribute ranks its rows
            known = finest.get(report.attribute)
            if known is None or report.partition.fragment_count > known.partition.fragment_count:
                finest[report.attribute] = report
        # NULLs first (``NULLS FIRST``), below every fragment.
        ranks = {
            a: np.where(fragments[r.name] == r.partition.null_fragment, -1, fragments[r.name])
            for a, r in finest.items()
        }
        simulated = [
            ReportSketch(
                r.name,
                r.runs,
                SketchOnSample(r.attribute, fragments[r.name], r.partition.null_fragment, r.kept),
            )
            for r in reports
        ]
        groups = max(1, round(footers.row_groups / max(1, len(pin.files))))
        order = self.context.tables.record(pin.table).sort_by
        advice = advise(pin.table, simulated, ranks, current, max(1, len(pin.files)), groups, order)
        finest_count = max((r.partition.fragment_count for r in reports), default=0)
        limit = page_row_limit(self.context.tables.properties(pin.table))
        page_rows, pages = fragment_page_rows(pin.record_count, finest_count, limit)
        return replace(advice, page_rows=page_rows, pages=pages)

    def recluster(self, table: str, layout: Layout | None = None, page_rows: int | None = None) -> int:
        """See :meth:`SketchService.recluster`."""
        if layout is None:
            advice = self.advise(table)
            page_rows = advice.page_rows if page_rows is None else page_rows
            layout = advice.recommended.layout if advice.recommended is not None else None
            order = self.context.tables.record(advice.table).sort_by
            if layout is None and page_rows is not None and order:
                layout = Layout("sort", tuple(order))  # its own order, in pages of a fragment
            if layout is None and page_rows is None:
                raise ConfigurationError(
                    f"the layout advisor recommends no rewrite of {advice.table}: {advice.reason}",
                    hint="pass a layout to rewrite it anyway, e.g. Layout('sort', ('column',))",
                )
        return self.context.tables.recluster(table, layout, page_rows)

    def _reports(self, table: str) -> list[_Report]:
        ctx = self.context
        runs = ctx.costs.runs_by_template(datetime.now(UTC) - RUNS_WINDOW)
        reports = []
        for definition in ctx.sketches.definitions():
            if table not in definition.partition_ids:
                continue
            record = ctx.sketches.version(definition.name)
            if record is None:
                continue
            version = ctx.partitions.sketch_version(record)
            stored, partition = ctx.partitions.get(definition.partition_ids[table])
            kept = frozenset(int(f) for f in version.fragments.get(table, []))
            weight = float(max(1, runs.get(definition.template_key or "", 0)))
            reports.append(_Report(definition.name, weight, stored.attribute, partition, kept))
        return reports


def _values(column: pa.ChunkedArray) -> np.ndarray:
    """The column as :meth:`RangePartition.fragments_of` takes it (numbers as numbers, NULLs
    as NaN; other types as Python values)."""
    if pa.types.is_integer(column.type) or pa.types.is_floating(column.type):
        return np.asarray(column.to_numpy())
    return np.asarray(column.to_pylist(), dtype=object)


def _sample(pin: PinnedSnapshot, columns: list[str], seed: int) -> pa.Table:
    """About ``SAMPLE_ROWS`` rows of ``columns``, each live row of the table equally likely:
    every file's columns read, a random share of its rows kept (memory: one file's columns)."""
    rng = np.random.default_rng(seed)
    total = max(1, pin.record_count)
    share = min(1.0, SAMPLE_ROWS / total)
    parts = []
    for data_file in pin.files:  # one file at a time, its deleted rows dropped
        read = read_files([data_file], pin.schema, columns)
        keep = rng.random(read.num_rows) < share
        parts.append(read.filter(pa.array(keep)))
    if not parts:
        return pa.table({c: pa.array([], pin.schema.field(c).type) for c in columns})
    return pa.concat_tables(parts)


# A row group's bounds on an attribute: its lowest and highest values (None: no statistics)
# and whether it holds NULLs.
_Bounds = tuple[Any, Any, bool]


class _RowGroupBounds:
    """The table's row groups' bounds on the attributes, from the files' Parquet footers."""

    def __init__(self, pin: PinnedSnapshot, attributes: set[str]) -> None:
        self.files: list[list[dict[str, _Bounds]]] = []
        for data_file in pin.files:
            metadata = pq.read_metadata(local_path(data_file.path))
            names = metadata.schema.names
            groups = []
            for index in range(metadata.num_row_groups):
                group = metadata.row_group(index)
                bounds = {}
                for attribute in attributes:
                    stats = group.column(names.index(attribute)).statistics if attribute in names else None
                    known = stats is not None and stats.has_min_max
                    bounds[attribute] = (
                        stats.min if known else None,  # type: ignore[union-attr]
                        stats.max if known else None,  # type: ignore[union-attr]
                        bool(stats is not None and stats.null_count),
                    )
                groups.append(bounds)
            self.files.append(groups)
        self.row_groups = sum(len(groups) for groups in self.files)

    def units_read(self, attribute: str, partition: RangePartition, kept: frozenset[int]) -> UnitsRead:
        """What a sketch keeping ``kept`` of ``partition`` reads now: a row group when its
        bounds reach a kept fragment (or it has NULLs and the NULL fragment is kept, or it has
        no bounds), a file when any of its row groups is read."""
        ranges = sorted(f for f in kept if f != partition.null_fragment)
        nulls_kept = partition.null_fragment in kept
        files = groups = 0
        for file_groups in self.files:
            read = [_reads(g[attribute], partition, ranges, nulls_kept) for g in file_groups]
            groups += sum(read)
            files += any(read) or not file_groups
        return UnitsRead(files, len(self.files), groups, self.row_groups)


def _reads(bounds: _Bounds, partition: RangePartition, ranges: list[int], nulls_kept: bool) -> bool:
    """Whether a row group with ``bounds`` holds a kept fragment (``ranges``: sorted)."""
    low, high, has_nulls = bounds
    if nulls_kept and has_nulls:
        return True
    if low is None or high is None:
        return True
    first, last = partition.fragment_of(low), partition.fragment_of(high)
    index = bisect_left(ranges, first)
    return index < len(ranges) and ranges[index] <= last
