"""The ``sketch`` command line: the same verbs as SketchService."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from sketch_core.attribute_choice.strategies import heuristic_fallbacks, preferences
from sketch_core.config import Settings
from sketch_core.errors import QueryError, SketchError
from sketch_core.layout.simulation import Layout
from sketch_core.localstack.postgres import PrivatePostgres
from sketch_core.localstack.stack import resolve
from sketch_core.metastore.engine import connect_metastore
from sketch_core.metastore.migrations import migrate
from sketch_core.metastore.state_modes import describe_state_mode
from sketch_core.policy import REPORT_WINDOW_SECONDS
from sketch_core.service import SketchService

app = typer.Typer(help="Provenance-based data skipping for Spark reports.", no_args_is_help=True)
tables_app = typer.Typer(help="Create and change Iceberg tables; every change gets a commit number.")
server_app = typer.Typer(help="The private PostgreSQL server used when SKETCH_METASTORE_URL is unset.")
app.add_typer(tables_app, name="tables")
policy_app = typer.Typer(help="Maintenance policies: when intermittent maintenance runs for a sketch.")
app.add_typer(server_app, name="server")
app.add_typer(policy_app, name="policy")
validation_app = typer.Typer(
    help="Delta validation: batches that failed their table's expectations, overrides, nullable columns."
)
app.add_typer(validation_app, name="validation")

console = Console()
err_console = Console(stderr=True)
# Exit codes: 2 for a request that will never work, 75 (EX_TEMPFAIL) when a retry may help.
EXIT_TERMINAL, EXIT_TRANSIENT = 2, 75


@app.callback()
def main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress details.")] = False,
) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


@contextmanager
def _errors() -> Iterator[None]:
    try:
        yield
    except SketchError as exc:
        err_console.print(f"[red]error:[/] {exc.message}")
        if exc.hint:
            err_console.print(f"[yellow]hint:[/] {exc.hint}")
        raise typer.Exit(EXIT_TRANSIENT if exc.transient else EXIT_TERMINAL) from exc


@contextmanager
def _service() -> Iterator[SketchService]:
    stack = resolve(Settings.from_env())
    svc = SketchService.from_settings(stack.settings)
    try:
        yield svc
    finally:
        svc.close()


@app.command()
def demo(
    scale: Annotated[float, typer.Option(help="TPC-H scale factor.")] = 0.1,
    delta_rows: Annotated[int, typer.Option(help="Rows in the demo's delta.")] = 1000,
) -> None:
    """Load TPC-H into Iceberg, commit a delta, and run a report at both snapshots."""
    from sketch_core.demo import run_demo

    with _errors():
        outcome = run_demo(Settings.from_env(), scale=scale, delta_rows=delta_rows, console=console)
    if not outcome.pinned_unchanged:
        raise typer.Exit(1)


@app.command()
def jars() -> None:
    """Fetch the JVM libraries Spark is given (Iceberg's Spark runtime, PostgreSQL's JDBC
    driver) with Maven into $SKETCH_JARS (default $SKETCH_HOME/jars); prints the spark-submit
    options that use them and the catalog."""
    from sketch_core.spark.jars import default_jars_dir, fetch_jars
    from sketch_core.spark.lake import lake_conf

    with _errors():
        settings = Settings.from_env()
        paths = fetch_jars(settings.jars_dir or default_jars_dir())
        console.print(f"--jars {','.join(str(p) for p in paths)}", soft_wrap=True)
        if settings.metastore_url:
            for key, value in lake_conf(settings).items():
                console.print(f"--conf {key}={value}", soft_wrap=True, markup=False)


@app.command("class-archive")
def class_archive(
    force: Annotated[bool, typer.Option(help="Build it again even if one exists.")] = False,
) -> None:
    """Build the archive of Spark's classes that sessions map at start (HotSpot's AppCDS): a
    fresh process starts and runs its first report sooner. `make` builds it; once per JVM and
    set of jars (about a minute)."""
    from sketch_core.spark.class_archive import build_archive

    with _errors():
        console.print(build_archive(force=force), soft_wrap=True, markup=False)


def _read_sql(sql: str) -> str:
    """SQL text, or ``@path`` for a .sql file."""
    if sql.startswith("@"):
        path = Path(sql[1:])
        if not path.is_file():
            raise QueryError(f"no SQL file at {path}", hint="pass the SQL itself or @path/to/file.sql")
        return path.read_text()
    return sql


def parse_value(raw: str) -> Any:
    """A --param value: an integer, a decimal number, an ISO date or timestamp, or else text.
    Quote it ('...') to keep text that looks like a number or a date."""
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1]
    for parse in (int, Decimal, dt.date.fromisoformat, dt.datetime.fromisoformat):
        try:
            return parse(raw)
        except (ValueError, ArithmeticError):
            continue
    return raw


def _pairs(items: list[str] | None, option: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise QueryError(
                f"{option} {item!r} is not NAME=VALUE", hint=f"for example {option} day=1995-03-15"
            )
        pairs[key.strip()] = value
    return pairs


ParamOption = Annotated[
    list[str] | None,
    typer.Option("--param", "-p", help="NAME=VALUE for a :NAME placeholder (repeatable)."),
]


@app.command()
def capture(
    sql: Annotated[str, typer.Argument(help="Spark SQL over ns.table names, or @file.sql.")],
    name: Annotated[str | None, typer.Option(help="Sketch name (default: derived from the query).")] = None,
    param: ParamOption = None,
    attribute: Annotated[
        list[str] | None,
        typer.Option("--attribute", "-a", help="TABLE=COLUMN to sketch on (repeatable; default: chosen)."),
    ] = None,
    fragments: Annotated[int | None, typer.Option(help="Fragments per partition.")] = None,
    snapshot: Annotated[int | None, typer.Option(help="Commit sequence to capture at.")] = None,
) -> None:
    """Capture a provenance sketch for a query and publish it as a new version."""
    with _errors(), _service() as svc:
        params = {k: parse_value(v) for k, v in _pairs(param, "--param").items()}
        version = svc.capture(
            _read_sql(sql),
            name=name,
            params=params or None,
            attributes=_pairs(attribute, "--attribute") or None,
            fragments=fragments,
            snapshot=snapshot,
        )
    console.print(
        f"captured [bold]{version.name}[/] version {version.version} at commit sequence {version.sequence}"
    )
    for table, ids in sorted(version.fragments.items()):
        attr, count = version.partitions[table]
        console.print(f"  {table}.{attr}: {len(ids)} of {count} fragments")


@app.command("explain-choice")
def explain_choice(
    sql: Annotated[str, typer.Argument(help="Spark SQL over ns.table names, or @file.sql.")],
    param: ParamOption = None,
    fragments: Annotated[int | None, typer.Option(help="Fragments per partition.")] = None,
) -> None:
    """Show each table's candidate sketch attributes with their estimated selectivity (from a
    stratified sample), and the unsafe ones with the reason."""
    with _errors(), _service() as svc:
        params = {k: parse_value(v) for k, v in _pairs(param, "--param").items()}
        estimates = svc.estimate_attributes(_read_sql(sql), params=params or None, fragments=fragments)
        strategy = svc.settings.attribute_strategy
    picks = preferences(
        "cost-all", estimates.tables, estimates.expected_selectivities(), files_read=estimates.files_read
    )
    view = Table(
        "table", "attribute", "kind", "expected selectivity", "95% interval", "files read", "cost-based pick"
    )
    found = estimates.estimation.candidates if estimates.estimation else {}
    for table in sorted(estimates.candidates):
        candidates = estimates.tables[table]
        for attribute, _ in estimates.ranked(table):
            kinds = [k for k in ("key", "group-by", "used") if attribute in candidates.pool(k)]
            key = f"{table}.{attribute}"
            e = found.get(key)
            best = "first" if picks.get(table, [None])[0] == attribute else ""
            if e is None and estimates.estimation is not None:
                best = estimates.estimation.unestimated.get(f"{table}.{attribute}", best)
            view.add_row(
                table,
                attribute,
                ", ".join(kinds) or "-",
                "-" if e is None else f"{e.selectivity:.1%}",
                "-" if e is None else f"{e.low:.1%} - {e.high:.1%}",
                f"{estimates.files_read[key]:.0%}" if key in estimates.files_read else "-",
                best,
            )
        for attribute, reason in estimates.refused.get(table, []):
            view.add_row(table, attribute, "unsafe", "-", "-", "-", reason)
    console.print(view)
    for table in heuristic_fallbacks("cost-all", estimates.tables, estimates.expected_selectivities()):
        console.print(
            f"{table}: no candidate estimated ({estimates.fallback_reason(table)}); "
            "a cost-based capture picks its attribute by the heuristic (sort key, then group-by)"
        )
    if estimates.estimation is None:
        console.print(f"no estimates: {estimates.reason}")
    else:
        sample = "drawn now" if estimates.sample_drawn else "stored"
        console.print(
            f"estimated from a {sample} sample of {estimates.sampled_table} in {estimates.seconds:.2f}s; "
            f"captures use the {strategy!r} strategy (SKETCH_ATTRIBUTE_STRATEGY)"
        )


@app.command()
def query(
    sql: Annotated[str, typer.Argument(help="Spark SQL over ns.table names, or @file.sql.")],
    param: ParamOption = None,
    snapshot: Annotated[
        int | None, typer.Option(help="Commit sequence to read at (default: latest).")
    ] = None,
    sketches: Annotated[
        bool, typer.Option("--sketches/--no-sketches", help="Use a sketch if one fits.")
    ] = True,
    always: Annotated[
        bool,
        typer.Option(
            "--always", help="Apply a valid sketch even where the query is expected to run faster without it."
        ),
    ] = False,
    max_rows: Annotated[int, typer.Option(help="Rows to print.")] = 20,
) -> None:
    """Run a query, skipping data with a sketch when one is valid for the pinned snapshots and
    expected to make it faster (SKETCH_USE)."""
    with _errors(), _service() as svc:
        params = {k: parse_value(v) for k, v in _pairs(param, "--param").items()}
        use: bool | str = ("always" if always else True) if sketches else False
        result = svc.query(_read_sql(sql), params=params or None, snapshot=snapshot, use_sketches=use)
    view = Table(*result.table.column_names)
    for row in result.table.slice(0, max_rows).to_pylist():
        view.add_row(*("NULL" if v is None else str(v) for v in row.values()))
    console.print(view)
    used = f"sketch {result.sketch[0]} v{result.sketch[1]}" if result.sketch else "no sketch"
    console.print(
        f"{result.table.num_rows} rows in {result.seconds:.2f}s at commit sequence {result.sequence}; "
        f"{used}; read {result.files_read} of {result.files_total} data files"
    )
    if result.sketch_reason:
        console.print(f"sketch: {result.sketch_reason}")


@app.command()
def status(name: Annotated[str | None, typer.Argument(help="Only this sketch.")] = None) -> None:
    """List sketches: newest version, staleness, size and last run."""
    with _errors(), _service() as svc:
        rows = svc.status(name)
    view = Table(
        "sketch", "version", "seq", "behind", "delta rows", "tables (fragments kept)", "last run", "policy"
    )
    for s in rows:
        tables = "\n".join(
            f"{t.table}.{t.attribute}: {t.fragments}/{t.fragment_count} ({t.selectivity:.1%})"
            for t in s.tables
        )
        run = s.last_run
        last = f"{run.strategy} {run.status} {run.seconds or 0:.1f}s" if run else "-"
        if s.cost_decision is not None:
            chosen = s.cost_decision
            last += (
                f"\nchose {chosen.action} ({chosen.context}, {chosen.decided_at:%H:%M:%S}): {chosen.reason}"
            )
        if s.state_mode is not None:
            last += f"\nstate {describe_state_mode(s.state_mode)}"
        if s.blocked is not None:
            last += f"\nBLOCKED: {s.blocked}"
        if s.files_expected:
            tables += "\nexpected files read: " + ", ".join(
                f"{t} {v:.0%}" for t, v in sorted(s.files_expected.items())
            )
        if s.last_use is not None:
            tables += f"\nlast use read {s.last_use[0]} of {s.last_use[1]} files"
        view.add_row(
            s.name,
            "-" if s.version is None else str(s.version),
            "-" if s.sequence is None else str(s.sequence),
            f"{s.commits_behind} commits",
            str(s.delta_rows_pending),
            tables or "-",
            last,
            _policy_cell(s.policy, s.policy_explicit, s.last_decision),
        )
    console.print(view)


def _policy_cell(policy: str, explicit: bool, decision: Any) -> str:
    text = policy if explicit else f"{policy} (default)"
    if decision is not None:
        verdict = "fired" if decision.fired else "waits"
        text += f"\nlast check {decision.decided_at:%Y-%m-%d %H:%M:%S}: {verdict}: {decision.reason}"
    return text


@app.command()
def maintain(
    name: Annotated[str | None, typer.Argument(help="Only this sketch (default: all).")] = None,
    strategy: Annotated[
        str,
        typer.Option(
            help="incremental, full (recapture), auto (the cheaper of the two, by the cost model) "
            "or cost (as auto, or leave the sketch stale where the queries expected before the "
            "next load cost less without it)."
        ),
    ] = "auto",
) -> None:
    """Bring sketches to the latest commit, each as a new version."""
    with _errors(), _service() as svc:
        runs = svc.maintain(name, strategy=strategy)
    view = Table("sketch", "strategy", "version", "delta rows", "seconds")
    for run in runs:
        versions = (
            f"{run.from_version} -> {run.to_version}"
            if run.published
            else f"{run.to_version} ({'left stale' if run.strategy == 'skip' else 'up to date'})"
        )
        view.add_row(run.name, run.strategy, versions, f"{run.delta_rows:,}", f"{run.seconds:.2f}")
    console.print(view)


@app.command()
def costs(name: Annotated[str, typer.Argument(help="The sketch.")]) -> None:
    """Show sketch NAME's cost models, fitted from its recorded runs (IMP Sec. 12)."""
    with _errors(), _service() as svc:
        model = svc.cost_model(name)
    view = Table("operation", "seconds", "driven by")
    sizes = {"incremental": "delta rows"}
    for operation, cost in model.costs.items():
        view.add_row(operation, cost.describe(), sizes.get(operation, "table rows"))
    console.print(view)


