"""How much memory a sketch's operator state takes, in full and cut to its top m values.

Measured on the state's Arrow tables (as stored: Arrow IPC, so bytes on disk are bytes in
memory). The top-m size follows what the engine keeps with ``keep_top=m`` (IMP 9.4.3): a
min/max keeps at most ``2 m`` values per group (it cuts back to ``m`` once it holds twice that),
and a top-k at most ``2 m`` entries; counters and running totals are kept whole. A state with
no ordered values (sums and counts only) has no top-m mode: cutting would save nothing. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

# The list columns that hold ordered values in an aggregation's state (see incremental/state.py).
_ORDERED_LISTS = re.compile(r"acc\d+_values|at\d+")
_TOPK_COUNT = "__count"


@dataclass(frozen=True)
class Footprint:
    full_bytes: int
    top_m_bytes: int | None  # None: nothing to cut (no min/max or top-k state)
    ordered_groups: int = 0  # groups holding min/max values, plus one per top-k: what a cut risks


def state_footprint(tables: Iterable[pa.Table], keep: int) -> Footprint:
    """The footprint of a state given as its operators' tables (a layered state's layers all
    count in full: an upper bound)."""
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    full = cut = 0.0
    ordered = False
    groups = 0
    for table in tables:
        full += table.nbytes
        if _TOPK_COUNT in table.column_names:
            ordered = True
            groups += 1
            cut += table.nbytes * min(1.0, 2 * keep / max(1, table.num_rows))
            continue
        if any(_ORDERED_LISTS.fullmatch(name) for name in table.column_names):
            groups += table.num_rows
        for name in table.column_names:
            column = table.column(name)
            if not _ORDERED_LISTS.fullmatch(name):
                cut += column.nbytes
                continue
            ordered = True
            lengths = pc.fill_null(pc.list_value_length(column), 0)
            total = pc.sum(lengths).as_py() or 0
            kept = pc.sum(pc.min_element_wise(lengths, 2 * keep)).as_py() or 0
            cut += column.nbytes * (kept / total if total else 1.0)
    return Footprint(int(full), round(cut) if ordered else None, groups)
