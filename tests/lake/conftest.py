"""Fixtures of the lakehouse tests."""

from __future__ import annotations

import pytest
from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

# Every way PySpark brings a DataFrame's rows to the driver (take, head, first and show too).
COLLECTING = ("collect", "toArrow", "toPandas", "toLocalIterator", "take", "head", "first", "show")


class DriverCollections:
    """Inside ``with``, collecting any DataFrame's rows fails and is noted in ``calls``."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self._patch = pytest.MonkeyPatch()

    def __enter__(self) -> DriverCollections:
        for method in COLLECTING:
            self._patch.setattr(ClassicDataFrame, method, self._refuse(method))
        return self

    def __exit__(self, *exc: object) -> None:
        self._patch.undo()

    def _refuse(self, method: str):  # type: ignore[no-untyped-def]
        def collecting(*args: object, **kwargs: object) -> None:
            self.calls.append(method)
            raise AssertionError(f"DataFrame.{method} collected rows to the driver")

        return collecting