@app.command()
def budget() -> None:
    """Choose which sketches keep their state in full, top-m or not at all (SKETCH_STATE_BUDGET_MB)."""
    with _errors(), _service() as svc:
        run = svc.allocate_state()
    if run is None:
        console.print("no state budget is set (SKETCH_STATE_BUDGET_MB): every sketch keeps its full state")
        return
    view = Table("sketch", "state", "why")
    for name, mode in run.allocation.modes.items():
        changed = " (changed)" if name in run.changed else ""
        view.add_row(name, mode + changed, run.allocation.reasons[name])
    for name in run.unsized:
        view.add_row(name, "unchanged", "no state measured yet: kept as it is")
    console.print(view)
    allocation = run.allocation
    console.print(f"{allocation.bytes:,} bytes of state, {allocation.seconds:.3g} s of maintenance per hour")


@app.command()
def gc(name: Annotated[str | None, typer.Argument(help="Only this sketch (default: all).")] = None) -> None:
    """Expire old sketch versions and table snapshots, and delete the state and table files
    nothing reads (SKETCH_RETAIN_*, SKETCH_EXPIRE_TABLE_SNAPSHOTS)."""
    with _errors(), _service() as svc:
        report = svc.collect_garbage([name] if name is not None else None)
    console.print(
        f"expired {report.version_count} versions"
        + "".join(f"\n  {name}: {versions}" for name, versions in sorted(report.versions.items()))
        + f"\ndeleted {report.state_directories} state directories"
        + "".join(
            f"\nexpired {count} snapshots of {table}"
            for table, count in sorted(report.table_snapshots.items())
        )
        + "".join(
            f"\ndeleted {gone.files} files ({gone.bytes:,} bytes) of {table} that no snapshot reads"
            for table, gone in sorted(report.table_files.items())
        )
    )


