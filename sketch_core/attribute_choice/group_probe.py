"""Telling cheaply that a table has more groups than a sample may hold strata for.

A stratified sample keeps at least one row of every group, so when the groups outnumber the
rows a sample at its rate may hold, whole groups are sampled instead
(:func:`sketch_core.spark.sampling.draw_sample`). Deciding that by counting every group on
Spark shuffles one row per group: for TPC-H SF10's ``lineitem`` grouped by ``l_orderkey``
(15M groups) 17 s of a first capture that took 47 s. But the rows of a few files hold no more
groups than the whole table, so when the group columns of the table's first files, read
in-process, already hold more groups than the limit, so does the table: the same decision,
without the count. When they do not (big groups, or a table sorted by something else), the
probe says nothing and Spark counts, which for big groups is cheap (its partial aggregation
collapses them).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from sketch_core.tables.file_columns import stored_as_named
from sketch_core.tables.orphans import local_path
from sketch_core.tables.pinned import PinnedSnapshot

# The most rows read: several times the largest sample (attribute_choice.store.MAX_SAMPLE_ROWS),
# so that groups of a few rows each (order lines per order) show more groups than a sample may
# hold, while the read stays a fraction of a second.
PROBE_ROWS = 4_000_000
_BATCH_ROWS = 1 << 16


def more_groups_than(
    pinned: PinnedSnapshot, group_columns: Sequence[str], limit: float, max_rows: int = PROBE_ROWS
) -> bool:
    """Whether ``pinned`` surely has more than ``limit`` groups of ``group_columns`` (NULL
    being a group of its own), from at most ``max_rows`` rows of its first files. False means
    the probe cannot tell, not that the groups are fewer."""
    columns = list(group_columns)
    # (Files read by name: where names are not what the files hold, the probe could count
    # another column's values.)
    if not columns or not pinned.files or not stored_as_named(pinned.schema):
        return False
    types = [pinned.schema.field(c).type for c in columns if c in pinned.schema.names]
    if len(types) < len(columns) or any(pa.types.is_floating(t) for t in types):
        # Spark groups NaNs and signed zeros together where Arrow's hashing may not: a count
        # that could exceed Spark's is no proof.
        return False
    groups: pa.Table | None = None
    read = 0
    try:
        for info in pinned.files:
            if read >= max_rows:
                break
            if info.deletes:  # its deleted rows may hold groups the table no longer has
                continue
            rows = _first_rows(info.path, columns, max_rows - read)
            if rows is None or rows.num_rows == 0:
                continue
            read += rows.num_rows
            both = rows if groups is None else pa.concat_tables([groups, rows.cast(groups.schema)])
            groups = both.group_by(columns, use_threads=False).aggregate([]).select(columns)
            if groups.num_rows > limit:
                return True
    except (OSError, pa.ArrowException):  # unreadable here: Spark counts
        return False
    return False


def _first_rows(path: str, columns: list[str], most: int) -> pa.Table | None:
    """Up to ``most`` of the file's first rows' ``columns``; None when it lacks one of them
    (written before a column was added, or under another name)."""
    file = pq.ParquetFile(local_path(path))
    if not set(columns) <= set(file.schema_arrow.names):
        return None
    batches, read = [], 0
    for batch in file.iter_batches(batch_size=_BATCH_ROWS, columns=columns, use_threads=False):
        batches.append(batch)
        read += batch.num_rows
        if read >= most:
            break
    return pa.Table.from_batches(batches).select(columns) if batches else None
