"""Whether a table's Parquet files carry a page index on a column, read from a footer.

A page index (a column index with each page's bounds, and an offset index) lets Spark's
Parquet reader skip the pages of a row group whose bounds miss every pushed range, so a
sketch's exact ranges then skip most of the rows of the files it keeps (see
:func:`sketch_core.partitions.pruning.pushed_intervals`). Iceberg's Java writer, and so every
Spark write to an Iceberg table, writes one; Arrow's writer (PyIceberg's) does not.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from sketch_core.lru import LruMap
from sketch_core.tables.orphans import local_path
from sketch_core.tables.pinned import DataFileInfo

# Data files are immutable, so an answer holds for as long as the path exists; bounded so a
# long-running service does not keep every path it ever read.
_CACHE_LIMIT = 4096
_answers: LruMap[tuple[str, str], bool] = LruMap(_CACHE_LIMIT)


def has_page_index(files: Sequence[DataFileInfo], column: str) -> bool:
    """Whether the largest of ``files`` (the one holding most of the rows a scan of them
    reads) has a page index on ``column``. False when its footer cannot be read here (a
    file system Arrow cannot open) or it has no such column: the caller then treats the
    files as plain Parquet, which is always sound."""
    if not files:
        return False
    largest = max(files, key=lambda info: info.record_count)
    key = (largest.path, column)
    answer = _answers.get(key)
    if answer is None:
        answer = _footer_has_page_index(largest.path, column)
        _answers.put(key, answer)
    return answer


def _footer_has_page_index(path: str, column: str) -> bool:
    try:
        metadata = pq.read_metadata(local_path(path))
    except (OSError, pa.ArrowException):
        return False
    if metadata.num_row_groups == 0:
        return False
    group = metadata.row_group(0)
    for index in range(group.num_columns):
        chunk = group.column(index)
        if chunk.path_in_schema == column:
            return bool(chunk.has_column_index and chunk.has_offset_index)
    return False
