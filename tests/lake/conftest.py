"""Fixtures of the lakehouse tests."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TypeVar

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

T = TypeVar("T")

# Every way PySpark brings a DataFrame's rows to the driver (take, head, first and show too).
COLLECTING = ("collect", "toArrow", "toPandas", "toLocalIterator", "take", "head", "first", "show")


class DriverCollections:
    """Inside ``with``, collecting any DataFrame's rows fails and is noted in ``calls``; except
    from a function named ``allowed_in`` (a small preview), noted in ``allowed``."""

    def __init__(self, allowed_in: str | None = None) -> None:
        self.calls: list[str] = []
        self.allowed: list[str] = []
        self.allowed_in = allowed_in
        self._patch = pytest.MonkeyPatch()

    def __enter__(self) -> DriverCollections:
        for method in COLLECTING:
            self._patch.setattr(ClassicDataFrame, method, self._refuse(method))
        return self

    def __exit__(self, *exc: object) -> None:
        self._patch.undo()

    def _refuse(self, method: str):  # type: ignore[no-untyped-def]
        original = getattr(ClassicDataFrame, method)

        def collecting(*args: object, **kwargs: object) -> object:
            if self.allowed_in is not None and any(
                f.function == self.allowed_in for f in inspect.stack(context=0)
            ):
                self.allowed.append(method)
                return original(*args, **kwargs)
            self.calls.append(method)
            raise AssertionError(f"DataFrame.{method} collected rows to the driver")

        return collecting


def spark_sql_during(spark: SparkSession, run: Callable[[], T]) -> tuple[T, list[str]]:
    """``run()``'s result and the SQL texts it handed to ``spark.sql``."""
    ran: list[str] = []
    real_sql = spark.sql

    def recording(text: str, *args: object, **kwargs: object) -> object:
        ran.append(text)
        return real_sql(text, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(spark, "sql", recording)
        return run(), ran
