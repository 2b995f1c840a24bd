"""Samples of a pinned snapshot, drawn in-process from its data files.

The attribute choice estimates on a sample of the query's largest table. Drawn on Spark, a
uniform sample of TPC-H SF10's ``lineitem`` (4 of its 16 columns, 60M rows) took 1.7 s warm
and up to 5.6 s in a new process: a job that decodes every row of the columns to keep 0.6% of
them. Read here, file by file on a few threads, the same columns decode in about 1 s, and
nothing but the sample is kept in memory (one file's columns per thread at a time). A sample
stratified by one column (a report grouping the table by it) took 4.2 s on Spark for a 2M-row
table (it counts the groups, then joins the counts back and ranks each group's rows).

Each row's draw comes from a generator seeded with the seed and the file's path, for every row
of the file, deleted or not: so a redraw with more columns keeps the same rows (a stored sample
only ever widens), and a row's fate does not depend on the deletes of other rows.

A stratified sample is drawn as Spark draws it (:mod:`sketch_core.spark.sampling`): each group
of ``n_g`` rows keeps ``max(1, ceil(rate * n_g))`` of them, uniformly; the rows whose random key
falls below a few times the group's share survive a first filter, and the quota with the
smallest keys among them is kept. The groups are counted first, from the group column alone.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar
from urllib.parse import urlparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sketch_core.tables.deltas import decoded, read_whole_file
from sketch_core.tables.pinned import DataFileInfo, PinnedSnapshot
from sketch_core.tables.position_deletes import deleted_positions, live_mask

# Files decoded at once: Arrow's decoding releases the GIL, and the Spark executors that share
# the machine are idle while a capture chooses its attributes.
_MAX_THREADS = 4
# Per-file group counts held before they are merged (besides twice the groups allowed).
_MERGE_ROWS = 1_000_000
T = TypeVar("T")


def readable_here(pinned: PinnedSnapshot) -> bool:
    """Whether every data file of ``pinned`` is on the local file system (an object store's
    files are left to Spark, which holds the credentials to read them)."""
    return all(urlparse(info.path).scheme in ("", "file") for info in pinned.files)


def groupable_here(pinned: PinnedSnapshot, group_columns: Sequence[str]) -> bool:
    """Whether a stratified sample by ``group_columns`` is drawn here: one column, of a kind
    Arrow groups as Spark does (a float's NaNs and signed zeros may not be; several columns are
    left to Spark's grouping)."""
    if len(group_columns) != 1 or group_columns[0] not in pinned.schema.names:
        return False
    kind = pinned.schema.field(group_columns[0]).type
    return any(
        check(kind)
        for check in (
            pa.types.is_integer,
            pa.types.is_string,
            pa.types.is_large_string,
            pa.types.is_date,
            pa.types.is_timestamp,
            pa.types.is_decimal,
            pa.types.is_boolean,
        )
    )


def uniform_file_sample(
    pinned: PinnedSnapshot, columns: Sequence[str], rate: float, seed: int, *, as_dictionaries: bool = True
) -> tuple[pa.Table, int]:
    """About ``rate`` of the live rows of ``pinned`` (its ``columns``, as the table's schema
    types them), and the number of live rows they were drawn from. ``as_dictionaries``: string
    columns the files store as dictionary indices decoded in the drawn rows only (False: every
    row decoded; the same sample, more slowly: for comparisons)."""
    target = _schema_of(pinned, columns)
    strings = _strings(target) if as_dictionaries else []

    def sample_file(info: DataFileInfo) -> tuple[pa.Table, int]:
        rows, alive = _live_rows(info, target, strings)
        keep = _keys(seed, info, rows.num_rows) < rate
        if alive is None:
            return decoded(rows.filter(pa.array(keep)), target), rows.num_rows
        return decoded(rows.filter(pa.array(keep & alive)), target), int(alive.sum())

    parts = _each_file(pinned, sample_file)
    if not parts:
        return target.empty_table(), 0
    return pa.concat_tables([rows for rows, _ in parts]), sum(live for _, live in parts)


def stratified_file_sample(
    pinned: PinnedSnapshot,
    group_column: str,
    columns: Sequence[str],
    rate: float,
    seed: int,
    oversample: float,
    *,
    as_dictionaries: bool = True,
) -> tuple[pa.Table, np.ndarray] | None:
    """``pinned``'s ``columns`` (``group_column`` among them) stratified by ``group_column``
    (see the module docstring), and each sampled row's group size; None where the groups
    outnumber ``rate`` times the rows (then whole groups are sampled, on Spark).
    ``as_dictionaries``: as for :func:`uniform_file_sample`."""
    counted = _group_counts(pinned, group_column, rate * pinned.record_count, as_dictionaries)
    if counted is None:
        return None
    values, counts = counted
    if len(counts) == 0 or len(counts) > rate * int(counts.sum()):
        return None
    quotas = np.maximum(1, np.ceil(counts * rate)).astype(np.int64)
    shares = np.minimum(1.0, oversample * quotas / counts)
    target = _schema_of(pinned, columns)
    # (The group column decoded: its values are looked up among the counted ones.)
    strings = [s for s in _strings(target) if s != group_column] if as_dictionaries else []

    def survivors(info: DataFileInfo) -> tuple[pa.Table, np.ndarray, np.ndarray]:
        rows, alive = _live_rows(info, target, strings)
        found = pc.index_in(rows.column(group_column), value_set=values, skip_nulls=False)
        # (A value held only by deleted rows is not among the counted ones.)
        group = pc.fill_null(found, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        known = group >= 0
        keys = _keys(seed, info, rows.num_rows)
        keep = known & (keys < shares[np.where(known, group, 0)])
        if alive is not None:
            keep &= alive
        return decoded(rows.filter(pa.array(keep)), target), group[keep], keys[keep]

    parts = _each_file(pinned, survivors)
    rows = pa.concat_tables([p[0] for p in parts])
    # (Group ids are positions in the counts, whose order may vary between draws: they only
    # label the groups here, so the rows kept do not depend on it.)
    group = np.concatenate([p[1] for p in parts])
    keys = np.concatenate([p[2] for p in parts])
    # Each group's quota of its smallest keys among the survivors.
    order = np.lexsort((keys, group))
    ranked = group[order]
    rank = np.arange(len(order)) - np.searchsorted(ranked, ranked, side="left")
    chosen = np.sort(order[rank < quotas[ranked]])
    return rows.take(pa.array(chosen)), counts[group[chosen]]


def _group_counts(
    pinned: PinnedSnapshot, column: str, most: float, as_dictionaries: bool
) -> tuple[pa.Array, np.ndarray] | None:
    """The distinct values of ``column`` among ``pinned``'s live rows (NULL one of them, where
    held) and how many rows hold each; None once they are found to be more than ``most`` (the
    files' counts are merged as they come, so that a column of many values is never held whole:
    a sample of whole groups is then drawn, on Spark)."""
    target = _schema_of(pinned, [column])
    strings = _strings(target) if as_dictionaries else []

    def count(info: DataFileInfo) -> pa.Table:
        rows, alive = _live_rows(info, target, strings)
        values = rows.column(column).combine_chunks()
        counted = pc.value_counts(values if alive is None else values.filter(pa.array(alive)))
        found = counted.field("values")  # (a dictionary's values decoded: one per value)
        return pa.table({"value": found.cast(target.field(column).type), "rows": counted.field("counts")})

    def merged(parts: list[pa.Table]) -> pa.Table:
        together = pa.concat_tables(parts).group_by("value").aggregate([("rows", "sum")])
        return together.rename_columns(["value", "rows"])

    kept: list[pa.Table] = []
    held = 0
    with ThreadPoolExecutor(_threads(pinned), thread_name_prefix="sample") as pool:
        for part in pool.map(count, pinned.files):
            kept.append(part)
            held += part.num_rows
            if held > 2 * most + _MERGE_ROWS:
                kept = [merged(kept)]
                held = kept[0].num_rows
                if held > most:
                    pool.shutdown(cancel_futures=True)
                    return None
    if not kept:
        return pa.array([], target.field(column).type), np.empty(0, dtype=np.int64)
    result = merged(kept)
    return result.column("value").combine_chunks(), result.column("rows").to_numpy().astype(np.int64)


def _schema_of(pinned: PinnedSnapshot, columns: Sequence[str]) -> pa.Schema:
    return pa.schema([pinned.schema.field(c) for c in columns], metadata=pinned.schema.metadata)


def _live_rows(
    info: DataFileInfo, target: pa.Schema, as_dictionaries: Sequence[str] = ()
) -> tuple[pa.Table, np.ndarray | None]:
    """Every row of the file (deleted ones too, so that positions and draws stay the file's),
    and the mask of those not deleted (None: none is); ``as_dictionaries``: see
    :func:`read_whole_file`."""
    rows = read_whole_file(info, target, as_dictionaries=as_dictionaries)
    return rows, live_mask(rows.num_rows, deleted_positions(info)) if info.deletes else None


def _strings(target: pa.Schema) -> list[str]:
    """The string and binary columns of ``target``: read as dictionaries where the file stores
    them so, and decoded once the sample's few rows are picked. A flag or status column decoded
    whole was 40% of the time reading TPC-H SF10 ``lineitem``'s four columns of Q10 (0.5 s of
    1.25 s)."""
    return [
        f.name
        for f in target
        if pa.types.is_string(f.type)
        or pa.types.is_large_string(f.type)
        or pa.types.is_binary(f.type)
        or pa.types.is_large_binary(f.type)
    ]


def _keys(seed: int, info: DataFileInfo, count: int) -> np.ndarray:
    """A uniform random key per row of the file, the same for every draw with ``seed``."""
    return np.random.default_rng([seed, zlib.crc32(info.path.encode())]).random(count)


def _each_file(pinned: PinnedSnapshot, work: Callable[[DataFileInfo], T]) -> list[T]:
    with ThreadPoolExecutor(_threads(pinned), thread_name_prefix="sample") as pool:
        return list(pool.map(work, pinned.files))


def _threads(pinned: PinnedSnapshot) -> int:
    return max(1, min(_MAX_THREADS, os.cpu_count() or 1, len(pinned.files)))
