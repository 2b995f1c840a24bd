"""``make demo``: the whole story through Airflow, each step a run of an example DAG.

Load ``demo.facts`` and capture the report's sketch (``load_then_capture``); several loads
with inserts and deletes, the policy checked after each, and maintenance when it fires
(``intermittent_maintenance``); a last load, then the refresh before the report and the report
with skipping (``refresh_before_report``). It ends with a summary: the report's time with and
without the sketch, maintenance time incremental and full, and whether the results agree.

Airflow runs for real (``dag.test()``) on a metadata database of its own on the same
PostgreSQL server as the metastore (the private one unless ``SKETCH_METASTORE_URL`` is set).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from sqlalchemy.engine import make_url

from sketch_core.config import Settings
from sketch_core.datasets.deltas import DeltaGenerator
from sketch_core.demo import step
from sketch_core.durations import median_seconds
from sketch_core.localstack.stack import LocalStack, resolve
from sketch_core.service import SketchService

DAGS = Path(__file__).resolve().parents[1] / "dags"
TIMED_RUNS = 5
# Enough rows that the plain report's scan, not Spark's fixed cost per query, is what it pays.
DEMO_ROWS = 40_000_000


@dataclass
class DemoOutcome:
    versions: list[int] = field(default_factory=list)  # the sketch's versions, as published
    maintenance: list[dict[str, Any]] = field(default_factory=list)  # the runs the DAGs made
    plain_seconds: float = 0.0
    sketched_seconds: float = 0.0
    files: tuple[int, int] = (0, 0)  # files read with the sketch, of all
    default_use: str = ""  # why the report applies the sketch by default, or not
    incremental_seconds: float = 0.0  # the last incremental run
    full_seconds: float = 0.0  # a recapture at the same snapshot
    results_equal: bool = False
    report_path: str | None = None


def run_story(
    svc: SketchService,
    dags: dict[str, Any],
    xcom: Callable[[Any, str], Any],
    *,
    initial_rows: int,
    loads: int,
    output_dir: Path,
    console: Console,
) -> DemoOutcome:
    """The story on an Airflow that is already configured; ``dags``: the example DAGs by id,
    ``xcom(run, task_id)``: what a task of a finished run returned."""
    from sketch_airflow.example import (
        DEMO_SKETCH,
        DEMO_TABLE,
        REPORT_PARAMETERS,
        REPORT_SQL,
        SAMPLED_ROWS,
        load_with_spark,
    )

    outcome = DemoOutcome()

    def test(dag_id: str, **conf: Any) -> Any:
        run = dags[dag_id].test(run_conf=conf or None)
        if run.state != "success":
            raise RuntimeError(f"{dag_id} run {run.run_id} ended {run.state}; see the log above")
        return run

    if svc.tables.exists(DEMO_TABLE):
        raise RuntimeError(f"{DEMO_TABLE} exists already: the demo starts from an empty metastore")
    with step(console, f"load_then_capture: {DEMO_TABLE} loaded ({initial_rows:,} rows), sketch captured"):
        run = test("load_then_capture", initial_rows=initial_rows, seed=1)
    captured = xcom(run, "capture")
    outcome.versions.append(captured["version"])
    policy, _ = svc.policy(DEMO_SKETCH)
    pin = svc.tables.pin(DEMO_TABLE)
    console.print(f"  {DEMO_TABLE}: {pin.record_count:,} rows in {len(pin.files)} files")
    kept = ", ".join(f"{count} fragments of {table}" for table, count in captured["fragments"].items())
    console.print(f"  {DEMO_SKETCH} v{captured['version']}: keeps {kept}")
    console.print(f"  policy: {policy.describe()}")

    generator = DeltaGenerator(svc.tables, DEMO_TABLE, ("key",), seed=2, read_rows_limit=SAMPLED_ROWS)
    for number in range(1, loads + 1):
        load_with_spark(svc, generator.inserts(1000))
        # Cancellations come soon after the orders: the newest rows, in the newest files.
        load_with_spark(svc, generator.deletes(400, among_newest=1000))
        (check,) = svc.check_policies([DEMO_SKETCH])
        verdict = "[bold]fires[/]" if check.fire else "waits"
        console.print(
            f"  load {number} (Spark INSERT and DELETE): 1,000 rows in, 400 of them cancelled; "
            f"policy {verdict}: "
            f"{check.decision.reason}"
        )
        if check.fire:
            with step(console, "intermittent_maintenance: the policy sensor passed, sketch maintained"):
                run = test("intermittent_maintenance")
            for summary in xcom(run, "maintain_due"):
                outcome.maintenance.append(summary)
                outcome.versions.append(summary["to_version"])
                console.print(
                    f"  {summary['name']}: v{summary['from_version']} -> v{summary['to_version']} "
                    f"{summary['strategy']} over {summary['delta_rows']:,} rows in {summary['seconds']:.2f}s"
                )

    load_with_spark(svc, generator.mixed(300, among_newest=1000))
    console.print(
        "  a last load (Spark MERGE): 150 rows in, 150 of the newest cancelled (below the policy's threshold)"
    )
    with step(console, "refresh_before_report: sketch refreshed, report run with skipping"):
        run = test("refresh_before_report", output_dir=str(output_dir))
    for summary in xcom(run, "refresh_sketches"):
        outcome.maintenance.append(summary)
        if summary["strategy"] != "none":
            outcome.versions.append(summary["to_version"])
    stats = xcom(run, "report")
    outcome.report_path = stats["output_path"]
    console.print(
        f"  report: {stats['rows']} rows, {stats['files_read']} of {stats['files_total']} files read, "
        f"sketch {stats['sketch']}; written to {stats['output_path']}"
    )

    with step(console, f"timing the report {TIMED_RUNS} times each way after a first run, and a recapture"):
        # Each way timed as itself: the sketch applied whatever the cost model would choose.
        # The results compared below are the timed runs' last.
        results: dict[str, Any] = {}

        def report(use: bool | str) -> Callable[[], None]:
            def run() -> None:
                results[str(use)] = svc.query(REPORT_SQL, REPORT_PARAMETERS, use_sketches=use)

            return run

        # After an untimed run each way: a way's first run compiles its plan and lists its
        # files (a plain run 3x, a sketched one 2x its later runs), as a scheduled report's
        # runs after the first do not.
        outcome.plain_seconds = median_seconds(report(False), TIMED_RUNS, warm_up=True)
        outcome.sketched_seconds = median_seconds(report("always"), TIMED_RUNS, warm_up=True)
        plain, sketched = results["False"], results["always"]
        outcome.files = (sketched.files_read, sketched.files_total)
        # What the report does by default, from these timings: apply the sketch where it pays.
        outcome.default_use = svc.query(REPORT_SQL, REPORT_PARAMETERS).sketch_reason
        version = svc.sketch(DEMO_SKETCH)
        started = time.perf_counter()
        recaptured = svc.capture(
            REPORT_SQL,
            name=f"{DEMO_SKETCH}_full",
            params=REPORT_PARAMETERS,
            attributes={t: a for t, (a, _) in version.partitions.items()},
            fragments={t: c for t, (_, c) in version.partitions.items()},
            snapshot=version.sequence,
        )
        outcome.full_seconds = time.perf_counter() - started
        svc.drop_sketch(recaptured.name)
    incremental = [m for m in outcome.maintenance if m["strategy"] == "incremental"]
    outcome.incremental_seconds = incremental[-1]["seconds"] if incremental else 0.0
    import pyarrow.parquet as pq

    written = pq.read_table(stats["output_path"])
    same_fragments = recaptured.fragments == version.fragments
    outcome.results_equal = (
        written.sort_by("a").equals(plain.table.sort_by("a"))
        and sketched.table.sort_by("a").equals(plain.table.sort_by("a"))
        and same_fragments
    )
    _print_summary(console, outcome)
    return outcome


def _print_summary(console: Console, outcome: DemoOutcome) -> None:
    table = Table(title="Summary", show_lines=False)
    table.add_column("what")
    table.add_column("figure", justify="right")
    speedup = outcome.plain_seconds / outcome.sketched_seconds if outcome.sketched_seconds else 0.0
    table.add_row(f"report without the sketch (median of {TIMED_RUNS})", f"{outcome.plain_seconds:.2f} s")
    table.add_row(
        f"report with the sketch (median of {TIMED_RUNS})",
        f"{outcome.sketched_seconds:.2f} s ({speedup:.1f}x)",
    )
    table.add_row("files read with the sketch", f"{outcome.files[0]} of {outcome.files[1]}")
    table.add_row("the report by default (SKETCH_USE=cost)", outcome.default_use)
    table.add_row("maintenance, incremental (last run)", f"{outcome.incremental_seconds:.2f} s")
    ratio = outcome.full_seconds / outcome.incremental_seconds if outcome.incremental_seconds else 0.0
    table.add_row(
        "maintenance, full recapture (same snapshot)", f"{outcome.full_seconds:.2f} s ({ratio:.0f}x)"
    )
    table.add_row("sketch versions published", ", ".join(f"v{v}" for v in outcome.versions))
    equal = "[green]yes[/]" if outcome.results_equal else "[red]NO[/]"
    table.add_row("results equal (report file, with and without the sketch; maintained = recaptured)", equal)
    console.print(table)


# -- setting Airflow up ------------------------------------------------------------------------------
@contextmanager
def _server(metastore_url: str) -> Iterator[Any]:
    """An autocommit connection to the metastore's server (its ``postgres`` database)."""
    import psycopg

    url = make_url(metastore_url)
    with psycopg.connect(
        host=url.host,
        port=url.port,
        user=url.username,
        password=url.password,
        dbname="postgres",
        autocommit=True,
    ) as conn:
        yield conn