@app.command()
def drop(name: Annotated[str, typer.Argument(help="The sketch to delete.")]) -> None:
    """Delete sketch NAME and all its versions (its partitions stay for other sketches)."""
    with _errors(), _service() as svc:
        svc.drop_sketch(name)
    console.print(f"dropped {name}")


@tables_app.command("create")
def tables_create(
    name: str,
    parquet: Annotated[Path, typer.Argument(help="Parquet file or directory.")],
    sort_by: Annotated[
        list[str] | None, typer.Option("--sort-by", help="Sort key column (repeatable).")
    ] = None,
) -> None:
    """Create NAME (ns.table) from Parquet, sorted by --sort-by."""
    with _errors(), _service() as svc:
        seq = svc.tables.create(name, parquet, sort_by=sort_by or [])
    console.print(f"created {name} at commit sequence {seq}")


@tables_app.command("append")
def tables_append(
    name: str, parquet: Annotated[Path, typer.Argument(help="Parquet file or directory.")]
) -> None:
    """Append the rows of a Parquet file to NAME."""
    with _errors(), _service() as svc:
        seq = svc.tables.append(name, parquet)
    console.print(f"appended to {name} at commit sequence {seq}")


@tables_app.command("delete")
def tables_delete(name: str, predicate: Annotated[str, typer.Argument(help="Spark SQL predicate.")]) -> None:
    """Delete the rows of NAME matching PREDICATE."""
    with _errors(), _service() as svc:
        seq = svc.tables.delete(name, predicate)
    console.print(f"deleted from {name}; table is at commit sequence {seq}")


