"""Drawing a stratified sample of a table on Spark (CBS Sec. 7.1).

Each group of ``group_columns`` is a stratum that keeps ``max(1, ceil(rate * n_g))`` of its
``n_g`` rows, chosen uniformly (as :func:`sketch_core.attribute_choice.sampling.draw_stratified` does in
memory). Ranking every row of the table within its group would shuffle the whole table; instead
each row gets a uniform random key, only rows whose key is below a few times the group's quota
share survive (a cheap filter), and the quota rows with the smallest keys among those are kept:
still a uniform sample of the group, from about three times the sample's rows. When the groups
outnumber the rows a sample at ``rate`` may hold, whole groups are kept, each with probability
``rate`` (see :mod:`sketch_core.attribute_choice.sampling`).

The result is the sampled rows plus :data:`STRATUM_ROWS`, the table rows of each row's stratum.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from sketch_core.errors import SamplingError

STRATUM_ROWS = "__stratum_rows"
# Survivors of the cheap filter per quota row: a group falls short of its quota only when fewer
# than a third of the expected survivors turn up (at a quota of 1, about 5% of such groups).
OVERSAMPLE = 3.0
_KEY, _COUNT, _QUOTA = "__sample_key", "__group_rows", "__group_quota"
STRATIFIED, WHOLE_GROUPS, UNIFORM = "stratified", "whole groups", "uniform"


def draw_sample(
    frame: DataFrame,
    group_columns: Sequence[str],
    rate: float,
    seed: int = 0,
    *,
    too_many_groups: bool = False,
    rows: int | None = None,
) -> tuple[pa.Table, str]:
    """A sample of ``frame`` at ``rate`` (see the module docstring), as Arrow; and how it was
    drawn: :data:`STRATIFIED`, :data:`WHOLE_GROUPS` (the groups were too many) or
    :data:`UNIFORM` (no group columns). ``too_many_groups``: the caller knows the groups
    outnumber the rows a sample at ``rate`` holds (see
    :mod:`sketch_core.attribute_choice.group_probe`), so they are not counted. ``rows``: the
    frame's row count, where the caller knows it (a table's metadata counts the rows of a
    snapshot without deletes), so that a uniform sample is one Spark job, not two."""
    if not 0 < rate <= 1:
        raise SamplingError(f"the sample rate must be in (0, 1], not {rate}")
    missing = [c for c in group_columns if c not in frame.columns]
    if missing:
        raise SamplingError(f"the table has no column {missing[0]!r}")
    columns = [F.col(c) for c in frame.columns]
    if not group_columns:
        total = frame.count() if rows is None else rows
        uniform = frame.sample(withReplacement=False, fraction=rate, seed=seed)
        sized = uniform.select(*columns, F.lit(int(total)).cast("long").alias(STRATUM_ROWS))
        return sized.toArrow(), UNIFORM
    if too_many_groups:
        return _whole_groups(frame, group_columns, rate, seed, columns), WHOLE_GROUPS
    counts = frame.groupBy(*group_columns).agg(F.count(F.lit(1)).alias(_COUNT)).cache()
    try:
        groups, total = counts.agg(F.count(F.lit(1)), F.sum(_COUNT)).first() or (0, 0)
        if groups and groups <= rate * (total or 0):
            sampled = _stratified(frame, counts, group_columns, rate, seed, columns)
            return sampled.toArrow(), STRATIFIED
    finally:
        counts.unpersist()
    return _whole_groups(frame, group_columns, rate, seed, columns), WHOLE_GROUPS


def _whole_groups(
    frame: DataFrame, group_columns: Sequence[str], rate: float, seed: int, columns: list[Column]
) -> pa.Table:
    """Whole groups, each kept with probability ``rate``: a hash of the key (and the seed)
    decides."""
    buckets = 1 << 30
    key = F.pmod(F.xxhash64(F.lit(seed), *[F.col(c) for c in group_columns]), F.lit(buckets))
    kept = frame.where(key < F.lit(int(rate * buckets)))
    return kept.select(*columns, F.lit(1).cast("long").alias(STRATUM_ROWS)).toArrow()


def _stratified(
    frame: DataFrame,
    counts: DataFrame,
    group_columns: Sequence[str],
    rate: float,
    seed: int,
    columns: list[Column],
) -> DataFrame:
    # The counts come from the same frame: their key columns are renamed, or Spark could not
    # tell the two sides' columns apart.
    keys = {c: f"__sample_group_{i}" for i, c in enumerate(group_columns)}
    quotas = counts.select(
        *[F.col(c).alias(k) for c, k in keys.items()],
        F.col(_COUNT),
        F.greatest(F.lit(1), F.ceil(F.col(_COUNT) * F.lit(rate))).alias(_QUOTA),
    )
    # Group keys may be NULL: NULL is a group of its own, so the join is null-safe.
    condition = [F.col(c).eqNullSafe(F.col(k)) for c, k in keys.items()]
    joined = frame.join(F.broadcast(quotas), condition).select(*columns, F.col(_COUNT), F.col(_QUOTA))
    keyed = joined.withColumn(_KEY, F.rand(seed))
    share = F.least(F.lit(1.0), F.lit(OVERSAMPLE) * F.col(_QUOTA) / F.col(_COUNT))
    survivors = keyed.where(F.col(_KEY) < share)
    rank = F.row_number().over(Window.partitionBy(*[F.col(c) for c in group_columns]).orderBy(_KEY))
    ranked = survivors.withColumn("__rank", rank)
    return ranked.where(F.col("__rank") <= F.col(_QUOTA)).select(
        *columns, F.col(_COUNT).cast("long").alias(STRATUM_ROWS)
    )
