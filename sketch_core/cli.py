"""The ``sketch`` command line: the same verbs as SketchService."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from sketch_core.config import Settings
from sketch_core.errors import SketchError
from sketch_core.localstack.postgres import PrivatePostgres
from sketch_core.localstack.stack import resolve
from sketch_core.service import SketchService

app = typer.Typer(help="Provenance-based data skipping for Spark reports.", no_args_is_help=True)
tables_app = typer.Typer(help="Create and change Iceberg tables; every change gets a commit number.")
server_app = typer.Typer(help="The private PostgreSQL server used when SKETCH_METASTORE_URL is unset.")
app.add_typer(tables_app, name="tables")
app.add_typer(server_app, name="server")

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
    """Start (or reuse) the private PostgreSQL server and print its URL."""
    with _errors():
        server = PrivatePostgres.default()
        port, started = server.ensure_running()
    console.print(f"{'started' if started else 'already running'}: {server.url(port, 'sketch')}")


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


if __name__ == "__main__":
    app()