@tables_app.command("drop")
def tables_drop(
    name: str,
    cascade: Annotated[bool, typer.Option("--cascade", help="Drop the sketches that read it too.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Drop NAME: its data files, history, partitions and samples (refused while sketches read it)."""
    if not yes:
        typer.confirm(f"Drop table {name} and delete its files?", abort=True)
    with _errors(), _service() as svc:
        seq = svc.drop_table(name, cascade=cascade)
    console.print(f"dropped {name} at commit sequence {seq}")


@tables_app.command("list")
def tables_list() -> None:
    """List tables with their sort keys and row counts."""
    with _errors(), _service() as svc:
        view = Table("table", "sort by", "rows", "files", "last commit")
        for record in svc.tables.list():
            pin = svc.tables.pin(record.name)
            view.add_row(
                record.name,
                ", ".join(record.sort_by),
                f"{pin.record_count:,}",
                str(len(pin.files)),
                str(pin.sequence),
            )
    console.print(view)


@tables_app.command("advise")
def tables_advise(name: str) -> None:
    """Show which layout of NAME would let its reports' sketches skip the most files: what each
    reads now and under each candidate sort or Z-order (simulated), and the recommendation."""
    with _errors(), _service() as svc:
        advice = svc.advise_layout(name)
    reports = sorted(advice.current.reads)
    view = Table("layout", *reports, "weighted share read")
    for estimate in (advice.current, *advice.candidates):
        label = "now" if estimate.layout is None else str(estimate.layout)
        if advice.recommended is not None and estimate.layout == advice.recommended.layout:
            label += " (recommended)"
        cells = [
            f"{r.files}/{r.files_total} files, {r.row_groups}/{r.row_groups_total} row groups"
            for r in (estimate.reads[report] for report in reports)
        ]
        view.add_row(label, *cells, f"{estimate.weighted_share:.0%}")
    console.print(view)
    console.print(advice.reason)
    if advice.pages:
        console.print(f"pages: {advice.pages}")


@tables_app.command("recluster")
def tables_recluster(
    name: str,
    layout: Annotated[
        str | None, typer.Option(help="sort(a, ...) or zorder(a, ...); default: the advised layout.")
    ] = None,
    page_rows: Annotated[
        int | None,
        typer.Option(
            help="Parquet pages of at most this many rows (default: the advised size, else the table's)."
        ),
    ] = None,
) -> None:
    """Rewrite NAME's files in a layout (one Iceberg rewrite on Spark; no rows change)."""
    with _errors(), _service() as svc:
        chosen = Layout.parse(layout) if layout else None
        seq = svc.recluster(name, chosen, page_rows)
    console.print(f"rewrote {name} in {chosen or 'the advised layout'} at commit sequence {seq}")


@tables_app.command("commits")
def tables_commits(name: Annotated[str | None, typer.Argument(help="Only this table.")] = None) -> None:
    """List commits with their global sequence numbers."""
    with _errors(), _service() as svc:
        view = Table("seq", "table", "operation", "+rows", "-rows", "total", "files +/-", "committed at")
        for c in svc.tables.commits(name):
            view.add_row(
                str(c.seq),
                c.table,
                c.operation,
                str(c.added_rows),
                str(c.deleted_rows),
                str(c.total_rows),
                f"{c.added_files}/{c.removed_files}",
                c.committed_at.isoformat(timespec="seconds"),
            )
    console.print(view)


@server_app.command("start")
def server_start() -> None:
    """Start (or reuse) the private PostgreSQL server, create and migrate its metastore
    database, and print the URL to export for Python and the other commands."""
    with _errors():
        # The private database is paired with the warehouse it describes (see resolve).
        stack = resolve(dataclasses.replace(Settings.from_env(), metastore_url=None))
        url = stack.settings.require_metastore_url()
        engine = connect_metastore(url)
        try:
            migrate(engine)
        finally:
            engine.dispose()
    console.print(f"{'started' if stack.started_server else 'already running'}; metastore ready")
    # Plain lines (no wrapping): they are meant for `eval "$(sketch server start | grep ^export)"`.
    typer.echo(f"export SKETCH_METASTORE_URL='{url}'")
    typer.echo(f"export SKETCH_WAREHOUSE='{stack.settings.warehouse}'")


@server_app.command("stop")
def server_stop() -> None:
    """Stop the private PostgreSQL server."""
    with _errors():
        PrivatePostgres.default().stop()
    console.print("stopped")


@server_app.command("status")
def server_status() -> None:
    """Say whether the private server runs, and where."""
    with _errors():
        server = PrivatePostgres.default()
        port = server.running_port()
    console.print(f"running on 127.0.0.1:{port}" if port else "not running")
    console.print(f"data directory: {server.data_dir}")


@policy_app.command("set")
def policy_set(
    name: Annotated[str, typer.Argument(help="The sketch.")],
    delta_rows: Annotated[int | None, typer.Option(help="Fire once this many rows changed.")] = None,
    elapsed: Annotated[float | None, typer.Option(help="Fire once this many seconds passed.")] = None,
    before_report: Annotated[
        list[str] | None, typer.Option(help="Fire when this report is announced (repeatable).")
    ] = None,
    lead: Annotated[float, typer.Option(help="Seconds ahead of a report's due time.")] = 0.0,
    combine: Annotated[str, typer.Option(help="any or all of the conditions.")] = "any",
) -> None:
    """Attach a maintenance policy to a sketch (replacing its current one)."""
    from sketch_core.policy import Policy

    with _errors(), _service() as svc:
        policy = Policy(delta_rows, elapsed, tuple(before_report or ()), lead, combine)
        svc.set_policy(name, policy)
    console.print(f"{name}: {policy.describe()}")


@policy_app.command("clear")
def policy_clear(name: Annotated[str, typer.Argument(help="The sketch.")]) -> None:
    """Detach a sketch's policy: it falls back to the default (maintain when stale)."""
    with _errors(), _service() as svc:
        svc.set_policy(name, None)
        policy, _ = svc.policy(name)
    console.print(f"{name}: {policy.describe()} (default)")


@policy_app.command("check")
def policy_check(
    name: Annotated[str | None, typer.Argument(help="Only this sketch (default: all).")] = None,
    run: Annotated[bool, typer.Option(help="Also maintain the sketches whose policy fires.")] = False,
) -> None:
    """Check policies now (no Spark): which sketches are due for maintenance, and why."""
    with _errors(), _service() as svc:
        checks = svc.check_policies([name] if name else None)
        view = Table("sketch", "policy", "fires", "reason")
        for c in checks:
            label = c.policy.describe() + ("" if c.explicit else " (default)")
            view.add_row(c.name, label, "yes" if c.fire else "no", c.decision.reason)
        console.print(view)
        if run:  # a sketch that is blocked (or whose table is gone) is passed over, with a warning
            for r in svc.maintain_each([c.name for c in checks if c.fire]):
                console.print(f"{r.name}: {r.strategy} {r.from_version} -> {r.to_version}")


@policy_app.command("announce")
def policy_announce(
    report: Annotated[str, typer.Argument(help="The report about to run.")],
    in_seconds: Annotated[float, typer.Option(help="Due this many seconds from now.")] = 0.0,
    window_seconds: Annotated[
        float, typer.Option(help="Policies fire for it until it ran, or this long after it is due.")
    ] = REPORT_WINDOW_SECONDS,
) -> None:
    """Announce a report: policies that name it fire at their next check, until it has run
    (`sketch policy finished REPORT`) or its window has passed."""
    due = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=in_seconds)
    with _errors(), _service() as svc:
        stored = svc.announce_report(report, due, window_seconds)
    console.print(f"{report}: due {stored:%Y-%m-%d %H:%M:%S %Z}")


@policy_app.command("finished")
def policy_finished(report: Annotated[str, typer.Argument(help="The report that has run.")]) -> None:
    """Record that a report has run: policies stop firing for its announcements."""
    with _errors(), _service() as svc:
        ended = svc.report_finished(report)
    console.print(f"{report}: {ended} announcement{'' if ended == 1 else 's'} ended")


@validation_app.command("list")
def validation_list(
    table: Annotated[str | None, typer.Argument(help="Only this table (default: all).")] = None,
    all_batches: Annotated[
        bool, typer.Option("--all", help="Every validated batch of TABLE, not only the quarantined.")
    ] = False,
) -> None:
    """List the quarantined delta batches: what they broke, and how to release them."""
    if all_batches and table is None:
        raise typer.BadParameter("--all needs a TABLE")
    with _errors(), _service() as svc:
        if table is not None and all_batches:
            batches = svc.validations.results(svc.tables.record(table).name)
        else:
            batches = svc.quarantined([svc.tables.record(table).name] if table else None)
    view = Table("table", "commit", "status", "rows in/out", "what it broke", "resolution")
    for b in batches:
        broke = "\n".join(str(f) for f in b.failures) or "-"
        view.add_row(
            b.table, str(b.seq), b.status, f"{b.inserted_rows}/{b.deleted_rows}", broke, b.resolution or "-"
        )
    console.print(view)
    if not batches:
        console.print("no quarantined batches" if not all_batches else "no validated batches")


@validation_app.command("run")
def validation_run(
    tables: Annotated[list[str] | None, typer.Argument(help="Only these tables (default: all).")] = None,
) -> None:
    """Validate the new delta batches now (after a load), so maintenance only reads the results."""
    with _errors(), _service() as svc:
        results = svc.validate_deltas(tables or None)
    failed = [r for r in results if r.status == "failed"]
    console.print(f"{len(results)} batches validated or already known; {len(failed)} quarantined")
    for batch in failed:
        console.print(f"  {batch.reason()}")
    if failed:
        raise typer.Exit(EXIT_TERMINAL)


@validation_app.command("override")
def validation_override(
    table: Annotated[str, typer.Argument(help="The table.")],
    seq: Annotated[int, typer.Argument(help="The quarantined commit's sequence number.")],
    reason: Annotated[str, typer.Option(help="Why the batch is acceptable (kept with it).")],
) -> None:
    """Accept a quarantined batch: the sketches it blocked are maintained again."""
    with _errors(), _service() as svc:
        svc.override_validation(table, seq, reason)
    console.print(f"accepted commit {seq} of {table}: {reason}")


@validation_app.command("nullable")
def validation_nullable(
    table: Annotated[str, typer.Argument(help="The table.")],
    columns: Annotated[list[str], typer.Argument(help="Columns that may hold NULLs.")],
) -> None:
    """Declare columns that may hold NULLs (the sort key and partition attributes may not
    otherwise)."""
    with _errors(), _service() as svc:
        svc.declare_nullable(table, columns)
    console.print(f"{table}: {', '.join(columns)} may hold NULLs")


if __name__ == "__main__":
    app()
