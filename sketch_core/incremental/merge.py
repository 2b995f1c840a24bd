"""The final merge μ (IMP Sec. 5.1): per fragment, how many result rows depend on it.

A fragment enters the sketch when its counter leaves zero and leaves the sketch when its
counter returns to zero; the merge turns the query result's annotated delta into a sketch
delta. Counters are kept per table (several scans of one table feed one sketch).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

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
        """Add the delta's rows to the counters; returns the fragments that changed membership."""
        before = {t: set(c) for t, c in self.counters.items()}
        multiplicities = rows.table.column(MULTIPLICITY).combine_chunks()
        for annotation in rows.annotations:
            table = self.tables[annotation]
            counter = self.counters.setdefault(table, Counter())
            # Summed per fragment with Arrow first: one step per fragment, not per row.
            lists = rows.table.column(annotation).combine_chunks()
            flat = pa.table(
                {
                    "f": pc.list_flatten(lists),
                    "n": pc.take(multiplicities, pc.list_parent_indices(lists)).cast(pa.int64()),
                }
            )
            sums = flat.group_by("f", use_threads=False).aggregate([("n", "sum")])
            for fragment, n in zip(
                sums.column("f").to_pylist(), sums.column("n_sum").to_pylist(), strict=True
            ):
                counter[fragment] += n
        added: dict[str, set[int]] = {}
        removed: dict[str, set[int]] = {}
        for table, counter in self.counters.items():
            for fragment in [f for f, n in counter.items() if n == 0]:
                del counter[fragment]
            if any(n < 0 for n in counter.values()):
                raise AssertionError(f"a fragment counter of {table} went negative: the state is corrupt")
            now, then = set(counter), before.get(table, set())
            added[table], removed[table] = now - then, then - now
        return SketchDelta(added, removed)


def counters_from_sketch_rows(tables: Mapping[str, str], rows: AnnotatedDelta) -> MergeState:
    """A merge state initialized from the full annotated result of the query."""
    state = MergeState(dict(tables))
    state.apply(rows)
    return state
