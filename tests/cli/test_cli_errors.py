"""Odd and hostile input to every `sketch` verb: each ends with the error and its hint (exit 2,
or 75 for a transient failure) or Click's usage message, never a traceback; nothing that was
already published changes."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sketch_core.cli import EXIT_TERMINAL, EXIT_TRANSIENT, app
from sketch_core.service import SketchService
from tests.reliability.test_public_errors import with_table

NS = "hostile_cli"
TABLE = f"{NS}.facts"
QUERY = f"SELECT a, SUM(b) AS s FROM {TABLE} GROUP BY a HAVING SUM(b) > 10"

INVOCATIONS: dict[str, list[str]] = {
    "capture empty": ["capture", ""],
    "capture garbage": ["capture", "SELEC a FROM"],
    "capture unknown table": ["capture", f"SELECT a FROM {NS}.nope"],
    "capture attribute without a table": ["capture", QUERY, "-a", "a"],
    "capture attribute unknown column": ["capture", QUERY, "-a", f"{TABLE}=nope"],
    "capture fragments zero": ["capture", QUERY, "--fragments", "0"],
    "capture fragments text": ["capture", QUERY, "--fragments", "many"],
    "capture param without a value": ["capture", QUERY, "-p", "x"],
    "capture sql file missing": ["capture", "@/nonexistent/report.sql"],
    "explain-choice garbage": ["explain-choice", "SELEC"],
    "query garbage": ["query", "SELEC"],
    "query unknown function": ["query", f"SELECT nofn(a) FROM {TABLE}"],
    "query snapshot in the future": ["query", QUERY, "--snapshot", str(10**12)],
    "query snapshot negative": ["query", QUERY, "--snapshot", "-3"],
    "status unknown": ["status", "nope"],
    "maintain unknown": ["maintain", "nope"],
    "maintain unknown strategy": ["maintain", "nope", "--strategy", "sometimes"],
    "costs unknown": ["costs", "nope"],
    "drop unknown": ["drop", "nope"],
    "gc unknown": ["gc", "nope"],
    "tables create without namespace": ["tables", "create", "nons", "/nonexistent.parquet"],
    "tables create missing file": ["tables", "create", f"{NS}.new", "/nonexistent.parquet"],
    "tables append unknown": ["tables", "append", f"{NS}.nope", "/nonexistent.parquet"],
    "tables delete bad predicate": ["tables", "delete", TABLE, "a >>> 1"],
    "tables delete unknown column": ["tables", "delete", TABLE, "nope = 1"],
    "tables drop unknown": ["tables", "drop", f"{NS}.nope", "--yes"],
    "tables commits unknown": ["tables", "commits", f"{NS}.nope"],
    "policy set unknown sketch": ["policy", "set", "nope"],
    "policy clear unknown": ["policy", "clear", "nope"],
    "policy check unknown": ["policy", "check", "nope"],
    "validation list unknown": ["validation", "list", f"{NS}.nope"],
}


@pytest.fixture(scope="module")
def hostile_table(svc: SketchService, spark: object) -> str:
    return with_table(svc, spark, TABLE, rows=500)


@pytest.mark.parametrize("label", sorted(INVOCATIONS))
def test_every_verb_fails_with_an_error_and_a_hint(
    svc: SketchService, hostile_table: str, env: dict[str, str], tmp_path: Path, label: str
) -> None:
    before = svc.tables.pin(hostile_table).snapshot_id
    result = CliRunner().invoke(app, INVOCATIONS[label], env=env, terminal_width=200)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{type(result.exception).__name__} escaped: {result.exception}\n{result.output}"
    )
    assert result.exit_code in (EXIT_TERMINAL, EXIT_TRANSIENT), result.output
    usage = "Usage:" in result.output  # Click's own check of the arguments
    assert usage or ("error:" in result.output and "hint:" in result.output), result.output
    assert svc.tables.pin(hostile_table).snapshot_id == before, "nothing published is changed"
