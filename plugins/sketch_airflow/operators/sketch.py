"""Operators over a sketch metastore: capture after loads, policy-driven maintenance, refresh
before reports, and reports that run with skipping.

Each operator only stores its arguments in ``__init__`` (plus checks that need no I/O: a query,
inline or in a ``.sql`` file, is checked for unsupported constructs when the DAG is parsed), gets its hook
lazily, and hands the work to :class:`sketch_core.service.SketchService`. Errors that a retry
cannot fix (an unsupported query, an unknown sketch, a bad policy) fail the task without
retrying; transient ones (the metastore unreachable) are raised for Airflow to retry.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from sketch_airflow.assets import SKETCH_VERSIONS, emit_carried, emit_version, sketch_asset
from sketch_airflow.hooks.sketch import DEFAULT_CONN_ID, SketchMetastoreHook
from sketch_airflow.operators.report_output import (
    OUTPUT_FORMATS,
    counted,
    preview_files,
    preview_table,
    write_files,
)
from sketch_core.algebra.frontend import check_supported
from sketch_core.errors import ConfigurationError, SketchError
from sketch_core.policy import REPORT_WINDOW_SECONDS, Policy
from sketch_core.service.arguments import check_strategy

if TYPE_CHECKING:
    from airflow.sdk import Context

    from sketch_core.service import MaintenanceRun, SketchService


def _is_template(value: str) -> bool:
    """Whether ``value`` is rendered before use (Jinja, or a ``.sql`` file to be read)."""
    return "{{" in value or "{%" in value or value.strip().lower().endswith(".sql")


def _policy(policy: Policy | Mapping[str, Any] | None) -> Policy | None:
    if policy is None or isinstance(policy, Policy):
        return policy
    return Policy.from_json(policy)


@contextlib.contextmanager
def failing_without_retry_on_bad_input() -> Iterator[None]:
    """A sketch error no retry can fix fails the task at once; transient ones propagate."""
    try:
        yield
    except SketchError as exc:
        if exc.transient:
            raise
        raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc


def maintain_sketches(svc: SketchService, names: Sequence[str] | None, strategy: str) -> list[MaintenanceRun]:
    """Every sketch as ``maintain()`` does (``names`` None), else each of ``names`` as
    ``maintain_each`` does: a sketch a quarantined batch blocks waits, the others go on."""
    return svc.maintain(None, strategy) if names is None else svc.maintain_each(names, strategy)


class _SketchOperator(BaseOperator):
    ui_color = "#e8f4ea"

    def __init__(self, *, sketch_conn_id: str = DEFAULT_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sketch_conn_id = sketch_conn_id
        self._hook: SketchMetastoreHook | None = None

    def _get_hook(self) -> SketchMetastoreHook:
        if self._hook is None:
            self._hook = SketchMetastoreHook(sketch_conn_id=self.sketch_conn_id)
        return self._hook

    def _service(self) -> SketchService:
        return self._get_hook().get_conn()

    def on_kill(self) -> None:
        if self._hook is not None:
            self._hook.close()

    def prepare_template(self) -> None:
        """Runs once ``.sql`` files have been read in, which DagBag does when it parses the DAG:
        a query from a file is checked then, as an inline one is in ``__init__`` (a file with
        Jinja in it is checked once rendered, in ``execute``)."""
        sql = getattr(self, "sql", None)
        if isinstance(sql, str) and not _is_template(sql) and getattr(self, "use_sketches", True):
            check_supported(sql)


def _published(
    context: Context, outlets: Sequence[Any], svc: SketchService, runs: Sequence[MaintenanceRun]
) -> list[dict[str, Any]]:
    """Emit an asset event per version the runs published; the runs' summaries (for XCom)."""
    for run in runs:
        if run.published and run.to_version is not None:
            emit_version(context, outlets, run.name, run.to_version, svc.sketch(run.name).sequence)
    return [_run_summary(r) for r in runs]


