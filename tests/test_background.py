"""A call on a thread of its own: its value, or its exception, handed back by result()."""

from __future__ import annotations

import threading

import pytest

from sketch_core.background import Background


def test_the_call_runs_on_another_thread_at_once_and_its_value_comes_back() -> None:
    started = threading.Event()
    go_on = threading.Event()

    def call() -> str:
        started.set()
        go_on.wait(10)
        return threading.current_thread().name

    running = Background(call, "probe")
    assert started.wait(10), "started before result() is asked for"
    go_on.set()
    assert running.result() == "probe" != threading.current_thread().name
    assert running.result() == "probe", "asked again: the same value"


def test_the_calls_exception_is_raised_by_result() -> None:
    def call() -> int:
        raise KeyError("gone")

    with pytest.raises(KeyError, match="gone"):
        Background(call).result()
