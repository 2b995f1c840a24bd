"""Spark job failures as the project's typed, transient error."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from py4j.protocol import Py4JError
from pyspark.errors import AnalysisException, PySparkException

from sketch_core.errors import SparkJobError, SparkQueryError

# SQLSTATE class 22: a data exception (division by zero, a malformed cast, an overflow).
_DATA_EXCEPTION = "22"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextmanager
def spark_job(what: str) -> Iterator[None]:
    """Run Spark work, turning its failures into the project's errors: the query's own
    (analysis errors, and data errors under ANSI mode) into :class:`SparkQueryError`, terminal;
    a job that fails while running into :class:`SparkJobError`, transient."""
    try:
        yield
    except AnalysisException as exc:
        raise SparkQueryError(what, _first_line(exc), exc.getSqlState()) from exc
    except PySparkException as exc:
        state = exc.getSqlState()
        if state is not None and state.startswith(_DATA_EXCEPTION):
            raise SparkQueryError(what, _first_line(exc), state) from exc
        raise SparkJobError(what, _first_line(exc)) from exc
    except Py4JError as exc:
        raise SparkJobError(what, _first_line(exc)) from exc