def _run_summary(run: MaintenanceRun) -> dict[str, Any]:
    return {
        "name": run.name,
        "strategy": run.strategy,
        "from_version": run.from_version,
        "to_version": run.to_version,
        "delta_rows": run.delta_rows,
        "seconds": round(run.seconds, 3),
        "where": run.where,
    }


class CaptureSketchOperator(_SketchOperator):
    """Capture a provenance sketch for ``sql`` (run after the loads of its tables).

    :param sql: Spark SQL over ``ns.table`` names, or a ``.sql`` file (templated).
    :param name: the sketch's name (templated; default: derived from the query).
    :param parameters: values for the query's ``:name`` placeholders (templated).
    :param attributes: ``{table: attribute}`` to partition on (default: chosen safely).
    :param fragments: fragments per partition (int, or ``{table: int}``).
    :param policy: the maintenance policy to attach (a ``Policy`` or its JSON form).
    :param with_state: also compute the incremental-maintenance state now, in the capture's
        Spark work, so that maintenance of small deltas later needs no Spark (default True).
    """

    template_fields: Sequence[str] = ("sql", "name", "parameters")
    template_ext: Sequence[str] = (".sql",)
    template_fields_renderers: ClassVar[dict[str, str]] = {"sql": "sql", "parameters": "json"}

    def __init__(
        self,
        *,
        sql: str,
        name: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        attributes: Mapping[str, str] | None = None,
        fragments: int | Mapping[str, int] | None = None,
        policy: Policy | Mapping[str, Any] | None = None,
        with_state: bool = True,
        **kwargs: Any,
    ) -> None:
        # Every successful capture publishes a version: a fixed name's asset is a direct outlet.
        kwargs.setdefault(
            "outlets", [SKETCH_VERSIONS if name is None or _is_template(name) else sketch_asset(name)]
        )
        super().__init__(**kwargs)
        if not _is_template(sql):
            check_supported(sql)  # a DAG with an unsupported query fails to parse, naming it
        self.sql = sql
        self.name = name
        self.parameters = parameters
        self.attributes = attributes
        self.fragments = fragments
        self.policy = _policy(policy)
        self.with_state = with_state

    def execute(self, context: Context) -> dict[str, Any]:
        with failing_without_retry_on_bad_input():
            svc = self._service()
            check_supported(self.sql)
            version = svc.capture(
                self.sql,
                name=self.name,
                params=dict(self.parameters or {}),
                attributes=dict(self.attributes) if self.attributes else None,
                fragments=self._fragments(),
                with_state=self.with_state,
            )
            if self.policy is not None:
                svc.set_policy(version.name, self.policy)
        emit_version(context, self.outlets, version.name, version.version, version.sequence)
        self.log.info(
            "captured %s version %d at sequence %d", version.name, version.version, version.sequence
        )
        return {
            "name": version.name,
            "version": version.version,
            "sequence": version.sequence,
            "fragments": {t: len(ids) for t, ids in version.fragments.items()},
        }

    def _fragments(self) -> int | dict[str, int] | None:
        return dict(self.fragments) if isinstance(self.fragments, Mapping) else self.fragments


