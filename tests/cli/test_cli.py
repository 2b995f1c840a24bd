"""The `sketch` command line against the real metastore and warehouse."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from sketch_core.cli import EXIT_TERMINAL, EXIT_TRANSIENT, app
from sketch_core.config import Settings
from sketch_core.datasets import synthetic_table
from sketch_core.localstack.postgres import free_loopback_port


@pytest.fixture
def env(settings: Settings) -> dict[str, str]:
    assert settings.metastore_url is not None
    return {"SKETCH_METASTORE_URL": settings.metastore_url, "SKETCH_WAREHOUSE": str(settings.warehouse)}


def test_tables_verbs_round_trip(env: dict[str, str], ns: str, tmp_path: Path) -> None:
    runner = CliRunner()
    first, more = tmp_path / "first.parquet", tmp_path / "more.parquet"
    pq.write_table(synthetic_table(100, groups=5, seed=1), first)
    pq.write_table(synthetic_table(20, groups=5, seed=2, key_start=100), more)

    created = runner.invoke(app, ["tables", "create", f"{ns}.r", str(first), "--sort-by", "key"], env=env)
    assert created.exit_code == 0, created.output
    assert f"created {ns}.r at commit sequence" in created.output
    assert runner.invoke(app, ["tables", "append", f"{ns}.r", str(more)], env=env).exit_code == 0
    assert runner.invoke(app, ["tables", "delete", f"{ns}.r", "key < 10"], env=env).exit_code == 0

    commits = runner.invoke(app, ["tables", "commits", f"{ns}.r"], env=env, terminal_width=200)
    assert commits.exit_code == 0
    assert [w for w in ("create", "append", "delete") if w in commits.output] == [
        "create",
        "append",
        "delete",
    ]
    listed = runner.invoke(app, ["tables", "list"], env=env, terminal_width=200)
    assert f"{ns}.r" in listed.output and "110" in listed.output


def test_errors_are_explained_with_exit_codes(env: dict[str, str], ns: str, tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(app, ["tables", "delete", f"{ns}.nope", "key = 1"], env=env)
    assert missing.exit_code == EXIT_TERMINAL
    assert "unknown table" in missing.output and "hint" in missing.output

    down = {**env, "SKETCH_METASTORE_URL": f"postgresql://x@127.0.0.1:{free_loopback_port()}/x"}
    unreachable = runner.invoke(app, ["tables", "list"], env=down)
    assert unreachable.exit_code == EXIT_TRANSIENT
    assert "cannot reach the metastore" in unreachable.output
