"""Stratified samples of pinned tables, kept for reuse (CBS Sec. 7.1: samples are cached per
group-by attributes and shared by the queries grouping on them).

A sample is drawn from the table's files in-process where it can be (a local table, sampled
uniformly or stratified by one column: :mod:`sketch_core.tables.file_sample`), else on Spark
(:func:`sketch_core.spark.sampling.draw_sample`: groups of several columns or of floats, whole
groups, an object store's files). It is written as one Parquet file under
``<warehouse>/_sketch_samples/`` and recorded in the metastore. It is reused for any snapshot of
its table until the rows inserted and deleted between the snapshot it was drawn from and the one
asked for exceed ``max_drift`` of the table; then it is drawn again and the old file deleted.

A sample holds the columns its callers asked for, not the whole table: the draw decodes every
column it keeps of every row of the table (at TPC-H SF10, 14 s to 20 s for all 16 `lineitem`
columns, 4 s to 5 s for the 4 a report reads). A caller that needs a column the stored sample
lacks gets it drawn again, with the columns it had and the ones asked for: the same rows, as
the draw is seeded (where it is drawn the same way), and a sample only ever widens.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from sketch_core.attribute_choice.group_probe import more_groups_than
from sketch_core.attribute_choice.sampling import (
    SAMPLE_ROW,
    StratifiedSample,
    sample_from_rows,
    whole_group_sample,
)
from sketch_core.lru import LruMap
from sketch_core.metastore.commits import CommitLog
from sketch_core.metastore.samples import SampleRecord, SampleRepository
from sketch_core.spark.sampling import (
    OVERSAMPLE,
    STRATIFIED,
    STRATUM_ROWS,
    UNIFORM,
    WHOLE_GROUPS,
    draw_sample,
)
from sketch_core.spark.views import pinned_dataframe
from sketch_core.tables.file_sample import (
    groupable_here,
    readable_here,
    stratified_file_sample,
    uniform_file_sample,
)
from sketch_core.tables.pinned import PinnedSnapshot

log = logging.getLogger(__name__)
SAMPLES_DIRECTORY = "_sketch_samples"


@dataclass(frozen=True)
class StoredSample:
    sample: StratifiedSample
    path: str  # its Parquet file, with the SAMPLE_ROW column
    drawn: bool  # drawn now (False: a stored one was reused)
    # Derived from the sample once and kept with it in memory (see SampledTable.memo).
    memo: dict[Any, Any] = field(default_factory=dict, compare=False)


# Samples kept in memory (a file is never rewritten: a new draw gets a new path).
LOADED_SAMPLES = 4
# The most rows a sample holds: the estimates' in-process work (every candidate attribute's
# fragments of every sample row, the other tables' rows matching its keys) grows with it, and
# an estimate's accuracy depends on the rows sampled, not on the table's size. At 5% of TPC-H
# SF10's lineitem (3M rows) choosing took 16 s of a 35 s capture.
MAX_SAMPLE_ROWS = 500_000


def sample_rate(rate: float, table_rows: int, max_rows: int) -> float:
    """``rate``, halved until a sample of ``table_rows`` rows at it holds at most ``max_rows``:
    halving, not the exact share, so that a table growing by less than double keeps its rate
    (a sample is found by its rate)."""
    while rate * table_rows > max_rows:
        rate /= 2
    return rate


class SampleStore:
    def __init__(
        self,
        repository: SampleRepository,
        commit_log: CommitLog,
        warehouse: Path,
        spark: Callable[[], SparkSession],
        *,
        rate: float,
        max_drift: float,
        seed: int = 0,
    ) -> None:
        self.repository = repository
        self.commit_log = commit_log
        self.directory = warehouse / SAMPLES_DIRECTORY
        self.spark = spark
        self.rate = rate
        self.max_drift = max_drift
        self.seed = seed
        self._loaded: LruMap[str, StoredSample] = LruMap(LOADED_SAMPLES)

    def sample(
        self, pinned: PinnedSnapshot, group_columns: Sequence[str], columns: Sequence[str] | None = None
    ) -> StoredSample:
        """The sample of ``pinned``'s table stratified by ``group_columns``, reused or drawn now,
        holding at least ``columns`` and the group columns (None: every column)."""
        groups = tuple(group_columns)
        names = pinned.schema.names
        wanted = set(names) if columns is None else {*groups, *columns}
        rate = sample_rate(self.rate, pinned.record_count, MAX_SAMPLE_ROWS)
        record = self.repository.find(pinned.table, groups, rate)
        if record is not None and Path(record.path).exists() and self.drift(record, pinned) <= self.max_drift:
            kept = self._loaded.get(record.path)
            if kept is None:
                kept = self._keep(StoredSample(self._load(record), record.path, drawn=False))
            held = set(kept.sample.rows.column_names)
            if wanted <= held:
                return replace(kept, drawn=False)
            # A column it was drawn without, or one renamed or added since (no rows changed):
            # drawn again, keeping the columns it had, so that its other users find them.
            wanted |= held & set(names)
        record, sample = self._draw(pinned, groups, rate, tuple(n for n in names if n in wanted))
        return self._keep(StoredSample(sample, record.path, drawn=True))

    def _keep(self, stored: StoredSample) -> StoredSample:
        self._loaded.put(stored.path, stored)
        return stored

    def drift(self, record: SampleRecord, pinned: PinnedSnapshot) -> float:
        """Rows inserted and deleted between the sample's snapshot and ``pinned``, as a share of
        the table the sample was drawn from."""
        low, high = sorted((record.drawn_at_seq, pinned.sequence))
        commits = self.commit_log.commits(pinned.table, after_seq=low, until_seq=high)
        changed = sum(c.added_rows + c.deleted_rows for c in commits)
        return changed / max(1, record.table_rows)

    def _draw(
        self, pinned: PinnedSnapshot, columns: tuple[str, ...], rate: float, kept: tuple[str, ...]
    ) -> tuple[SampleRecord, StratifiedSample]:
        """A sample of ``kept`` columns of ``pinned`` stratified by ``columns``."""
        # The sample at `rate` holds about rate * rows rows; more groups than that: whole groups.
        many = bool(columns) and more_groups_than(pinned, columns, rate * pinned.record_count)
        in_process, many = (None, many) if many else self._in_process(pinned, columns, rate, kept)
        if in_process is not None:
            rows, how = in_process
        else:
            rows, how = self._draw_on_spark(pinned, columns, rate, kept, many)
        rows = rows.append_column(SAMPLE_ROW, pa.array(np.arange(rows.num_rows), pa.int64()))
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{pinned.table}-{uuid.uuid4().hex}.parquet"
        pq.write_table(rows, path)
        sample = _sample_of(rows, columns, rate, how)
        record = SampleRecord(
            table=pinned.table,
            group_columns=columns,
            rate=rate,
            drawn_at_seq=pinned.sequence,
            table_rows=pinned.record_count,
            sample_rows=rows.num_rows,
            strata=_strata(how, sample),
            path=str(path),
        )
        replaced = self.repository.record(record)
        if replaced is not None:
            Path(replaced).unlink(missing_ok=True)
        log.info(
            "drew a %d-row sample of %s (%s, %s; %d of its %d columns; %s)",
            rows.num_rows,
            pinned.table,
            ", ".join(columns) or "-",
            how,
            len(kept),
            len(pinned.schema.names),
            "on Spark" if in_process is None else "from its files",
        )
        return record, sample

    def _draw_on_spark(
        self, pinned: PinnedSnapshot, columns: tuple[str, ...], rate: float, kept: tuple[str, ...], many: bool
    ) -> tuple[pa.Table, str]:
        whole = pinned_dataframe(self.spark(), pinned)
        # By position: a name holding a dot or a backtick would be parsed as a path.
        chosen = [whole[i] for i, name in enumerate(whole.columns) if name in kept]
        frame = whole.select(*chosen) if len(chosen) < len(whole.columns) else whole
        # Without deletes, the files' counts are the rows (no Spark job to count them).
        counted = None if pinned.has_deletes else pinned.record_count
        return draw_sample(frame, columns, rate, self.seed, too_many_groups=many, rows=counted)

    def _in_process(
        self, pinned: PinnedSnapshot, columns: tuple[str, ...], rate: float, kept: tuple[str, ...]
    ) -> tuple[tuple[pa.Table, str] | None, bool]:
        """A uniform sample, or one stratified by a single column, drawn from the table's files
        here (see :mod:`sketch_core.tables.file_sample`), as :func:`draw_sample` returns it, and
        whether the groups were found to outnumber the rows it may hold. None where Spark draws
        it: files in an object store, groups of several columns or of floats, a sample of whole
        groups (the groups too many), or a read that failed here."""
        if not readable_here(pinned) or (columns and not groupable_here(pinned, columns)):
            return None, False
        try:
            if not columns:
                rows, live = uniform_file_sample(pinned, kept, rate, self.seed)
                sizes = np.full(rows.num_rows, live, dtype=np.int64)
                how = UNIFORM
            else:
                drawn = stratified_file_sample(pinned, columns[0], kept, rate, self.seed, OVERSAMPLE)
                if drawn is None:
                    return None, True
                (rows, sizes), how = drawn, STRATIFIED
        except Exception as error:  # Spark reads the same files: a failure here costs a job
            log.warning("drawing the sample of %s here failed (%r); drawing it on Spark", pinned.table, error)
            return None, False
        return (rows.append_column(STRATUM_ROWS, pa.array(sizes, pa.int64())), how), False

    def _load(self, record: SampleRecord) -> StratifiedSample:
        how = WHOLE_GROUPS if record.strata == 0 else STRATIFIED if record.strata > 1 else UNIFORM
        return _sample_of(pq.read_table(record.path), record.group_columns, record.rate, how)


def _sample_of(rows: pa.Table, columns: tuple[str, ...], rate: float, how: str) -> StratifiedSample:
    """The sample the stored ``rows`` hold, drawn as ``how`` says."""
    if how == WHOLE_GROUPS:
        return whole_group_sample(rows.drop_columns([STRATUM_ROWS]), columns, rate)
    return sample_from_rows(rows, columns if how == STRATIFIED else (), rate, STRATUM_ROWS)


def _strata(how: str, sample: StratifiedSample) -> int:
    """What the metastore records for a sample's strata (and :meth:`SampleStore._load` reads
    back as how it was drawn): one per group for a stratified sample, 1 for a uniform one (or a
    stratified one of one group: the same weights), 0 for a sample of whole groups."""
    if how == WHOLE_GROUPS:
        return 0
    return len(sample.stratum_rows) if how == STRATIFIED else 1
