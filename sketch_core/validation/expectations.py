"""Validating a delta batch against a table's suite with Great Expectations.

The suite (:mod:`sketch_core.validation.suite`) becomes a Great Expectations suite over the
batch's inserted rows as a pandas frame (Arrow-backed, so NULLs stay NULLs): the columns in
order, no NULLs where values are required, learned value domains, and the row count the
commit's metadata states. Column types are compared on the Arrow schema itself: Great
Expectations' pandas type check reads Arrow-backed columns as Python values (it sees ``int``
for int32 and int64 alike), which cannot tell a widened type from the learned one.

Great Expectations takes seconds to import, so it is imported on the first validation that
needs it, and one ephemeral context serves the process. Most batches do not need it: a batch
that :func:`sketch_core.validation.screen.certainly_passes` (the same expectations in Arrow,
answering only when certain) has no failures to report.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from typing import Any

import pyarrow as pa

from sketch_core.metastore.validations import Failure
from sketch_core.validation.screen import certainly_passes
from sketch_core.validation.suite import TableSuite, domain_bounds

log = logging.getLogger(__name__)

# How many offending values a failure quotes.
_SAMPLE_VALUES = 5


def validate_batch(
    suite: TableSuite,
    batch: pa.Table,
    required: list[str],
    expected_rows: int | None,
    slack: float,
) -> list[Failure]:
    """The expectations of ``suite`` that the inserted rows ``batch`` fails (empty: it
    passes). ``required``: columns that must have no NULLs; ``expected_rows``: the row count the
    commit's metadata states (None: not checked)."""
    if certainly_passes(suite, batch, required, expected_rows, slack):
        return []
    return great_expectations_failures(suite, batch, required, expected_rows, slack)


def great_expectations_failures(
    suite: TableSuite,
    batch: pa.Table,
    required: list[str],
    expected_rows: int | None,
    slack: float,
) -> list[Failure]:
    """What :func:`validate_batch` reports, always computed by Great Expectations."""
    failures = _type_failures(suite, batch)
    if [f.name for f in batch.schema] != suite.column_names:
        # Expectations on columns the batch does not have would only fail with errors: the
        # column-list expectation alone says what differs.
        return _run(_column_list(suite), batch) + failures
    expectations = _column_list(suite)
    expectations += [_gx().ExpectColumnValuesToNotBeNull(column=c) for c in required]
    for rule in suite.columns:
        bounds = domain_bounds(rule, slack)
        if bounds is not None:
            expectations.append(
                _gx().ExpectColumnValuesToBeBetween(
                    column=rule.name, min_value=bounds[0], max_value=bounds[1]
                )
            )
    if expected_rows is not None:
        expectations.append(_gx().ExpectTableRowCountToEqual(value=expected_rows))
    return _run(expectations, batch) + failures


def _column_list(suite: TableSuite) -> list[Any]:
    return [_gx().ExpectTableColumnsToMatchOrderedList(column_list=suite.column_names)]


def _type_failures(suite: TableSuite, batch: pa.Table) -> list[Failure]:
    learned = {c.name: c.type for c in suite.columns}
    return [
        Failure("expect_column_type", f.name, f"type {f.type}, expected {learned[f.name]}")
        for f in batch.schema
        if f.name in learned and str(f.type) != learned[f.name]
    ]


def _run(expectations: list[Any], batch: pa.Table) -> list[Failure]:
    import pandas as pd

    gx = _import_gx()
    suite = gx.ExpectationSuite(name="delta", expectations=expectations)
    frame = batch.to_pandas(types_mapper=pd.ArrowDtype)
    result = (
        _batch_definition()
        .get_batch(batch_parameters={"dataframe": frame})
        .validate(
            suite, result_format={"result_format": "SUMMARY", "partial_unexpected_count": _SAMPLE_VALUES}
        )
    )
    return [_failure(r) for r in result.results if not r.success]


def _failure(result: Any) -> Failure:
    config = result.expectation_config
    kwargs = dict(config.kwargs)
    column = kwargs.get("column")
    found: dict[str, Any] = dict(result.result or {})
    raised = (result.exception_info or {}).get("exception_message")
    if raised:
        detail = f"could not be checked: {raised}"
    elif config.type == "expect_column_values_to_not_be_null":
        detail = f"{found.get('unexpected_count')} NULL values; this column must have values"
    elif config.type == "expect_column_values_to_be_between":
        detail = (
            f"{found.get('unexpected_count')} values outside the learned domain "
            f"[{kwargs.get('min_value')}, {kwargs.get('max_value')}], e.g. "
            f"{', '.join(map(str, found.get('partial_unexpected_list') or []))}"
        )
    elif config.type == "expect_table_row_count_to_equal":
        detail = (
            f"{found.get('observed_value')} rows inserted, the commit's metadata (its change in "
            f"total rows, with the rows deleted) says {kwargs.get('value')}"
        )
    elif config.type == "expect_table_columns_to_match_ordered_list":
        detail = f"columns {found.get('observed_value')}, expected {kwargs.get('column_list')}"
    else:
        detail = f"observed {found.get('observed_value')!r}"
    return Failure(config.type, column, detail)


_lock = threading.Lock()
_definition: Any = None


def _gx() -> Any:
    """Great Expectations' expectations module, imported on first use (seconds of imports)."""
    return _import_gx().expectations


def _import_gx() -> Any:
    """The ``great_expectations`` package. Its import warns of deprecated modules it uses
    (``sre_constants``, ...): its business, not a fault here, so those warnings are muted."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")  # no usage statistics sent anywhere
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        import great_expectations
        import great_expectations.expectations

    return great_expectations


def _batch_definition() -> Any:
    """A batch definition over a whole pandas frame, in one ephemeral context per process."""
    global _definition
    with _lock:
        if _definition is None:
            gx = _import_gx()
            context = gx.get_context(mode="ephemeral")
            context.variables.progress_bars = {"globally": False}
            source = context.data_sources.add_pandas("sketch_deltas")
            _definition = source.add_dataframe_asset("batch").add_batch_definition_whole_dataframe("whole")
            log.info("Great Expectations context ready (version %s)", gx.__version__)
        return _definition