def _airflow_database_url(metastore_url: str) -> str:
    """A database beside the metastore's, on the same server, for Airflow's own tables."""
    url = make_url(metastore_url)
    name = f"{url.database}_airflow"
    with _server(metastore_url) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')
    return url.set(database=name).render_as_string(hide_password=False)


def _configure_airflow(settings: Settings, home: Path, airflow_url: str) -> None:
    """Airflow reads its configuration once, when imported: set it first."""
    # Printed on Airflow's import, about a test client Airflow imports: nothing users can act on.
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    metastore = make_url(settings.require_metastore_url())
    connection = {
        "conn_type": "sketch_metastore",
        "host": metastore.host,
        "port": metastore.port,
        "login": metastore.username,
        "password": metastore.password,
        "schema": metastore.database,
        # Files of ~1-2 MB: even the demo's table spans enough of them to skip most.
        "extra": {"warehouse": str(settings.warehouse), "settings": {"target_file_bytes": 4 * 1024 * 1024}},
    }
    os.environ.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=airflow_url,
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC=airflow_url.replace("+psycopg", "+psycopg_async"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(DAGS),
        AIRFLOW_CONN_SKETCH_DEFAULT=json.dumps(connection),
        # The story's own lines, not every task's log: Airflow says only what went wrong.
        AIRFLOW__LOGGING__LOGGING_LEVEL="WARNING",
    )


