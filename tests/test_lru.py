"""The bounded map the package's in-memory caches share."""

from __future__ import annotations

import os
import threading

import pytest

from sketch_core.lru import LruMap


def test_the_least_recently_used_entry_goes_first() -> None:
    kept: LruMap[str, int] = LruMap(2)
    assert kept.put("a", 1) == [] and kept.put("b", 2) == []
    assert kept.get("a") == 1  # "b" is now the least recently used
    assert kept.put("c", 3) == [("b", 2)]
    assert kept.keys() == ["a", "c"] and "b" not in kept and kept.get("b") is None
    assert kept.put("a", 10) == []  # replacing keeps one entry per key
    assert kept.keys() == ["c", "a"] and kept.get("a") == 10 and len(kept) == 2


def test_a_missing_key_and_a_kept_none_are_told_apart_by_the_default() -> None:
    missing = object()
    kept: LruMap[str, int | None] = LruMap(4)
    kept.put("none", None)
    assert kept.get("none", missing) is None
    assert kept.get("other", missing) is missing
    assert kept.pop("none") is None and kept.get("none", missing) is missing


def test_a_capacity_read_from_a_setting_applies_at_the_next_put() -> None:
    setting = {"entries": 3}
    kept: LruMap[int, int] = LruMap(lambda: setting["entries"])
    for i in range(3):
        kept.put(i, i)
    setting["entries"] = 1
    assert kept.put(3, 3) == [(0, 0), (1, 1), (2, 2)]
    setting["entries"] = 0
    assert kept.put(4, 4) == [(3, 3), (4, 4)] and len(kept) == 0  # 0 keeps nothing


def test_get_or_make_makes_each_value_once_across_threads() -> None:
    made: list[int] = []
    barrier = threading.Barrier(8)
    kept: LruMap[str, int] = LruMap(4)

    def make() -> int:
        made.append(1)
        return len(made)

    def worker(results: list[int]) -> None:
        barrier.wait()
        results.append(kept.get_or_make("pool", make))

    results: list[int] = []
    threads = [threading.Thread(target=worker, args=(results,)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert made == [1] and results == [1] * 8


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_empties_the_map_even_if_its_lock_was_held_at_the_fork() -> None:
    kept: LruMap[str, int] = LruMap(4)
    kept.put("parent", 1)
    kept._lock.acquire()  # as if another thread held it when the process forked
    try:
        pid = os.fork()
        if pid == 0:  # the child: must not block on the parent's lock
            ok = kept.forget_after_fork() == [1] and len(kept) == 0
            kept.put("child", 2)
            os._exit(0 if ok and kept.keys() == ["child"] else 1)
        _, status = os.waitpid(pid, 0)
    finally:
        kept._lock.release()
    assert os.waitstatus_to_exitcode(status) == 0
    assert kept.keys() == ["parent"]