class MaintainSketchesOperator(_SketchOperator):
    """Maintain sketches: those whose policy fires (``policy_driven``, the default), or all.

    :param names: only these sketches (templated; default: every sketch).
    :param strategy: ``auto`` (default), ``cost`` (may leave a sketch stale: see
        ``RefreshSketchesOperator``), ``incremental`` or ``full``.
    :param policy_driven: check each sketch's policy first and maintain only those that fire.
    """

    template_fields: Sequence[str] = ("names", "strategy")

    def __init__(
        self,
        *,
        names: Sequence[str] | None = None,
        strategy: str = "auto",
        policy_driven: bool = True,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("outlets", [SKETCH_VERSIONS])
        super().__init__(**kwargs)
        self.names = names
        self.strategy = strategy
        self.policy_driven = policy_driven

    def execute(self, context: Context) -> list[dict[str, Any]]:
        with failing_without_retry_on_bad_input():
            check_strategy(self.strategy)  # a typo fails now, not once a policy first fires
            svc = self._service()
            names = list(self.names) if self.names is not None else None
            if self.policy_driven:
                names = [check.name for check in svc.check_policies(names) if check.fire]
            runs = maintain_sketches(svc, names, self.strategy)
        summaries = _published(context, self.outlets, svc, runs)
        self.log.info("maintained %d sketches: %s", len(runs), summaries)
        return summaries


class MaterializeViewOperator(_SketchOperator):
    """Keep the rows of a recursive query as an Iceberg table (``svc.materialize``): the first
    run materialises it, every later run maintains it (incrementally, with absorption
    provenance: links that expire re-derive nothing), writing the rows that changed.

    :param table: the view's table, ``ns.table``, also the name of the sketch that keeps it
        (templated).
    :param sql: the ``WITH RECURSIVE`` query, or a ``.sql`` file (templated).
    :param attributes: ``{table: attribute}`` for the sketch (default: the join columns).
    :param fragments: fragments per partition (int, or ``{table: int}``).
    :param strategy: for the later runs: ``auto`` (default), ``incremental`` or ``full``.
    """

    template_fields: Sequence[str] = ("table", "sql")
    template_ext: Sequence[str] = (".sql",)
    template_fields_renderers: ClassVar[dict[str, str]] = {"sql": "sql"}

    def __init__(
        self,
        *,
        table: str,
        sql: str,
        attributes: Mapping[str, str] | None = None,
        fragments: int | Mapping[str, int] | None = None,
        strategy: str = "auto",
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("outlets", [SKETCH_VERSIONS if _is_template(table) else sketch_asset(table)])
        super().__init__(**kwargs)
        if not _is_template(sql):
            check_supported(sql)
        self.table = table
        self.sql = sql
        self.attributes = attributes
        self.fragments = fragments
        self.strategy = strategy

    def execute(self, context: Context) -> dict[str, Any]:
        from sketch_core.errors import SketchNotFoundError

        with failing_without_retry_on_bad_input():
            check_strategy(self.strategy)
            svc = self._service()
            try:
                svc.sketch(self.table)
            except SketchNotFoundError:
                version = svc.materialize(
                    self.table,
                    self.sql,
                    attributes=dict(self.attributes) if self.attributes else None,
                    fragments=dict(self.fragments) if isinstance(self.fragments, Mapping) else self.fragments,
                )
                emit_version(context, self.outlets, version.name, version.version, version.sequence)
                self.log.info("materialised %s at sequence %d", self.table, version.sequence)
                return {"name": version.name, "strategy": "capture", "to_version": version.version}
            (run,) = svc.maintain(self.table, strategy=self.strategy)
        (summary,) = _published(context, self.outlets, svc, [run])
        self.log.info("maintained %s: %s", self.table, summary)
        return summary


class ReclusterTableOperator(_SketchOperator):
    """Rewrite a table's files in the layout its reports need (one Iceberg rewrite on Spark,
    no rows changed: the sketches stay valid). Run it after loads, at a quiet hour.

    :param table: the table (templated).
    :param layout: ``sort(a, ...)`` or ``zorder(a, ...)`` (templated; default: the layout
        advisor's recommendation; the task then fails, without retry, when it has none).

    The sketches current before the rewrite are carried to it (new versions, nothing read),
    each an event of its asset through ``SKETCH_VERSIONS`` (the default outlet).

    Returns (to XCom) the table, the layout, the rewrite's commit sequence and the sketches
    carried.
    """

    template_fields: Sequence[str] = ("table", "layout")

    def __init__(self, *, table: str, layout: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("outlets", [SKETCH_VERSIONS])
        super().__init__(**kwargs)
        self.table = table
        self.layout = layout

    def execute(self, context: Context) -> dict[str, Any]:
        from sketch_core.layout.simulation import Layout

        with failing_without_retry_on_bad_input():
            layout = Layout.parse(self.layout) if self.layout else None
            svc = self._service()
            sequence = svc.recluster(self.table, layout)
        carried = emit_carried(context, self.outlets, svc, sequence)
        self.log.info(
            "rewrote %s in %s at sequence %d; sketches carried to it: %s",
            self.table,
            layout or "the advised layout",
            sequence,
            ", ".join(carried) or "none",
        )
        return {
            "table": self.table,
            "layout": str(layout) if layout else "advised",
            "sequence": sequence,
            "carried": carried,
        }


class RefreshSketchesOperator(_SketchOperator):
    """Bring a report's sketches to the latest snapshots right before it runs.

    The sketches are those captured for the report's query template (``sql``), those named,
    and those whose policy names ``report`` (which is announced first, so policy checks see it
    too; the announcement lasts until the report operator given the same ``report`` has run, or
    ``report_window_seconds`` if it never does). Each is maintained with ``strategy``: ``auto``
    (the default) maintains incrementally
    or recaptures, whichever the cost model expects cheaper (recapture where incremental
    maintenance does not apply); ``cost`` may also leave a sketch stale ("skip", recorded with
    the model's figures) where the report and the queries expected before the next load are
    cheaper without it; ``incremental`` and ``full`` force one way.
    """

    template_fields: Sequence[str] = ("sql", "report", "names")
    template_ext: Sequence[str] = (".sql",)
    template_fields_renderers: ClassVar[dict[str, str]] = {"sql": "sql"}

    def __init__(
        self,
        *,
        sql: str | None = None,
        report: str | None = None,
        names: Sequence[str] | None = None,
        strategy: str = "auto",
        report_window_seconds: float = REPORT_WINDOW_SECONDS,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("outlets", [SKETCH_VERSIONS])
        super().__init__(**kwargs)
        if sql is None and report is None and not names:
            raise ConfigurationError(
                "RefreshSketchesOperator needs sql, report or names to find the sketches",
                hint="pass the report's sql, its report name (as policies announce it), or names=[...]",
            )
        if sql is not None and not _is_template(sql):
            check_supported(sql)
        self.sql = sql
        self.report = report
        self.names = names
        self.strategy = strategy
        self.report_window_seconds = report_window_seconds

    def execute(self, context: Context) -> list[dict[str, Any]]:
        with failing_without_retry_on_bad_input():
            if self.sql is not None:
                check_supported(self.sql)
            svc = self._service()
            if self.report:
                svc.announce_report(self.report, window_seconds=self.report_window_seconds)
            names = set(self.names or ()) | set(svc.report_sketches(self.sql, self.report))
            runs = maintain_sketches(svc, sorted(names), self.strategy)
        summaries = _published(context, self.outlets, svc, runs)
        self.log.info("refreshed %d sketches: %s", len(runs), summaries)
        return summaries


class SketchedQueryOperator(_SketchOperator):
    """Run a report with skipping and write its result.

    :param sql: Spark SQL, or a ``.sql`` file (templated).
    :param parameters: values for ``:name`` placeholders (templated).
    :param output_path: a folder Spark writes the result to as part files (templated),
        replacing an earlier result there at once; the format follows ``output_format``
        (``parquet``, ``csv`` with a header, or ``json`` lines).
    :param output_table: an Iceberg table (``ns.table``) to write the result to, replacing
        its rows (created on first use).
    :param snapshot: a commit sequence number to read at (default: the latest).
    :param use_sketches: False runs the plain query (for comparisons); ``"always"`` applies a
        valid sketch even where the query is expected to run faster without it.
    :param report: the report's name as the refresh before it announced it (templated): once
        the report has run, its announcement ends and the policies naming it stop firing.

    The result is written by Spark from a lazy frame read through Iceberg's source
    (:meth:`SketchService.sketched_frame`): it never passes through the driver. The return
    value (pushed to XCom) holds the statistics: rows, data files of the sketch's fragments of
    the files in total, the sketch version used and why, the commit sequence read, the seconds
    taken, and a preview of the written result's first rows.
    """

    template_fields: Sequence[str] = ("sql", "parameters", "output_path", "output_table", "report")
    template_ext: Sequence[str] = (".sql",)
    template_fields_renderers: ClassVar[dict[str, str]] = {"sql": "sql", "parameters": "json"}

    def __init__(
        self,
        *,
        sql: str,
        parameters: Mapping[str, Any] | None = None,
        output_path: str | None = None,
        output_format: str = "parquet",
        output_table: str | None = None,
        snapshot: int | None = None,
        use_sketches: bool | str = True,
        report: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if output_format not in OUTPUT_FORMATS:
            raise ConfigurationError(
                f"output_format must be one of {', '.join(OUTPUT_FORMATS)}, got {output_format!r}",
                hint="write the result as parquet, csv or json (lines)",
            )
        if use_sketches and not _is_template(sql):  # a plain report may use any construct
            check_supported(sql)
        self.sql = sql
        self.parameters = parameters
        self.output_path = output_path
        self.output_format = output_format
        self.output_table = output_table
        self.snapshot = snapshot
        self.use_sketches = use_sketches
        self.report = report

    def execute(self, context: Context) -> dict[str, Any]:
        with failing_without_retry_on_bad_input():
            if self.use_sketches:  # as when the DAG was parsed, for a query known only now
                check_supported(self.sql)
            svc = self._service()
            if self.output_path or self.output_table:
                stats = self._write_with_spark(svc)
            else:  # nowhere to write: the result is counted, and the run recorded
                result = svc.query(
                    self.sql,
                    dict(self.parameters or {}),
                    snapshot=self.snapshot,
                    use_sketches=self.use_sketches,
                )
                stats = {
                    "rows": result.table.num_rows,
                    "files_read": result.files_read,
                    "files_total": result.files_total,
                    "sketch": list(result.sketch) if result.sketch else None,
                    "sketch_reason": result.sketch_reason,
                    "sequence": result.sequence,
                    "seconds": round(result.seconds, 3),
                }
            if self.report:
                svc.report_finished(self.report)
        stats |= {"output_path": self.output_path, "output_table": self.output_table}
        self.log.info("report: %s", {k: v for k, v in stats.items() if k != "preview"})
        return stats

    def _write_with_spark(self, svc: SketchService) -> dict[str, Any]:
        """The report as a lazy frame, written by Spark (distributed, nothing collected): the
        stats hold its row count and a preview of at most ``PREVIEW_ROWS`` rows."""
        started = time.perf_counter()
        run = svc.sketched_frame(
            self.sql, dict(self.parameters or {}), snapshot=self.snapshot, use_sketches=self.use_sketches
        )
        frame, observation = counted(run.frame)
        preview: list[dict[str, Any]] = []
        if self.output_table:
            if svc.tables.exists(self.output_table):
                svc.tables.overwrite(self.output_table, frame)
            else:
                svc.tables.create(self.output_table, frame)
            frame = run.frame  # counted once, by the first write
            preview = preview_table(svc.spark, f"{svc.settings.catalog_name}.{self.output_table}")
        if self.output_path:
            path = Path(self.output_path)
            write_files(frame, path, self.output_format)
            preview = preview_files(svc.spark, path, self.output_format)
        return {
            "rows": int(observation.get["rows"]),
            "files_read": run.files_in_sketch,
            "files_total": run.files_total,
            "sketch": list(run.sketch) if run.sketch else None,
            "sketch_reason": run.sketch_reason,
            "sequence": run.sequence,
            "seconds": round(time.perf_counter() - started, 3),
            "preview": preview,
        }
