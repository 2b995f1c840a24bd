"""Merge-on-read deletes: the row positions of a data file that its delete files remove.

A merge-on-read DELETE, UPDATE or MERGE (Spark's ``write.*.mode = merge-on-read``) leaves the
data files as they are and writes which of their rows are gone: position-delete files (format
v2; Parquet rows of ``file_path, pos``) or deletion vectors (format v3; a Roaring bitmap per data
file in a Puffin file). A reader of a snapshot drops those positions from each data file. Both
are written once and never changed, so what a delete file says about a data file is cached.

Between two snapshots a data file may stay while the positions deleted from it grow: the rows
at the new positions are the delete's rows (the delta's deleted side), read from the data file
itself. Equality deletes (rows removed by value, written by streaming engines) are not read
here; the table service refuses tables that have them, by name.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.table.deletion_vector import deletion_vectors_from_puffin_file
from pyiceberg.table.puffin import PuffinFile

from sketch_core.lru import LruMap
from sketch_core.tables.orphans import local_path
from sketch_core.tables.pinned import DataFileInfo

_NONE = np.empty(0, dtype=np.int64)
# Delete files whose positions are kept (each maps data files to sorted positions).
_CACHED_DELETE_FILES = 256
_cache: LruMap[str, dict[str, np.ndarray]] = LruMap(_CACHED_DELETE_FILES)


def _read_delete_file(path: str) -> dict[str, np.ndarray]:
    """Per data file path, the sorted positions the delete file at ``path`` removes."""
    local = local_path(path)
    if path.endswith(".puffin"):
        with open(local, "rb") as handle:
            vectors = deletion_vectors_from_puffin_file(PuffinFile(handle.read()))
        return {
            dv.referenced_data_file: np.sort(dv.to_vector().to_numpy().astype(np.int64)) for dv in vectors
        }
    rows = pq.read_table(local, columns=["file_path", "pos"])
    found: dict[str, np.ndarray] = {}
    for data_path in pc.unique(rows.column("file_path")).to_pylist():
        mask = pc.equal(rows.column("file_path"), data_path)
        found[data_path] = np.sort(rows.column("pos").filter(mask).to_numpy().astype(np.int64))
    return found


def _positions_by_file(path: str) -> dict[str, np.ndarray]:
    known = _cache.get(path)
    if known is None:
        known = _read_delete_file(path)
        _cache.put(path, known)
    return known


def deleted_positions(info: DataFileInfo) -> np.ndarray:
    """The sorted, distinct row positions of ``info``'s data file that its delete files remove."""
    if not info.deletes:
        return _NONE
    parts = [_positions_by_file(delete).get(info.path, _NONE) for delete in info.deletes]
    return np.unique(np.concatenate(parts)) if parts else _NONE


def live_mask(num_rows: int, positions: np.ndarray) -> np.ndarray:
    """A mask of a file's ``num_rows`` rows that keeps all but those at ``positions``."""
    keep = np.ones(num_rows, dtype=bool)
    keep[positions[positions < num_rows]] = False
    return keep


def without_positions(rows: pa.Table, positions: np.ndarray) -> pa.Table:
    """``rows`` (a whole data file, in file order) less those at ``positions``."""
    return rows if len(positions) == 0 else rows.filter(pa.array(live_mask(rows.num_rows, positions)))


def changed_positions(before: DataFileInfo, after: DataFileInfo) -> tuple[np.ndarray, np.ndarray]:
    """For one data file in two snapshots: (positions deleted since ``before``, positions that
    came back). The second is empty in practice (Iceberg never undeletes a row of a live file)."""
    old, new = deleted_positions(before), deleted_positions(after)
    return np.setdiff1d(new, old, assume_unique=True), np.setdiff1d(old, new, assume_unique=True)
