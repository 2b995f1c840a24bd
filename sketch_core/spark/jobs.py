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


def _java_cause(exc: Py4JError) -> str | None:
    """The innermost Java cause of a JVM error, as its class and message: Py4J's own first line
    names only the method called ("An error occurred while calling o146.getResult."), and
    Spark wraps a job's failure (such as results beyond ``spark.driver.maxResultSize``) in
    "Exception thrown in awaitResult"."""
    error = getattr(exc, "java_exception", None)
    try:
        for _ in range(16):  # (a cause chain is short; a cycle must not hang the error path)
            cause = error.getCause() if error is not None else None
            if cause is None:
                break
            error = cause
        text = str(error.toString()).strip() if error is not None else ""
    except Py4JError:  # the gateway is gone: Py4J's own message is all there is
        return None
    return text.splitlines()[0] if text else None


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
        raise SparkJobError(what, _java_cause(exc) or _first_line(exc)) from exc