def _drop_database(metastore_url: str, name: str) -> None:
    with _server(metastore_url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.airflow_demo", description=__doc__)
    parser.add_argument("--rows", type=int, default=DEMO_ROWS, help="rows of the first load")
    parser.add_argument("--loads", type=int, default=2, help="loads with inserts and deletes")
    args = parser.parse_args(argv)
    console = Console()
    try:
        with airflow_stack("airflow-demo", "sketch_airflow_demo", console) as (svc, dags):
            outcome = run_story(
                svc,
                dags,
                read_xcom,
                initial_rows=args.rows,
                loads=args.loads,
                output_dir=svc.settings.warehouse.parent / "reports",
                console=console,
            )
    except AirflowSetupError:
        return 1
    return 0 if outcome.results_equal else 1


class AirflowSetupError(RuntimeError):
    """Airflow could not be set up (its database migration or the DAGs' import failed)."""


@contextmanager
def airflow_stack(
    directory: str, database: str, console: Console
) -> Iterator[tuple[SketchService, dict[str, Any]]]:
    """A fresh metastore (``database``) and warehouse under ``$SKETCH_HOME/<directory>``, and
    Airflow configured on a database beside it with the example DAGs: the service the DAGs'
    connection makes, and the DAGs by id."""
    base = Settings.from_env()
    home = base.warehouse.parent / directory
    settings = replace(base, warehouse=home / "warehouse")
    # A fresh start every time: the story begins with an empty warehouse, and a private
    # metastore paired with a new warehouse is recreated (see sketch_core.localstack.stack).
    with step(console, "metastore ready (PostgreSQL), warehouse empty"):
        stack: LocalStack = resolve(replace(settings, warehouse=_fresh(settings.warehouse)), database)
        _drop_database(stack.settings.require_metastore_url(), f"{database}_airflow")
    try:
        airflow_url = _airflow_database_url(stack.settings.require_metastore_url())
        _configure_airflow(stack.settings, home, airflow_url)
        with step(console, "Airflow's database migrated"):
            # What `airflow db migrate` does, in this process: Airflow is imported here anyway,
            # and the command's own interpreter spent ~2 s importing it again.
            from airflow.utils import db

            try:
                db.upgradedb()
            except Exception as exc:
                console.print(f"{type(exc).__name__}: {exc}")
                raise AirflowSetupError("migrating Airflow's database failed") from exc
        from airflow.dag_processing.dagbag import DagBag
        from sketch_airflow.hooks.sketch import SketchMetastoreHook

        bag = DagBag(dag_folder=str(DAGS))
        if bag.import_errors:
            console.print(bag.import_errors)
            raise AirflowSetupError("the DAGs did not import")
        hook = SketchMetastoreHook()
        try:
            yield hook.get_conn(), bag.dags
        finally:
            hook.close()
    finally:
        stack.shutdown()


def _fresh(path: Path) -> Path:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def read_xcom(run: Any, task_id: str) -> Any:
    """What ``task_id`` returned in a finished run."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    query = XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id, task_ids=task_id, key="return_value")
    with create_session() as session:
        row = session.scalars(query).first()
        if row is None:
            raise RuntimeError(f"{task_id} of {run.dag_id} returned nothing")
        return XComModel.deserialize_value(row)


if __name__ == "__main__":
    sys.exit(main())
