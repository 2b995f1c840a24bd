"""Bloom filters over join keys (IMP 9.4.1).

A join's delta ΔR ⋈ S' reads S' from storage for the delta's keys. A Bloom filter over the key
values S' holds drops, before that read, the delta rows that cannot have a partner; when none
is left the read is skipped. The filter never has false negatives as long as every key S' holds
was added, so it is safe to keep keys that were deleted since: they only let a few rows through
that the join then drops. Deletions are counted instead, and a filter whose keys are mostly
gone (or that has taken in far more keys than it was sized for) is reported stale, to be built
again from S'.

Keys are tuples of integer-like values (integers, dates, timestamps, booleans), hashed with
splitmix64, so the filter means the same in every process and can be stored with the state.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

BITS_PER_KEY = 10  # with 5 hash functions: about 1% false positives at capacity
HASHES = 5
_MIN_BITS = 1 << 10

_U64 = np.uint64
# What a state stores for "no filter" (or, in a layer of changes, "unchanged").
EMPTY_BLOOM = pa.table({"words": pa.array([], pa.uint64())})


def hashable(types: Sequence[pa.DataType]) -> bool:
    """Whether keys of these types can go into a filter."""
    return bool(types) and all(
        pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_boolean(t)
        for t in types
    )


def _as_int64(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    kind = column.type
    if pa.types.is_boolean(kind):
        column = pc.cast(column, pa.int8())
    elif pa.types.is_date32(kind):
        column = column.cast(pa.int32())
    elif pa.types.is_date64(kind) or pa.types.is_timestamp(kind):
        column = column.cast(pa.int64())
    return np.asarray(pc.fill_null(column, 0).to_numpy(zero_copy_only=False), dtype=np.int64)


def _mix(values: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: a well-spread 64-bit hash of each value."""
    with np.errstate(over="ignore"):
        z = values.astype(_U64) + _U64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
        return z ^ (z >> _U64(31))


def key_hashes(columns: Sequence[pa.Array | pa.ChunkedArray]) -> tuple[np.ndarray, np.ndarray]:
    """A 64-bit hash per row of the key columns, and whether the row's key has no NULL (a key
    with a NULL never equals anything, so it is neither added nor found)."""
    rows = len(columns[0])
    hashed = np.zeros(rows, dtype=_U64)
    valid = np.ones(rows, dtype=bool)
    for column in columns:
        with np.errstate(over="ignore"):
            hashed = _mix(hashed * _U64(31) ^ _mix(_as_int64(column)))
        if column.null_count:
            valid &= np.asarray(pc.is_valid(column).to_numpy(zero_copy_only=False), dtype=bool)
    return hashed, valid


class KeyBloom:
    """A Bloom filter over key tuples, sized for ``capacity`` keys."""

    def __init__(
        self, capacity: int, words: np.ndarray | None = None, added: int = 0, deleted: int = 0
    ) -> None:
        bits = max(_MIN_BITS, 1 << int(max(1, capacity) * BITS_PER_KEY - 1).bit_length())
        self.capacity = max(1, capacity)
        self.words = np.zeros(bits // 64, dtype=_U64) if words is None else words
        self.added = added  # key rows added, duplicates included
        self.deleted = deleted  # key rows deleted since it was built
        self.dirty = words is None

    @property
    def bits(self) -> int:
        return len(self.words) * 64

    def _positions_by_hash(self, hashed: np.ndarray) -> Iterator[np.ndarray]:
        """Each hash function's bit position per hash (double hashing), one function at a time."""
        low, high = hashed & _U64(0xFFFFFFFF), (hashed >> _U64(32)) | _U64(1)
        mask = _U64(self.bits - 1)
        with np.errstate(over="ignore"):
            for step in range(HASHES):
                yield (low + _U64(step) * high) & mask

    def _positions(self, hashed: np.ndarray) -> np.ndarray:
        """HASHES bit positions per hash, shape (HASHES, rows)."""
        return np.stack(list(self._positions_by_hash(hashed)))

    def add(self, columns: Sequence[pa.Array | pa.ChunkedArray]) -> None:
        hashed, valid = key_hashes(columns)
        hashed = hashed[valid]
        if hashed.size:
            # A byte per bit, marked a hash function at a time and packed into words once:
            # setting the same bit twice is harmless, so plain assignment does what an OR per
            # position (``np.bitwise_or.at``) did, which took 3 s of a filter over 15M keys
            # (TPC-H SF10 orders: the first maintenance run after a capture builds it).
            marks = np.zeros(self.bits, dtype=np.uint8)
            for positions in self._positions_by_hash(hashed):
                marks[positions.astype(np.intp)] = 1
            # Bit p of the filter is bit p % 64 of word p // 64: packed little-endian.
            self.words |= np.packbits(marks, bitorder="little").view("<u8").astype(_U64)
            self.dirty = True
        self.added += int(valid.sum())

    def note_deleted(self, rows: int) -> None:
        if rows:
            self.deleted += rows
            self.dirty = True

    def might_contain(self, columns: Sequence[pa.Array | pa.ChunkedArray]) -> np.ndarray:
        """Per row: False when the key is certainly not in the filter."""
        hashed, valid = key_hashes(columns)
        positions = self._positions(hashed)
        words = self.words[(positions >> _U64(6)).astype(np.int64)]
        found = ((words >> (positions & _U64(63))) & _U64(1)).astype(bool).all(axis=0)
        return found & valid

    @property
    def stale(self) -> bool:
        """Mostly deleted keys, or far more keys than it was sized for: worth building again."""
        return self.deleted > max(self.added, 1) // 2 or self.added > 4 * self.capacity

    # -- stored form ----------------------------------------------------------------------------
    def to_table(self) -> pa.Table:
        counts = {"capacity": self.capacity, "added": self.added, "deleted": self.deleted}
        return pa.table({"words": pa.array(self.words, pa.uint64())}).replace_schema_metadata(
            {k: str(v) for k, v in counts.items()}
        )

    @classmethod
    def from_table(cls, table: pa.Table) -> KeyBloom | None:
        """The filter stored by :meth:`to_table`; None for an empty table (no filter)."""
        if table.num_rows == 0:
            return None
        meta = {k.decode(): int(v) for k, v in (table.schema.metadata or {}).items()}
        words = np.asarray(table.column("words").to_numpy(), dtype=_U64).copy()
        bloom = cls(meta["capacity"], words, meta["added"], meta["deleted"])
        bloom.dirty = False
        return bloom
