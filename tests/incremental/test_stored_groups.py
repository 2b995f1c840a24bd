"""Lazily read groups behave like the dict they stand for, and read only what is used."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from sketch_core.incremental.stored_groups import StoredGroups


def _layer(keys: list[int], rows: list[int]) -> pa.Table:
    return pa.table({"k": pa.array(keys, pa.int64()), "rows": pa.array(rows, pa.int64())})


def _groups(built: list[int]) -> StoredGroups[dict[str, Any]]:
    def build(record: dict[str, Any]) -> dict[str, Any]:
        built.append(record["k"])
        return dict(record)

    whole = _layer([1, 2, 3, 4], [10, 20, 30, 40])
    changes = _layer([2, 3, 5], [21, 0, 50])  # 2 changed, 3 vanished, 5 is new
    return StoredGroups([whole, changes], lambda t: [(k,) for k in t.column("k").to_pylist()], build)


def test_the_newest_stored_row_of_each_group_wins_and_vanished_groups_are_gone() -> None:
    built: list[int] = []
    groups = _groups(built)
    assert len(groups) == 4 and built == []  # nothing read yet
    assert groups[(2,)]["rows"] == 21 and built == [2]
    assert (3,) not in groups and groups.get((3,)) is None
    groups.preload([(1,), (5,), (2,), (9,)])
    assert sorted(built) == [1, 2, 5]  # each read once; unknown keys ignored
    assert dict((k, v["rows"]) for k, v in groups.items()) == {(1,): 10, (2,): 21, (4,): 40, (5,): 50}


def test_changes_deletions_and_what_is_left_untouched() -> None:
    built: list[int] = []
    groups = _groups(built)
    groups[(7,)] = {"k": 7, "rows": 70}  # a new group
    del groups[(4,)]  # a stored group, never read
    del groups[(1,)]
    groups[(1,)] = {"k": 1, "rows": 11}  # deleted, then back
    assert len(groups) == 4 and sorted(groups) == [(1,), (2,), (5,), (7,)]
    with pytest.raises(KeyError):
        del groups[(4,)]
    with pytest.raises(KeyError):
        groups[(3,)]
    # Rows never read nor deleted, as stored: 2 and 5 (1 was replaced, 4 deleted).
    assert groups.untouched_rows().column("k").to_pylist() == [2, 5]
    assert built == []  # not even the groups deleted or replaced were read
