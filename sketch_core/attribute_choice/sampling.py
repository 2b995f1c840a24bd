"""Stratified samples (pure): each stratum of a table sampled at the same rate.

Cost-based selection (CBS Sec. 7.1) draws a sample per (table, group-by attributes) in which
every group is a stratum: a uniform sample would miss the small groups, and a HAVING or top-k
query is decided group by group. Each stratum of ``n_g`` rows keeps ``max(1, ceil(rate * n_g))``
of them, chosen uniformly without replacement (the distribution reservoir sampling draws from a
stream).

When the groups outnumber the rows a sample of that rate may hold, one row per group would not
be a sample any more. CBS falls back to a uniform sample; but then a group is seen through one
row or none, scaled up twentyfold at 5%, and a HAVING threshold on it is decided by noise (TPC-H
Q18's orders: every order looked large). Instead whole groups are sampled, each kept with
probability ``rate`` (by a hash of its key): a kept group's aggregates are exact, and each row
stands for ``1 / rate`` rows of the table (``population_scale``).

The Spark job that draws samples of big tables draws the same distribution; this module holds
the sample's shape and a reference implementation over Arrow for small inputs and tests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from sketch_core.errors import SamplingError

# The column of a stored sample holding each row's position in it (a Spark view over the sample
# reads it, so that the rows coming back can be matched with their strata and weights).
SAMPLE_ROW = "__sample_row"


@dataclass(frozen=True)
class StratifiedSample:
    """Sampled rows with their stratum, and per stratum its rows in the table and in the sample.

    ``strata`` numbers each sampled row's stratum (0..k-1); ``stratum_rows[g]`` is the number
    of table rows in stratum g and ``stratum_samples[g]`` the number sampled. A row stands for
    ``stratum_rows[g] / stratum_samples[g]`` rows of the table (:meth:`weights`).
    """

    rows: pa.Table
    strata: np.ndarray
    stratum_rows: np.ndarray
    stratum_samples: np.ndarray
    group_columns: tuple[str, ...]
    rate: float
    # Sampled by whole groups: each row is its own stratum (weight 1: its group is complete)
    # and stands for ``population_scale`` rows of the table.
    whole_groups: bool = False
    population_scale: float = 1.0

    def __post_init__(self) -> None:
        if len(self.strata) != self.rows.num_rows:
            raise SamplingError(f"{len(self.strata)} stratum ids for {self.rows.num_rows} sampled rows")
        counted = np.bincount(self.strata, minlength=len(self.stratum_samples))
        if len(counted) != len(self.stratum_samples) or not np.array_equal(counted, self.stratum_samples):
            raise SamplingError("the per-stratum sample counts do not match the sampled rows")
        if np.any(self.stratum_samples > self.stratum_rows):
            raise SamplingError("a stratum has more sampled rows than table rows")

    @property
    def table_rows(self) -> int:
        return round(float(self.stratum_rows.sum()) * self.population_scale)

    @property
    def stratified(self) -> bool:
        """True when each group is a stratum (False: uniform, or sampled by whole groups)."""
        return bool(self.group_columns) and not self.whole_groups

    def weights(self) -> np.ndarray:
        """Per sampled row, the number of table rows it stands for."""
        per_stratum: np.ndarray = self.stratum_rows / np.maximum(self.stratum_samples, 1)
        return np.asarray(per_stratum[self.strata], dtype=float)


def stratum_ids(table: pa.Table, columns: Sequence[str]) -> tuple[np.ndarray, int]:
    """Per row, the id of its combination of ``columns`` values (NULL is a value); and how many."""
    if not columns:
        return np.zeros(table.num_rows, dtype=np.int64), int(table.num_rows > 0)
    codes = np.zeros(table.num_rows, dtype=np.int64)
    for name in columns:
        encoded = table.column(name).combine_chunks().dictionary_encode(null_encoding="encode")
        indices = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        _, codes = np.unique(codes * (len(encoded.dictionary) + 1) + indices, return_inverse=True)
    count = int(codes.max()) + 1 if table.num_rows else 0
    return codes.astype(np.int64), count


def draw_stratified(
    table: pa.Table, group_columns: Sequence[str], rate: float, seed: int = 0
) -> StratifiedSample:
    """A stratified sample of ``table`` (in memory) at ``rate``, one stratum per group."""
    if not 0 < rate <= 1:
        raise SamplingError(f"the sample rate must be in (0, 1], not {rate}")
    missing = [c for c in group_columns if c not in table.column_names]
    if missing:
        raise SamplingError(f"the table has no column {missing[0]!r}")
    rng = np.random.default_rng(seed)
    strata, count = stratum_ids(table, group_columns)
    if group_columns and count > rate * table.num_rows:
        kept_groups = rng.random(count) < rate
        return whole_group_sample(table.filter(pa.array(kept_groups[strata])), group_columns, rate)
    if not group_columns:
        strata, count = np.zeros(table.num_rows, dtype=np.int64), int(table.num_rows > 0)
    sizes = np.bincount(strata, minlength=count)
    quotas = np.minimum(sizes, np.maximum(1, np.ceil(rate * sizes).astype(np.int64)))
    # A random key per row; within each stratum the rows with the smallest keys are kept.
    order = np.lexsort((rng.random(table.num_rows), strata))
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])) if count else np.zeros(0, dtype=np.int64)
    rank = np.arange(table.num_rows) - starts[strata[order]]
    kept = np.sort(order[rank < quotas[strata[order]]])
    return StratifiedSample(
        rows=table.take(pa.array(kept, type=pa.int64())),
        strata=strata[kept],
        stratum_rows=sizes,
        stratum_samples=quotas,
        group_columns=tuple(group_columns),
        rate=rate,
    )


def whole_group_sample(rows: pa.Table, group_columns: Sequence[str], rate: float) -> StratifiedSample:
    """A sample of whole groups, each kept with probability ``rate``: every row complete in its
    group (weight 1) and standing for ``1 / rate`` table rows. The bootstrap then has nothing to
    resample (each row is its own stratum): a kept group's aggregates are not estimates."""
    ones = np.ones(rows.num_rows, dtype=np.int64)
    return StratifiedSample(
        rows=rows,
        strata=np.arange(rows.num_rows, dtype=np.int64),
        stratum_rows=ones,
        stratum_samples=ones,
        group_columns=tuple(group_columns),
        rate=rate,
        whole_groups=True,
        population_scale=1 / rate,
    )


def sample_from_rows(
    rows: pa.Table, group_columns: Sequence[str], rate: float, stratum_rows_column: str
) -> StratifiedSample:
    """A sample drawn elsewhere (on Spark): ``rows`` holds the sampled rows and, in
    ``stratum_rows_column``, the table rows of each row's stratum. No group columns: one stratum."""
    if stratum_rows_column not in rows.column_names:
        raise SamplingError(f"the sampled rows have no {stratum_rows_column!r} column")
    sizes = rows.column(stratum_rows_column).to_numpy(zero_copy_only=False).astype(np.int64)
    data = rows.drop_columns([stratum_rows_column])
    strata, count = stratum_ids(data, group_columns)
    stratum_rows = np.zeros(count, dtype=np.int64)
    stratum_rows[strata] = sizes
    return StratifiedSample(
        rows=data,
        strata=strata,
        stratum_rows=stratum_rows,
        stratum_samples=np.bincount(strata, minlength=count),
        group_columns=tuple(group_columns),
        rate=rate,
    )


def quota(rows: int, rate: float) -> int:
    """The rows a stratum of ``rows`` rows keeps at ``rate``."""
    return min(rows, max(1, math.ceil(rate * rows)))
