"""Decimal arrays as their unscaled integers (exact Python ints) and back, without a Python
object per value: a ``decimal128`` is a 16-byte two's-complement integer, read and written as
two 64-bit words."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_LOW = (1 << 64) - 1


def to_unscaled(values: pa.Array | pa.ChunkedArray, scale: int) -> np.ndarray:
    """The values times 10**scale, as an object array of ints (NULL as 0); exact when
    ``scale`` is at least the values' own scale."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    values = pc.fill_null(values.cast(pa.decimal128(38, scale)), pa.scalar(0).cast(pa.decimal128(38, scale)))
    words = np.frombuffer(values.buffers()[1], dtype=np.uint64)
    words = words[2 * values.offset : 2 * (values.offset + len(values))].reshape(-1, 2)
    high = words[:, 1].view(np.int64).astype(object)
    unscaled: np.ndarray = (high << 64) + words[:, 0].astype(object)
    return unscaled


def from_unscaled(unscaled: np.ndarray, kind: pa.DataType, valid: np.ndarray | None = None) -> pa.Array:
    """Unscaled ints (an object array) as a decimal array of type ``kind``; NULL where not
    ``valid``. Raises ArithmeticError when a value does not fit the type's precision."""
    count = len(unscaled)
    if count and max(abs(int(v)) for v in (unscaled.max(), unscaled.min())) >= 10**kind.precision:
        raise ArithmeticError(f"a sum does not fit {kind}")
    words = np.empty((count, 2), dtype=np.uint64)
    words[:, 0] = (unscaled & _LOW).astype(np.uint64) if count else []
    words[:, 1] = (unscaled >> 64).astype(np.int64).view(np.uint64) if count else []
    array = pa.Array.from_buffers(kind, count, [None, pa.py_buffer(words.tobytes())])
    if valid is not None and not valid.all():
        array = pc.if_else(pa.array(valid), array, pa.scalar(None, kind))
    return array
