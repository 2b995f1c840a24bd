"""The final merge μ (IMP Sec. 5.1): per fragment, how many result rows depend on it.

A fragment enters the sketch when its counter leaves zero and leaves the sketch when its
counter returns to zero; the merge turns the query result's annotated delta into a sketch
delta. Counters are kept per table (several scans of one table feed one sketch).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sketch_core.incremental.annotated import MULTIPLICITY, AnnotatedDelta


@dataclass(frozen=True)
class SketchDelta:
    added: dict[str, set[int]]  # table -> fragments that entered the sketch
    removed: dict[str, set[int]]  # table -> fragments that left it

    @property
    def is_empty(self) -> bool:
        return not any(self.added.values()) and not any(self.removed.values())


@dataclass
class MergeState:
    tables: dict[str, str]  # annotation -> table
    counters: dict[str, Counter[int]] = field(default_factory=dict)  # table -> fragment -> rows

    def sketch(self) -> dict[str, set[int]]:
        return {
            table: {f for f, n in self.counters.get(table, Counter()).items() if n > 0}
            for table in set(self.tables.values())
        }

    def apply(self, rows: AnnotatedDelta) -> SketchDelta:
        """Add the delta's rows to the counters; returns the fragments that changed membership.

        Only the fragments whose counters change are visited: an aggregation's update retracts
        its old row and emits the new one, often with the same fragments, so most cancel.
        """
        multiplicities = rows.table.column(MULTIPLICITY).combine_chunks()
        net: dict[str, Counter[int]] = {}
        for annotation in rows.annotations:
            table = self.tables[annotation]
            lists = rows.table.column(annotation).combine_chunks()
            fragments = pc.list_flatten(lists).to_numpy(zero_copy_only=False)
            if len(fragments) == 0:
                continue
            counts = pc.take(multiplicities, pc.list_parent_indices(lists)).cast(pa.int64()).to_numpy()
            # Summed per fragment first, exactly: one step per fragment, not per row.
            order = np.argsort(fragments, kind="stable")
            fragments, counts = fragments[order], counts[order]
            starts = np.flatnonzero(np.r_[True, fragments[1:] != fragments[:-1]])
            sums = np.add.reduceat(counts, starts)
            changed = np.flatnonzero(sums)
            net.setdefault(table, Counter()).update(
                dict(zip(fragments[starts[changed]].tolist(), sums[changed].tolist(), strict=True))
            )
        added: dict[str, set[int]] = {t: set() for t in self.counters}
        removed: dict[str, set[int]] = {t: set() for t in self.counters}
        for table, changes in net.items():
            counter = self.counters.setdefault(table, Counter())
            entered, left = added.setdefault(table, set()), removed.setdefault(table, set())
            for fragment, n in changes.items():
                if n == 0:
                    continue
                old = counter.get(fragment, 0)
                new = old + n
                if new < 0:
                    raise AssertionError(f"a fragment counter of {table} went negative: the state is corrupt")
                if new == 0:
                    del counter[fragment]
                    left.add(fragment)
                else:
                    counter[fragment] = new
                    if old == 0:
                        entered.add(fragment)
        return SketchDelta(added, removed)


def counters_from_sketch_rows(tables: Mapping[str, str], rows: AnnotatedDelta) -> MergeState:
    """A merge state initialized from the full annotated result of the query."""
    state = MergeState(dict(tables))
    state.apply(rows)
    return state
