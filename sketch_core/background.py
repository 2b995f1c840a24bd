"""A call run on a thread of its own while the caller goes on (a round trip overlapped with
another one), with its result or its exception handed back when asked for."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Background(Generic[T]):
    """``call()`` on a new thread, started at once; :meth:`result` waits for it.

    A thread per call, not a pool: a pool's threads do not survive a fork (Airflow forks task
    processes), and starting one costs ~0.1 ms, little beside the round trip it overlaps."""

    def __init__(self, call: Callable[[], T], name: str = "sketch-background") -> None:
        self._call = call
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._call()
        except BaseException as exc:  # handed to the caller by result()
            self._error = exc

    def result(self) -> T:
        """The call's value, once it returned; its exception, raised here, if it raised."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]
