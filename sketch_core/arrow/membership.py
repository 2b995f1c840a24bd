"""Which values of a column are among a set of wanted ones, for the large sets estimates and
join reads probe with (a sample's hundreds of thousands of order keys against millions of
rows).

Arrow's ``is_in`` hashes every row; integer keys over a dense enough range are instead looked
up in a bitset of the range between the smallest and largest wanted value: at SF10 375,000
order keys against 2.3M `orders` rows, 25 ms instead of 125-190 ms.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# The bitset's size bound, in bits (32 MiB): order keys up to SF40 fit.
MAX_BITSET_BITS = 1 << 28
# Fewer wanted values hash faster than a bitset over their range is cleared.
MIN_BITSET_VALUES = 4_096


def is_in(column: pa.ChunkedArray | pa.Array, values: pa.Array) -> pa.Array | pa.ChunkedArray:
    """Per row of ``column``, whether its value is one of ``values`` (of the column's type); a
    NULL is in only where ``values`` holds a NULL (as Arrow's ``is_in``)."""
    bits = _bitset(column.type, values)
    if bits is None:
        return pc.is_in(column, value_set=values)
    lookup, low, high = bits
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    valid = None
    if column.null_count:
        valid = np.asarray(column.is_valid().to_numpy(zero_copy_only=False))
        column = column.fill_null(pa.scalar(low, column.type))
    data = np.asarray(column.to_numpy(zero_copy_only=False)).astype(np.int64, copy=False)
    inside = (data >= low) & (data <= high)
    offset = np.where(inside, data - low, 0)
    found = inside & ((lookup[offset >> 3] >> (offset & 7).astype(np.uint8)) & 1).astype(bool)
    return pa.array(found if valid is None else found & valid)


def _bitset(kind: pa.DataType, values: pa.Array) -> tuple[np.ndarray, int, int] | None:
    """The bitset of ``values`` over their range, its lowest and highest value; None where
    hashing is the better (or the only) way: not integers that fit int64, NULLs wanted, few
    values, or a range too wide."""
    if not pa.types.is_integer(kind) or kind == pa.uint64() or values.null_count:
        return None
    if len(values) < MIN_BITSET_VALUES:
        return None
    wanted = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.int64)
    low, high = int(wanted.min()), int(wanted.max())
    if high - low >= MAX_BITSET_BITS:
        return None
    offset = wanted - low
    lookup = np.zeros(((high - low) >> 3) + 1, dtype=np.uint8)
    np.bitwise_or.at(lookup, offset >> 3, np.left_shift(1, offset & 7).astype(np.uint8))
    return lookup, low, high
