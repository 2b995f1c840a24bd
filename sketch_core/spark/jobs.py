"""Spark job failures as the project's typed, transient error."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from py4j.protocol import Py4JError
from pyspark.errors import AnalysisException, PySparkException

from sketch_core.errors import SparkJobError


@contextmanager
def spark_job(what: str) -> Iterator[None]:
    """Run Spark work, turning a job that fails while running into :class:`SparkJobError`
    (transient). An ``AnalysisException`` is the query's fault, not the job's: it passes."""
    try:
        yield
    except AnalysisException:
        raise
    except (PySparkException, Py4JError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SparkJobError(what, first_line) from exc
