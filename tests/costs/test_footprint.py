"""State footprints, in full and cut to the top m, on states small enough to count by hand."""

from __future__ import annotations

import pyarrow as pa
import pytest

from sketch_core.costs.budget import exhaust_probability
from sketch_core.costs.footprint import state_footprint

VALUES = pa.list_(pa.struct([("v", pa.int64()), ("n", pa.int64())]))


def test_sums_and_counts_have_nothing_to_cut() -> None:
    sums = pa.table({"key_a": [1, 2, 3], "rows": [4, 5, 6], "acc0_total": ["1", "2", "3"]})
    footprint = state_footprint([sums], keep=2)
    assert footprint.full_bytes == sums.nbytes and footprint.top_m_bytes is None


def test_min_max_values_are_cut_to_twice_m_per_group() -> None:
    lengths = [10, 2, 0, 6]  # with m = 2 the engine keeps at most 4 per group: 4 + 2 + 0 + 4 = 10 of 18
    values = pa.array([[{"v": v, "n": 1} for v in range(k)] for k in lengths], VALUES)
    keys = pa.array([1, 2, 3, 4], pa.int64())
    state = pa.table({"key_a": keys, "acc0_values": values})
    footprint = state_footprint([state], keep=2)
    assert footprint.full_bytes == state.nbytes
    assert footprint.top_m_bytes == round(keys.nbytes + values.nbytes * 10 / 18)
    assert footprint.ordered_groups == 4
    # A large m keeps everything.
    assert state_footprint([state], keep=10).top_m_bytes == state.nbytes


def test_top_k_entries_are_cut_to_twice_m() -> None:
    entries = pa.table({"a": list(range(100)), "__count": [1] * 100})
    merge = pa.table({"table": ["t"] * 5, "fragment": [1, 2, 3, 4, 5], "rows": [1] * 5})
    footprint = state_footprint([entries, merge], keep=5)
    assert footprint.full_bytes == entries.nbytes + merge.nbytes
    assert footprint.top_m_bytes == round(entries.nbytes * 10 / 100 + merge.nbytes)
    assert footprint.ordered_groups == 1


def test_exhaustion_is_the_union_of_each_groups_kept_values_all_deleted() -> None:
    # 1% of the rows deleted per run, m = 3: a group loses all three with 1e-6; 1,000 groups: 1e-3.
    assert exhaust_probability(1000, 1_000_000, 10_000, keep=3) == pytest.approx(1e-3)
    assert exhaust_probability(1000, 1_000_000, 0, keep=3) == 0.0
    assert exhaust_probability(10**9, 100, 50, keep=1) == 1.0  # capped
    with pytest.raises(ValueError):
        state_footprint([], keep=0)
